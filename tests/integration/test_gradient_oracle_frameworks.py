"""The gradient oracle against real autodiff: torch autograd and TensorFlow GradientTape.

Wrong backward rules are planted with torch.autograd.Function and tf.custom_gradient; the
oracle must fail them, and pass the frameworks' own gradients. The glue (numpy in, numpy
out) is written here on purpose: it is what a suite does with a framework adapter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks.gradients import GradientMismatch, check_jvp_vjp_consistency, check_vjp

Array = np.ndarray

# --------------------------------------------------------------------------- torch


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


def torch_glue(torch: Any, fn: Callable[..., Any]) -> tuple[Callable[..., Array], Callable[..., list[Array]]]:
    def f(xs: list[Array]) -> Array:
        return fn(*[torch.from_numpy(x) for x in xs]).detach().numpy()

    def vjp(xs: list[Array], w: Array) -> list[Array]:
        inputs = [torch.from_numpy(x).requires_grad_() for x in xs]
        out = fn(*inputs)
        grads = torch.autograd.grad(out, inputs, grad_outputs=torch.from_numpy(w), allow_unused=True)
        return [None if g is None else g.numpy() for g in grads]

    return f, vjp


def planted(torch: Any, backward_rule: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    """y = sin(x) * x with a hand-written backward: backward_rule(x, grad_out) -> grad_x."""

    class SinTimesX(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return torch.sin(x) * x

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            (x,) = ctx.saved_tensors
            return backward_rule(x, grad)

    return SinTimesX.apply


def right_rule(torch: Any) -> Callable[[Any, Any], Any]:
    return lambda x, g: g * (torch.sin(x) + x * torch.cos(x))


@pytest.fixture
def x() -> Array:
    return np.random.default_rng(0).normal(0.0, 1.5, (4, 5))


def test_torch_autograd_of_a_builtin_composition_passes(torch: Any, x: Array) -> None:
    m = torch.from_numpy(np.random.default_rng(1).standard_normal((5, 3)))

    def fn(a: Any, b: Any) -> Any:
        return torch.tanh(a @ m) * torch.exp(-(b**2)) + torch.logsumexp(a, dim=1, keepdim=True)

    f, vjp = torch_glue(torch, fn)
    result = check_vjp(f, [x, np.linspace(-1.0, 1.0, 3)], vjp, names=["a", "b"])
    assert result.max_error_ratio <= 1.0


def test_torch_correct_custom_backward_passes(torch: Any, x: Array) -> None:
    f, vjp = torch_glue(torch, planted(torch, right_rule(torch)))
    assert check_vjp(f, [x], vjp).max_error_ratio <= 1.0


def test_torch_backward_off_by_0_1_percent_fails(torch: Any, x: Array) -> None:
    f, vjp = torch_glue(torch, planted(torch, lambda x_, g: 1.001 * right_rule(torch)(x_, g)))
    with pytest.raises(GradientMismatch, match=r"gradient of input 'x' .* about 0\.1% too large"):
        check_vjp(f, [x], vjp, names=["x"])


def test_torch_backward_with_sign_flip_where_x_positive_fails(torch: Any, x: Array) -> None:
    def rule(x_: Any, g: Any) -> Any:
        good = right_rule(torch)(x_, g)
        return torch.where(x_ > 0, -good, good)

    f, vjp = torch_glue(torch, planted(torch, rule))
    with pytest.raises(GradientMismatch, match="sign error in part of the input"):
        check_vjp(f, [x], vjp, names=["x"])


def test_torch_backward_missing_a_term_fails(torch: Any, x: Array) -> None:
    f, vjp = torch_glue(torch, planted(torch, lambda x_, g: g * torch.sin(x_)))
    with pytest.raises(GradientMismatch, match="wrong or missing term"):
        check_vjp(f, [x], vjp, names=["x"])


def test_torch_gradcheck_passes_a_0_1_percent_error_that_the_oracle_catches(torch: Any, x: Array) -> None:
    off = planted(torch, lambda x_, g: 1.001 * right_rule(torch)(x_, g))
    t = torch.from_numpy(x.copy()).requires_grad_()
    # Defaults: eps=1e-6, atol=1e-5, rtol=1e-3 elementwise; a 0.1% error sits inside rtol.
    assert torch.autograd.gradcheck(off, (t,), fast_mode=False)
    f, vjp = torch_glue(torch, off)
    with pytest.raises(GradientMismatch):
        check_vjp(f, [x], vjp)


def test_torch_forward_mode_agrees_with_reverse_mode(torch: Any, x: Array) -> None:
    def fn(a: Any) -> Any:
        return torch.sin(a) * torch.tanh(a.sum(dim=0))

    def jvp(xs: list[Array], us: list[Array]) -> Array:
        _, tangent = torch.func.jvp(fn, (torch.from_numpy(xs[0]),), (torch.from_numpy(us[0]),))
        return tangent.numpy()

    _, vjp = torch_glue(torch, fn)
    result = check_jvp_vjp_consistency(jvp, vjp, [x], (4, 5), seed=3)
    assert result.max_error_ratio <= 1.0


# --------------------------------------------------------------------------- tensorflow


@pytest.fixture(scope="module")
def tf() -> Any:
    return pytest.importorskip("tensorflow")


def tf_glue(tf: Any, fn: Callable[..., Any]) -> tuple[Callable[..., Array], Callable[..., list[Array]]]:
    def f(xs: list[Array]) -> Array:
        return fn(*[tf.constant(x) for x in xs]).numpy()

    def vjp(xs: list[Array], w: Array) -> list[Array]:
        inputs = [tf.constant(x) for x in xs]
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = fn(*inputs)
        grads = tape.gradient(out, inputs, output_gradients=tf.constant(w))
        return [None if g is None else g.numpy() for g in grads]

    return f, vjp


def tf_planted(tf: Any, factor: float) -> Callable[[Any], Any]:
    @tf.custom_gradient
    def sin_times_x(x: Any) -> Any:
        def grad(g: Any) -> Any:
            return factor * g * (tf.sin(x) + x * tf.cos(x))

        return tf.sin(x) * x, grad

    return sin_times_x


def test_tensorflow_tape_of_a_builtin_composition_passes(tf: Any, x: Array) -> None:
    m = tf.constant(np.random.default_rng(1).standard_normal((5, 3)))

    def fn(a: Any) -> Any:
        return tf.tanh(a @ m) * tf.reduce_logsumexp(a, axis=1, keepdims=True)

    f, vjp = tf_glue(tf, fn)
    assert check_vjp(f, [x], vjp).max_error_ratio <= 1.0


def test_tensorflow_correct_custom_gradient_passes(tf: Any, x: Array) -> None:
    f, vjp = tf_glue(tf, tf_planted(tf, 1.0))
    assert check_vjp(f, [x], vjp).max_error_ratio <= 1.0


def test_tensorflow_custom_gradient_off_by_0_1_percent_fails(tf: Any, x: Array) -> None:
    f, vjp = tf_glue(tf, tf_planted(tf, 1.001))
    with pytest.raises(GradientMismatch, match=r"gradient of input 'x' .* about 0\.1% too large"):
        check_vjp(f, [x], vjp, names=["x"])
