"""Forward mode against reverse mode: ``v . (J u) == (J^T v) . u`` for random pairs.

Both sides are the bilinear form ``v^T J u``; a wrong forward-mode (jvp) rule shows as a
difference beyond the two modes' rounding, without finite differences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .bounds import DEFAULT_RTOL, _norm
from .steps import VJP, Array, _as_inputs, _element_scales, _labels, _u_inf
from .vjp import Evidence, GradientMismatch, _flat, _reverse

JVP = Callable[[list[Array], list[Array]], ArrayLike]


@dataclass(frozen=True)
class ConsistencyResult:
    max_error_ratio: float
    rtol: float
    pairs: int
    worst: dict[str, Any] = field(compare=False)

    def as_evidence(self) -> Evidence:
        flat: Evidence = {
            "check": "jvp-vs-vjp",
            "max_error_ratio": self.max_error_ratio,
            "rtol": self.rtol,
            "pairs": self.pairs,
        }
        return _flat(flat, self.worst)


def check_jvp_vjp_consistency(
    jvp: JVP,
    vjp: VJP,
    xs: Sequence[ArrayLike],
    out_shape: Sequence[int],
    *,
    seed: int = 0,
    rtol: float | None = None,
    pairs: int = 3,
    names: Sequence[str] | None = None,
    derivative_error: float = 0.0,
) -> ConsistencyResult:
    """Check ``v . jvp(xs, u) == vjp(xs, v) . u`` for ``pairs`` random pairs (u, v).

    Both sides are the bilinear form v^T J u, computed once through forward mode and once
    through reverse mode. If each mode's product has a normwise relative error of at most
    rtol, then ``|v.(Ju) - v.(Ju)'| <= rtol*||v||*||Ju||`` and likewise
    ``rtol*||J^T v * s||*||u / s||`` for the reverse side (norms in element units, as in
    :func:`~.vjp.check_vjp`); the allowed difference is the sum of the two bounds.

    That bound is relative to the derivative and collapses where J u is zero or cancels
    (softmax followed by a sum over its axis: J = 0 exactly, forward mode returns 1e-17).
    ``derivative_error`` is the absolute floor from the rounding of the derivative's own
    computation, ``B`` with ``|error of v.(J u)| <= B * ||v||_1 * ||u||_inf`` in either mode
    (e.g. ``Program.derivative_error_bound``); both modes may err by it, so the floor added
    to the allowed difference is ``2 * B * ||v||_1 * ||u||_inf``.
    """
    __tracebackhide__ = True
    inputs = _as_inputs(xs)
    labels = _labels(inputs, names)
    tol = DEFAULT_RTOL if rtol is None else float(rtol)
    rng = np.random.default_rng(seed)
    s = [_element_scales(x) for x in inputs]
    shape = tuple(int(n) for n in out_shape)
    floor = max(0.0, float(derivative_error))
    rows = [_pair(jvp, vjp, inputs, s, shape, rng, labels, tol, floor) for _ in range(max(1, int(pairs)))]
    worst_i = max(range(len(rows)), key=lambda i: rows[i]["ratio"])
    worst = {"pair": worst_i, **rows[worst_i]}
    if worst["error"] > worst["allowed"]:
        raise GradientMismatch(_consistency_message(worst, len(rows), seed))
    return ConsistencyResult(worst["ratio"], tol, len(rows), worst)


def _pair(
    jvp: JVP,
    vjp: VJP,
    xs: list[Array],
    s: list[Array],
    shape: tuple[int, ...],
    rng: np.random.Generator,
    labels: list[str],
    rtol: float,
    derivative_error: float = 0.0,
) -> dict[str, float]:
    __tracebackhide__ = True
    z = [rng.standard_normal(x.shape) for x in xs]
    v = rng.standard_normal(shape)
    ju = np.asarray(jvp(xs, [sj * zj for sj, zj in zip(s, z)]), dtype=np.float64)
    if ju.shape != shape:
        raise GradientMismatch(f"forward-mode product J u has shape {ju.shape}, but should be {shape} (out_shape)")
    gv = _reverse(vjp, xs, v, labels)
    forward = float(np.vdot(v, ju))
    reverse = sum(float(np.vdot(g * sj, zj)) for g, sj, zj in zip(gv, s, z))
    bound_f = float(np.linalg.norm(v)) * _norm([ju])
    bound_r = _norm([g * sj for g, sj in zip(gv, s)]) * math.sqrt(sum(float(np.sum(zj**2)) for zj in z))
    floor = 2.0 * derivative_error * float(np.sum(np.abs(v))) * _u_inf(s, z)
    allowed = rtol * (bound_f + bound_r) + floor
    error = abs(forward - reverse)
    ratio = error / allowed if allowed > 0 else (0.0 if error == 0 else math.inf)
    return {"forward": forward, "reverse": reverse, "error": error, "allowed": allowed, "ratio": ratio,
            "relative_part": rtol * (bound_f + bound_r), "rounding_floor": floor}


def _consistency_message(worst: dict[str, Any], pairs: int, seed: int) -> str:
    fwd, rev = worst["forward"], worst["reverse"]
    hint = "forward and reverse mode disagree: one of the two rules is wrong."
    if rev != 0 and fwd / rev > 0:
        r = fwd / rev
        size = "larger" if r > 1 else "smaller"
        hint = (
            f"forward mode is about {abs(r - 1) * 100:.2g}% {size} than reverse mode; "
            "if check_vjp passes for this function, the forward-mode (jvp) rule is the wrong one."
        )
    return (
        f"v.(J u)={fwd:.9g} from forward mode (jvp), but should equal (J^T v).u={rev:.9g} from "
        f"reverse mode (vjp) for random u, v (pair {worst['pair']} of {pairs}): difference "
        f"{worst['error']:.3g} is {worst['ratio']:.3g}x the allowed {worst['allowed']:.3g} "
        f"(rtol part {worst['relative_part']:.3g} + rounding floor {worst['rounding_floor']:.3g}). "
        f"Hint: {hint} Reproduce with seed={seed}."
    )
