"""The Hessian-vector-product oracle against real second-order autodiff.

A wrong second derivative is planted under a right first derivative: y = sin(x) * x, whose
backward is itself an op with a hand-written backward (torch.autograd.Function; TensorFlow's
tf.custom_gradient nested in a tf.custom_gradient), so the gradient is right and only its own
derivative is off. The oracle must fail it with a message naming the error, and pass the
right rule and the frameworks' own double backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks.gradients import HessianMismatch, check_hvp

Array = np.ndarray


def _right_d2(lib: Any, x: Any) -> Any:
    return 2 * lib.cos(x) - x * lib.sin(x)


def _missing_d2(lib: Any, x: Any) -> Any:  # drops the -x sin(x) term
    return 2 * lib.cos(x)


@pytest.fixture
def x() -> Array:
    return np.random.default_rng(0).normal(0.0, 1.5, (3, 4))


# --------------------------------------------------------------------------- torch


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


def torch_planted(torch: Any, second: Callable[[Any, Any], Any] | None) -> Callable[[Any], Any]:
    """sin(x) * x with a right backward whose own backward uses ``second`` (None: autograd's)."""

    class Deriv(torch.autograd.Function):  # g -> g * f'(x), with f'' from ``second`` both ways
        @staticmethod
        def forward(ctx: Any, x: Any, g: Any) -> Any:
            ctx.save_for_backward(x, g)
            ctx.save_for_forward(x, g)
            return g * (torch.sin(x) + x * torch.cos(x))

        @staticmethod
        def jvp(ctx: Any, x_t: Any, g_t: Any) -> Any:
            x, g = ctx.saved_tensors
            assert second is not None
            return g_t * (torch.sin(x) + x * torch.cos(x)) + g * second(torch, x) * x_t

        @staticmethod
        def backward(ctx: Any, gg: Any) -> Any:
            x, g = ctx.saved_tensors
            assert second is not None
            return gg * g * second(torch, x), gg * (torch.sin(x) + x * torch.cos(x))

    class SinTimesX(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return torch.sin(x) * x

        @staticmethod
        def jvp(ctx: Any, x_t: Any) -> Any:
            (x,) = ctx.saved_tensors
            return x_t * (torch.sin(x) + x * torch.cos(x))

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            if second is None:
                return g * (torch.sin(x) + x * torch.cos(x))
            return Deriv.apply(x, g)

    return SinTimesX.apply


def torch_glue(torch: Any, fn: Callable[[Any], Any],
               mode: str = "reverse-over-reverse") -> tuple[Callable[..., list[Array]], Callable[..., list[Array]]]:
    def grad(xs: list[Array], w: Array) -> list[Array]:
        t = torch.from_numpy(xs[0]).requires_grad_()
        return [torch.autograd.grad(fn(t), t, torch.from_numpy(w))[0].numpy()]

    def hvp(xs: list[Array], w: Array, vs: list[Array]) -> list[Array]:
        if mode == "forward-over-reverse":  # torch.autograd.forward_ad around autograd.grad
            fwd = torch.autograd.forward_ad
            with fwd.dual_level():
                t = fwd.make_dual(torch.from_numpy(xs[0]).requires_grad_(), torch.from_numpy(vs[0]))
                (g,) = torch.autograd.grad(fn(t), t, torch.from_numpy(w), create_graph=True)
                return [fwd.unpack_dual(g).tangent.detach().numpy()]
        t = torch.from_numpy(xs[0]).requires_grad_()
        (g,) = torch.autograd.grad(fn(t), t, torch.from_numpy(w), create_graph=True)
        return [torch.autograd.grad(g, t, torch.from_numpy(vs[0]))[0].numpy()]

    return grad, hvp


TORCH_MODES = ["reverse-over-reverse", "forward-over-reverse"]


@pytest.mark.parametrize("mode", TORCH_MODES)
def test_torch_second_order_of_builtins_passes(torch: Any, x: Array, mode: str) -> None:
    grad, hvp = torch_glue(torch, lambda a: torch.tanh(a) * torch.sin(a.sum(dim=0)), mode)
    assert check_hvp(grad, hvp, [x], x.shape, tangents=2).max_error_ratio <= 1.0


@pytest.mark.parametrize("mode", TORCH_MODES)
def test_torch_right_planted_second_derivative_passes(torch: Any, x: Array, mode: str) -> None:
    grad, hvp = torch_glue(torch, torch_planted(torch, _right_d2), mode)
    assert check_hvp(grad, hvp, [x], x.shape).max_error_ratio <= 1.0


@pytest.mark.parametrize("mode", TORCH_MODES)
def test_torch_second_derivative_missing_a_term_fails(torch: Any, x: Array, mode: str) -> None:
    grad, hvp = torch_glue(torch, torch_planted(torch, _missing_d2), mode)
    with pytest.raises(HessianMismatch, match=rf"from torch {mode}, but should be .* Hint: the Hessian-vector product"):
        check_hvp(grad, hvp, [x], x.shape, names=["x"], mode=f"torch {mode}")


def test_torch_double_backward_off_by_0_1_percent_fails(torch: Any, x: Array) -> None:
    grad, hvp = torch_glue(torch, torch_planted(torch, lambda lib, x_: 1.001 * _right_d2(lib, x_)))
    with pytest.raises(HessianMismatch, match=r"about 0\.1% too large"):
        check_hvp(grad, hvp, [x], x.shape, names=["x"])


# --------------------------------------------------------------------------- tensorflow


@pytest.fixture(scope="module")
def tf() -> Any:
    return pytest.importorskip("tensorflow")


def tf_planted(tf: Any, second: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    """sin(x) * x whose gradient is a custom-gradient op with f'' from ``second``."""
    math = tf.math

    @tf.custom_gradient
    def deriv(x: Any, g: Any) -> Any:
        def grad2(gg: Any) -> Any:
            return gg * g * second(math, x), gg * (tf.sin(x) + x * tf.cos(x))

        return g * (tf.sin(x) + x * tf.cos(x)), grad2

    @tf.custom_gradient
    def sin_times_x(x: Any) -> Any:
        return tf.sin(x) * x, lambda g: deriv(x, g)

    return sin_times_x


def tf_glue(tf: Any, fn: Callable[[Any], Any], mode: str) -> tuple[Callable[..., list[Array]], Callable[..., list[Array]]]:
    def gradient(t: Any, w: Array) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = fn(t)
        return tape.gradient(y, t, output_gradients=tf.constant(w))

    def grad(xs: list[Array], w: Array) -> list[Array]:
        return [gradient(tf.constant(xs[0]), w).numpy()]

    def hvp(xs: list[Array], w: Array, vs: list[Array]) -> list[Array]:
        t, v = tf.constant(xs[0]), tf.constant(vs[0])
        if mode == "reverse-over-reverse":
            with tf.GradientTape() as outer:
                outer.watch(t)
                g = gradient(t, w)
            return [outer.gradient(g, t, output_gradients=v).numpy()]
        with tf.autodiff.ForwardAccumulator(t, v) as acc:
            g = gradient(t, w)
        return [acc.jvp(g).numpy()]

    return grad, hvp


MODES = ["reverse-over-reverse", "forward-over-reverse"]


@pytest.mark.parametrize("mode", MODES)
def test_tensorflow_second_order_of_builtins_passes(tf: Any, x: Array, mode: str) -> None:
    grad, hvp = tf_glue(tf, lambda a: tf.tanh(a) * tf.sin(tf.reduce_sum(a, axis=0)), mode)
    assert check_hvp(grad, hvp, [x], x.shape, tangents=2).max_error_ratio <= 1.0


@pytest.mark.parametrize("mode", MODES)
def test_tensorflow_right_nested_custom_gradient_passes(tf: Any, x: Array, mode: str) -> None:
    grad, hvp = tf_glue(tf, tf_planted(tf, _right_d2), mode)
    assert check_hvp(grad, hvp, [x], x.shape).max_error_ratio <= 1.0


def test_tensorflow_wrong_nested_custom_gradient_fails(tf: Any, x: Array) -> None:
    # Only the nested tapes run the inner custom gradient: ForwardAccumulator differentiates the
    # custom op's forward computation, which is right (the planted right rule passes both modes).
    grad, hvp = tf_glue(tf, tf_planted(tf, _missing_d2), "reverse-over-reverse")
    with pytest.raises(HessianMismatch, match=r"from tensorflow reverse-over-reverse, but should be"):
        check_hvp(grad, hvp, [x], x.shape, names=["x"], mode="tensorflow reverse-over-reverse")
