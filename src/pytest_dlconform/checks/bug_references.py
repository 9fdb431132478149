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
#: The reverse-mode references of single ops, by (framework, op): the per-op suite computes
#: each one for every sample of that op, ``fn(inputs, cotangent) -> [gradient per input]``.
OP_VJPS: dict[tuple[str, str], str] = {}


def reference(name: str, *, vjp_of: tuple[str, str] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a bug reference under ``name`` (what an entry's ``reference`` key names);
    ``vjp_of=(framework, op)`` marks it as that op's reverse-mode gradient under the finding."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        REFERENCES[name] = fn
        if vjp_of is not None:
            OP_VJPS[vjp_of] = name
        return fn
    return register


def relative_deviation(got: Any, want: Any) -> float:
    """The largest elementwise |got - want| / |want| over arrays of one gradient (per input):
    inf where ``want`` is 0 and ``got`` is not, or where either is NaN."""
    import numpy as np

    worst = 0.0
    for g, r in zip(got, want, strict=True):
        g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.abs(g - r) / np.abs(r)
        err = np.where(g == r, 0.0, err)  # exact agreement, zeros included
        worst = max(worst, float(np.max(np.where(np.isnan(err), np.inf, err), initial=0.0)))
    return worst


def op_vjp_reference(framework: str, op: str) -> str | None:
    """The name of the bug reference for ``op``'s reverse mode in ``framework``, if one is registered."""
    return OP_VJPS.get((framework, op))


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




@reference("torch-hardsigmoid-vjp", vjp_of=("torch", "hardsigmoid"))
def torch_hardsigmoid_vjp(xs: Any, w: Any) -> list[Any]:
    """torch.nn.functional.hardsigmoid's float64 backward as torch 2.13 computes it: the
    cotangent times float32(1/6) = 0.16666667163 (the kernel's ``1.0f / 6.0f``, widened) where
    -3 < x < 3, and 0 elsewhere; the documented derivative there is 1/6."""
    import numpy as np

    (x,) = xs
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    return [np.where((x > -3.0) & (x < 3.0), w * _float32(1.0 / 6.0), 0.0)]
