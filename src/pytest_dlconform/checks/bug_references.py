"""Bug references: each recomputes a quantity a framework computes under a finding, so a
known-divergence entry (its ``reference`` key) matches only an observation equal to the bug,
not any other failure of the same test. The test that the entry pins rebuilds the
framework's result with the reference and records how far the observation is from it
(``evidence.reference``). Imports no framework and nothing of the report machinery.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

#: Bug references by name.
REFERENCES: dict[str, Callable[..., Any]] = {}


def reference(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a bug reference under ``name`` (what an entry's ``reference`` key names)."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        REFERENCES[name] = fn
        return fn
    return register


def bug_reference(name: str) -> Callable[..., Any]:
    """The registered bug reference ``name`` (for the test that records its deviation)."""
    try:
        return REFERENCES[name]
    except KeyError:
        raise KeyError(f"no bug reference {name!r}; registered: {', '.join(sorted(REFERENCES))}") from None


def _float32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


@reference("keras-loss-scale-float32")
def keras_loss_scale_float32(replicas: int) -> float:
    """The factor by which Keras 3.15 fit under a strategy of ``replicas`` replicas scales a
    float64 step's loss against single-device fit: each replica's loss is multiplied by
    ops.cast(1.0 / N, float64), which goes through a float32 tensor, so the N replicas' sum is
    N * float32(1/N) times the mean (1.0000000298 for N = 3; exactly 1 for 1, 2, 4)."""
    return replicas * _float32(1.0 / replicas)


@reference("torch-logcumsumexp-jvp")
def torch_logcumsumexp_jvp(x: Any, u: Any) -> Any:
    """torch.logcumsumexp's forward-mode JVP as torch 2.13 computes it (float64): the prefix
    sums of exp(x - max x) * u over those of exp(x - max x) plus 1e-13, so a prefix far below
    the axis maximum (exp(x - max) under ~1e-13) loses its tangent."""
    import numpy as np

    x, u = np.asarray(x, np.float64), np.asarray(u, np.float64)
    e = np.exp(x - np.max(x))
    return np.cumsum(e * u) / (np.cumsum(e) + 1e-13)


