"""Meta-tests for the Hessian-vector-product oracle (numpy only): it passes right second
derivatives, fails wrong ones with a message that names the error, and says "inconclusive"
where finite differences of the gradient cannot judge."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.checks.gradients import HessianMismatch, InconclusiveCheck, check_hvp

Array = np.ndarray


def _grad(xs: list[Array], w: Array) -> list[Array]:
    """L = <w, sin(x) x>: gradient w (x cos x + sin x)."""
    (x,) = xs
    return [w * (x * np.cos(x) + np.sin(x))]


def _hvp(scale: float = 1.0, missing: bool = False):
    def hvp(xs: list[Array], w: Array, vs: list[Array]) -> list[Array]:
        (x,), (v,) = xs, vs
        d2 = 2 * np.cos(x) - (0.0 if missing else x * np.sin(x))
        return [scale * w * d2 * v]

    return hvp


X = [np.array([[0.3, -1.2, 2.5], [0.8, -0.4, 1.7]])]


def test_correct_hvp_passes_with_margin_on_record() -> None:
    result = check_hvp(_grad, _hvp(), X, (2, 3), tangents=2)
    assert result.max_error_ratio < 0.5
    assert result.gradient_evaluations == 8 and result.hvp_evaluations == 2
    assert result.resolution < 1e-6  # a uniform 1e-6 error would have failed
    ev = result.as_evidence()
    assert ev["check"] == "hvp-vs-finite-differences-of-the-gradient" and ev["tangents"] == 2


@pytest.mark.parametrize("factor, word", [(1.001, "large"), (0.999, "small")])
def test_hvp_off_by_0_1_percent_fails_and_says_by_how_much(factor: float, word: str) -> None:
    with pytest.raises(HessianMismatch, match=rf"from torch reverse-over-reverse.*about 0\.1% too {word}"):
        check_hvp(_grad, _hvp(factor), X, (2, 3), mode="torch reverse-over-reverse")


def test_hvp_missing_a_term_fails() -> None:
    with pytest.raises(HessianMismatch, match=r"<c, H v>=.* but should be .*central finite differences of the "
                                              r"reverse-mode gradient"):
        check_hvp(_grad, _hvp(missing=True), X, (2, 3))


def test_zero_hvp_where_the_gradient_moves_is_a_missing_second_derivative() -> None:
    zero = lambda xs, w, vs: [np.zeros_like(x) for x in xs]
    with pytest.raises(HessianMismatch, match="missing second derivative"):
        check_hvp(_grad, zero, X, (2, 3))


def test_wrong_shape_and_non_finite_hvps_fail() -> None:
    with pytest.raises(HessianMismatch, match=r"has shape \(3,\), but should be \(2, 3\)"):
        check_hvp(_grad, lambda xs, w, vs: [np.zeros(3)], X, (2, 3))
    with pytest.raises(HessianMismatch, match="non-finite"):
        check_hvp(_grad, lambda xs, w, vs: [np.full((2, 3), np.nan)], X, (2, 3))


def test_linear_function_has_an_exactly_zero_hvp_and_a_spurious_one_fails() -> None:
    a = np.array([[1.5, -2.0, 0.5], [3.0, 1.0, -1.0]])
    grad = lambda xs, w: [w * a]
    zero = lambda xs, w, vs: [np.zeros_like(x) for x in xs]
    result = check_hvp(grad, zero, X, (2, 3))
    assert result.max_abs_fd == 0.0 and result.max_abs_hvp == 0.0 and result.max_error_ratio == 0.0
    spurious = lambda xs, w, vs: [0.1 * w * vs[0]]
    with pytest.raises(HessianMismatch, match="second derivative is spurious"):
        check_hvp(grad, spurious, X, (2, 3))


def test_two_inputs_a_wrong_cross_term_names_an_input() -> None:
    # L = <w, a * b>: H = [[0, diag(w)], [diag(w), 0]]; the planted rule drops the b -> a block.
    grad = lambda xs, w: [w * xs[1], w * xs[0]]
    wrong = lambda xs, w, vs: [np.zeros_like(vs[0]), w * vs[0]]
    xs = [np.array([0.5, -1.5, 2.0]), np.array([1.25, 0.75, -0.5])]
    check_hvp(grad, lambda xs, w, vs: [w * vs[1], w * vs[0]], xs, (3,), names=["a", "b"])
    with pytest.raises(HessianMismatch, match=r"input 'a' \(shape \(3,\)\)"):
        check_hvp(grad, wrong, xs, (3,), names=["a", "b"])


def test_a_gradient_with_a_jump_inside_the_step_is_inconclusive_not_a_pass() -> None:
    # L = <w, relu(x - k)> with the kink k within a step of x: the gradient jumps inside the
    # finite-difference stencil, so its differences mean nothing.
    x = [np.array([1.0, 2.0, -0.5])]
    kink = x[0] + 1e-5 * np.abs(x[0])
    grad = lambda xs, w: [w * (xs[0] > kink)]
    zero = lambda xs, w, vs: [np.zeros_like(v) for v in vs]
    with pytest.raises(InconclusiveCheck, match="too noisy to judge the Hessian-vector product"):
        check_hvp(grad, zero, x, (3,))


def test_a_gradient_drowned_in_rounding_is_inconclusive() -> None:
    # L = <w, exp(x)> at |x| ~ 1e-12: a step of 1e-4 of x moves the gradient (about 1) by 1e-16,
    # below its own rounding, so the differences are noise.
    grad = lambda xs, w: [w * np.exp(xs[0])]
    hvp = lambda xs, w, vs: [w * np.exp(xs[0]) * vs[0]]
    with pytest.raises(InconclusiveCheck, match="below the rounding noise of the gradient"):
        check_hvp(grad, hvp, [np.array([1e-12, -2e-12])], (2,))


def test_cotangent_is_used_and_checked() -> None:
    seen = []
    grad = lambda xs, w: (seen.append(w.copy()), _grad(xs, w))[1]
    w = np.arange(6.0).reshape(2, 3) - 2.5
    check_hvp(grad, _hvp(), X, (2, 3), cotangent=w)
    assert all(np.array_equal(s, w) for s in seen)
    with pytest.raises(ValueError, match="cotangent has shape"):
        check_hvp(_grad, _hvp(), X, (2, 3), cotangent=np.ones(3))
