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
:func:`_estimate`): the measured gap between the two central differences, the rounding
that gap may hide, and the rounding of the extrapolation itself. When the
finite-difference error is not small against the scale (of the whole gradient), the
function is not smooth enough at that point, or its derivative drowns in the rounding
noise of f, and the check cannot mean anything: :class:`InconclusiveCheck`, a harness
problem, never a pass and never a :class:`GradientMismatch`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

# Finite differences too noisy to judge (the function is not smooth enough there): a harness
# problem, never a violation.
from ..core.exceptions import InconclusiveCheck

__all__ = [
    "ConsistencyResult",
    "GradientCheckResult",
    "GradientMismatch",
    "HessianCheckResult",
    "HessianMismatch",
    "InconclusiveCheck",
    "check_hvp",
    "check_jvp_vjp_consistency",
    "check_vjp",
]

Array = NDArray[np.float64]
Function = Callable[[list[Array]], ArrayLike]
VJP = Callable[[list[Array], Array], Sequence["ArrayLike | None"]]
JVP = Callable[[list[Array], list[Array]], ArrayLike]
Evidence = dict[str, "float | int | str"]

EPS: float = float(np.finfo(np.float64).eps)
# Default rtol = sqrt(eps) ~ 1.5e-8. A float64 reverse pass of m operations carries a
# normwise rounding error of order m * eps (Higham ch. 3), i.e. 1e-14..1e-12 for real
# programs: sqrt(eps) leaves four or more orders of magnitude for deep or ill-conditioned
# backward passes, while a wrong gradient is wrong by far more (a term, a sign, a factor
# 1.001). The finite-difference error is accounted for separately (fd_error, a bound), so
# rtol does not need to absorb it.
DEFAULT_RTOL: float = math.sqrt(EPS)
# Step, relative to each element's magnitude. The extrapolated value errs by about
# c4*h**4 + eps/h (best near eps**(1/5) ~ 7.4e-4), but the error we can *certify* from two
# differences is their gap, c2*h**2. h = eps**(1/4) ~ 1.2e-4 keeps the extrapolation's
# truncation at rounding level (h**4 = eps) and makes the certified bound c2*sqrt(eps),
# i.e. rtol times the curvature. Measured on 3000 generated programs: the smallest
# detectable uniform gradient error is 4e-6 at worst with eps**(1/4), against 1.5e-4
# (and an occasional miss of a 0.1% error on steep functions) with eps**(1/5); the price
# is that a lone tanh saturates into "inconclusive" at |x| ~ 14 instead of ~ 15.
STEP: float = EPS**0.25
# Above this fraction of the scale the finite differences are too noisy to judge.
INCONCLUSIVE_FRACTION: float = 0.1
# Elements much smaller than their input's RMS are stepped as if they were this large.
SCALE_FLOOR: float = 1e-3


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


def _flat(head: Evidence, worst: dict[str, Any]) -> Evidence:
    """One level, strict-JSON values: non-finite floats become their repr."""
    flat = {**head, **{f"worst_{k}": v for k, v in worst.items()}}
    return {k: repr(v) if isinstance(v, float) and not math.isfinite(v) else v for k, v in flat.items()}


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


# --------------------------------------------------------------------------- differences


@dataclass(frozen=True)
class _Estimate:
    value: float  # Richardson-extrapolated derivative of L along u
    truncation: float  # |D(h/2) - D(h)|, the measured gap (see _estimate)
    rounding: float  # bound on the extrapolation's rounding, (4 r2 + r1) / 3
    gap_rounding: float = 0.0  # bound on the rounding inside the gap, r1 + r2


def _probe(f: _Counted, xs: list[Array], u: list[Array], h: float) -> list[Array]:
    return [f([x + t * ui for x, ui in zip(xs, u)]) for t in (h, -h, h / 2, -h / 2)]


def _estimate(outs: list[Array], w: Array, h: float, f_error: float = 0.0) -> _Estimate:
    """Richardson extrapolation of two central differences and a bound on its error.

    With c2, c4 the Taylor coefficients of L along u, D(h) = L' + c2 h^2 + c4 h^4 + rho(h) and
    R = (4 D(h/2) - D(h)) / 3 = L' - c4 h^4 / 4 + (4 rho(h/2) - rho(h)) / 3. The rounding
    |rho(h)| <= r1 and |rho(h/2)| <= r2 come from bounds on L's rounding (below). The gap
    G = D(h/2) - D(h) = -3/4 c2 h^2 - 15/16 c4 h^4 + rho(h/2) - rho(h). Where L is smooth on
    the scale of the step, |c4| h^2 <= 0.6 |c2| (at h = eps^(1/4) relative to each element,
    the fifth derivative over the third times h^2 s^2 / 20: only a kink or a feature narrower
    than ~1e-4 of the element breaks it, and then the gap is large and the check
    inconclusive), so |c4 h^4 / 4| <= 0.15 |c2| h^2 <= |3/4 c2 h^2 + 15/16 c4 h^4| <= |G| + r1 + r2.
    Hence |R - L'| <= |G| + (r1 + r2) + (4 r2 + r1) / 3: the three fields, all bounds.
    """
    ls = [float(np.vdot(w, y)) for y in outs]
    # L's rounding: the inner product of n terms rounds by at most gamma_n sum|w*y| (n u,
    # Higham 3.1), f's outputs by eps |y| each (the contract of f, relative), plus what the
    # caller says f may err by absolutely per element (f_error: logdet near I, programs).
    n = max(1, w.size)
    rel = EPS + n * EPS / 2
    mags = [rel * float(np.abs(w * y).sum()) + float(np.abs(w).sum()) * f_error for y in outs]
    d1 = (ls[0] - ls[1]) / (2 * h)
    d2 = (ls[2] - ls[3]) / h
    r1 = (mags[0] + mags[1]) / (2 * h)
    r2 = (mags[2] + mags[3]) / h
    return _Estimate((4 * d2 - d1) / 3, abs(d2 - d1), (4 * r2 + r1) / 3, r1 + r2)


@dataclass(frozen=True)
class _Measurement:
    direction: _Direction
    reverse: float
    fd: _Estimate
    scale: float  # ||g*s|| * ||z|| over the inputs the direction moves: bounds |g . u|
    whole: float  # the same with the whole gradient: what "negligible" is measured against
    rtol: float
    floor: float = 0.0  # the reverse pass's own absolute rounding along u (derivative_error)

    @property
    def error(self) -> float:
        return abs(self.fd.value - self.reverse)

    @property
    def fd_error(self) -> float:
        """Bound on |fd - true derivative| (_estimate): no safety factor, every term derived."""
        return self.fd.truncation + self.fd.gap_rounding + self.fd.rounding

    @property
    def allowed(self) -> float:
        return self.rtol * self.scale + self.floor + self.fd_error

    @property
    def ratio(self) -> float:
        if self.allowed > 0:
            return self.error / self.allowed
        return 0.0 if self.error == 0 else math.inf

    @property
    def reference(self) -> float:
        # Against the whole gradient: an input whose own gradient is below the noise of L
        # is checked in absolute terms (it is negligible, and reverse mode must say so),
        # not declared inconclusive.
        return max(self.whole, abs(self.fd.value))

    @property
    def conclusive(self) -> bool:
        if not math.isfinite(self.fd.value + self.fd_error):
            return False
        if self.reference == 0 and self.fd.truncation == 0:
            return True  # f does not move along u, and reverse mode says so too
        return self.fd_error <= INCONCLUSIVE_FRACTION * self.reference

    def as_dict(self, labels: list[str]) -> dict[str, Any]:
        d = self.direction
        return {
            "direction": d.index,
            "kind": d.kind,
            "input": "all inputs" if d.input is None else labels[d.input],
            "reverse": self.reverse,
            "fd": self.fd.value,
            "error": self.error,
            "allowed": self.allowed,
            "scale": self.scale,
            "fd_error": self.fd_error,
            "rounding_floor": self.floor,
        }


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
    as in :func:`check_jvp_vjp_consistency`): rtol is relative to the gradient, which
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


def _u_inf(s: Sequence[Array], z: Sequence[Array]) -> float:
    """``||u||_inf`` of the tangent ``u = s * z`` (element units back to the inputs' own)."""
    return max((float(np.max(np.abs(sj * zj))) for sj, zj in zip(s, z) if zj.size), default=0.0)


def _tangent(d: _Direction, s: list[Array]) -> list[Array]:
    return [sj * zj for sj, zj in zip(s, d.z)]


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


# --------------------------------------------------------------------------- forward vs reverse


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
    :func:`check_vjp`); the allowed difference is the sum of the two bounds.

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


def _norm(arrays: Sequence[Array]) -> float:
    """The 2-norm of all entries, scaled first: squares of a derivative of 1e-229 (erf at
    x = 23) underflow to 0, which made the allowed difference 0 (explore seed 302827194)."""
    top = max((float(np.max(np.abs(a))) for a in arrays if a.size), default=0.0)
    if top == 0 or not math.isfinite(top):
        return top
    return top * math.sqrt(sum(float(np.sum((a / top) ** 2)) for a in arrays))


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


# --------------------------------------------------------------------------- Hessian-vector products

#: ``hvp(xs, w, vs)``: the Hessian of ``L(x) = <w, f(x)>`` times the tangent ``vs`` (one
#: array per input), by some second-order mode of the framework under test.
HVP = Callable[[list[Array], Array, list[Array]], Sequence["ArrayLike | None"]]


#: Relative rounding of each element of the first-order gradient that the finite differences
#: of the gradient allow for (f itself is trusted to one ulp in check_vjp; a gradient is the
#: result of a backward pass, a few rounded operations per element).
GRADIENT_ULPS: float = 4.0


class HessianMismatch(GradientMismatch):
    """A Hessian-vector product disagrees with finite differences of the gradient."""


@dataclass(frozen=True)
class HessianCheckResult:
    max_error_ratio: float
    rtol: float
    tangents: int
    projections: int
    gradient_evaluations: int
    hvp_evaluations: int
    worst: dict[str, Any] = field(compare=False)
    #: Largest |H v| element in element units (s * H v) over the tangents: 0.0 exactly where
    #: the framework says the Hessian vanishes (piecewise-linear and linear ops).
    max_abs_hvp: float = 0.0
    #: Largest |finite difference of the gradient| element in element units: 0.0 exactly
    #: where the gradient does not move at all along the tangents.
    max_abs_fd: float = 0.0
    resolution: float = math.nan

    def as_evidence(self) -> Evidence:
        flat: Evidence = {
            "check": "hvp-vs-finite-differences-of-the-gradient",
            "max_error_ratio": self.max_error_ratio,
            "rtol": self.rtol,
            "resolution": self.resolution,
            "tangents": self.tangents,
            "projections": self.projections,
            "gradient_evaluations": self.gradient_evaluations,
            "hvp_evaluations": self.hvp_evaluations,
            "max_abs_hvp": self.max_abs_hvp,
            "max_abs_fd": self.max_abs_fd,
        }
        return _flat(flat, self.worst)


def _second(hvp: HVP, xs: list[Array], w: Array, vs: list[Array], labels: list[str]) -> list[Array]:
    """Call the HVP under test once; None (an input f does not depend on twice) counts as zero."""
    __tracebackhide__ = True
    out = list(hvp(xs, w, vs))
    if len(out) != len(xs):
        raise ValueError(f"hvp returned {len(out)} arrays, but there are {len(xs)} inputs")
    res = []
    for h, x, label in zip(out, xs, labels):
        h = np.zeros_like(x) if h is None else np.asarray(h, dtype=np.float64)
        if h.shape != x.shape:
            raise HessianMismatch(f"Hessian-vector product for {label} has shape {h.shape}, but should be {x.shape}")
        bad = np.argwhere(~np.isfinite(h))
        if bad.size:
            raise HessianMismatch(
                f"Hessian-vector product for {label} has {len(bad)} non-finite values (first at index "
                f"{tuple(int(i) for i in bad[0])}), but should be finite: the check only runs where f is smooth")
        res.append(h)
    return res


def _gradient_at(grad: VJP, xs: list[Array], w: Array) -> Array:
    """The trusted first-order gradient, all inputs flattened into one vector (None is zero)."""
    gs = list(grad(xs, w))
    if len(gs) != len(xs):
        raise ValueError(f"grad returned {len(gs)} gradients, but there are {len(xs)} inputs")
    flat = [np.zeros(x.size) if g is None else np.asarray(g, dtype=np.float64).reshape(-1) for g, x in zip(gs, xs)]
    if any(g.size != x.size for g, x in zip(flat, xs)):
        raise ValueError("grad returned a gradient whose size differs from its input's")
    return np.concatenate(flat) if flat else np.zeros(0)


def _projections(rng: np.random.Generator, hs: Array, error: Array, xs: list[Array], count: int,
                 first: int) -> list[_Direction]:
    """Where to look at H v (all vectors in element units, flattened): along each input's own
    part of the claimed H v (a uniformly scaled H v shows its full relative error there, and a
    failure names the input), along the claimed-minus-estimated difference (the whole error's
    norm), then ``count`` random ones."""
    out = []
    a = 0
    for j, x in enumerate(xs):
        b = a + x.size
        z = np.zeros_like(hs)
        z[a:b] = hs[a:b]
        kind = f"input {j} H v direction"
        if not np.any(z[a:b]):
            z[a:b] = rng.standard_normal(b - a)
            kind = f"input {j} random direction (its H v is zero)"
        out.append(_Direction(first + j, kind, j, _unit([z])))
        a = b
    if np.any(error):
        out.append(_Direction(first + len(out), "error direction (claimed minus finite differences)", None,
                              _unit([error.copy()])))
    out += [_Direction(first + len(out) + i, "random", None, _unit([rng.standard_normal(hs.size)]))
            for i in range(count)]
    return out


def _hessian_measure(d: _Direction, outs: list[Array], flat_s: Array, hs: Array, xs: list[Array], rtol: float,
                     grad_error: float) -> _Measurement:
    """``<zc, s * H v>`` against the Richardson estimate of the same projection of the gradient's
    central differences: the gradient is L's derivative, so its differences along v are
    _estimate's differences of ``<c, g>`` with ``c = s * zc``."""
    zc = d.z[0]
    moved = np.ones(hs.size, dtype=bool) if d.input is None else _mask(xs, d.input)
    claimed = float(np.vdot(hs, zc))
    z_norm = float(np.linalg.norm(zc))
    scale = _norm([hs[moved]]) * z_norm
    whole = _norm([hs]) * z_norm
    return _Measurement(d, claimed, _gradient_estimate(outs, flat_s * zc, grad_error), scale, whole, rtol)


def _gradient_estimate(outs: list[Array], c: Array, grad_error: float) -> _Estimate:
    """:func:`_estimate` with the gradient as the function: each gradient element is trusted to
    ``GRADIENT_ULPS`` ulps of itself (a backward pass of a few rounded operations, not one
    correctly rounded value as f's contract) plus ``grad_error`` absolutely."""
    est = _estimate(outs, c, STEP, grad_error)
    extra = (GRADIENT_ULPS - 1) * EPS
    mags = [extra * float(np.abs(c * y).sum()) for y in outs]
    r1 = (mags[0] + mags[1]) / (2 * STEP)
    r2 = (mags[2] + mags[3]) / STEP
    return _Estimate(est.value, est.truncation, est.rounding + (4 * r2 + r1) / 3, est.gap_rounding + r1 + r2)


def _mask(xs: list[Array], j: int) -> NDArray[np.bool_]:
    sizes = np.cumsum([0] + [x.size for x in xs])
    m = np.zeros(int(sizes[-1]), dtype=bool)
    m[sizes[j]:sizes[j + 1]] = True
    return m


def check_hvp(
    grad: VJP,
    hvp: HVP,
    xs: Sequence[ArrayLike],
    out_shape: Sequence[int],
    *,
    tangents: int = 1,
    projections: int = 2,
    rtol: float | None = None,
    seed: int = 0,
    names: Sequence[str] | None = None,
    derivative_error: float = 0.0,
    cotangent: ArrayLike | None = None,
    mode: str = "hvp",
) -> HessianCheckResult:
    """Check a Hessian-vector product against central differences of the gradient.

    ``grad(xs, w)`` is the first-order reverse-mode gradient of ``L(x) = <w, f(x)>`` (the
    framework's own, checked elsewhere against finite differences of f, e.g. by
    :func:`check_vjp`), ``hvp(xs, w, vs)`` the product ``H_L v`` under test (named ``mode``
    in messages: reverse-over-reverse, forward-over-reverse). ``w`` is ``cotangent`` or a
    seeded standard normal of ``out_shape``.

    For each of ``tangents`` random tangents ``v = s * z`` (element units, as in
    :func:`check_vjp`: ``max|z| = 1``, ``s_i = |x_i|`` floored), the gradient is evaluated at
    ``x +- h v`` and ``x +- h/2 v`` (h = STEP); its central differences, extrapolated
    (Richardson), estimate ``H v``. They are compared along projections ``c = s * zc``: each
    input's own part of the claimed ``H v``, the claimed-minus-estimated difference, and
    ``projections`` random ones, each a scalar ``<c, H v>`` judged exactly as check_vjp judges
    ``<g, u>``: it passes when ``|fd - claimed| <= rtol * scale + fd_error``, ``scale =
    ||s * H v|| * ||zc||`` (over the inputs the projection moves), ``fd_error`` the bound of
    :func:`_estimate` with the gradient as the function (relative rounding ``eps`` per element
    plus ``derivative_error * ||w||_1``, the reverse pass's absolute rounding bound ``B``, see
    check_vjp). Where ``fd_error`` is not small against the scale of the whole ``H v`` (or the
    estimate), the gradient is not smooth enough there or drowns in its rounding:
    :class:`InconclusiveCheck`. A gradient that does not move at all (a linear or
    piecewise-linear op away from its kinks) gives an estimate of exactly 0 and is conclusive:
    the claimed H v must then be 0 within the rounding bound.

    Uses ``4 * tangents`` calls of grad and ``tangents`` calls of hvp. Raises
    :class:`HessianMismatch` (a :class:`GradientMismatch`) or :class:`InconclusiveCheck`.
    """
    __tracebackhide__ = True
    inputs = _as_inputs(xs)
    labels = _labels(inputs, names)
    tol = DEFAULT_RTOL if rtol is None else float(rtol)
    rng = np.random.default_rng(seed)
    s = [_element_scales(x) for x in inputs]
    flat_s = np.concatenate([a.reshape(-1) for a in s]) if s else np.zeros(0)
    w = rng.standard_normal(tuple(int(n) for n in out_shape))
    if cotangent is not None:
        given_w = np.asarray(cotangent, dtype=np.float64)
        if given_w.shape != w.shape:
            raise ValueError(f"cotangent has shape {given_w.shape}, but out_shape is {w.shape}")
        w = given_w
    grad_error = max(0.0, float(derivative_error)) * float(np.sum(np.abs(w)))
    found: list[tuple[int, _Measurement]] = []
    top_h = top_fd = 0.0
    for t in range(max(1, int(tangents))):
        z = _unit([rng.standard_normal(x.shape) for x in inputs])
        vs = [sj * zj for sj, zj in zip(s, z)]
        hs = np.concatenate([(sj * hj).reshape(-1) for sj, hj in zip(s, _second(hvp, inputs, w, vs, labels))])
        outs = [_gradient_at(grad, [x + step * v for x, v in zip(inputs, vs)], w)
                for step in (STEP, -STEP, STEP / 2, -STEP / 2)]
        d1 = (outs[0] - outs[1]) / (2 * STEP)
        d2 = (outs[2] - outs[3]) / STEP
        fd = flat_s * (4 * d2 - d1) / 3
        top_h = max(top_h, float(np.max(np.abs(hs), initial=0.0)))
        top_fd = max(top_fd, float(np.max(np.abs(fd), initial=0.0)) if np.all(np.isfinite(fd)) else math.inf)
        plan = _projections(rng, hs, hs - fd if np.all(np.isfinite(fd)) else np.zeros_like(hs), inputs,
                            projections, len(found))
        found += [(t, _hessian_measure(d, outs, flat_s, hs, inputs, tol, grad_error)) for d in plan]
    _judge_hessian(found, labels, seed, mode)
    worst_t, worst = max(found, key=lambda tm: tm[1].ratio)
    own = [m.allowed / m.scale for _, m in found if m.direction.input is not None and m.scale > 0
           and "H v direction" in m.direction.kind]
    return HessianCheckResult(
        max_error_ratio=worst.ratio, rtol=tol, tangents=max(1, int(tangents)), projections=len(found),
        gradient_evaluations=4 * max(1, int(tangents)), hvp_evaluations=max(1, int(tangents)),
        worst={"tangent": worst_t, **worst.as_dict(labels)}, max_abs_hvp=top_h, max_abs_fd=top_fd,
        resolution=min(own, default=math.nan),
    )


def _judge_hessian(found: list[tuple[int, _Measurement]], labels: list[str], seed: int, mode: str) -> None:
    """As :func:`_judge`: a clear mismatch wins over noise elsewhere; noise wins over a pass."""
    __tracebackhide__ = True
    failed = [(t, m) for t, m in found if m.conclusive and m.error > m.allowed]
    if failed:
        own = [tm for tm in failed if tm[1].direction.input is not None]
        t, worst = max(own or failed, key=lambda tm: tm[1].ratio)
        raise HessianMismatch(_hessian_message(worst, t, len(failed), len(found), labels, seed, mode))
    noisy = [(t, m) for t, m in found if not m.conclusive]
    if noisy:
        t, worst = max(noisy, key=lambda tm: tm[1].fd_error / tm[1].reference if tm[1].reference > 0 else math.inf)
        raise InconclusiveCheck(_hessian_inconclusive(worst, t, len(found), labels, seed))


def _hessian_hint(m: _Measurement, labels: list[str]) -> str:
    d = m.direction
    r = _factor(m)
    if m.reverse == 0:
        return "the Hessian-vector product is zero there, but the gradient changes along v (a missing second derivative)."
    if not math.isfinite(r):
        return "finite differences see the gradient not change along v, so that second derivative is spurious."
    if r <= 0:
        return f"the Hessian-vector product points the wrong way ({_TERM})."
    where = "along all inputs" if d.input is None else f"for {labels[d.input]}"
    size = "large" if r > 1 else "small"
    return f"the Hessian-vector product {where} is about {_amount(r)} too {size} ({_factor_text(r)} x)."


def _hessian_message(m: _Measurement, tangent: int, failed: int, total: int, labels: list[str], seed: int,
                     mode: str) -> str:
    d = m.direction
    where = "all inputs" if d.input is None else labels[d.input]
    rel = m.error / m.scale if m.scale > 0 else math.inf
    return (
        f"<c, H v>={m.reverse:.9g} from {mode}, but should be {m.fd.value:.9g} (central finite differences "
        f"of the reverse-mode gradient along v, Richardson) for tangent {tangent}, projection {d.index} of "
        f"{total} ({d.kind}, on {where}): error {m.error:.3g} is {m.ratio:.3g}x the allowed {m.allowed:.3g} "
        f"(relative error {rel:.3g}, rtol {m.rtol:.2g}, finite-difference error {m.fd_error:.3g}); "
        f"{failed} of {total} projections fail. Hint: {_hessian_hint(m, labels)} "
        f"Reproduce with seed={seed}."
    )


def _hessian_inconclusive(m: _Measurement, tangent: int, total: int, labels: list[str], seed: int) -> str:
    d = m.direction
    where = "all inputs" if d.input is None else labels[d.input]
    cause = ("the second derivative is below the rounding noise of the gradient (f is nearly flat or the "
             "gradient a cancellation there)" if m.fd.rounding > m.fd.truncation else
             f"the gradient is not smooth (or not finite) within a relative step of {STEP:.2g} of the inputs: "
             "choose inputs away from kinks")
    return (
        f"finite differences of the gradient are too noisy to judge the Hessian-vector product for tangent "
        f"{tangent}, projection {d.index} of {total} ({d.kind}, on {where}): estimated error {m.fd_error:.3g} "
        f"(truncation {m.fd.truncation:.3g}, rounding {m.fd.rounding:.3g}) exceeds "
        f"{INCONCLUSIVE_FRACTION:.0%} of the scale {m.reference:.3g} (estimate {m.fd.value:.6g}, claimed "
        f"{m.reverse:.6g}); {cause}. This is a harness problem, not a conformance result (seed={seed})."
    )
