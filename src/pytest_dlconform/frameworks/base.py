"""The adapter protocol: one small interface that suites written once for both frameworks use."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..core.exceptions import HarnessError

__all__ = ["Adapter", "HarnessError", "TensorFn"]

# A program under test: takes a list of framework tensors, returns one framework tensor.
TensorFn = Callable[[list[Any]], Any]




@runtime_checkable
class Adapter(Protocol):
    name: str  # "tensorflow" or "torch"
    short: str  # short id used in test ids: "tf", "torch"

    @property
    def module(self) -> Any:
        """The imported, configured framework module (imported on first use)."""

    def version(self) -> str: ...

    def configure(self, *, threads: int | None, logical_cpus: int) -> None:
        """Settings that only take effect before the framework initialises."""

    def device(self, kind: str, index: int = 0) -> Any:
        """Framework device for a device kind ("cpu", "gpu", "multi-gpu"), checked usable."""

    def dtype(self, name: str) -> Any: ...

    def tensor(self, array: np.ndarray, dtype: str = "float64", device: str = "cpu") -> Any: ...

    def numpy(self, tensor: Any) -> np.ndarray: ...

    def call(self, fn: TensorFn, xs: Sequence[np.ndarray], dtype: str, device: str) -> np.ndarray: ...

    def vjp(self, fn: TensorFn, xs: Sequence[np.ndarray], w: np.ndarray, dtype: str, device: str) -> list[np.ndarray]:
        """Reverse mode: w^T J for each input, unconnected inputs as zeros."""

    def jvp(self, fn: TensorFn, xs: Sequence[np.ndarray], us: Sequence[np.ndarray], dtype: str, device: str) -> np.ndarray:
        """Forward mode: J u."""

    def seed(self, value: int) -> None: ...

    def snapshot(self) -> Mapping[str, Any]:
        """Global state that tests may change and must restore (compared after each test)."""

    def restore(self, state: Mapping[str, Any]) -> None: ...


def state_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    return [f"{key}: {before[key]!r} -> {after.get(key)!r}" for key in before if before[key] != after.get(key)]
