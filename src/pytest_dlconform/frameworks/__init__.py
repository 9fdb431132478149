"""Framework adapters, created lazily: importing this package imports no framework."""

from __future__ import annotations

import functools

from .base import Adapter, HarnessError, TensorFn, state_diff

__all__ = ["Adapter", "HarnessError", "TensorFn", "adapter", "state_diff"]


@functools.cache
def adapter(name: str) -> Adapter:
    """The process-wide adapter for a framework ("tensorflow" or "torch")."""
    if name == "tensorflow":
        from .tensorflow import TensorFlowAdapter

        return TensorFlowAdapter()
    if name == "torch":
        from .torch import TorchAdapter

        return TorchAdapter()
    raise ValueError(f"unknown framework {name!r}; use 'tensorflow' or 'torch'")
