"""The fudge factors of issue 13, derived: numerics' rounding count (no CONDITION), check_vjp's
finite-difference allowance (no SAFETY), the int8 half step. Each derived bound holds for a
conforming computation and fails a deliberately wrong one that the old, looser bound let
pass (docs/tolerances.md, "Fudge factors derived")."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.checks import gradients, numerics
from pytest_dlconform.checks import roundtrip as rt
from pytest_dlconform.checks.gradients import GradientMismatch, check_vjp
from pytest_dlconform.checks.numerics import OP_ROUNDING, UNIT_ROUNDOFF, ToleranceExceeded, assert_close, tolerance
from pytest_dlconform.checks.roundtrip.oracles import INT8_HALF_STEP
from pytest_dlconform.checks.usermodel.tolerances import f_error_float32

U32 = UNIT_ROUNDOFF["float32"]


def old_rtol(ops: int, reduction: int, u: float) -> float:
    return 16.0 * (max(1, ops) + max(1, reduction)) * u  # the removed CONDITION = 16 model


# ---------------------------------------------------------------- numerics: CONDITION removed


def test_the_rounding_count_is_op_rounding_per_op_and_one_per_summed_term():
    assert not hasattr(numerics, "CONDITION") and not hasattr(gradients, "SAFETY")
    assert OP_ROUNDING == 4.0  # 2 ulp: the elementary functions' documented accuracy
    tol = tolerance("float32", ops=3, reduction=10)
    assert tol.rtol == pytest.approx((4 * 3 + 10) * U32)
    assert "(4 * ops 3 + reduction 10) * u(float32)" in tol.why
    assert tolerance("float64", ops=0, reduction=0).rtol == pytest.approx(5 * UNIT_ROUNDOFF["float64"])
    # The magnitude floor and the flush-to-zero floor are unchanged in form.
    assert tolerance("float64", ops=2, reduction=1, magnitude=3.0).atol == pytest.approx(9 * 3.0 * 2.0**-53)


def test_a_conforming_float32_chain_passes_the_derived_bound():
    x = np.random.default_rng(0).uniform(-3, 3, (64, 8))
    for _ in range(20):  # tanh(x) * 0.5 + sum over 8 terms, in float32 against float64
        y32 = (np.tanh(x.astype(np.float32)) * np.float32(0.5)).sum(axis=1, dtype=np.float32)
        y64 = (np.tanh(x) * 0.5).sum(axis=1)
        mag = (np.abs(np.tanh(x)) * 0.5).sum(axis=1).max()
        assert_close(y32, y64, tolerance("float32", ops=2, reduction=8, magnitude=mag), what="tanh chain")
        x = x + 0.37


def test_a_relative_error_of_3e_6_fails_now_and_passed_the_old_bound():
    x = np.random.default_rng(1).uniform(-2, 2, 256)
    wrong = (np.tanh(x) * (1 + 3e-6)).astype(np.float32)  # a mis-rounded constant, 50 u(float32)
    tol = tolerance("float32", ops=2, reduction=4)
    rel = float(np.max(np.abs(wrong - np.tanh(x))) / np.max(np.abs(np.tanh(x))))
    assert tol.rtol < rel < old_rtol(2, 4, U32)
    with pytest.raises(ToleranceExceeded, match=r"max\|actual - expected\| = .* but should be <= rtol 7\.153e-07"):
        assert_close(wrong, np.tanh(x), tol, what="wrong tanh")


def test_f_error_of_a_float32_forward_pass_is_one_operations_rounding():
    assert f_error_float32(np.array([-2.0, 0.5])) == pytest.approx(OP_ROUNDING * U32 * 2.0)


# ---------------------------------------------------------------- check_vjp: SAFETY removed


def _sin_x_times_x(xs):
    return np.sin(xs[0]) * xs[0]


def _sin_x_times_x_vjp(xs, w):
    x = xs[0]
    return [w * (np.cos(x) * x + np.sin(x))]


@pytest.mark.parametrize("seed", range(40))
def test_the_derived_finite_difference_bound_holds_for_exact_gradients(seed):
    """rtol = 0: the allowance is the finite-difference bound alone, so an exact gradient that
    fell outside it would be a false alarm of the derivation."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-6, 6, 7) * 10.0 ** rng.uniform(-3, 2)
    fns = [(_sin_x_times_x, _sin_x_times_x_vjp),
           (lambda xs: np.exp(np.tanh(xs[0])), lambda xs, w: [w * np.exp(np.tanh(xs[0])) * (1 - np.tanh(xs[0]) ** 2)]),
           (lambda xs: np.log1p(xs[0] ** 2), lambda xs, w: [w * 2 * xs[0] / (1 + xs[0] ** 2)])]
    for f, vjp in fns:
        try:
            result = check_vjp(f, [x], vjp, rtol=0.0, seed=seed)
        except gradients.InconclusiveCheck:
            continue  # a saturated tanh: noise, never a pass and never a mismatch
        assert result.max_error_ratio <= 1.0


def test_the_allowance_is_the_bound_itself_and_a_gradient_just_outside_fails():
    x = np.linspace(-2.0, 3.0, 6)
    result = check_vjp(_sin_x_times_x, [x], _sin_x_times_x_vjp, names=["x"], rtol=0.0)
    worst = result.worst
    assert worst["allowed"] == pytest.approx(worst["fd_error"])  # no factor on the derived bound
    r = 2.0 * result.resolution
    with pytest.raises(GradientMismatch, match=r"gradient of input 'x'"):
        check_vjp(_sin_x_times_x, [x], lambda xs, w: [(1 + r) * g for g in _sin_x_times_x_vjp(xs, w)],
                  names=["x"], rtol=0.0)


def test_a_gradient_error_the_safety_factor_hid_now_fails():
    """The old allowance was 4 (gap + rounding); the new one is gap + gap's rounding + rounding
    <= gap + 2 rounding, so 1.8x the new one (1.8 gap + 3.6 rounding) was always inside the old
    one: a uniform error of that size passed before and fails now."""
    x = np.linspace(0.5, 1.5, 4)

    def f(xs):
        return np.exp(3 * xs[0])

    def vjp(xs, w):
        return [w * 3 * np.exp(3 * xs[0])]

    result = check_vjp(f, [x], vjp, rtol=0.0, directions=4)
    r = 1.8 * result.resolution
    with pytest.raises(GradientMismatch, match=r"relative error .* rtol 0"):
        check_vjp(f, [x], lambda xs, w: [(1 + r) * g for g in vjp(xs, w)], rtol=0.0, directions=4)


# ---------------------------------------------------------------- int8: the half step


def _legacy_quantise(w: np.ndarray) -> rt.Int8Tensor:
    """tensorflow/lite/tools/optimize/quantization_utils.cc in float32: scale = m / 127,
    scale_inv = 127 / m, q = round(w * scale_inv), per output channel (rows of [out, in])."""
    w32 = w.astype(np.float32)
    m = np.max(np.abs(w32), axis=1)
    scale = (m / np.float32(127)).astype(np.float32)
    inv = (np.float32(127) / m).astype(np.float32)
    q = np.clip(np.round((w32 * inv[:, None]).astype(np.float32)), -127, 127).astype(np.int8)
    return rt.Int8Tensor("spec_model/dense_0_1/MatMul", q, scale.astype(np.float64), np.zeros(len(m), np.int64), 0)


SPEC = rt.ModelSpec(32, (rt.Layer("dense", 52, "sigmoid"), rt.Layer("dense", 2, "tanh")), "float32", 804)


def test_the_half_step_is_derived_from_the_converters_float32_arithmetic():
    assert INT8_HALF_STEP == 0.5 + 127 * (3 * 2.0**-24 + 2 * 2.0**-53)
    assert INT8_HALF_STEP - 0.5 < 1e-4 / 4  # the old allowance was 1e-4


def test_the_documented_quantiser_passes_at_every_seed():
    kernel = rt.parameters(SPEC)[0]["kernel"]
    rng = np.random.default_rng(5)
    for _ in range(30):
        w = kernel * rng.uniform(0.1, 10.0, kernel.shape[1])  # other channel ranges, other ties
        spec_w = w.astype(np.float32).astype(np.float64)
        t = _legacy_quantise(spec_w.T)
        rt.oracles._check_int8_kernel(t, spec_w.T, "legacy quantiser")


def test_a_weight_half_a_step_and_5e_5_away_fails_now():
    kernel = rt.parameters(SPEC)[0]["kernel"].astype(np.float32).astype(np.float64)
    t = _legacy_quantise(kernel.T)
    w = kernel.T.copy()
    c, k = 3, int(np.argmin(np.abs(np.abs(t.values[3].astype(np.int64)) - 60)))
    # Move the original weight so that its stored value is 0.5 + 5e-5 steps away (an off-by-
    # rounding quantiser, e.g. floor(x + 0.5) applied after a biased scale): inside 1e-4.
    w[c, k] = (t.values[c, k] + np.sign(t.values[c, k]) * (0.5 + 5e-5)) * t.scales[c]
    off = r"weight \[3, \d+\] stored as .* steps away, should be <= 0\.5 .*1 weight\(s\) off"
    with pytest.raises(rt.QuantisedWeightsMismatch, match=off):
        rt.oracles._check_int8_kernel(t, w, "off by rounding")


# ---------------------------------------------------------------- flow programs: cancellation


def test_a_cancelling_flow_program_is_judged_against_its_largest_intermediate():
    """Explore seed 85307689: sigmoid(...) * 0.5 - 0.25 three times cancels to 1.7e-3; TorchScript's
    float64 result was off by 5.55e-17 (one rounding of a term of size 0.25). Against the result
    alone the bound is 1.2e-17; against FlowRun.magnitude (1.45) it holds, and 1e-12 still fails."""
    from pytest_dlconform.checks.tracing.control_flow import Affine, FlowProgram, PythonFor, TensorIf, Unary

    program = FlowProgram((TensorIf(-0.4, (Unary("cos"),), ()), PythonFor(3, (Unary("sigmoid"), Affine(0.5, -0.25)))))
    x = np.random.default_rng(0).uniform(-1.5, 1.5, (2, 3))
    run = program.run(x)
    assert run.magnitude == pytest.approx(1.4504, rel=1e-4) and np.max(np.abs(run.y)) < 2e-3
    observed = run.y + 5.551115123125783e-17
    with pytest.raises(ToleranceExceeded):
        assert_close(observed, run.y, tolerance("float64", ops=program.op_count(), reduction=x.size), what="no floor")
    tol = tolerance("float64", ops=program.op_count(), reduction=x.size, magnitude=run.magnitude)
    assert_close(observed, run.y, tol, what="with the intermediates' magnitude")
    with pytest.raises(ToleranceExceeded, match="wrong by 1e-12"):
        assert_close(run.y + 1e-12, run.y, tol, what="wrong by 1e-12")
