"""Mutants of torch.nn.functional functions checked directly by the claim modules.torch.functional
(suite suites/modules/test_torch_functional.py)."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

_CLAIM = "modules.torch.functional"


@mutant("torch-interpolate-nearest-exact-is-nearest", areas="modules", claims=_CLAIM, target="torch",
        select="test_torch_functional and interpolate", cite="https://github.com/pytorch/pytorch/pull/64501",
        bug="F.interpolate(mode='nearest-exact') computes the legacy 'nearest' source index floor(dst * scale) "
            "instead of floor((dst + 0.5) * scale): the half-pixel error of issue 34808 that PR 64501 added "
            "'nearest-exact' to fix.")
def _torch_interpolate_nearest_exact_is_nearest() -> None:
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def interpolate(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("mode") == "nearest-exact":
                kwargs["mode"] = "nearest"
            return orig(*args, **kwargs)
        return interpolate
    wrap(F, "interpolate", make)


@mutant("torch-embedding-bag-reduces-padding", areas="modules", claims=_CLAIM, target="torch",
        select="test_torch_functional and embedding_bag", cite="https://github.com/pytorch/pytorch/issues/56064",
        bug="F.embedding_bag includes the entries equal to padding_idx in its sum/mean/max (the behaviour "
            "issue 56064 proposes as an opt-in flag; PR 49237 made the reduction exclude them), so bags "
            "with padding are skewed.")
def _torch_embedding_bag_reduces_padding() -> None:
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def embedding_bag(*args: Any, **kwargs: Any) -> Any:
            kwargs["padding_idx"] = None
            return orig(*args, **kwargs)
        return embedding_bag
    wrap(F, "embedding_bag", make)
