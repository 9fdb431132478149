"""Reverse-mode gradients against finite differences, independent of any framework.

The oracle needs only numpy: the caller hands it ``f(xs) -> array`` evaluated in float64
and ``vjp(xs, w) -> [array, ...]``, the reverse-mode vector-Jacobian product under test.

How it works (:func:`check_vjp`):

* one seeded random cotangent ``w`` of f's output shape turns f into the scalar
  ``L(x) = <w, f(x)>``; ``g = vjp(xs, w)`` is called once and is L's claimed gradient;
* ``g . u`` is compared with the derivative of L along a few directions ``u``: first one
  per input along that input's own gradient (a uniformly scaled gradient shows its full
  relative error there, and a failure names the input), then random Gaussian ones;
* each derivative is a central difference at steps h and h/2 combined by Richardson
  extrapolation (error O(h**4)), so a check costs 4 evaluations of f per direction and
  one vjp, whatever the input size (h = eps**(1/4) relative to each element, see STEP).

Directions live in each element's own units: an element moves by at most ``h * s_i`` with
``s_i = |x_i|`` (floored at 1e-3 of its input's RMS), so inputs of 1e-6 and 1e6 in one
call are both probed at the same relative step; all norms below are taken in those
units, which makes the check invariant to rescaling an input.

A direction passes when ``|fd - g.u| <= rtol * scale + floor + fd_error``, where
``scale = ||g*s|| * ||u/s||`` bounds ``|g.u|`` (Cauchy-Schwarz, over the inputs the
direction moves), ``floor`` is the reverse pass's own absolute rounding when the caller
bounds it (``derivative_error``: a gradient that is a cancellation of larger terms) and
``fd_error`` bounds the extrapolated difference's error (see
:func:`~.bounds._estimate`): the measured gap between the two central differences, the rounding
that gap may hide, and the rounding of the extrapolation itself. When the
finite-difference error is not small against the scale (of the whole gradient), the
function is not smooth enough at that point, or its derivative drowns in the rounding
noise of f, and the check cannot mean anything: :class:`InconclusiveCheck`, a harness
problem, never a pass and never a :class:`GradientMismatch`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

# Finite differences too noisy to judge (the function is not smooth enough there): a harness
# problem, never a violation.
from ...core.exceptions import InconclusiveCheck
from .bounds import DEFAULT_RTOL, INCONCLUSIVE_FRACTION, _estimate, _Measurement
from .steps import (
    STEP,
    VJP,
    Array,
    Function,
    _as_inputs,
    _Counted,
    _Direction,
    _element_scales,
    _input_direction,
    _labels,
    _probe,
    _random_direction,
    _tangent,
    _u_inf,
)

Evidence = dict[str, "float | int | str"]


class GradientMismatch(AssertionError):
    """The reverse-mode gradient disagrees with finite differences (a conformance failure)."""


@dataclass(frozen=True)
class GradientCheckResult:
    max_error_ratio: float
    rtol: float
    directions: int
    evaluations: int
    vjp_evaluations: int
    worst: dict[str, Any] = field(compare=False)
    # Smallest allowed/scale over the input-gradient directions: a gradient uniformly
    # scaled by (1 + r) with |r| above this would have failed.
    resolution: float = math.nan

    def as_evidence(self) -> Evidence:
        flat: Evidence = {
            "check": "vjp-vs-finite-differences",
            "max_error_ratio": self.max_error_ratio,
            "rtol": self.rtol,
            "resolution": self.resolution,
            "directions": self.directions,
            "evaluations": self.evaluations,
            "vjp_evaluations": self.vjp_evaluations,
        }
        return _flat(flat, self.worst)


def _flat(head: Evidence, worst: dict[str, Any]) -> Evidence:
    """One level, strict-JSON values: non-finite floats become their repr."""
    flat = {**head, **{f"worst_{k}": v for k, v in worst.items()}}
    return {k: repr(v) if isinstance(v, float) and not math.isfinite(v) else v for k, v in flat.items()}


def _reverse(vjp: VJP, xs: list[Array], w: Array, labels: list[str]) -> list[Array]:
    """Call the vjp under test once; None (an unconnected input) counts as zero."""
    __tracebackhide__ = True
    grads = list(vjp(xs, w))
    if len(grads) != len(xs):
        raise ValueError(f"vjp returned {len(grads)} gradients, but there are {len(xs)} inputs")
    out = []
    for g, x, label in zip(grads, xs, labels):
        g = np.zeros_like(x) if g is None else np.asarray(g, dtype=np.float64)
        if g.shape != x.shape:
            raise GradientMismatch(f"reverse-mode gradient of {label} has shape {g.shape}, but should be {x.shape}")
        bad = np.argwhere(~np.isfinite(g))
        if bad.size:
            raise GradientMismatch(
                f"reverse-mode gradient of {label} has {len(bad)} non-finite values "
                f"(first at index {tuple(int(i) for i in bad[0])}), but should be finite: "
                "the check only runs where f is smooth"
            )
        out.append(g)
    return out


def _measure(d: _Direction, outs: list[Array], w: Array, gs: list[Array], s: list[Array], rtol: float,
             f_error: float = 0.0, derivative_error: float = 0.0) -> _Measurement:
    """gs is the gradient in element units (g * s), so g . u == gs . z."""
    moved = range(len(gs)) if d.input is None else [d.input]
    reverse = sum(float(np.vdot(gs[j], d.z[j])) for j in moved)
    z_norm = math.sqrt(sum(float(np.vdot(d.z[j], d.z[j])) for j in moved))
    squares = [float(np.vdot(a, a)) for a in gs]
    scale = math.sqrt(sum(squares[j] for j in moved)) * z_norm
    floor = derivative_error * float(np.sum(np.abs(w))) * _u_inf([s[j] for j in moved], [d.z[j] for j in moved])
    return _Measurement(d, reverse, _estimate(outs, w, STEP, f_error), scale, math.sqrt(sum(squares)) * z_norm, rtol,
                        floor)


# --------------------------------------------------------------------------- check_vjp


def check_vjp(
    f: Function,
    xs: Sequence[ArrayLike],
    vjp: VJP,
    *,
    directions: int = 8,
    rtol: float | None = None,
    seed: int = 0,
    names: Sequence[str] | None = None,
    f_error: float = 0.0,
    derivative_error: float = 0.0,
    cotangent: ArrayLike | None = None,
) -> GradientCheckResult:
    """Check ``vjp`` against finite differences of ``f`` along ``directions`` directions.

    ``f_error`` is an optional absolute bound on the rounding error of each element of
    ``f(xs)`` beyond eps * |f| (e.g. ``Program.error_bound``); it enters the finite
    differences' rounding estimate, so it widens the allowance by the error it implies
    (about 6 * f_error * sum|w| / h, see _estimate) and can make a direction inconclusive;
    rtol is unchanged.

    ``derivative_error`` is the reverse pass's own absolute rounding, ``B`` with
    ``|error of vjp(w) . u| <= B * ||w||_1 * ||u||_inf`` (``Program.derivative_error_bound``,
    as in :func:`~.consistency.check_jvp_vjp_consistency`): rtol is relative to the gradient, which
    collapses where the gradient is a cancellation of larger terms (a saturated
    cross-entropy's ``p - T``, 1e-8 from terms of 1), so the floor is added to each
    direction's allowance.

    ``cotangent`` is the ``w`` to use, of f's output shape (default: a standard normal one
    from ``seed``): a caller that already holds ``vjp(xs, w)`` for some ``w`` (one backward
    call of a compiled batch served many checks) passes that ``w``.

    Uses exactly ``4 * directions`` calls of f and one call of vjp; ``directions`` is raised
    to ``len(xs) + 1`` if smaller (one per input plus at least one random direction).
    Raises :class:`GradientMismatch` or :class:`InconclusiveCheck`.
    """
    __tracebackhide__ = True
    inputs = _as_inputs(xs)
    labels = _labels(inputs, names)
    tol = DEFAULT_RTOL if rtol is None else float(rtol)
    total = max(int(directions), len(inputs) + 1)
    rng = np.random.default_rng(seed)
    s = [_element_scales(x) for x in inputs]
    fn = _Counted(f)
    # The first random direction is probed before w exists: it tells us f's output shape.
    first = _random_direction(rng, inputs, len(inputs))
    probes = [(first, _probe(fn, inputs, _tangent(first, s), STEP))]
    w = rng.standard_normal(fn.shape or ())  # drawn either way: the directions stay the same
    if cotangent is not None:
        given_w = np.asarray(cotangent, dtype=np.float64)
        if given_w.shape != w.shape:
            raise ValueError(f"cotangent has shape {given_w.shape}, f's output has shape {w.shape}")
        w = given_w
    gs = [gj * sj for gj, sj in zip(_reverse(vjp, inputs, w, labels), s)]  # element units
    plan = [_input_direction(rng, gs, j) for j in range(len(inputs))]
    plan += [_random_direction(rng, inputs, i) for i in range(len(inputs) + 1, total)]
    probes += [(d, _probe(fn, inputs, _tangent(d, s), STEP)) for d in plan]
    floor = max(0.0, float(derivative_error))
    found = sorted((_measure(d, o, w, gs, s, tol, f_error, floor) for d, o in probes), key=lambda m: m.direction.index)
    _judge(found, labels, seed)
    return _result(found, labels, tol, fn.calls)


def _judge(found: list[_Measurement], labels: list[str], seed: int) -> None:
    """A clear mismatch wins over noise elsewhere; noise wins over a pass."""
    __tracebackhide__ = True
    failed = [m for m in found if m.conclusive and m.error > m.allowed]
    if failed:
        raise GradientMismatch(_mismatch_message(_reported(failed), failed, found, labels, seed))
    noisy = [m for m in found if not m.conclusive]
    if noisy:
        worst = max(noisy, key=lambda m: m.fd_error / m.reference if m.reference > 0 else math.inf)
        raise InconclusiveCheck(_inconclusive_message(worst, len(found), labels, seed))


def _reported(failed: list[_Measurement]) -> _Measurement:
    """The failure to explain: one along an input's own gradient names the input, so it wins."""
    own = [m for m in failed if m.direction.input is not None]
    return max(own or failed, key=lambda m: m.ratio)


def _result(found: list[_Measurement], labels: list[str], rtol: float, calls: int) -> GradientCheckResult:
    worst = max(found, key=lambda m: m.ratio)
    own = [m.allowed / m.scale for m in found if m.direction.input is not None and m.scale > 0]
    # Uniformly scaling g by (1 + r) shifts <g, u> by r * scale along an input's own
    # gradient, so the best of those directions bounds what a uniform error can hide.
    return GradientCheckResult(
        max_error_ratio=worst.ratio,
        rtol=rtol,
        directions=len(found),
        evaluations=calls,
        vjp_evaluations=1,
        worst=worst.as_dict(labels),
        resolution=min(own, default=math.nan),
    )


# --------------------------------------------------------------------------- messages


def _factor(m: _Measurement) -> float:
    return m.reverse / m.fd.value if m.fd.value != 0 else math.inf


def _well_determined(m: _Measurement) -> bool:
    return m.conclusive and abs(m.fd.value) > 10 * m.allowed


def _uniform(worst: _Measurement, found: list[_Measurement]) -> bool:
    """Every well-determined direction shows the same reverse/fd factor as the worst one."""
    r = _factor(worst)
    others = [_factor(m) for m in found if _well_determined(m)]
    return len(others) > 1 and all(abs(x - r) <= 0.05 * abs(r - 1) for x in others)


_TERM = "a wrong or missing term, or a sign error in part of the input"


def _hint(worst: _Measurement, found: list[_Measurement], labels: list[str]) -> str:
    d = worst.direction
    if d.input is None:
        return f"the reverse-mode gradient disagrees with finite differences along a random direction ({_TERM})."
    label, r = labels[d.input], _factor(worst)
    if "gradient direction" not in d.kind:
        return f"reverse mode says the gradient of {label} is zero, but f changes along it (a missing gradient)."
    if not math.isfinite(r):
        return f"finite differences see no change along the gradient of {label}, so that gradient is spurious."
    if r <= 0:
        return f"the reverse-mode gradient of {label} points the wrong way: f decreases along it ({_TERM})."
    return _scale_hint(worst, found, label, r)


def _scale_hint(worst: _Measurement, found: list[_Measurement], label: str, r: float) -> str:
    size = "large" if r > 1 else "small"
    hint = f"the reverse-mode gradient of {label} is about {_amount(r)} too {size} along its own direction"
    if _uniform(worst, found):
        return f"{hint}; every direction checked shows the same factor {_factor_text(r)}: the whole gradient looks scaled."
    if any(m.error > m.allowed for m in found if m is not worst and m.conclusive):
        return f"{hint}, and other directions fail by other factors, so it is not a constant scale: {_TERM}."
    return hint + "."


def _amount(r: float) -> str:
    # the form is chosen on the ratio as printed (3 digits), so a ratio of 1.5 reads the same
    # whichever side of 1.5 its last bits fall on (a gradient 1.5 times too large: 1.4999999 or 1.5000001)
    if not 0.5 < float(f"{r:.3g}") < 1.5 or not 0.5 < float(f"{1 / r:.3g}") < 2:
        return f"{max(r, 1 / r):.3g} times"
    pct = f"{abs(r - 1) * 100:.2g}%"
    return pct if abs(r - 1) >= 1e-4 else f"{pct} (relative {abs(r - 1):.3g})"


def _factor_text(r: float) -> str:
    return f"1{r - 1:+.3g}" if abs(r - 1) < 1e-4 else f"{r:.7g}"


def _mismatch_message(
    worst: _Measurement, failed: list[_Measurement], found: list[_Measurement], labels: list[str], seed: int
) -> str:
    d = worst.direction
    where = "all inputs" if d.input is None else labels[d.input]
    rel = worst.error / worst.scale if worst.scale > 0 else math.inf
    top = max(failed, key=lambda m: m.ratio)
    return (
        f"<g, u>={worst.reverse:.9g} from reverse mode, but should be {worst.fd.value:.9g} "
        f"(central finite differences, Richardson) along direction {d.index} of {len(found)} "
        f"({d.kind}, moving {where}): error {worst.error:.3g} is {worst.ratio:.3g}x the allowed "
        f"{worst.allowed:.3g} (relative error {rel:.3g}, rtol {worst.rtol:.2g}, "
        f"finite-difference error {worst.fd_error:.3g}{_floor_text(worst)}); {len(failed)} of {len(found)} directions "
        f"fail, worst {top.ratio:.3g}x along direction {top.direction.index}. "
        f"Hint: {_hint(worst, found, labels)} Reproduce with seed={seed}, directions={len(found)}."
    )


def _floor_text(m: _Measurement) -> str:
    return f", reverse-pass rounding floor {m.floor:.3g}" if m.floor > 0 else ""


def _inconclusive_message(worst: _Measurement, total: int, labels: list[str], seed: int) -> str:
    d = worst.direction
    where = "all inputs" if d.input is None else labels[d.input]
    if worst.fd.rounding > worst.fd.truncation:
        cause = (
            "the derivative along it is below the rounding noise of f's value (f is nearly flat "
            "there, e.g. saturated): choose inputs where f visibly changes"
        )
    else:
        cause = (
            f"f is not smooth (or not finite) within a relative step of {STEP:.2g} of the inputs: "
            "choose inputs away from kinks and discontinuities"
        )
    return (
        f"finite differences are too noisy to judge the gradient along direction {d.index} of {total} "
        f"({d.kind}, moving {where}): estimated error {worst.fd_error:.3g} (truncation "
        f"{worst.fd.truncation:.3g}, rounding {worst.fd.rounding:.3g}) exceeds "
        f"{INCONCLUSIVE_FRACTION:.0%} of the scale {worst.reference:.3g} (derivative estimate "
        f"{worst.fd.value:.6g}, reverse mode {worst.reverse:.6g}); {cause}. "
        f"This is a harness problem, not a conformance result (seed={seed})."
    )
