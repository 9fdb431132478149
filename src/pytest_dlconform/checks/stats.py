"""Statistical oracles: exact binomial bounds with a stated false-alarm probability.

A random operation (dropout, a random sampler) is checked by counting events and comparing
the count with the binomial distribution the documentation implies. The acceptance
interval comes from the exact binomial tails, so a correct implementation fails a check
with probability at most ``alpha`` (the false alarm), whatever the sample size; callers
split their per-test budget (1e-6) over the checks a test makes (Bonferroni).

How large a sample must be to see a given error is the other half: :func:`trials_for`
returns the smallest tensor size at which a count check detects a rate off by a relative
``shift`` (2% by default) with probability at least ``1 - miss``, computed from the same
exact tails, so a test can state its power instead of hoping for it.

Computation: the binomial log-pmf from ``math.lgamma`` over a window around the mean that
Hoeffding's inequality shows holds all but :data:`OUTSIDE` of the mass; the mass outside
is added to both tails, which keeps every bound conservative. numpy only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from ..core import evidence
from .numerics import difference, record_held

__all__ = [
    "BinomialInterval",
    "DropoutReport",
    "StatisticalViolation",
    "assert_binomial",
    "assert_frequencies",
    "assert_scaled",
    "binomial_interval",
    "check_dropout",
    "dropout_elements",
    "dropout_scale_bound",
    "miss_probability",
    "trials_for",
]

# Hoeffding: P(|K - np| >= t) <= 2 exp(-2 t^2 / n); the window leaves out at most this much.
OUTSIDE = 1e-30
# The per-test false-alarm budget of the project (docs/writing-suites.md).
TEST_ALPHA = 1e-6


class StatisticalViolation(AssertionError):
    """A count falls outside the interval a correct implementation stays in with probability >= 1 - alpha."""


@dataclass(frozen=True)
class BinomialInterval:
    """Accept ``lo <= K <= hi`` for K ~ Binomial(n, p); P(K < lo) and P(K > hi) are each <= alpha / 2."""

    n: int
    p: float
    alpha: float
    lo: int
    hi: int

    def contains(self, count: int) -> bool:
        return self.lo <= count <= self.hi


def _window(n: int, p: float) -> tuple[int, int]:
    half = math.sqrt(n * math.log(2.0 / OUTSIDE) / 2.0)
    mean = n * p
    return max(0, math.floor(mean - half) - 1), min(n, math.ceil(mean + half) + 1)


@functools.lru_cache(maxsize=256)
def _pmf(n: int, p: float) -> tuple[int, np.ndarray]:
    """(first k, pmf over the window); the window holds all but OUTSIDE of the mass."""
    a, b = _window(n, p)
    k = np.arange(a, b + 1, dtype=np.float64)
    lg = np.vectorize(math.lgamma, otypes=[np.float64])
    log_pmf = math.lgamma(n + 1.0) - lg(k + 1.0) - lg(n - k + 1.0) + k * math.log(p) + (n - k) * math.log1p(-p)
    return a, np.exp(log_pmf)


@functools.lru_cache(maxsize=256)
def binomial_interval(n: int, p: float, alpha: float) -> BinomialInterval:
    """The acceptance interval for a Binomial(n, p) count at false-alarm probability ``alpha``."""
    if n < 0 or not 0.0 <= p <= 1.0 or not 0.0 < alpha < 1.0:
        raise ValueError(f"binomial_interval(n={n}, p={p}, alpha={alpha}): need n >= 0, 0 <= p <= 1, 0 < alpha < 1")
    if p == 0.0 or p == 1.0 or n == 0:
        k = round(n * p)
        return BinomialInterval(n, p, alpha, k, k)
    a, pmf = _pmf(n, p)
    # below[i] = P(K < a + i) (an upper bound: the mass left of the window is added).
    below = OUTSIDE + np.concatenate(([0.0], np.cumsum(pmf)))
    above = OUTSIDE + np.concatenate((np.cumsum(pmf[::-1])[::-1], [0.0]))  # above[i] = P(K >= a + i)
    half = alpha / 2.0
    lo = a + int(np.nonzero(below <= half)[0].max(initial=0))
    hi_index = np.nonzero(above <= half)[0]  # P(K >= a + i) <= half  ->  accept up to a + i - 1
    hi = (a + int(hi_index.min()) - 1) if hi_index.size else n
    return BinomialInterval(n, p, alpha, max(0, lo), min(n, hi))


def miss_probability(interval: BinomialInterval, p_true: float) -> float:
    """P(the check passes) when the true rate is ``p_true``: one minus the power against it."""
    n = interval.n
    if p_true in (0.0, 1.0):
        return 1.0 if interval.contains(round(n * p_true)) else 0.0
    a, pmf = _pmf(n, p_true)
    lo, hi = max(interval.lo, a), min(interval.hi, a + pmf.size - 1)
    inside = float(pmf[lo - a: hi - a + 1].sum()) if hi >= lo else 0.0
    return min(1.0, inside + 2 * OUTSIDE)


@functools.lru_cache(maxsize=256)
def trials_for(p: float, *, shift: float = 0.02, alpha: float = TEST_ALPHA, miss: float = TEST_ALPHA) -> int:
    """Smallest n (within 2%) at which the count check at ``alpha`` rejects rates p(1 - shift)
    and p(1 + shift) each with probability >= 1 - miss."""
    if not 0.0 < p < 1.0:
        return 1
    alternatives = [q for q in (p * (1 - shift), p * (1 + shift)) if 0.0 < q < 1.0]
    z = NormalDist().inv_cdf
    za, zb = z(1 - alpha / 2), z(1 - miss)
    n = max(
        math.ceil(((za * math.sqrt(p * (1 - p)) + zb * math.sqrt(q * (1 - q))) / (q - p)) ** 2)
        for q in alternatives
    )
    n = max(n, 16)
    # The normal approximation is close; confirm with the exact tails and grow if needed.
    while any(miss_probability(binomial_interval(n, p, alpha), q) > miss for q in alternatives):
        n = math.ceil(n * 1.02)
    return n


def assert_binomial(count: int, n: int, p: float, *, alpha: float, what: str) -> BinomialInterval:
    """Fail when ``count`` is outside the exact acceptance interval of Binomial(n, p)."""
    __tracebackhide__ = True
    iv = binomial_interval(int(n), float(p), float(alpha))
    half_width = max(iv.hi - n * p, n * p - iv.lo, 1e-12)
    evidence.check(what, observed=abs(count - n * p) / half_width, tolerance=1.0,
                   count=int(count), n=int(n), p=p, interval=[iv.lo, iv.hi], alpha=alpha)
    if not iv.contains(int(count)):
        raise StatisticalViolation(
            f"{what}: count {count} of {n}, but should be in [{iv.lo}, {iv.hi}] for Binomial(n={n}, p={p:.6g}) "
            f"(observed rate {count / max(n, 1):.6g}; a correct implementation falls outside with probability <= {alpha:.1e})"
        )
    return iv


def assert_frequencies(counts: Sequence[int], probs: Sequence[float], *, alpha: float, what: str) -> None:
    """Each category's count ~ Binomial(total, prob_i); one check per category at alpha / k."""
    __tracebackhide__ = True
    counts_a = np.asarray(counts, dtype=np.int64)
    probs_a = np.asarray(probs, dtype=np.float64)
    if counts_a.shape != probs_a.shape:
        raise ValueError(f"{what}: {counts_a.size} counts for {probs_a.size} probabilities")
    total, k = int(counts_a.sum()), max(1, int(np.count_nonzero(probs_a)))
    for i, (c, q) in enumerate(zip(counts_a, probs_a)):
        assert_binomial(int(c), total, float(q), alpha=alpha / k, what=f"{what}: category {i}")


# float64's unit round-off: the scale factor 1/(1-p) starts from a Python float.
_U64 = 2.0**-53


def dropout_scale_bound(roundoff: float) -> tuple[float, str]:
    """Relative error bound of a kept dropout value against ``x / (1 - p)``, and its basis.

    The factor is a rounded number before it multiplies: implementations compute ``1 - p``
    in float64 (exact for p >= 1/2 by Sterbenz's lemma, one rounding ``u64`` otherwise),
    round it or its reciprocal to the tensor's dtype (torch: ``noise.div_(1 - p)`` on a
    float32 mask rounds the divisor to float32, then divides; tf.nn.dropout: ``1 / (1 - p)``
    in float64, rounded to the tensor dtype), divide once (a rounding in the tensor dtype
    or in float64), and multiply (one rounding). With ``|d| <= u`` each, the worst case is
    ``x * (1 + d_mul) * (1 + d_div) / (1 + d_cast)`` and two float64 roundings:
    ``(1 + u)**2 / (1 - u) * (1 + u64)**2 - 1``, i.e. three roundings of ``u`` (one of a
    divisor), not two: float32 inputs of 1.38 with p = 0.309 show 1.1u.
    """
    bound = (1.0 + roundoff) ** 2 / (1.0 - roundoff) * (1.0 + _U64) ** 2 - 1.0
    return bound, (f"(1+u)^2/(1-u)*(1+u64)^2 - 1 with u={roundoff:.3g}: "
                   "1-p in float64, its rounding to the dtype, the division, the multiply")


def _relative_errors(ys: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|y - exact| / |exact| elementwise where both are finite (0 elsewhere: the non-finite rule)."""
    both = np.isfinite(ys) & np.isfinite(exact)
    y, x = np.where(both, ys, 0.0), np.where(both, exact, 0.0)
    return np.abs(y - x) / np.maximum(np.abs(x), np.finfo(np.float64).tiny)


def assert_scaled(x: np.ndarray, y: np.ndarray, factor: float, *, roundoff: float, roundings: int, what: str,
                  bound: float | None = None, basis: str = "") -> float:
    """``y == x * factor`` up to ``roundings`` roundings of relative size ``roundoff`` each,
    or up to the relative ``bound`` a caller derived (``basis`` says from what).

    Returns the worst relative error in units of ``roundoff``."""
    __tracebackhide__ = True
    xs, ys = np.asarray(x, np.float64), np.asarray(y, np.float64)
    exact = xs * factor
    if bound is None:
        bound = (1.0 + roundoff) ** roundings - 1.0
        basis = basis or f"{roundings} rounding(s) of u={roundoff:.3g}"
    limit: float = bound
    d = difference(ys, exact)
    rel = _relative_errors(ys, exact)
    worst = float(rel.max(initial=0.0)) if d.nonfinite_match else math.inf
    if not d.nonfinite_match:
        evidence.check(what, observed=worst, tolerance=bound, factor=factor, roundings=roundings, basis=basis)
        raise StatisticalViolation(f"{what}: kept {d.describe()} (input * {factor:.9g}); non-finite values must match")
    if worst <= bound:
        record_held(what, exact, lambda w: difference(w, exact).nonfinite_match
                    and bool(np.all(_relative_errors(w, exact) <= limit)), observed=worst, tolerance=bound,
                    factor=factor, roundings=roundings, basis=basis)
    else:
        evidence.check(what, observed=worst, tolerance=bound, factor=factor, roundings=roundings, basis=basis)
        i = int(np.argmax(rel))
        raise StatisticalViolation(
            f"{what}: kept value {float(ys.flat[i])!r} for input {float(xs.flat[i])!r}, but should be input * {factor:.9g} = "
            f"{float(exact.flat[i])!r} up to its rounding (relative error {worst:.3e} > {bound:.3e} [{basis}]; "
            f"observed scale {ys.flat[i] / xs.flat[i]:.9g})"
        )
    return worst / roundoff


@dataclass
class DropoutReport:
    p: float
    elements: int
    zero_rate: float
    intervals: list[BinomialInterval]
    power: float  # against a rate off by 2% (relative), for the first count check
    worst_scale_error_ulps: float

    def as_evidence(self) -> dict[str, Any]:
        return {"p": self.p, "elements": self.elements, "zero_rate": self.zero_rate,
                "power_vs_2pct_rate_error": self.power, "worst_scale_error_in_roundings": self.worst_scale_error_ulps}


def _mask(y: np.ndarray, mask_shape: tuple[int, ...] | None, what: str) -> np.ndarray:
    """Where the output is zero; with a broadcast mask shape, constant along broadcast axes."""
    zero = np.asarray(y) == 0
    if mask_shape is None:
        return zero.ravel()
    axes = tuple(i for i, (m, s) in enumerate(zip(mask_shape, zero.shape)) if m == 1 and s != 1)
    reduced_all, reduced_any = zero.all(axis=axes, keepdims=True), zero.any(axis=axes, keepdims=True)
    if not np.array_equal(reduced_all, reduced_any):
        raise StatisticalViolation(
            f"{what}: the dropped pattern varies along axes {axes}, but a mask of shape {mask_shape} "
            f"is broadcast along them (whole slices are kept or dropped together)"
        )
    return reduced_any.ravel()


def dropout_checks(calls: int) -> int:
    """How many count checks :func:`check_dropout` makes for ``calls`` outputs (its Bonferroni split)."""
    return calls + 1 + (calls - 1)


def dropout_elements(p: float, *, calls: int = 2, alpha: float = TEST_ALPHA, shift: float = 0.02) -> int:
    """Mask elements at which :func:`check_dropout` (``calls`` outputs, total ``alpha``) rejects
    a drop rate off by ``shift`` (relative) with probability >= 1 - alpha."""
    return trials_for(p, shift=shift, alpha=alpha / dropout_checks(calls), miss=alpha)


def check_dropout(x: np.ndarray, outputs: Sequence[np.ndarray], p: float, *, roundoff: float, alpha: float = TEST_ALPHA,
                  mask_shape: tuple[int, ...] | None = None, what: str = "dropout") -> DropoutReport:
    """Dropout in training mode on an input without zeros, called ``len(outputs)`` times.

    Checks, with total false-alarm probability ``alpha`` split over the count checks:
    each call zeroes Binomial(m, p) of its m mask elements; disjoint neighbouring pairs are
    both dropped Binomial(m/2, p^2) times (independence within a call, which a mask that
    drops a block or a stripe fails); two calls drop the same element Binomial(m, p^2) times
    (a fresh mask per call); kept elements equal x / (1 - p) up to the rounding of the
    scale factor itself and of the product (:func:`dropout_scale_bound`).
    """
    __tracebackhide__ = True
    xs = np.asarray(x)
    if np.any(xs == 0):
        raise ValueError(f"{what}: the input must not contain zeros (a zero cannot be told from a dropped element)")
    masks = [_mask(y, mask_shape, what) for y in outputs]
    a = alpha / dropout_checks(len(masks))
    intervals, m = [], masks[0].size
    for i, (y, mask) in enumerate(zip(outputs, masks)):
        if np.asarray(y).shape != xs.shape:
            raise StatisticalViolation(f"{what}: output shape {np.asarray(y).shape}, but should be the input's {xs.shape}")
        intervals.append(assert_binomial(int(mask.sum()), mask.size, p, alpha=a, what=f"{what}: zeros in call {i}"))
    pairs = masks[0][: m - m % 2].reshape(-1, 2)
    intervals.append(assert_binomial(int(pairs.all(axis=1).sum()), pairs.shape[0], p * p, alpha=a,
                                     what=f"{what}: neighbouring pairs both dropped"))
    for i in range(1, len(masks)):
        intervals.append(assert_binomial(int((masks[0] & masks[i]).sum()), m, p * p, alpha=a,
                                         what=f"{what}: elements dropped in both call 0 and call {i}"))
    worst = 0.0
    if p < 1.0:
        bound, basis = dropout_scale_bound(roundoff)
        for y in outputs:
            kept = np.asarray(y) != 0
            worst = max(worst, assert_scaled(xs[kept], np.asarray(y)[kept], 1.0 / (1.0 - p), roundoff=roundoff,
                                             roundings=3, bound=bound, basis=basis,
                                             what=f"{what}: kept values scaled by 1/(1-p)"))
    shifted = [q for q in (p * 0.98, p * 1.02) if 0.0 < q < 1.0]
    power = 1.0 - max((miss_probability(intervals[0], q) for q in shifted), default=0.0)
    report = DropoutReport(p, m, float(masks[0].mean()), intervals, power, worst)
    evidence.note(**{f"{what}: {k}": v for k, v in report.as_evidence().items()})
    return report
