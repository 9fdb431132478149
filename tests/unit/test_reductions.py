"""Meta-tests for the reduction and step-equivalence oracles (checks/reductions.py).

numpy only. Right implementations (numpy simulations of ring and tree all-reduces in the
dtype, in any order) must pass; deliberately wrong ones (a reduction that returns the
local value, a mean over N-1, a gather in the wrong order, a broadcast from the wrong
rank, a replica that drifted, a weight off by a few ulps too many) must fail with a
message that names what is wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlconform.checks import reductions as R
from pytest_dlconform.checks.numerics import Tolerance

FLOATS = ["float16", "float32", "float64"]


def _inputs(seed: int, n: int, shape: tuple[int, ...], dtype: str, integral: bool) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if integral:
        return [rng.integers(-20, 21, size=shape).astype(dtype) for _ in range(n)]
    return [rng.uniform(-8, 8, size=shape).astype(dtype) for _ in range(n)]


def _ring_sum(values: list[np.ndarray], dtype: str, order: list[int]) -> np.ndarray:
    """Sum in the dtype, one rounding per addition, in the given replica order."""
    acc = values[order[0]].astype(dtype)
    for i in order[1:]:
        acc = (acc + values[i].astype(dtype)).astype(dtype)
    return acc


def _tree_sum(values: list[np.ndarray], dtype: str) -> np.ndarray:
    layer = [v.astype(dtype) for v in values]
    while len(layer) > 1:
        layer = [(layer[i] + layer[i + 1]).astype(dtype) if i + 1 < len(layer) else layer[i] for i in range(0, len(layer), 2)]
    return layer[0]


cases = st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 8), st.lists(st.integers(1, 4), max_size=2).map(tuple),
                  st.sampled_from(FLOATS), st.booleans())


@settings(max_examples=150, deadline=None)
@given(case=cases, data=st.data())
def test_sums_and_means_in_any_order_pass(case, data):
    seed, n, shape, dtype, integral = case
    values = _inputs(seed, n, shape, dtype, integral)
    order = data.draw(st.permutations(list(range(n))), label="order")
    for total in (_ring_sum(values, dtype, order), _tree_sum(values, dtype)):
        R.check_reduction(total, values, op="sum", dtype=dtype, api="simulated all_reduce")
        # a mean as sum / n, and as torch's AVG does it: each value divided by n first
        R.check_reduction((total / np.asarray(n, dtype)).astype(dtype), values, op="mean", dtype=dtype, api="mean")
        prescaled = _ring_sum([(v / np.asarray(n, dtype)).astype(dtype) for v in values], dtype, order)
        R.check_reduction(prescaled, values, op="mean", dtype=dtype, api="AVG")


@settings(max_examples=100, deadline=None)
@given(case=cases)
def test_max_min_and_products_pass(case):
    seed, n, shape, dtype, integral = case
    values = [np.clip(v, -3, 3).astype(dtype) for v in _inputs(seed, n, shape, dtype, integral)]
    R.check_reduction(np.max(np.stack(values), 0), values, op="max", dtype=dtype, api="max")
    R.check_reduction(np.min(np.stack(values), 0), values, op="min", dtype=dtype, api="min")
    prod = values[0].astype(dtype)
    for v in values[1:]:
        prod = (prod * v).astype(dtype)
    R.check_reduction(prod, values, op="product", dtype=dtype, api="product")


def test_a_reduction_that_returns_the_local_value_fails():
    values = [np.array([1.0, 2.0]), np.array([3.0, 5.0])]
    with pytest.raises(R.ReductionMismatch,
                       match=r"all_reduce\(SUM\) over 2 replica\(s\).*element \[0\] = .*1\.0.*should be .*4\.0"):
        R.check_reduction(values[0], values, op="sum", dtype="float64", api="all_reduce")


def test_a_mean_over_n_minus_one_fails():
    values = [np.full(3, 1.5), np.full(3, 2.25), np.full(3, -0.75)]
    wrong = sum(values) / 2
    with pytest.raises(R.ReductionMismatch, match=r"MEAN.*exceeds the bound"):
        R.check_reduction(wrong, values, op="mean", dtype="float64", api="all_reduce")


def test_exact_results_are_required_for_integer_valued_inputs():
    values = [np.array([3.0, 7.0], np.float32), np.array([5.0, -2.0], np.float32)]
    off_by_one_ulp = np.nextafter(np.array([8.0, 5.0], np.float32), np.float32(100))
    with pytest.raises(R.ReductionMismatch, match=r"exceeds the bound 0\.000e\+00 \[exact"):
        R.check_reduction(off_by_one_ulp, values, op="sum", dtype="float32", api="all_reduce")


def test_integer_tensors_are_exact_and_an_integer_mean_divides_once():
    values = [np.array([3, 7]), np.array([4, -2]), np.array([1, 1])]
    R.check_reduction(np.array([8, 6]), values, op="sum", dtype="int32", api="sum")
    R.check_reduction(np.array([8 / 3, 2.0]), values, op="mean", dtype="int64", api="mean")
    with pytest.raises(R.ReductionMismatch, match="exact"):
        R.check_reduction(np.array([8, 7]), values, op="sum", dtype="int32", api="sum")
    with pytest.raises(R.ReductionMismatch, match="float64 division"):
        R.check_reduction(np.array([2.0, 2.0]), values, op="mean", dtype="int64", api="mean")  # floor division


def test_a_sum_error_beyond_the_summation_bound_fails_and_within_passes():
    rng = np.random.default_rng(3)
    values = [rng.uniform(-1, 1, 16).astype(np.float32) for _ in range(4)]
    bound, _ = R.error_bound("sum", values, "float32")
    reference = R.reference("sum", values, "float32")
    inside = (reference + 0.5 * bound).astype(np.float64)
    R.check_reduction(inside, values, op="sum", dtype="float32", api="sum")
    outside = reference + 2.0 * bound + 1e-30
    with pytest.raises(R.ReductionMismatch, match=r"gamma_3\(u_float32\)"):
        R.check_reduction(outside, values, op="sum", dtype="float32", api="sum")


def test_strategy_reduce_along_an_axis_is_a_mean_over_all_rows():
    values = [np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), np.array([[10.0, 20.0]])]
    R.check_reduction(np.array([4.75, 8.0]), values, op="mean", dtype="float64", api="strategy.reduce", axis=0)
    with pytest.raises(R.ReductionMismatch, match="axis=0"):  # the mean of the two replica means
        R.check_reduction(np.array([6.5, 12.0]), values, op="mean", dtype="float64", api="strategy.reduce", axis=0)


def test_shapes_and_dtypes_are_checked():
    values = [np.ones((2, 3)), np.ones((2, 3))]
    with pytest.raises(R.ReductionMismatch, match=r"shape \(3,\), but should be \(2, 3\)"):
        R.check_reduction(np.full(3, 2.0), values, op="sum", dtype="float64", api="all_reduce")
    with pytest.raises(R.ReductionMismatch, match="result dtype int32, but should be float64"):
        R.check_dtype("int32", "float64", what="MEAN of int32")


def test_gathers_must_keep_replica_order():
    values = [np.array([1.0, 2.0]), np.array([3.0])]
    R.check_gather(np.array([1.0, 2.0, 3.0]), values, axis=0, api="strategy.gather", dtype="float32")
    with pytest.raises(R.ReductionMismatch, match=r"element \[0\] = .*3\.0.*should be .*1\.0.*bitwise"):
        R.check_gather(np.array([3.0, 1.0, 2.0]), values, axis=0, api="strategy.gather", dtype="float32")
    same = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    R.check_gather_list(same, same, api="all_gather", dtype="float64")
    with pytest.raises(R.ReductionMismatch, match="bitwise"):
        R.check_gather_list(same[::-1], same, api="all_gather", dtype="float64")
    with pytest.raises(R.ReductionMismatch, match="one per rank"):
        R.check_gather_list(same[:1], same, api="all_gather", dtype="float64")


def test_gathered_values_are_compared_as_the_framework_rounded_them():
    values = [np.array([0.1]), np.array([0.2])]
    as_float16 = np.array([0.1, 0.2]).astype(np.float16)
    R.check_gather(as_float16, values, axis=0, api="all_gather", dtype="float16")


def test_a_broadcast_from_the_wrong_rank_fails():
    values = [np.array([1.0]), np.array([2.0]), np.array([3.0])]
    R.check_broadcast(np.array([3.0]), values, src=2, api="broadcast", dtype="float64")
    with pytest.raises(R.ReductionMismatch, match=r"broadcast\(src=2\)"):
        R.check_broadcast(np.array([1.0]), values, src=2, api="broadcast", dtype="float64")


def test_replicas_that_drifted_apart_fail():
    a = [np.array([1.0, 2.0]), np.array([0.5])]
    R.check_replicas_agree([a, [x.copy() for x in a]], what="mirrored", names=["kernel 0", "bias 0"])
    drifted = [a[0], np.array([0.5 + 2**-40])]
    with pytest.raises(R.ReplicaMismatch, match=r"replica 1's bias 0 differs from replica 0's .*9\.095e-13"):
        R.check_replicas_agree([a, drifted], what="mirrored", names=["kernel 0", "bias 0"])


def test_weights_beyond_the_step_tolerance_fail():
    expected = [np.array([[0.5, -1.0]]), np.array([0.25])]
    tol = R.step_tolerance("float32", layers=1, steps=2, batch=4)
    R.check_weights([expected[0] * (1 + tol.rtol / 2), expected[1]], expected, tol, what="ddp")
    off = [expected[0], expected[1] + 10 * tol.rtol]
    with pytest.raises(R.StepMismatch, match=r"ddp: bias 0 max\|distributed - single device\|.*but should be <="):
        R.check_weights(off, expected, tol, what="ddp", names=["kernel 0", "bias 0"])
    with pytest.raises(R.StepMismatch, match="shape"):
        R.check_weights([expected[0].T, expected[1]], expected, tol, what="ddp")
    with pytest.raises(R.StepMismatch, match="but should be"):
        R.check_weights([expected[0] * np.nan, expected[1]], expected, Tolerance(1.0, "any"), what="nan")


def test_step_tolerance_grows_with_depth_steps_and_batch_and_shrinks_with_precision():
    base = R.step_tolerance("float32", layers=1, steps=1, batch=2).rtol
    assert R.step_tolerance("float32", layers=3, steps=1, batch=2).rtol > base
    assert R.step_tolerance("float32", layers=1, steps=3, batch=2).rtol > base
    assert R.step_tolerance("float32", layers=1, steps=1, batch=64).rtol > base
    assert R.step_tolerance("float64", layers=1, steps=1, batch=2).rtol < base * 1e-8


@pytest.mark.parametrize(("batch", "replicas", "sizes"),
                         [(5, 2, [3, 2]), (3, 2, [2, 1]), (1, 2, [1, 0]), (7, 3, [3, 2, 2]), (4, 2, [2, 2])])
def test_split_sizes(batch, replicas, sizes):
    assert R.split_sizes(batch, replicas) == sizes
    R.check_batch_split([sizes], [batch], what="split")


def test_a_wrong_batch_split_fails():
    with pytest.raises(R.SplitMismatch,
                       match=r"step 1 split a global batch of 5 rows into \[2, 3\].*should split it into \[3, 2\]"):
        R.check_batch_split([[2, 2], [2, 3]], [4, 5], what="mirrored")
    with pytest.raises(R.SplitMismatch, match="global batches"):
        R.check_batch_split([[2, 2]], [4, 4], what="mirrored")


def test_sampler_contract():
    R.check_sampler_shards([[0, 2, 4], [1, 3, 0]], dataset_len=5, drop_last=False, what="sampler")
    R.check_sampler_shards([[0, 2], [1, 3]], dataset_len=5, drop_last=True, what="sampler")
    with pytest.raises(R.SplitMismatch, match=r"ranks got \[3, 2\] indices of 5, but each should get 3"):
        R.check_sampler_shards([[0, 2, 4], [1, 3]], dataset_len=5, drop_last=False, what="sampler")
    with pytest.raises(R.SplitMismatch, match=r"indices \[4\] of the dataset were never used"):
        R.check_sampler_shards([[0, 2, 0], [1, 3, 1]], dataset_len=5, drop_last=False, what="sampler")
    with pytest.raises(R.SplitMismatch, match="indices repeat"):
        R.check_sampler_shards([[0, 2], [1, 0]], dataset_len=5, drop_last=True, what="sampler")
