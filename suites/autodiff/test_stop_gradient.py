"""tf.stop_gradient and torch's Tensor.detach, against their documented contract
(claim autodiff.tape.stop-gradient): the value passes through unchanged, the gradient does not.

The oracle: d/dv sum(stop(v*v) * v + sin(v)) = v*v + cos(v), the stopped factor held
constant (an identity in place of stop_gradient gives 3v^2 + cos(v)), with the float64
tolerance of test_tape (terms of size |v*v| + |cos(v)|, which cancel near a root); the
forward value of the stopped tensor must be bitwise its input's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, float_arrays, shapes, tolerance


def f64(magnitude: np.ndarray) -> object:
    return tolerance("float64", ops=4, magnitude=float(np.max(magnitude, initial=0.0)), underflow=True)


def arrays(min_dims: int = 0, max_dims: int = 2) -> st.SearchStrategy[np.ndarray]:
    return shapes(min_dims, max_dims).flatmap(float_arrays)


def _expected(x: np.ndarray) -> tuple[np.ndarray, object]:
    return x * x + np.cos(x), f64(x * x + np.abs(np.cos(x)))


@pytest.mark.claim("autodiff.tape.stop-gradient")
@given(x=arrays())
def test_tf_stop_gradient_passes_the_value_and_blocks_the_gradient(tf, x):
    v = tf.Variable(x)
    with tf.GradientTape(persistent=True) as tape:
        square = v * v
        stopped = tf.stop_gradient(square)
        z = tf.reduce_sum(stopped * v + tf.sin(v))
        only_stopped = tf.reduce_sum(tf.stop_gradient(v))
    assert stopped.dtype == square.dtype and stopped.shape == square.shape, "tf.stop_gradient changed dtype or shape"
    assert np.array_equal(stopped.numpy(), square.numpy()), "tf.stop_gradient changed its input's values"
    expected, tol = _expected(x)
    assert_close(tape.gradient(z, v).numpy(), expected, tol, what="gradient with a tf.stop_gradient factor held constant")
    assert tape.gradient(only_stopped, v) is None, "a gradient flowed through tf.stop_gradient (every path is stopped)"


@pytest.mark.claim("autodiff.tape.stop-gradient")
@given(x=arrays())
def test_tf_gradients_in_a_function_do_not_flow_through_stop_gradient(tf, x):
    @tf.function
    def grads(t):
        stopped = tf.stop_gradient(t * t)
        full = tf.gradients(tf.reduce_sum(stopped * t + tf.sin(t)), t)[0]
        return full, tf.gradients(tf.reduce_sum(tf.stop_gradient(t)), t)[0]

    full, only_stopped = grads(tf.constant(x))
    expected, tol = _expected(x)
    assert_close(full.numpy(), expected, tol, what="tf.gradients with a tf.stop_gradient factor held constant")
    assert only_stopped is None, "tf.gradients flowed through tf.stop_gradient in a tf.function (every path is stopped)"


@pytest.mark.claim("autodiff.tape.stop-gradient")
@given(x=arrays())
def test_torch_detach_passes_the_value_and_blocks_the_gradient(torch, x):
    v = torch.tensor(x, requires_grad=True)
    square = v * v
    detached = square.detach()
    assert not detached.requires_grad and detached.grad_fn is None, \
        f"Tensor.detach() result requires_grad={detached.requires_grad}, grad_fn={detached.grad_fn}"
    assert detached.data_ptr() == square.data_ptr(), "Tensor.detach() does not share its input's storage"
    assert torch.equal(detached, square), "Tensor.detach() changed its input's values"
    (g,) = torch.autograd.grad((detached * v + torch.sin(v)).sum(), v)
    expected, tol = _expected(x)
    assert_close(g.detach().cpu().numpy(), expected, tol, what="gradient with a detached factor held constant")
