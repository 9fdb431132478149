"""Meta-tests for the scheduler suites' references and comparison (suites/modules/
test_torch_lr_schedulers.py, test_keras_schedules.py): the covering arrays cover every pair,
each reference matches the documented values, and each check fails a deliberately wrong
schedule (a planted bug) with a message naming the step, the value and the bound.

No framework: the planted schedules are Python.
"""

from __future__ import annotations

import math

import pytest

from pytest_dlconform.suites.modules import test_keras_schedules as ks
from pytest_dlconform.suites.modules import test_torch_lr_schedulers as ts

BASES = ts.BASES


@pytest.mark.parametrize("generator", [ts.covering_array, ks.covering_array])
@pytest.mark.parametrize("factors", [
    {"a": [1, 2, 3], "b": ["x", "y"], "c": [True, False], "d": [0.1, 0.2, 0.3, 0.4]},
    {"a": [1, 2], "b": [3, 4]},
    ts.CYCLIC, ts.ONE_CYCLE, ts.PLATEAU,
    dict(ks.SCHEDULES["CosineDecay"][0]),
])
def test_covering_array_covers_every_pair(generator, factors):
    rows = generator(factors)
    assert not ts.uncovered_pairs(factors, rows)
    assert generator(factors) == rows  # deterministic
    sizes = sorted(len(v) for v in factors.values())
    assert len(rows) <= 2 * sizes[-1] * sizes[-2], f"{len(rows)} rows for {sizes}"  # far fewer than all combinations


def test_uncovered_pairs_names_a_missing_pair():
    factors = {"a": [1, 2], "b": [3, 4]}
    assert ts.uncovered_pairs(factors, [{"a": 1, "b": 3}, {"a": 2, "b": 4}, {"a": 1, "b": 4}]) == ["a=2 with b=3"]


def test_references_reproduce_the_docstring_examples():
    # StepLR: 0.05 until 30, 0.005 until 60; MultiStepLR milestones [30, 80]; ConstantLR(0.5, 40)
    assert [ts.ref_step(0.05, t, 30, 0.1) for t in (0, 29, 30, 60)] == pytest.approx([0.05, 0.05, 0.005, 0.0005])
    assert [ts.ref_multistep(0.05, t, [30, 80], 0.1) for t in (29, 30, 80)] == pytest.approx([0.05, 0.005, 0.0005])
    assert [ts.ref_constant(0.05, t, 0.5, 40) for t in (0, 39, 40)] == [0.025, 0.025, 0.05]
    # LinearLR(start 0.05, 40): 0.003687 and 0.004875 are epochs 1 and 2 (the docstring says 0 and 1)
    assert ts.ref_linear(0.05, 1, 0.05, 1.0, 40) == pytest.approx(0.0036875)
    # CosineAnnealingWarmRestarts(T_0=1, T_mult=2), PR 23952's expected output at lr 0.5
    got = [ts.ref_warm_restarts(0.5, t, 1, 2, 0.0) for t in range(8)]
    assert got == pytest.approx([0.5, 0.5, 0.25, 0.5, 0.42677669529663687, 0.25, 0.07322330470336313, 0.5])
    # OneCycleLR ends at min_lr = initial_lr / final_div_factor at step total - 1
    phases = ts.one_cycle_phases(40, 0.3, False, 0.004, 0.1, 0.004 / 1e4)
    assert ts.ref_one_cycle(phases, 39, "cos") == pytest.approx(0.004 / 1e4, rel=1e-12)
    assert ts.ref_one_cycle(phases, 11, "cos") == pytest.approx(0.1, rel=1e-12)
    # Keras: PiecewiseConstantDecay boundaries [100000, 110000], values [1.0, 0.5, 0.1]
    assert [ks.ref_piecewise(s, [100000, 110000], [1.0, 0.5, 0.1]) for s in (100000, 100001, 110001)] == [1.0, 0.5, 0.1]


def _planted_step_lr(step_size: int, gamma: float, steps: int, *, late: bool) -> list[list[float]]:
    """StepLR with a planted off-by-one: decays one step late."""
    return [[b * gamma ** (max(0, t - 1 if late else t) // step_size) for b in BASES] for t in range(steps + 1)]


def test_torch_comparison_fails_a_scheduler_that_decays_one_step_late():
    want = ts._table(lambda b, t: ts.ref_step(b, t, 3, 0.5), 12)
    ts.assert_schedule(_planted_step_lr(3, 0.5, 12, late=False), want, what="StepLR", ops=1.0)
    with pytest.raises(AssertionError, match=r"StepLR: group 0 \(base lr 0.1\) after 3 steps: lr 0.1, but should be "
                                             r"0.05 \(\|difference\| 5.000e-02 > allowed"):
        ts.assert_schedule(_planted_step_lr(3, 0.5, 12, late=True), want, what="StepLR", ops=1.0)


def test_torch_comparison_fails_t_mult_ignored_and_a_short_one_cycle():
    want = ts._table(lambda b, t: ts.ref_warm_restarts(b, t, 3, 2, 0.0), 20)
    wrong = ts._table(lambda b, t: ts.ref_warm_restarts(b, t, 3, 1, 0.0), 20)
    with pytest.raises(AssertionError, match=r"WR: group 0 \(base lr 0.1\) after 4 steps: lr 0.075.*, but should be 0.0933"):
        ts.assert_schedule(wrong, want, what="WR", ops=0.0, floor=1.0)
    right = ts.one_cycle_phases(40, 0.3, False, 0.004, 0.1, 4e-7)
    short = [(11.0, 0.004, 0.1), (40.0, 0.1, 4e-7)]  # the last phase ends one step late
    with pytest.raises(AssertionError, match=r"after 12 steps"):
        ts.assert_schedule([[ts.ref_one_cycle(short, t, "cos")] for t in range(40)],
                           [[ts.ref_one_cycle(right, t, "cos")] for t in range(40)], what="OneCycleLR", ops=0.0,
                           floor=1.0, fixed_ops=8.0)


def test_torch_bound_is_rounding_sized():
    want = ts._table(lambda b, t: ts.ref_exponential(b, t, 0.9), 48)
    nudged = [[x * (1 + 1e-12) for x in row] for row in want]  # 9000 u: beyond 48 steps' rounding
    with pytest.raises(AssertionError, match="after 0 steps"):
        ts.assert_schedule(nudged, want, what="ExponentialLR", ops=1.0)
    ts.assert_schedule([[x * (1 + 8 * 2**-53) for x in row] for row in want], want, what="ExponentialLR", ops=1.0)


def test_plateau_reference_follows_patience_and_cooldown():
    flat = [1.0] * 8  # the first value sets the best; every later one is a bad epoch
    lrs = ts.ref_plateau(flat, [1.0], mode="min", factor=0.5, patience=1, threshold=0.0, threshold_mode="abs",
                         cooldown=0, min_lrs=[0.0], eps=0.0)
    assert [r[0] for r in lrs] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125]
    cooled = ts.ref_plateau(flat, [1.0], mode="min", factor=0.5, patience=1, threshold=0.0, threshold_mode="abs",
                            cooldown=2, min_lrs=[0.0], eps=0.0)
    assert [r[0] for r in cooled] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25]
    with pytest.raises(AssertionError, match=r"after 5 steps: lr 0.25, but should be 0.5"):
        ts.assert_schedule(lrs, cooled, what="ReduceLROnPlateau(cooldown=2)", ops=1.0)


def test_cyclic_reference_rises_and_falls_over_the_two_half_cycles():
    assert [ts.cyclic_position(t, 4, 2)[1] for t in range(8)] == [0, 0.25, 0.5, 0.75, 1.0, 0.5, 0.0, 0.25]
    assert [ts.cyclic_scale("triangular2", 1.0, c, 0) for c in (1, 2, 3)] == [1.0, 0.5, 0.25]


def test_keras_comparison_fails_staircase_ignored_and_a_warmup_without_its_start():
    row = {"decay_steps": 7, "decay_rate": 0.5, "staircase": True}
    want = [ks.ref_exponential(t, 0.1, 7, 0.5, True) for t in range(ks.STEPS)]
    smooth = [ks.ref_exponential(t, 0.1, 7, 0.5, False) for t in range(ks.STEPS)]
    with pytest.raises(AssertionError, match=r"ExponentialDecay in float64 at step 1: .*, but should be 0.1 "):
        ks.assert_schedule(smooth, want, what="ExponentialDecay", dtype="float64",
                           extra=[ks.SCHEDULES["ExponentialDecay"][3](row, t) for t in range(ks.STEPS)])
    # The CosineDecay docstring's warmup snippet (completed_fraction * total_delta, no start)
    want = [ks.ref_cosine(t, 0.1, 10, 0.0, 0.2, 5) for t in range(ks.STEPS)]
    snippet = [t / 5 * (0.2 - 0.1) if t < 5 else w for t, w in enumerate(want)]
    with pytest.raises(AssertionError, match=r"at step 0: 0.0, but should be 0.1"):
        ks.assert_schedule(snippet, want, what="CosineDecay", dtype="float32")


def test_keras_restart_position_counts_geometric_periods():
    assert [ks.restart_position(s, 3, 2.0)[0] for s in (0, 2, 3, 8, 9, 20, 21)] == [0, 0, 1, 1, 2, 2, 3]
    assert ks.ref_restarts(3, 0.1, 3, 2.0, 0.5, 0.0) == pytest.approx(0.05)
    assert math.isclose(ks.ref_polynomial(0, 0.1, 7, 0.0, 1.0, True), 0.1)
    assert math.isclose(ks.ref_polynomial(7, 0.1, 7, 0.0, 1.0, True), 0.0, abs_tol=1e-18)  # ceil(7/7) = 1
