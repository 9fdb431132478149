"""Mutants of the generic torch.nn module contract (claim modules.torch.module-contract).

Each puts back a behaviour that a reported bug or an earlier release had; the record-driven suite
(suites/modules/test_torch_module_records.py) must notice it through one of its generic properties.
"""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

CLAIMS = "modules.torch.module-contract"


@mutant("torch-module-zero-grad-keeps-zeros", areas="modules", claims=CLAIMS, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/pull/92731",
        bug="nn.Module.zero_grad() defaults to set_to_none=False again: gradients become zero tensors instead "
            "of None (the pre-2.0 default that PR 92731 changed, a BC-breaking note of 2.0).")
def _torch_zero_grad_keeps_zeros() -> None:
    import torch.nn as nn

    def make(orig: Any) -> Any:
        def zero_grad(self: Any, set_to_none: bool = False) -> None:
            orig(self, set_to_none)
        return zero_grad
    wrap(nn.Module, "zero_grad", make)


@mutant("torch-embedding-padding-idx-gets-gradient", areas="modules", claims=CLAIMS, target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/issues/26302",
        bug="Embedding's padding_idx row receives gradient (issue 26302: nonzero gradient at padding_idx, "
            "there on CUDA; the forward values are unchanged, only the backward ignores padding_idx).")
def _torch_embedding_padding_gradient() -> None:
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def embedding(input: Any, weight: Any, padding_idx: Any = None, *args: Any, **kwargs: Any) -> Any:
            return orig(input, weight, None, *args, **kwargs)
        return embedding
    wrap(F, "embedding", make)


@mutant("torch-instancenorm-ignores-eval", areas="modules", claims=CLAIMS, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/1541",
        bug="InstanceNorm with track_running_stats=True keeps using (and averaging into the running buffers) "
            "the instance statistics in eval(), as when InstanceNorm overrode eval() to stay in training "
            "mode (issue 1541).")
def _torch_instancenorm_ignores_eval() -> None:
    import torch.nn.functional as F
    from torch.nn.modules import instancenorm

    def _apply_instance_norm(self: Any, input: Any) -> Any:
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias, True,
                               self.momentum if self.momentum is not None else 0.0, self.eps)
    instancenorm._InstanceNorm._apply_instance_norm = _apply_instance_norm  # type: ignore[method-assign]
