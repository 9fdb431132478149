"""Meta-tests for the gradient oracle: it passes right gradients and fails wrong ones.

numpy only. The functions under test are generated compositions of smooth elementwise
maps, matrix products and products across inputs, with hand-written reverse-mode rules.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlconform.checks.gradients import (
    GradientMismatch,
    InconclusiveCheck,
    check_jvp_vjp_consistency,
    check_vjp,
)

Array = np.ndarray
Unary = Callable[[Array], Array]


def _sigmoid(y: Array) -> Array:
    return 0.5 * (1.0 + np.tanh(0.5 * y))


# name -> (function, derivative); all smooth on the whole real line.
OPS: dict[str, tuple[Unary, Unary]] = {
    "sin": (np.sin, np.cos),
    "cos": (np.cos, lambda y: -np.sin(y)),
    "tanh": (np.tanh, lambda y: 1.0 - np.tanh(y) ** 2),  # the frameworks' own formula
    "sigmoid": (_sigmoid, lambda y: _sigmoid(y) * (1.0 - _sigmoid(y))),
    "atan": (np.arctan, lambda y: 1.0 / (1.0 + y * y)),
    "softplus": (lambda y: np.logaddexp(0.0, y), _sigmoid),
    "gauss": (lambda y: np.exp(-y * y), lambda y: -2.0 * y * np.exp(-y * y)),
    "square": (lambda y: y * y, lambda y: 2.0 * y),
}


@dataclass(frozen=True)
class Program:
    """out = c * prod_j (A_j @ chain_j(k_j * x_j / mag_j).ravel() + b_j), optionally 0-d."""

    chains: list[list[str]]
    inner: list[float]  # k_j / mag_j: brings each input to O(1) before its chain
    mats: list[Array]
    offsets: list[Array]
    const: float
    scalar: bool

    def forward(self, xs: list[Array]) -> tuple[list[list[Array]], list[Array]]:
        trails, ps = [], []
        for x, chain, k, a, b in zip(xs, self.chains, self.inner, self.mats, self.offsets):
            trail = [k * x]
            for name in chain:
                trail.append(OPS[name][0](trail[-1]))
            trails.append(trail)
            ps.append(a @ trail[-1].ravel() + b)
        return trails, ps

    def f(self, xs: list[Array]) -> Array:
        out = self.const * np.prod(self.forward(xs)[1], axis=0)
        return out.reshape(()) if self.scalar else out

    def vjp(self, xs: list[Array], w: Array) -> list[Array]:
        trails, ps = self.forward(xs)
        wv = np.reshape(w, -1)
        grads = []
        for j, (x, chain, k, a) in enumerate(zip(xs, self.chains, self.inner, self.mats)):
            others = np.prod([p for i, p in enumerate(ps) if i != j], axis=0) if len(ps) > 1 else 1.0
            gy = (a.T @ (self.const * wv * others)).reshape(x.shape)
            for name, y in zip(reversed(chain), reversed(trails[j][:-1])):
                gy = gy * OPS[name][1](y)
            grads.append(gy * k)
        return grads


SHAPES = [(), (1,), (4,), (2, 3)]


@st.composite
def programs(draw: st.DrawFn) -> tuple[Program, list[Array]]:
    n = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(n)]
    mags = [10.0 ** draw(st.sampled_from([-6, -3, 0, 3, 6])) for _ in range(n)]
    chains = [draw(st.lists(st.sampled_from(sorted(OPS)), min_size=1, max_size=3)) for _ in range(n)]
    scalar = draw(st.booleans())
    m = 1 if scalar else draw(st.sampled_from([2, 5]))
    const = 10.0 ** draw(st.sampled_from([-6, 0, 6]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    xs = [mag * rng.choice([-1.0, 1.0], s) * rng.uniform(0.5, 2.0, s) for s, mag in zip(shapes, mags)]
    inner = [float(rng.uniform(0.5, 1.5)) / mag for mag in mags]
    mats = [rng.standard_normal((m, int(np.prod(s)))) for s in shapes]
    offsets = [rng.uniform(1.0, 2.0, m) for _ in shapes]
    return Program(chains, inner, mats, offsets, const, scalar), xs


FAST = settings(derandomize=True, database=None, deadline=None, max_examples=40)


@FAST
@given(programs())
def test_correct_gradients_of_generated_smooth_functions_pass(case: tuple[Program, list[Array]]) -> None:
    prog, xs = case
    result = check_vjp(prog.f, xs, prog.vjp, seed=1)
    assert result.max_error_ratio <= 1.0
    assert result.evaluations == 4 * result.directions


@settings(derandomize=True, database=None, deadline=None, max_examples=25)
@given(programs())
def test_gradient_scaled_by_1_001_is_caught_for_generated_functions(case: tuple[Program, list[Array]]) -> None:
    prog, xs = case

    def off(xs: list[Array], w: Array) -> list[Array]:
        return [1.001 * g for g in prog.vjp(xs, w)]

    with pytest.raises(GradientMismatch, match=r"0\.1% too (large|small)|same factor 1\.001"):
        check_vjp(prog.f, xs, off, seed=1)


# --------------------------------------------------------------------------- fixed cases


def sin_x_times_x(xs: list[Array]) -> Array:
    return np.sin(xs[0]) * xs[0]


def sin_x_times_x_vjp(xs: list[Array], w: Array) -> list[Array]:
    x = xs[0]
    return [w * (np.sin(x) + x * np.cos(x))]


@pytest.fixture
def x() -> Array:
    return np.random.default_rng(7).normal(0.0, 1.5, 200)


def test_correct_gradient_passes_with_margin_on_record(x: Array) -> None:
    result = check_vjp(sin_x_times_x, [x], sin_x_times_x_vjp, names=["x"])
    assert result.max_error_ratio < 1e-2
    assert result.resolution < 1e-4  # a uniform 0.01% error would not go unnoticed
    evidence = result.as_evidence()
    assert json.loads(json.dumps(evidence)) == evidence
    assert all(isinstance(v, (int, float, str)) for v in evidence.values())


@pytest.mark.parametrize("factor, word", [(1.001, "large"), (0.999, "small")])
def test_gradient_off_by_0_1_percent_fails(x: Array, factor: float, word: str) -> None:
    def off(xs: list[Array], w: Array) -> list[Array]:
        return [factor * g for g in sin_x_times_x_vjp(xs, w)]

    with pytest.raises(GradientMismatch, match=rf"gradient of input 'x' .* is about 0\.1% too {word} along its own"):
        check_vjp(sin_x_times_x, [x], off, names=["x"])


def test_sign_flip_in_one_region_fails(x: Array) -> None:
    region = x > 1.0
    g = sin_x_times_x_vjp([x], np.ones_like(x))[0]
    assert np.sum(g[region] ** 2) >= 0.05 * np.sum(g**2)  # the region matters

    def flipped(xs: list[Array], w: Array) -> list[Array]:
        (grad,) = sin_x_times_x_vjp(xs, w)
        grad[xs[0] > 1.0] *= -1.0
        return [grad]

    with pytest.raises(GradientMismatch, match=r"input 'x'.*sign error in part of the input"):
        check_vjp(sin_x_times_x, [x], flipped, names=["x"])


def test_missing_term_fails(x: Array) -> None:
    def missing(xs: list[Array], w: Array) -> list[Array]:
        return [w * np.sin(xs[0])]  # forgot x * cos(x)

    with pytest.raises(GradientMismatch, match="wrong or missing term"):
        check_vjp(sin_x_times_x, [x], missing, names=["x"])


def test_gradients_swapped_between_inputs_fail() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))

    def f(xs: list[Array]) -> Array:
        return xs[0] * np.sin(xs[1])

    def swapped(xs: list[Array], w: Array) -> list[Array]:
        return [w * xs[0] * np.cos(xs[1]), w * np.sin(xs[1])]

    def right(xs: list[Array], w: Array) -> list[Array]:
        return swapped(xs, w)[::-1]

    check_vjp(f, [a, b], right, names=["a", "b"])
    # Both gradients are wrong; the message names one of them (the worse of the two ratios).
    with pytest.raises(GradientMismatch, match=r"gradient of input '[ab]' \(shape \(3, 4\)\)"):
        check_vjp(f, [a, b], swapped, names=["a", "b"])


@pytest.mark.parametrize("mag", [1e-6, 1e6])
@pytest.mark.parametrize("const", [1e-6, 1e6])
def test_extreme_magnitudes_pass_and_still_catch_0_1_percent(mag: float, const: float) -> None:
    x = mag * np.random.default_rng(5).uniform(0.5, 2.0, 30)

    def f(xs: list[Array]) -> Array:
        return const * np.exp(xs[0] / mag)

    def vjp(xs: list[Array], w: Array) -> list[Array]:
        return [w * const * np.exp(xs[0] / mag) / mag]

    assert check_vjp(f, [x], vjp).max_error_ratio <= 1.0
    with pytest.raises(GradientMismatch, match=r"0\.1% too large"):
        check_vjp(f, [x], lambda xs, w: [1.001 * g for g in vjp(xs, w)])


def test_saturated_tanh_passes() -> None:
    rng = np.random.default_rng(11)
    x = rng.choice([-1.0, 1.0], 25) * rng.uniform(8.0, 12.0, 25)
    result = check_vjp(lambda xs: np.tanh(xs[0]), [x], lambda xs, w: [w * (1.0 - np.tanh(xs[0]) ** 2)])
    assert result.max_error_ratio <= 1.0


def test_input_with_negligible_gradient_is_judged_against_the_whole_gradient() -> None:
    a, b = np.array([0.3, -1.2]), np.array([8.0])  # d/db exp(-b**2) ~ 3e-27: below f's noise

    def f(xs: list[Array]) -> Array:
        return np.sin(xs[0]) + np.exp(-xs[1] ** 2)

    def vjp(xs: list[Array], w: Array) -> list[Array]:
        return [w * np.cos(xs[0]), np.sum(w) * -2.0 * xs[1] * np.exp(-xs[1] ** 2)]

    check_vjp(f, [a, b], vjp, names=["a", "b"])
    with pytest.raises(GradientMismatch, match="input 'b'"):
        check_vjp(f, [a, b], lambda xs, w: [vjp(xs, w)[0], np.array([1e-6])], names=["a", "b"])


def test_lone_fully_saturated_tanh_is_inconclusive() -> None:
    with pytest.raises(InconclusiveCheck, match="below the rounding noise"):
        check_vjp(lambda xs: np.tanh(xs[0]), [np.array(16.0)], lambda xs, w: [w * (1.0 - np.tanh(xs[0]) ** 2)])


def test_zero_dimensional_inputs_and_inputs_of_different_shapes_pass() -> None:
    a, b, c = np.array(0.7), np.array([1.5, -0.3, 2.0]), np.array(-1.2)

    def f(xs: list[Array]) -> Array:
        return np.sin(xs[0] * xs[1]) + xs[2] ** 2

    def vjp(xs: list[Array], w: Array) -> list[Array]:
        cos = w * np.cos(xs[0] * xs[1])
        return [np.sum(cos * xs[1]), cos * xs[0], np.sum(w) * 2.0 * xs[2]]

    result = check_vjp(f, [a, b, c], vjp, directions=4)
    assert result.max_error_ratio <= 1.0
    assert result.directions == 4


def test_unconnected_input_may_return_none_but_not_when_f_uses_it() -> None:
    a, b = np.array([0.4, 1.1]), np.array([2.0, 3.0])

    def f(xs: list[Array]) -> Array:
        return np.sin(xs[0])

    check_vjp(f, [a, b], lambda xs, w: [w * np.cos(xs[0]), None])
    with pytest.raises(GradientMismatch, match=r"gradient of input 0 \(shape \(2,\)\) is zero, but f changes"):
        check_vjp(f, [a, b], lambda xs, w: [None, None])


def test_wrong_shape_and_non_finite_gradients_fail(x: Array) -> None:
    with pytest.raises(GradientMismatch, match=r"has shape \(200, 1\), but should be \(200,\)"):
        check_vjp(sin_x_times_x, [x], lambda xs, w: [sin_x_times_x_vjp(xs, w)[0][:, None]])
    with pytest.raises(GradientMismatch, match="non-finite"):
        check_vjp(sin_x_times_x, [x], lambda xs, w: [np.full_like(x, np.nan)])


def test_step_function_is_inconclusive_not_a_pass_or_a_mismatch() -> None:
    x = np.array([1.0 + 1e-6, 2.5, -0.5])  # the first element sits on a jump of floor()
    with pytest.raises(InconclusiveCheck, match="not smooth"):
        check_vjp(lambda xs: np.floor(xs[0]), [x], lambda xs, w: [np.zeros_like(xs[0])])


def test_abs_at_zero_with_subgradient_zero_passes() -> None:
    x = np.array([0.0, 1.3, -0.8])  # elementwise relative steps never cross a kink at 0
    check_vjp(lambda xs: np.abs(xs[0]), [x], lambda xs, w: [w * np.sign(xs[0])])


@pytest.mark.parametrize("size", [10, 10_000])
@pytest.mark.parametrize("directions", [2, 8])
def test_cost_is_four_evaluations_per_direction_whatever_the_input_size(size: int, directions: int) -> None:
    calls = 0

    def f(xs: list[Array]) -> Array:
        nonlocal calls
        calls += 1
        return np.sin(xs[0]).sum(keepdims=True)

    x = np.linspace(-2.0, 2.0, size)
    result = check_vjp(f, [x], lambda xs, w: [w * np.cos(xs[0])], directions=directions)
    assert result.evaluations == calls == 4 * directions
    assert result.vjp_evaluations == 1


# --------------------------------------------------------------------------- forward vs reverse


def _jvp_vjp_pair(factor: float) -> tuple[Callable[..., Array], Callable[..., list[Array]]]:
    """f(a, b) = M @ sin(a) + (b.b / 2) * ones(3); the forward rule optionally scaled."""
    m = np.random.default_rng(2).standard_normal((3, 5))

    def jvp(xs: list[Array], us: list[Array]) -> Array:
        return factor * (m @ (np.cos(xs[0]) * us[0]) + np.dot(xs[1], us[1]) * np.ones(3))

    def vjp(xs: list[Array], v: Array) -> list[Array]:
        return [np.cos(xs[0]) * (m.T @ v), np.sum(v) * xs[1]]

    return jvp, vjp


def test_consistent_forward_and_reverse_mode_pass() -> None:
    jvp, vjp = _jvp_vjp_pair(1.0)
    xs = [np.linspace(-1.0, 1.0, 5), np.array([0.5, -2.0, 3.0])]
    result = check_jvp_vjp_consistency(jvp, vjp, xs, (3,), seed=0)
    assert result.max_error_ratio <= 1.0
    assert json.loads(json.dumps(result.as_evidence())) == result.as_evidence()


def test_forward_mode_off_by_0_1_percent_fails() -> None:
    jvp, vjp = _jvp_vjp_pair(1.001)
    xs = [np.linspace(-1.0, 1.0, 5), np.array([0.5, -2.0, 3.0])]
    with pytest.raises(GradientMismatch, match=r"forward mode is about 0\.1% larger than reverse mode"):
        check_jvp_vjp_consistency(jvp, vjp, xs, (3,), seed=0)


def test_default_rtol_is_sqrt_eps() -> None:
    result = check_vjp(lambda xs: xs[0] ** 2, [np.array([1.0, 2.0])], lambda xs, w: [2.0 * w * xs[0]])
    assert result.rtol == pytest.approx(math.sqrt(np.finfo(np.float64).eps))


def test_absolute_evaluation_error_of_f_is_accounted_for_only_when_declared():
    # f's evaluation carries an absolute error (as logdet near the identity does), far
    # above eps * |f|: without f_error the oracle blames reverse mode; with it, the
    # finite differences are known to be that noisy, and a real 0.1% error still shows.
    noise = 1e-15
    f = lambda xs: 1e-5 * xs[0] + noise * np.sin(1e9 * xs[0])
    x = [np.linspace(0.5, 2, 10)]
    with pytest.raises(GradientMismatch):
        check_vjp(f, x, lambda xs, w: [1e-5 * w])
    assert check_vjp(f, x, lambda xs, w: [1e-5 * w], f_error=noise).max_error_ratio <= 1
    with pytest.raises(GradientMismatch, match="too large"):
        check_vjp(f, x, lambda xs, w: [1.001e-5 * w], f_error=noise)


def test_absolute_rounding_of_the_reverse_pass_is_allowed_only_when_declared() -> None:
    # A gradient that is a cancellation of larger terms (a saturated cross-entropy's p - T,
    # 1e-8 from terms of 1: explore seed 48213) carries an absolute rounding error far
    # above rtol times itself. derivative_error = B allows B * ||w||_1 * ||u||_inf along u,
    # and nothing more: an error of 3 B (one input entry, so ||u||_inf = |u|) still fails.
    bound = 1e-15
    f = lambda xs: 1e-10 * xs[0]
    x = [np.array([1.5])]

    def vjp(offset: float) -> Callable[[list[Array], Array], list[Array]]:
        return lambda xs, w: [1e-10 * w + offset * np.sum(np.abs(w))]

    with pytest.raises(GradientMismatch):
        check_vjp(f, x, vjp(0.5 * bound))
    result = check_vjp(f, x, vjp(0.5 * bound), derivative_error=bound)
    assert result.max_error_ratio <= 1 and result.worst["rounding_floor"] > 0
    with pytest.raises(GradientMismatch, match="reverse-pass rounding floor"):
        check_vjp(f, x, vjp(3 * bound), derivative_error=bound)


def test_a_given_cotangent_is_the_one_the_vjp_is_asked_for_and_judged_with() -> None:
    """check_vjp(cotangent=w): a caller holding one backward result (a compiled batch's) for
    its own w passes it; a wrong gradient for that w still fails, and a w of another shape
    is refused."""
    import numpy as np

    from pytest_dlconform.checks.gradients import GradientMismatch, check_vjp

    xs = [np.array([0.3, -1.2, 2.0])]
    w = np.array([0.5, -2.0, 1.5])
    f = lambda v: np.sin(v[0])
    asked = []
    right = lambda v, w_: asked.append(np.asarray(w_).copy()) or [np.cos(v[0]) * w_]
    check_vjp(f, xs, right, seed=3, cotangent=w)
    assert np.array_equal(asked[0], w)
    with pytest.raises(GradientMismatch):
        check_vjp(f, xs, lambda v, w_: [1.01 * np.cos(v[0]) * w_], seed=3, cotangent=w)
    with pytest.raises(ValueError, match=r"cotangent has shape \(2,\), f's output has shape \(3,\)"):
        check_vjp(f, xs, right, seed=3, cotangent=np.ones(2))


@pytest.mark.parametrize(("op", "x", "seen"), [("mish", 16.5, 1.06e-14), ("silu", 33.0, 1.78e-15)])
def test_the_saturated_mish_and_silu_gradients_allow_a_rounded_output_s_cancellation(op: str, x: float,
                                                                                     seen: float) -> None:
    """XLA's float64 mish (x = 16.5) and silu (regime "large") gradients differed from eager by
    what ``1 - t**2`` (``1 - s``) from a rounded t (s), times x, gives: allowed now; a 1e-4
    relative error of the gradient (about 1) still is not."""
    import numpy as np

    from pytest_dlconform.programs import Op, Program
    from pytest_dlconform.programs.errors import gradient_error_bound

    program = Program(((1,),), (Op(op),))
    b, floor = gradient_error_bound(program, [np.array([x])], "float64")
    allowed = 2 * (b * 1.0 + floor)  # compiled vs eager, ||w||_1 = 1
    assert seen <= allowed < 1e-4
