"""Mutants of the model area: framework bugs a user's model meets, run through the model.*
claims on the shipped example model ``examples.torch_user:tabular_model`` (a residual MLP
with Linear, BatchNorm1d, GELU, Dropout, tanh and a custom module holding a buffer).

Each mutant names the example with ``model=``; the runner passes it as ``--dl-model`` and puts
the checkout's root on ``PYTHONPATH`` so every process (the factory check's fresh interpreter,
the rank processes, the export's fresh interpreter) can import it.
"""

from __future__ import annotations

import os
from typing import Any

from . import mutant
from ._patch import wrap

TORCH_EXAMPLE = "examples.torch_user:tabular_model"


@mutant("torch-gelu-backward-drops-pdf-term", areas="model", claims="model.gradients.finite-differences",
        target="torch", model=TORCH_EXAMPLE, cite="https://github.com/pytorch/pytorch/issues/107876",
        bug="GELU's backward is wrong on CPU (issue 107876: gradients of GELU inconsistent on CPU, a shared "
            "buffer in the oneDNN kernel; PR 108004): here the backward drops the x * pdf(x) term and returns "
            "grad * Phi(x) while the forward stays exact.")
def _gelu_backward() -> None:
    import math

    import torch
    import torch.nn.functional as F

    original = F.gelu

    class WrongGelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return original(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 0.5 * (1 + torch.erf(x / math.sqrt(2.0)))  # Phi(x) only: the x * phi(x) term is gone

    def gelu(input: Any, approximate: str = "none") -> Any:
        if approximate != "none" or not torch.is_grad_enabled() or not input.requires_grad:
            return original(input, approximate=approximate)
        return WrongGelu.apply(input)
    F.gelu = gelu


@mutant("torch-load-state-dict-skips-custom-buffers", areas="model", claims="model.export.round-trip",
        target="torch", model=TORCH_EXAMPLE, select="state-dict",
        cite="https://github.com/pytorch/pytorch/issues/8104",
        bug="load_state_dict silently leaves the buffers of user-defined modules at their current values "
            "(issue 8104: load_state_dict unexpectedly does not load a tensor into a buffer; #28340), so a "
            "restored model keeps its freshly built buffer.")
def _load_skips_custom_buffers() -> None:
    import torch
    from torch import nn

    def make(orig: Any) -> Any:
        def _load_from_state_dict(self: Any, *args: Any, **kwargs: Any) -> None:
            custom = not type(self).__module__.startswith("torch.")
            kept = {k: b.detach().clone() for k, b in self._buffers.items() if b is not None} if custom else {}
            orig(self, *args, **kwargs)
            with torch.no_grad():
                for k, old in kept.items():
                    self._buffers[k].copy_(old)
        return _load_from_state_dict
    wrap(nn.Module, "_load_from_state_dict", make)


@mutant("torch-dropout-ignores-manual-seed", areas="model", claims="model.determinism.seeded", target="torch",
        model=TORCH_EXAMPLE, cite="https://github.com/pytorch/pytorch/issues/84516",
        bug="Dropout draws its mask from a generator that torch.manual_seed does not seed, so equally seeded "
            "training steps drop different units (issue 84516: dropout non-deterministic on MPS even with the "
            "manual seed set).")
def _dropout_unseeded() -> None:
    import torch
    import torch.nn.functional as F

    original = F.dropout
    generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)

    def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        if not training or not 0 < p < 1:
            return original(input, p, training, inplace)
        keep = torch.rand(input.shape, generator=generator, dtype=torch.float64) >= p
        return input * keep.to(device=input.device, dtype=input.dtype) / (1 - p)
    F.dropout = dropout


@mutant("torch-compile-ignores-eval-mode", areas="model", claims="model.compile.equivalence", target="torch",
        model=TORCH_EXAMPLE, cite="https://github.com/pytorch/pytorch/issues/105653",
        bug="A torch.compile'd module keeps running its training-mode graph after eval() (issue 105653: a changed "
            "nn.Module.training does not trigger recompilation; #132986), so dropout stays active and batch "
            "normalisation uses batch statistics at inference.")
def _compile_ignores_eval() -> None:
    import torch
    from torch import nn

    class StaleMode(nn.Module):
        """The compiled module, always called (and so traced) with its modules in training mode."""

        def __init__(self, compiled: Any) -> None:
            super().__init__()
            self.compiled = compiled

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            inner = getattr(self.compiled, "_orig_mod", self.compiled)
            modes = {m: m.training for m in inner.modules()}
            inner.train(True)
            try:
                return self.compiled(*args, **kwargs)
            finally:
                for m, training in modes.items():
                    m.training = training

    def make(orig: Any) -> Any:
        def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
            compiled = orig(model, *args, **kwargs)
            return StaleMode(compiled) if isinstance(model, nn.Module) else compiled
        return compile
    wrap(torch, "compile", make)


@mutant("torch-ddp-divides-by-world-size-twice", areas="model", claims="model.distributed.step-equivalence",
        target="torch", model=TORCH_EXAMPLE, select="ddp", cite="https://github.com/pytorch/pytorch/issues/36516",
        bug="DistributedDataParallel divides the all-reduced gradient bucket by the wrong count (issue 36516: DDP "
            "divides bucket contents by the world size instead of the number of replicas): here by the world "
            "size squared, so a step under DDP is smaller than the single-device step.")
def _ddp_wrong_divisor() -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    def hook(state: Any, bucket: Any) -> Any:
        world = dist.get_world_size()
        buf = bucket.buffer().div_(world * world)
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])
    # register_comm_hook checks the annotations (strings here, from __future__): give it the ones it wants.
    hook.__annotations__ = {"bucket": dist.GradBucket}

    def make(orig: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            self.register_comm_hook(None, hook)
        return init
    wrap(DDP, "__init__", make)
