"""Oracles of the GPU paths that a CPU can exercise: NCCL's integer AVG judged from its
documentation, and the device moves the suites need."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.checks.reductions import ReductionMismatch
from pytest_dlconform.harness.distribution import Outcome, ReduceCase, check_nccl_int_avg

CASE = ReduceCase("all_reduce", (np.array([7.0, -3.0]), np.array([2.0, 4.0]), np.array([1.0, 1.0])), "int32", op="mean")


def test_nccl_integer_avg_within_the_documented_rounding_holds():
    # AVG divides before summing: 7/3 + 2/3 + 1/3 truncated is 2, the mean is 3.33: off by < 3 ranks
    check_nccl_int_avg(CASE, Outcome((np.array([2, 0], np.int32),), info={"dtype": "int32"}), "nccl, rank 0")


@pytest.mark.parametrize("outcome, message", [
    (Outcome(error="RuntimeError: unsupported"), "documents ncclAvg for integer types"),
    (Outcome((np.array([3.33, 0.67]),), info={"dtype": "float64"}), "dtype float64, but should be int32"),
    (Outcome((np.array([10, 2], np.int32),), info={"dtype": "int32"}), "off the mean by"),  # a SUM, not an AVG
])
def test_nccl_integer_avg_wrong_answers_are_violations(outcome, message):
    with pytest.raises(ReductionMismatch, match=message):
        check_nccl_int_avg(CASE, outcome, "nccl, rank 0")
