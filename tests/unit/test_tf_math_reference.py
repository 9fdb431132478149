"""Meta-tests for modules.tf.math-functions (suites/modules/test_tf_math.py, _tf_math_reference.py):
the elementwise oracle fails a deliberately wrong answer (sign flip, dropped term, zeros, a NaN,
a finite value where inf is documented, wrong dtype or shape) with a message naming the element;
the references reproduce known values; and whole records, run on a numpy stand-in for ``tf``,
hold for a correct implementation and fail for the wrong ones the mutants model.

No framework: the implementations are numpy.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.suites.modules import _tf_math_reference as ref
from pytest_dlconform.suites.modules import test_tf_math as suite

U = ref.U64


# ----------------------------------------------------------------- the oracle


def test_assert_values_accepts_a_correct_answer_and_rounding():
    want = np.array([1.0, -2.0, np.inf, np.nan, 0.0])
    got = want * (1 + np.array([U, -U, 0, 0, 0]))
    assert ref.assert_values(got, want, rtol=2 * U, what="ok") <= 1.0


@pytest.mark.parametrize(("label", "wrong", "message"), [
    ("sign flip", lambda w: -w, r"element 2 is .*-3e-300"),
    ("zeros", lambda w: np.zeros_like(w), "bound"),
    ("dropped term (scaled by 1 + 1e-12)", lambda w: w * (1 + 1e-12), "error/bound"),
    ("NaN", lambda w: np.where(np.arange(w.size) == 1, np.nan, w), "element 1"),
])
def test_assert_values_rejects_wrong_finite_answers(label, wrong, message):
    want = np.array([1.5, -2.0, 3e-300, 7.0])
    with pytest.raises(ref.ValueMismatch, match=message):
        ref.assert_values(wrong(want), want, rtol=4 * U, what=label)


def test_assert_values_requires_the_documented_non_finite_values():
    want = np.array([np.inf, 1.0])
    with pytest.raises(ref.ValueMismatch, match="non-finite values must match"):
        ref.assert_values(np.array([26.2, 1.0]), want, rtol=1.0, what="erfcinv(0)")
    with pytest.raises(ref.ValueMismatch, match="non-finite values must match"):
        ref.assert_values(np.array([-np.inf, 1.0]), want, rtol=1.0, what="sign of inf")


def test_assert_values_checks_dtype_shape_and_exact_integers():
    with pytest.raises(ref.ValueMismatch, match="dtype float32"):
        ref.assert_values(np.float32(0.375), np.float64(0.375), rtol=0, what="zero_fraction dtype")
    with pytest.raises(ref.ValueMismatch, match="shape"):
        ref.assert_values(np.zeros(3), np.zeros(4), rtol=1, what="shape")
    with pytest.raises(ref.ValueMismatch, match="1 element"):
        ref.assert_values(np.array([0, 2, 2]), np.array([0, 2, 1]), rtol=0, what="bincount")


def test_assert_values_absolute_floor_is_per_element():
    want = np.array([1e-17, 1.0])
    ref.assert_values(np.array([3e-16, 1.0]), want, rtol=U, atol=np.array([1e-15, 0.0]), what="floor")
    with pytest.raises(ref.ValueMismatch, match="element 1"):
        ref.assert_values(np.array([1e-17, 1.0 + 1e-15]), want, rtol=U, atol=np.array([1e-15, 0.0]), what="floor")


# ----------------------------------------------------------------- references


def test_references_reproduce_known_values():
    assert ref.mp_map(ref.lgamma, np.array([0.5]))[0] == pytest.approx(math.log(math.sqrt(math.pi)), rel=1e-15)
    assert ref.mp_map(ref.lgamma, np.array([-2.0]))[0] == math.inf
    assert ref.mp_map(ref.ndtri, np.array([0.5, 0.0]))[0] == 0.0
    assert ref.mp_map(ref.erfcinv, np.array([1e-300]))[0] == pytest.approx(26.209469960516124, rel=1e-14)
    assert ref.mp_map(ref.ndtri, np.array([1e-300]))[0] == pytest.approx(-37.0470962993612, rel=1e-14)
    assert ref.mp_map(ref.i0e, np.array([0.0]))[0] == 1.0
    assert ref.mp_map(ref.igamma, np.array([1.0]), np.array([2.0]))[0] == pytest.approx(1 - math.exp(-2), rel=1e-15)
    assert ref.mp_map(ref.zeta, np.array([2.0]), np.array([1.0]))[0] == pytest.approx(math.pi ** 2 / 6, rel=1e-15)
    assert ref.lbeta_rows(np.array([[2.0, 3.0]]))[0] == pytest.approx(math.log(1 / 12), rel=1e-15)
    assert ref.polyval([2.0, 1.0, 0.0], np.array([3.0]))[0] == 21.0


def test_sobol_first_dimension_is_the_gray_code_van_der_corput_sequence():
    assert ref.sobol_first_dimension(8, 0).tolist() == [0, 0.5, 0.75, 0.25, 0.375, 0.875, 0.625, 0.125]
    assert ref.sobol_first_dimension(3, 5).tolist() == [0.875, 0.625, 0.125]


def test_segment_reference_fills_empty_segments_and_drops_negative_ids():
    data = np.array([[1.0], [2.0], [5.0]])
    out = ref.segment_reduce(data, np.array([2, -1, 2]), 4, "max", -7.0)
    assert out.ravel().tolist() == [-7.0, -7.0, 5.0, -7.0]
    assert ref.segment_reduce(data, np.array([0, 0, 1]), 3, "sqrt_n", 0.0).ravel().tolist() == \
        [3 / math.sqrt(2), 5.0, 0.0]


# ----------------------------------------------------------------- records on a numpy stand-in for tf


def _fake_tf(**math_fns: Any) -> Any:
    def constant(x: Any, dtype: Any = None) -> np.ndarray:
        return np.asarray(x, dtype=dtype)
    return SimpleNamespace(constant=constant, float64=np.float64, float32=np.float32, int32=np.int32,
                           int64=np.int64, math=SimpleNamespace(**math_fns))


def _run(name: str, tf: Any) -> None:
    comparisons, _ = suite.RECORDS[name](tf)
    for cmp in comparisons:
        ref.assert_values(cmp.got, cmp.want, rtol=cmp.rtol, atol=cmp.atol, what=cmp.what, dtype=cmp.dtype)


def _divide_no_nan(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(y == 0, 0.0, x / np.where(y == 0, 1.0, y))


def _unsorted_max(fill: float) -> Any:
    def fn(data: np.ndarray, ids: np.ndarray, num: int) -> np.ndarray:
        out = np.full((num, *data.shape[1:]), fill if data.dtype.kind == "f" else np.iinfo(data.dtype).min,
                      dtype=data.dtype)
        for i in range(num):
            if (ids == i).any():
                out[i] = data[ids == i].max(0)
        return out
    return fn


def test_divide_no_nan_record_holds_for_a_correct_and_fails_a_plain_division():
    _run("divide_no_nan", _fake_tf(divide_no_nan=_divide_no_nan))
    with np.errstate(divide="ignore", invalid="ignore"), pytest.raises(ref.ValueMismatch, match="divide_no_nan"):
        _run("divide_no_nan", _fake_tf(divide_no_nan=lambda x, y: x / y))


def test_unsorted_segment_max_record_requires_the_lowest_value_in_empty_segments():
    lowest = np.finfo(np.float64).min
    _run("unsorted_segment_max", _fake_tf(unsorted_segment_max=_unsorted_max(lowest)))
    with pytest.raises(ref.ValueMismatch, match="unsorted_segment_max float64"):
        _run("unsorted_segment_max", _fake_tf(unsorted_segment_max=_unsorted_max(0.0)))


def test_round_record_fails_half_up_rounding():
    _run("round", _fake_tf(round=np.round))  # numpy rounds half to even
    with pytest.raises(ref.ValueMismatch, match="half to even"):
        _run("round", _fake_tf(round=lambda x: np.floor(np.asarray(x) + 0.5) if np.asarray(x).dtype.kind == "f" else x))


def test_bessel_i0e_record_fails_a_dropped_scaling_factor():
    i0 = lambda x: ref.mp_map(lambda v: ref.mpmath.besseli(0, v), x)
    _run("bessel_i0e", _fake_tf(bessel_i0e=lambda x: ref.mp_map(ref.i0e, x)))
    with pytest.raises(ref.ValueMismatch, match="bessel_i0e"):
        _run("bessel_i0e", _fake_tf(bessel_i0e=i0))


def test_xlogy_record_fails_nan_at_x_zero():
    def xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return x * np.log(y)
    with pytest.raises(ref.ValueMismatch, match="xlogy"):
        _run("xlogy", _fake_tf(xlogy=xlogy))


def test_every_assigned_function_has_a_record_or_a_reason():
    assert set(suite.ASSIGNED) <= set(suite.RECORDS) | set(suite.OUT_OF_SCOPE)
    assert set(suite.OUT_OF_SCOPE) <= set(suite.ASSIGNED)
