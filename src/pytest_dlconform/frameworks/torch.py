"""torch adapter. torch is imported on first use of :attr:`module`, never before."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.versions import framework_version
from .base import HarnessError, TensorFn

_AUTOCAST_DEVICES = ("cpu", "cuda")


class TorchAdapter:
    name = "torch"
    short = "torch"

    def __init__(self) -> None:
        self._torch: Any = None
        self._threads: int | None = None
        self.configured: dict[str, Any] = {}

    def version(self) -> str:
        return framework_version("torch") or "not installed"

    def configure(self, *, threads: int | None, logical_cpus: int) -> None:
        del logical_cpus  # torch replicas are processes, not logical devices
        self._threads = threads
        if "torch" in sys.modules:
            self._apply(sys.modules["torch"])

    @property
    def module(self) -> Any:
        if self._torch is None:
            import torch

            self._apply(torch)
        return self._torch

    def _apply(self, torch: Any) -> None:
        if self._torch is not None:
            return
        self._torch = torch
        if self._threads:
            torch.set_num_threads(self._threads)
            try:
                torch.set_num_interop_threads(max(1, min(2, self._threads)))
            except RuntimeError:
                pass  # already set once parallel work started; intra-op threads are what matter here
        self.configured = {"threads": torch.get_num_threads(), "cuda_devices": torch.cuda.device_count()}

    def device(self, kind: str, index: int = 0) -> str:
        torch = self.module
        if kind == "cpu":
            return "cpu"
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if found <= index:
            build = torch.version.cuda or "a CPU-only build"
            raise HarnessError(
                f"torch {torch.__version__} ({build}) sees {found} CUDA device(s), the test needs cuda:{index}; "
                "install a CUDA build of torch on this machine"
            )
        return f"cuda:{index}"

    def dtype(self, name: str) -> Any:
        return getattr(self.module, name)

    def tensor(self, array: np.ndarray, dtype: str = "float64", device: str = "cpu", requires_grad: bool = False) -> Any:
        torch = self.module
        t = torch.tensor(np.asarray(array), dtype=self.dtype(dtype), device=self.device(device))
        return t.requires_grad_(requires_grad)

    def numpy(self, tensor: Any) -> np.ndarray:
        t = tensor.detach().cpu()
        if t.dtype == self.module.bfloat16:
            t = t.float()
        return t.numpy()

    def call(self, fn: TensorFn, xs: Sequence[np.ndarray], dtype: str, device: str) -> np.ndarray:
        with self.module.no_grad():
            return self.numpy(fn([self.tensor(x, dtype, device) for x in xs]))

    def vjp(self, fn: TensorFn, xs: Sequence[np.ndarray], w: np.ndarray, dtype: str, device: str) -> list[np.ndarray]:
        torch = self.module
        inputs = [self.tensor(x, dtype, device, requires_grad=True) for x in xs]
        out = fn(inputs)
        grads = torch.autograd.grad(
            out, inputs, grad_outputs=self.tensor(w, dtype, device), allow_unused=True, materialize_grads=True
        )
        return [self.numpy(g) for g in grads]

    def jvp(self, fn: TensorFn, xs: Sequence[np.ndarray], us: Sequence[np.ndarray], dtype: str, device: str) -> np.ndarray:
        torch = self.module
        inputs = tuple(self.tensor(x, dtype, device) for x in xs)
        tangents = tuple(self.tensor(u, dtype, device) for u in us)
        _, ju = torch.func.jvp(lambda *a: fn(list(a)), inputs, tangents)
        return self.numpy(ju)

    def seed(self, value: int) -> None:
        self.module.manual_seed(value)

    def snapshot(self) -> Mapping[str, Any]:
        if self._torch is None and "torch" not in sys.modules:
            return {}
        torch = self.module
        state: dict[str, Any] = {
            "torch.get_default_dtype": torch.get_default_dtype(),
            "torch.is_grad_enabled": torch.is_grad_enabled(),
            "torch.is_inference_mode_enabled": torch.is_inference_mode_enabled(),
            "torch.is_anomaly_enabled": torch.is_anomaly_enabled(),
            "torch.are_deterministic_algorithms_enabled": torch.are_deterministic_algorithms_enabled(),
            "torch.get_num_threads": torch.get_num_threads(),
        }
        for dev in _AUTOCAST_DEVICES:
            state[f"torch.is_autocast_enabled({dev!r})"] = torch.is_autocast_enabled(dev)
            state[f"torch.get_autocast_dtype({dev!r})"] = torch.get_autocast_dtype(dev)
        return state

    def restore(self, state: Mapping[str, Any]) -> None:
        if not state:
            return
        torch = self.module
        torch.set_default_dtype(state["torch.get_default_dtype"])
        torch.set_grad_enabled(state["torch.is_grad_enabled"])
        torch.autograd.set_detect_anomaly(state["torch.is_anomaly_enabled"])
        if torch.are_deterministic_algorithms_enabled() != state["torch.are_deterministic_algorithms_enabled"]:
            # (about 9 ms a call even when nothing changes: only when a test changed it)
            torch.use_deterministic_algorithms(state["torch.are_deterministic_algorithms_enabled"])
        torch.set_num_threads(state["torch.get_num_threads"])
        for dev in _AUTOCAST_DEVICES:
            torch.set_autocast_enabled(dev, state[f"torch.is_autocast_enabled({dev!r})"])
            torch.set_autocast_dtype(dev, state[f"torch.get_autocast_dtype({dev!r})"])
        if torch.is_inference_mode_enabled() != state["torch.is_inference_mode_enabled"]:
            # Inference mode is a context manager only; a leaked one cannot be closed from here.
            raise HarnessError("torch inference mode leaked out of the test and cannot be restored")
