"""What a finite difference and a claimed derivative may differ by.

:func:`_estimate` extrapolates two central differences (Richardson) and bounds the result's
error from its own measurements; :class:`_Measurement` holds one direction's claimed and
estimated derivative and decides whether they agree within ``rtol * scale + floor +
fd_error``, or whether the estimate is too noisy to judge at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .steps import EPS, Array, _Direction

# Default rtol = sqrt(eps) ~ 1.5e-8. A float64 reverse pass of m operations carries a
# normwise rounding error of order m * eps (Higham ch. 3), i.e. 1e-14..1e-12 for real
# programs: sqrt(eps) leaves four or more orders of magnitude for deep or ill-conditioned
# backward passes, while a wrong gradient is wrong by far more (a term, a sign, a factor
# 1.001). The finite-difference error is accounted for separately (fd_error, a bound), so
# rtol does not need to absorb it.
DEFAULT_RTOL: float = math.sqrt(EPS)
# Above this fraction of the scale the finite differences are too noisy to judge.
INCONCLUSIVE_FRACTION: float = 0.1


@dataclass(frozen=True)
class _Estimate:
    value: float  # Richardson-extrapolated derivative of L along u
    truncation: float  # |D(h/2) - D(h)|, the measured gap (see _estimate)
    rounding: float  # bound on the extrapolation's rounding, (4 r2 + r1) / 3
    gap_rounding: float = 0.0  # bound on the rounding inside the gap, r1 + r2


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


def _norm(arrays: Sequence[Array]) -> float:
    """The 2-norm of all entries, scaled first: unscaled, the squares of a derivative of 1e-229
    (erf at x = 23) underflow to 0, and the allowed difference with them (explore seed 302827194)."""
    top = max((float(np.max(np.abs(a))) for a in arrays if a.size), default=0.0)
    if top == 0 or not math.isfinite(top):
        return top
    return top * math.sqrt(sum(float(np.sum((a / top) ** 2)) for a in arrays))
