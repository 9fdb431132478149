"""Meta-tests for the statistical oracles (checks/stats.py): exact bounds, stated power, and
dropout checks that pass 200 runs of a correct implementation and fail slightly wrong ones.

numpy only; every random draw comes from a fixed seed, so these tests are deterministic.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest

from pytest_dlconform.checks.stats import (
    TEST_ALPHA,
    StatisticalViolation,
    assert_binomial,
    assert_frequencies,
    binomial_interval,
    check_dropout,
    dropout_elements,
    miss_probability,
    trials_for,
)

U32 = 2.0**-24
RUNS = 200


def exact_interval(n: int, p: float, alpha: float) -> tuple[int, int]:
    """The acceptance interval by exact rational arithmetic (small n only)."""
    q = Fraction(p)  # the rates below are dyadic, so this is exact and cheap
    pmf = [comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(n + 1)]
    below = [Fraction(0)]
    for v in pmf:
        below.append(below[-1] + v)  # below[k] = P(K < k)
    half = Fraction(alpha) / 2
    lo = max(k for k in range(n + 1) if below[k] <= half)
    hi = min(k for k in range(n + 1) if 1 - below[k + 1] <= half)
    return lo, hi


@pytest.mark.parametrize("n,p,alpha", [(50, 0.3125, 1e-3), (200, 0.5, 1e-6), (120, 0.0625, 1e-2), (10, 0.5, 0.5),
                                       (300, 0.875, 1e-4)])
def test_interval_matches_exact_rational_computation(n, p, alpha):
    iv = binomial_interval(n, p, alpha)
    assert (iv.lo, iv.hi) == exact_interval(n, p, alpha)


def test_degenerate_rates_accept_only_the_certain_count():
    assert (binomial_interval(100, 0.0, 1e-6).lo, binomial_interval(100, 0.0, 1e-6).hi) == (0, 0)
    assert (binomial_interval(100, 1.0, 1e-6).lo, binomial_interval(100, 1.0, 1e-6).hi) == (100, 100)
    with pytest.raises(StatisticalViolation, match=r"count 1 of 100, but should be in \[0, 0\]"):
        assert_binomial(1, 100, 0.0, alpha=1e-6, what="p=0")


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9])
def test_trials_for_reaches_the_stated_power(p):
    n = trials_for(p)
    iv = binomial_interval(n, p, TEST_ALPHA)
    for q in (p * 0.98, p * 1.02):
        assert miss_probability(iv, q) <= TEST_ALPHA
    # and not wastefully: 5% fewer trials no longer reach it
    smaller = binomial_interval(int(n * 0.95), p, TEST_ALPHA)
    assert max(miss_probability(smaller, q) for q in (p * 0.98, p * 1.02)) > TEST_ALPHA


def test_binomial_check_message_names_count_interval_and_alpha():
    with pytest.raises(StatisticalViolation,
                       match=r"zeros: count 700 of 1000, but should be in \[\d+, \d+\] .*probability <= 1\.0e-06"):
        assert_binomial(700, 1000, 0.5, alpha=1e-6, what="zeros")


# ------------------------------------------------------------------ dropout implementations


def dropout(x: np.ndarray, p: float, rng: np.random.Generator, *, rate: float | None = None,
            scale: float | None = None) -> np.ndarray:
    """Inverted dropout in float32; ``rate``/``scale`` plant a wrong drop rate or scale."""
    drop = rng.random(x.shape) < (p if rate is None else rate)
    factor = np.float32(1.0 / (1.0 - p) if scale is None else scale)
    return np.where(drop, np.float32(0), x * factor).astype(np.float32)


def _input(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.uniform(1, 2, n) * rng.choice([-1, 1], n)).astype(np.float32)


@pytest.mark.parametrize("p", [0.5, 0.9])
def test_dropout_check_passes_200_runs_of_a_correct_implementation(p):
    n = dropout_elements(p, calls=2)
    x = _input(n, 0)
    for run in range(RUNS):
        rng = np.random.default_rng(1000 + run)
        report = check_dropout(x, [dropout(x, p, rng), dropout(x, p, rng)], p, roundoff=U32)
        assert report.power >= 1 - TEST_ALPHA
        assert report.worst_scale_error_ulps <= 2.0 + 1e-9


@pytest.mark.parametrize("p", [0.5, 0.9])
@pytest.mark.parametrize("shift", [0.98, 1.02])
def test_dropout_check_fails_every_run_of_a_rate_off_by_two_percent(p, shift):
    n = dropout_elements(p, calls=2)
    x = _input(n, 0)
    for run in range(RUNS):
        rng = np.random.default_rng(5000 + run)
        outs = [dropout(x, p, rng, rate=p * shift), dropout(x, p, rng, rate=p * shift)]
        with pytest.raises(StatisticalViolation, match=r"zeros in call 0: count \d+ of \d+, but should be in"):
            check_dropout(x, outs, p, roundoff=U32)


@pytest.mark.parametrize("shift", [0.98, 1.02])
def test_dropout_check_fails_every_run_of_a_scale_off_by_two_percent(shift):
    p = 0.9  # the smallest tensor of the tested rates: the scale check does not need power
    x = _input(dropout_elements(p, calls=2), 0)
    for run in range(RUNS):
        rng = np.random.default_rng(9000 + run)
        outs = [dropout(x, p, rng, scale=10.0 * shift) for _ in range(2)]
        with pytest.raises(StatisticalViolation, match=r"kept values scaled by 1/\(1-p\).*but should be input \* 10"):
            check_dropout(x, outs, p, roundoff=U32)


def test_dropout_check_fails_a_mask_reused_across_calls():
    p, x = 0.5, _input(dropout_elements(0.5, calls=2), 1)
    y = dropout(x, p, np.random.default_rng(3))
    with pytest.raises(StatisticalViolation, match="dropped in both call 0 and call 1"):
        check_dropout(x, [y, y.copy()], p, roundoff=U32)


def test_dropout_check_fails_a_mask_that_drops_neighbours_together():
    p, x = 0.5, _input(dropout_elements(0.5, calls=1), 2)
    rng = np.random.default_rng(4)
    pairs = np.repeat(rng.random(x.size // 2 + 1) < p, 2)[: x.size]  # the right rate, but in pairs
    y = np.where(pairs, np.float32(0), x * np.float32(2)).astype(np.float32)
    with pytest.raises(StatisticalViolation, match="neighbouring pairs both dropped"):
        check_dropout(x, [y], p, roundoff=U32)


def test_dropout_check_fails_a_mask_that_ignores_the_broadcast_shape():
    p, x = 0.5, _input(64 * 8, 5).reshape(64, 8)
    y = dropout(x, p, np.random.default_rng(6))  # elementwise, though the mask should be (64, 1)
    with pytest.raises(StatisticalViolation, match=r"varies along axes \(1,\).*broadcast"):
        check_dropout(x, [y], p, roundoff=U32, mask_shape=(64, 1))


def test_dropout_check_refuses_an_input_with_zeros():
    with pytest.raises(ValueError, match="must not contain zeros"):
        check_dropout(np.zeros(4, np.float32), [np.zeros(4, np.float32)], 0.5, roundoff=U32)


def test_frequencies_pass_a_correct_sampler_and_fail_a_biased_one():
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    rng = np.random.default_rng(7)
    for _ in range(RUNS):
        counts = np.bincount(rng.choice(4, 20000, p=probs), minlength=4)
        assert_frequencies(counts, probs, alpha=TEST_ALPHA, what="sampler")
    biased = np.array([0.1, 0.2, 0.32, 0.38])  # one weight off by 2 percentage points
    counts = np.bincount(np.random.default_rng(8).choice(4, 200000, p=biased), minlength=4)
    with pytest.raises(StatisticalViolation, match="sampler: category 2"):
        assert_frequencies(counts, probs, alpha=TEST_ALPHA, what="sampler")
