"""Where the finite differences step: inputs in element units, directions, probes of f.

Every oracle here steps each element by at most ``h * s_i`` with ``s_i = |x_i|`` (floored at
``SCALE_FLOOR`` of its input's RMS), so inputs of 1e-6 and 1e6 in one call are probed at the
same relative step and every norm is invariant to rescaling an input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
Function = Callable[[list[Array]], ArrayLike]
VJP = Callable[[list[Array], Array], Sequence["ArrayLike | None"]]

EPS: float = float(np.finfo(np.float64).eps)
# Step, relative to each element's magnitude. The extrapolated value errs by about
# c4*h**4 + eps/h (best near eps**(1/5) ~ 7.4e-4), but the error we can *certify* from two
# differences is their gap, c2*h**2. h = eps**(1/4) ~ 1.2e-4 keeps the extrapolation's
# truncation at rounding level (h**4 = eps) and makes the certified bound c2*sqrt(eps),
# i.e. rtol times the curvature. Measured on 3000 generated programs: the smallest
# detectable uniform gradient error is 4e-6 at worst with eps**(1/4), against 1.5e-4
# (and an occasional miss of a 0.1% error on steep functions) with eps**(1/5); the price
# is that a lone tanh saturates into "inconclusive" at |x| ~ 14 instead of ~ 15.
STEP: float = EPS**0.25
# Elements much smaller than their input's RMS are stepped as if they were this large.
SCALE_FLOOR: float = 1e-3


# --------------------------------------------------------------------------- inputs


def _as_inputs(xs: Sequence[ArrayLike]) -> list[Array]:
    if isinstance(xs, np.ndarray) or not isinstance(xs, Sequence):
        raise TypeError(f"xs must be a list of arrays, one per input, not {type(xs).__name__}")
    arrays = [np.asarray(x) for x in xs]
    for j, a in enumerate(arrays):
        if np.iscomplexobj(a) or not np.all(np.isfinite(a)):
            raise ValueError(f"input {j} must be real and finite to check its gradient")
    return [a.astype(np.float64, copy=True) for a in arrays]


def _labels(xs: list[Array], names: Sequence[str] | None) -> list[str]:
    if names is None:
        return [f"input {j} (shape {x.shape})" for j, x in enumerate(xs)]
    if len(names) != len(xs):
        raise ValueError(f"names has {len(names)} entries, but there are {len(xs)} inputs")
    return [f"input {n!r} (shape {x.shape})" for n, x in zip(names, xs)]


def _element_scales(x: Array) -> Array:
    """Per-element magnitude |x_i|, floored so that zeros still move."""
    rms = float(np.sqrt(np.mean(np.square(x)))) if x.size else 0.0
    floor = SCALE_FLOOR * rms if rms > 0 else 1.0
    return np.maximum(np.abs(x), floor)


class _Counted:
    """Wraps f: counts calls, converts to float64, insists on one output shape."""

    def __init__(self, f: Function) -> None:
        self.f = f
        self.calls = 0
        self.shape: tuple[int, ...] | None = None

    def __call__(self, xs: list[Array]) -> Array:
        self.calls += 1
        y = np.asarray(self.f(xs), dtype=np.float64)
        if self.shape is not None and y.shape != self.shape:
            raise ValueError(f"f returned shape {y.shape}, but earlier {self.shape}: f must keep its shape")
        self.shape = y.shape
        return y


# --------------------------------------------------------------------------- directions


@dataclass(frozen=True)
class _Direction:
    index: int
    kind: str
    input: int | None  # the input this direction is confined to, None for all
    z: list[Array]  # tangent in element units (u = s * z), max |z| == 1


def _unit(z: list[Array]) -> list[Array]:
    top = max((float(np.max(np.abs(a))) for a in z if a.size), default=0.0)
    return [a / top for a in z] if top > 0 else z


def _random_direction(rng: np.random.Generator, xs: list[Array], index: int) -> _Direction:
    z = [rng.standard_normal(x.shape) for x in xs]
    return _Direction(index, "random", None, _unit(z))


def _input_direction(rng: np.random.Generator, gs: list[Array], j: int) -> _Direction:
    """Along input j's own gradient in element units, z_j = g_j * s_j (zero elsewhere)."""
    z = [np.zeros_like(a) for a in gs]
    z[j] = gs[j].copy()
    kind = f"input {j} gradient direction"
    if not np.any(z[j]):
        z[j] = rng.standard_normal(gs[j].shape)
        kind = f"input {j} random direction (its gradient is zero)"
    return _Direction(j, kind, j, _unit(z))


def _tangent(d: _Direction, s: list[Array]) -> list[Array]:
    return [sj * zj for sj, zj in zip(s, d.z)]


def _u_inf(s: Sequence[Array], z: Sequence[Array]) -> float:
    """``||u||_inf`` of the tangent ``u = s * z`` (element units back to the inputs' own)."""
    return max((float(np.max(np.abs(sj * zj))) for sj, zj in zip(s, z) if zj.size), default=0.0)


def _probe(f: _Counted, xs: list[Array], u: list[Array], h: float) -> list[Array]:
    return [f([x + t * ui for x, ui in zip(xs, u)]) for t in (h, -h, h / 2, -h / 2)]

