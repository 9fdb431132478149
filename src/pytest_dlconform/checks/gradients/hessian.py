"""Hessian-vector products against central differences of the (trusted) gradient.

The same estimate and the same judgement as :func:`~.vjp.check_vjp`, one order up: the
gradient plays f, each projection ``<c, H v>`` plays ``<g, u>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ...core.exceptions import InconclusiveCheck
from .bounds import DEFAULT_RTOL, INCONCLUSIVE_FRACTION, _Estimate, _estimate, _Measurement, _norm
from .steps import EPS, STEP, VJP, Array, _as_inputs, _Direction, _element_scales, _labels, _unit
from .vjp import _TERM, Evidence, GradientMismatch, _amount, _factor, _factor_text, _flat

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
    """:func:`~.bounds._estimate` with the gradient as the function: each gradient element is trusted to
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
    :func:`~.vjp.check_vjp`), ``hvp(xs, w, vs)`` the product ``H_L v`` under test (named ``mode``
    in messages: reverse-over-reverse, forward-over-reverse). ``w`` is ``cotangent`` or a
    seeded standard normal of ``out_shape``.

    For each of ``tangents`` random tangents ``v = s * z`` (element units, as in
    :func:`~.vjp.check_vjp`: ``max|z| = 1``, ``s_i = |x_i|`` floored), the gradient is evaluated at
    ``x +- h v`` and ``x +- h/2 v`` (h = STEP); its central differences, extrapolated
    (Richardson), estimate ``H v``. They are compared along projections ``c = s * zc``: each
    input's own part of the claimed ``H v``, the claimed-minus-estimated difference, and
    ``projections`` random ones, each a scalar ``<c, H v>`` judged exactly as check_vjp judges
    ``<g, u>``: it passes when ``|fd - claimed| <= rtol * scale + fd_error``, ``scale =
    ||s * H v|| * ||zc||`` (over the inputs the projection moves), ``fd_error`` the bound of
    :func:`~.bounds._estimate` with the gradient as the function (relative rounding ``eps`` per element
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
    """As :func:`~.vjp._judge`: a clear mismatch wins over noise elsewhere; noise wins over a pass."""
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
