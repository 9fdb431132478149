"""Meta-tests for the one comparison every tolerance check is built on (numerics.difference)
and for the vacuity rule (issue 28, items 1 and 2), oracle family by oracle family.

numpy only. Non-finite values: a NaN where the reference is finite (or a finite value where
the reference is NaN) is a violation naming the element; NaN and infinities at the same
places compare as equal and the finite rest is compared. Vacuity: a bound that also accepts
a canonical wrong answer (all zeros, the sign flip, ...) records the check as inconclusive
with the reason, never as a check that held, and a result outside the bound still fails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_dlconform.checks import crossframework as cf
from pytest_dlconform.checks import reductions as R
from pytest_dlconform.checks import roundtrip as rt
from pytest_dlconform.checks import tfjs
from pytest_dlconform.checks.numerics import (
    Tolerance,
    ToleranceExceeded,
    assert_close,
    assert_equal,
    canonical_wrong_answers,
    difference,
    normwise_error,
    tolerance,
)
from pytest_dlconform.checks.stats import StatisticalViolation, assert_scaled
from pytest_dlconform.checks.tracing import assert_within
from pytest_dlconform.checks.tracing.dynamo_cache import CompileCountMismatch, _compare_output
from pytest_dlconform.core import evidence

REF = np.array([1.0, 2.0, 3.0, 4.0])
PARTLY_NAN = np.array([1.0, math.nan, 3.0, 4.0])
F32 = tolerance("float32", ops=2, reduction=4)
VACUOUS = Tolerance(10.0, "larger than max|reference|")  # accepts all zeros and the sign flip


# --------------------------------------------------------------------------- the helper


def test_a_nan_where_the_reference_is_finite_is_named_with_its_index():
    d = difference(PARTLY_NAN, REF)
    assert (d.mismatch, d.expected_value, d.max_abs) == ((1,), 2.0, math.inf)
    assert math.isnan(d.actual_value) and d.error == 0.0  # the finite rest agrees
    assert d.describe() == "element [1] is nan, but should be 2.0"


def test_a_finite_value_where_the_reference_is_nan_is_a_mismatch():
    d = difference(REF, PARTLY_NAN)
    assert d.mismatch == (1,) and d.describe() == "element [1] is 2.0, but should be nan"
    assert normwise_error(REF, PARTLY_NAN) == (math.inf, 4.0)


def test_matching_nan_and_infinities_compare_equal_and_the_rest_is_compared():
    e = np.array([[math.nan, math.inf], [-math.inf, 2.0]])
    d = difference(np.array([[math.nan, math.inf], [-math.inf, 2.5]]), e)
    assert d.nonfinite_match and (d.error, d.scale, d.at) == (0.5, 2.0, (1, 1))
    assert normwise_error(e, e) == (0.0, 2.0)


def test_an_infinity_of_the_wrong_sign_or_a_nan_for_an_infinity_is_a_mismatch():
    e = np.array([1.0, math.inf])
    assert difference(np.array([1.0, -math.inf]), e).describe() == "element [1] is -inf, but should be inf"
    assert difference(np.array([1.0, math.nan]), e).mismatch == (1,)


def test_every_canonical_wrong_answer_but_the_correct_one_differs():
    names = [name for name, _ in canonical_wrong_answers(REF, "float32")]
    assert names == ["all zeros", "one element NaN", "sign-flipped", "scaled by 1 + 0.01"]
    assert [name for name, _ in canonical_wrong_answers(REF, "float16")] == names[:3]


# --------------------------------------------------------------------------- numerics


def test_assert_close_fails_a_partly_nan_result_naming_the_element():
    with pytest.raises(ToleranceExceeded, match=r"y: element \[1\] is nan, but should be 2\.0"):
        assert_close(PARTLY_NAN, REF, F32, what="y")


def test_assert_close_fails_a_finite_result_where_the_reference_is_nan():
    with pytest.raises(ToleranceExceeded, match=r"element \[1\] is 2\.0, but should be nan"):
        assert_close(REF, PARTLY_NAN, F32, what="y")


def test_assert_close_passes_matching_non_finite_values_and_records_a_check():
    e = np.array([1.0, math.nan, -math.inf, 4.0])
    with evidence.recording() as rec:
        assert assert_close(e.copy(), e, F32, what="y") == 0.0
    assert "y" in rec.checks and not rec.inconclusive


def test_assert_close_with_a_vacuous_bound_is_inconclusive_not_held():
    with evidence.recording() as rec:
        assert_close(REF * (1 + 1e-9), REF, VACUOUS, what="loose")
    assert "loose" not in rec.checks
    entry = rec.inconclusive["loose"]
    assert entry["reason"] == "the bound accepts all zeros, sign-flipped, scaled by 1 + 0.01"
    assert (entry["bound"], entry["scale"]) == (10.0, 4.0)


def test_assert_close_with_a_vacuous_bound_still_fails_outside_it():
    with pytest.raises(ToleranceExceeded, match="but should be <= rtol"):
        assert_close(REF * 100, REF, VACUOUS, what="loose")


def test_a_float16_bound_is_not_tried_against_the_one_percent_scaling():
    tol = Tolerance(0.02, "a many-term float16 sum", dtype="float16")
    with evidence.recording() as rec:
        assert_close(REF.astype(np.float16), REF, tol, what="f16")
    assert "f16" in rec.checks and not rec.inconclusive


def test_assert_equal_names_a_nan_where_the_reference_is_finite():
    with pytest.raises(ToleranceExceeded, match=r"element \[1\] is nan, but should be 2\.0"):
        assert_equal(PARTLY_NAN, REF, what="bits")
    assert_equal(PARTLY_NAN, PARTLY_NAN.copy(), what="bits")


# --------------------------------------------------------------------------- round trips


def test_a_partly_nan_exported_output_fails_and_names_the_element():
    with pytest.raises(rt.OutputMismatch, match=r"output 'y': element \[1\] is nan, but should be 2\.0"):
        rt.assert_close_outputs({"y": PARTLY_NAN}, {"y": REF}, F32, what="tflite")


def test_an_exported_output_finite_where_the_original_is_nan_fails():
    with pytest.raises(rt.OutputMismatch, match=r"element \[1\] is 2\.0, but should be nan"):
        rt.assert_close_outputs({"y": REF}, {"y": PARTLY_NAN}, F32, what="tflite")


def test_exported_outputs_with_matching_nan_and_inf_pass():
    e = np.array([1.0, math.nan, math.inf, 4.0], np.float32)
    assert rt.assert_close_outputs({"y": e.copy()}, {"y": e}, F32, what="tflite") == 0.0


def test_an_exported_output_bound_larger_than_the_output_is_inconclusive():
    with evidence.recording() as rec:
        rt.assert_close_outputs({"y": REF.astype(np.float32)}, {"y": REF}, F32, what="tflite", scale=1e9)
    assert "outputs normwise relative error" not in rec.checks
    reason = rec.inconclusive["outputs normwise relative error"]["reason"]
    assert reason == "the bound accepts all zeros, sign-flipped, scaled by 1 + 0.01"


def test_the_quantisation_bound_fails_a_nan_and_is_inconclusive_when_it_accepts_zeros():
    bound = np.full(4, 0.1)
    with pytest.raises(rt.QuantisationBoundExceeded, match=r"element \[1\] is nan, but should be 2\.0"):
        rt.assert_within_bound(PARTLY_NAN, REF, bound, what="int8")
    with evidence.recording() as rec:
        rt.assert_within_bound(REF + 0.05, REF, bound, what="int8")
        rt.assert_within_bound(REF, REF, np.full(4, 5.0), what="int8", name="loose")
    assert "quantisation error / bound" in rec.checks and "loose" not in rec.checks
    assert rec.inconclusive["loose"]["reason"] == "the bound accepts all zeros"


def test_bitwise_outputs_and_state_accept_matching_nan_and_name_a_stray_one():
    e = {"y": np.array([1.0, math.nan], np.float32)}
    rt.assert_same_outputs({"y": e["y"].copy()}, e, what="same")
    rt.assert_same_state({"y": e["y"].copy()}, e, what="same")
    with pytest.raises(rt.OutputMismatch, match=r"element \[0\] is nan, but should be 1\.0"):
        rt.assert_same_outputs({"y": np.array([math.nan, math.nan], np.float32)}, e, what="stray")
    with pytest.raises(rt.StateMismatch, match=r"element \[0\] is nan, but should be 1\.0"):
        rt.assert_same_state({"y": np.array([math.nan, math.nan], np.float32)}, e, what="stray")


# --------------------------------------------------------------------------- tracing


def test_assert_within_fails_a_nan_and_is_inconclusive_for_a_bound_above_the_result():
    with pytest.raises(ToleranceExceeded, match=r"element \[1\] is nan, but should be 2\.0"):
        assert_within(PARTLY_NAN, REF, 1e-6, what="traced")
    with evidence.recording() as rec:
        assert_within(REF, REF, 1e-6, what="tight")
        assert_within(REF, REF, 10.0, what="loose")
    assert "tight" in rec.checks and "loose" not in rec.checks
    assert rec.inconclusive["loose"]["reason"] == "the bound accepts all zeros, sign-flipped, scaled by 1 + 0.01"


class _Tensor:
    """What _compare_output reads from a torch tensor, for numpy arrays."""

    def __init__(self, value: np.ndarray) -> None:
        self.value = value

    def detach(self) -> _Tensor:
        return self

    double = cpu = detach

    def numpy(self) -> np.ndarray:
        return self.value


def test_the_compiled_output_comparison_fails_a_nan():
    _compare_output(None, _Tensor(PARTLY_NAN), _Tensor(PARTLY_NAN.copy()), 0.0, "call 1")
    with pytest.raises(CompileCountMismatch, match=r"call 1: the compiled output's element \[1\] is nan"):
        _compare_output(None, _Tensor(PARTLY_NAN), _Tensor(REF), 1e-3, "call 1")


# --------------------------------------------------------------------------- reductions


def test_step_weights_fail_a_nan_and_a_vacuous_tensor_is_inconclusive():
    tol = tolerance("float64", ops=4, reduction=4)
    with pytest.raises(R.StepMismatch, match=r"kernel: element \[1\] is nan, but should be 2\.0"):
        R.check_weights([PARTLY_NAN], [REF], tol, what="ddp", names=["kernel"])
    with evidence.recording() as rec:
        R.check_weights([REF, REF], [REF, REF], tol, what="ddp", names=["kernel", "bias"])
        R.check_weights([REF], [REF], VACUOUS, what="loose", names=["kernel"])
    assert rec.checks["ddp"]["count"] == 1 and "loose" not in rec.checks
    assert rec.inconclusive["loose"]["tensor"] == "kernel"


# --------------------------------------------------------------------------- crossframework


def test_crossframework_gradients_fail_a_nan_and_a_vacuous_tensor_is_inconclusive():
    tol = tolerance("float64", ops=4, reduction=4)
    want = {"logits": REF, "grad/w": REF, "grad/b": REF}
    with pytest.raises(cf.ModelMismatch, match=r"grad/w: element \[1\] is nan, but should be 2\.0"):
        cf.compare({**want, "grad/w": PARTLY_NAN}, want, tol, tol, what="mlp")
    with pytest.raises(cf.ModelMismatch, match=r"logits: element \[1\] is nan, but should be 2\.0"):
        cf.compare({**want, "logits": PARTLY_NAN}, want, tol, tol, what="mlp")
    with evidence.recording() as rec:  # the bias gradient's terms are 1e20 times its size
        cf.compare(dict(want), want, tol, tol, what="mlp", grad_scales={"grad/b": 4e20})
    assert rec.checks["mlp: gradients"]["worst"] == "grad/w"
    entry = rec.inconclusive["mlp: gradients"]
    assert (entry["tensor"], entry["reason"]) == ("grad/b", "the bound accepts all zeros, sign-flipped, scaled by 1 + 0.01")


# --------------------------------------------------------------------------- stats and tfjs


def test_dropout_scaling_fails_a_nan_kept_value():
    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(StatisticalViolation, match=r"kept element \[1\] is nan, but should be 4\.0"):
        assert_scaled(x, np.array([2.0, math.nan, 6.0]), 2.0, roundoff=2.0**-24, roundings=3, what="dropout")
    with evidence.recording() as rec:
        assert_scaled(x, 2 * x, 2.0, roundoff=2.0**-24, roundings=3, what="dropout")
        assert_scaled(x, 2 * x, 2.0, roundoff=2.0**-24, roundings=3, bound=1.5, what="loose")
    assert "dropout" in rec.checks and "loose" not in rec.checks
    assert rec.inconclusive["loose"]["reason"] == "the bound accepts all zeros, scaled by 1 + 0.01"


def test_tfjs_weights_fail_a_nan_and_a_vacuous_bound_is_inconclusive():
    w = {"dense_0/kernel": np.linspace(-1, 1, 8)}
    with pytest.raises(tfjs.TfjsMismatch, match=r"dense_0/kernel: element \[3\] is nan"):
        tfjs.assert_weights({"dense_0/kernel": np.where(np.arange(8) == 3, math.nan, w["dense_0/kernel"])}, w,
                            what="nan", quantisation="uint8")
    with evidence.recording() as rec:
        tfjs.assert_weights(dict(w), w, what="uint8", quantisation="uint8")
        tfjs.assert_weights({"b": np.full(4, 1e-8)}, {"b": np.full(4, 1e-8)}, what="tiny", quantisation="float16")
    assert "weights by name (uint8)" in rec.checks
    assert rec.inconclusive["weights by name (float16)"]["weight"] == "b"
