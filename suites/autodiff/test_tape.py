"""GradientTape semantics (seed 000) and their torch analogues, as properties.

Each test draws the values; the oracle is the analytic derivative of a function whose
derivative is known in closed form, compared with a float64 tolerance from the operation.
Where the derivative is a sum of terms that can cancel (``x*x + sin(x) + 2*x`` near its
root, ``1 - tanh(x)**2`` at |x| ~ 3, a polynomial's derivative near a root), both the
framework's and the reference's rounding error is set by the size of the terms, not by the
result: the tolerance takes ``magnitude=`` the largest sum of |terms| (checks/numerics.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, float_arrays, shapes, tolerance

F64 = tolerance("float64", ops=4)


def f64(magnitude: float | np.ndarray) -> object:
    """F64 with the absolute floor of a result computed from terms of this size."""
    return tolerance("float64", ops=4, magnitude=float(np.max(magnitude, initial=0.0)), underflow=True)


def arrays(min_dims: int = 0, max_dims: int = 2) -> st.SearchStrategy[np.ndarray]:
    return shapes(min_dims, max_dims).flatmap(float_arrays)


# ---------------------------------------------------------------- records-forward


@pytest.mark.claim("autodiff.tape.records-forward")
@given(x=arrays())
def test_values_computed_before_the_tape_or_while_stopped_are_constants(tf, x):
    v = tf.Variable(x)
    before = v * v  # computed before the tape opened: a constant to it
    with tf.GradientTape() as tape:
        with tape.stop_recording():
            stopped = tf.sin(v)  # computed while recording is paused: also a constant
        z = tf.reduce_sum(before * v + stopped * v + v**2)
    grad = tape.gradient(z, v)
    # d/dv of (c1*v + c2*v + v**2) with c1, c2 held constant.
    terms = x * x + np.abs(np.sin(x)) + 2 * np.abs(x)  # the sum cancels near x = -2.3
    assert_close(grad.numpy(), x * x + np.sin(x) + 2 * x, f64(terms), what="gradient with unrecorded factors held constant")


@pytest.mark.claim("autodiff.tape.records-forward")
@given(x=arrays())
def test_torch_no_grad_results_are_constants(torch, x):
    v = torch.tensor(x, requires_grad=True)
    with torch.no_grad():
        c = torch.sin(v)
    assert not c.requires_grad, "a result computed under torch.no_grad() requires grad"
    (g,) = torch.autograd.grad((c * v + v**2).sum(), v)
    assert_close(g.detach().cpu().numpy(), np.sin(x) + 2 * x, f64(np.abs(np.sin(x)) + 2 * np.abs(x)),
                 what="gradient with a no_grad factor held constant")


# ---------------------------------------------------------------- watch


@pytest.mark.claim("autodiff.tape.watch")
@given(x=arrays())
def test_constants_need_watch_trainable_variables_do_not(tf, x):
    c = tf.constant(x)
    v = tf.Variable(x)
    frozen = tf.Variable(x, trainable=False)
    with tf.GradientTape(persistent=True) as tape:
        y_c, y_v, y_f = tf.reduce_sum(c**2), tf.reduce_sum(v**2), tf.reduce_sum(frozen**2)
    assert tape.gradient(y_c, c) is None, "an unwatched constant got a gradient"
    assert tape.gradient(y_f, frozen) is None, "a non-trainable Variable was watched automatically"
    assert_close(tape.gradient(y_v, v).numpy(), 2 * x, F64, what="gradient of an automatically watched Variable")
    with tf.GradientTape() as tape:
        tape.watch(c)
        y = tf.reduce_sum(c**2)
    assert_close(tape.gradient(y, c).numpy(), 2 * x, F64, what="gradient of a watched constant")


@pytest.mark.claim("autodiff.tape.watch")
@given(x=arrays())
def test_watch_accessed_variables_false_watches_only_what_is_watched(tf, x):
    a, b = tf.Variable(x), tf.Variable(x + 1.0)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(b)
        y = tf.reduce_sum(a * b)
    ga, gb = tape.gradient(y, [a, b])
    assert ga is None, "with watch_accessed_variables=False an unwatched Variable got a gradient"
    assert [w.name for w in tape.watched_variables()] == [b.name]
    assert_close(gb.numpy(), x, F64, what="gradient of the explicitly watched Variable")


@pytest.mark.claim("autodiff.tape.watch")
@given(n=st.integers(-1000, 1000))
def test_integer_tensors_are_not_differentiable(tf, n):
    t = tf.constant(n)
    with tf.GradientTape() as tape:
        tape.watch(t)  # documented: watching a non-floating tensor has no effect (a warning is logged)
        y = t * t
    assert tape.gradient(y, t) is None, "an integer tensor got a gradient"


# ---------------------------------------------------------------- nested / higher order

polynomials = st.lists(st.floats(-3, 3, allow_nan=False), min_size=1, max_size=6).map(np.array)


def _poly_derivatives(coefs: np.ndarray, x: float) -> tuple[float, float]:
    p = np.polynomial.Polynomial(coefs)
    return float(p.deriv(1)(x)), float(p.deriv(2)(x))


def _poly_magnitudes(coefs: np.ndarray, x: float) -> tuple[float, float]:
    """p'(x) and p''(x) with |coefficients| and |x|: Horner's error bound is
    gamma_2n * sum|c_k x^k| (Higham 5.1), which stays when p' or p'' cancels near a root."""
    p = np.polynomial.Polynomial(np.abs(coefs))
    return float(p.deriv(1)(abs(x))), float(p.deriv(2)(abs(x)))


def _poly(coefs: np.ndarray, x):  # framework-agnostic: Horner's scheme
    acc = x * 0.0 + float(coefs[-1])
    for c in coefs[-2::-1]:
        acc = acc * x + float(c)
    return acc


@pytest.mark.claim("autodiff.tape.nested")
def test_seed_second_derivative_of_cube_is_twelve(tf):
    x = tf.Variable(2.0, dtype=tf.float64)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = x**3
        dy = inner.gradient(y, x)
    assert float(outer.gradient(dy, x)) == 12.0


@pytest.mark.claim("autodiff.tape.nested")
@given(coefs=polynomials, x=st.floats(-2, 2, allow_nan=False))
def test_nested_tapes_give_second_derivatives(tf, coefs, x):
    v = tf.Variable(x, dtype=tf.float64)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = _poly(coefs, v)
        dy = inner.gradient(y, v)
    d2y = outer.gradient(dy, v) if dy is not None else None
    d1, d2 = _poly_derivatives(coefs, x)
    m1, m2 = _poly_magnitudes(coefs, x)
    # Coefficients and powers of x may be subnormal: TensorFlow flushes those to zero.
    tol1, tol2 = (tolerance("float64", ops=3 * len(coefs), magnitude=m, underflow=True) for m in (m1, m2))
    assert_close(0.0 if dy is None else float(dy), d1, tol1, what=f"p'(x) for p={coefs.tolist()} at {x}")
    assert_close(0.0 if d2y is None else float(d2y), d2, tol2, what=f"p''(x) for p={coefs.tolist()} at {x}")


@pytest.mark.claim("autodiff.tape.nested")
@given(coefs=polynomials, x=st.floats(-2, 2, allow_nan=False))
def test_torch_create_graph_gives_second_derivatives(torch, coefs, x):
    v = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = _poly(coefs, v)
    (dy,) = torch.autograd.grad(y, v, create_graph=True, materialize_grads=True)
    (d2y,) = torch.autograd.grad(dy, v, allow_unused=True, materialize_grads=True) if dy.requires_grad else (torch.zeros(()),)
    d1, d2 = _poly_derivatives(coefs, x)
    m1, m2 = _poly_magnitudes(coefs, x)
    tol1, tol2 = (tolerance("float64", ops=3 * len(coefs), magnitude=m, underflow=True) for m in (m1, m2))
    assert_close(float(dy.detach()), d1, tol1, what=f"p'(x) for p={coefs.tolist()} at {x}")
    assert_close(float(d2y), d2, tol2, what=f"p''(x) for p={coefs.tolist()} at {x}")


# ---------------------------------------------------------------- multiple tapes


@pytest.mark.claim("autodiff.tape.multiple")
@given(x=arrays(1), n_tapes=st.integers(2, 4))
def test_several_tapes_over_one_computation_are_independent(tf, x, n_tapes):
    v = tf.Variable(x)
    tapes = [tf.GradientTape() for _ in range(n_tapes)]
    for tape in tapes:
        tape.__enter__()
    try:
        s = tf.sin(v)
        targets = [tf.reduce_sum(s * v ** (k + 1)) for k in range(n_tapes)]
    finally:
        for tape in reversed(tapes):
            tape.__exit__(None, None, None)
    for k, (tape, target) in enumerate(zip(tapes, targets)):
        p = k + 1  # d/dx sin(x) x**p = cos(x) x**p + p sin(x) x**(p-1)
        expected = np.cos(x) * x**p + p * np.sin(x) * x ** (p - 1)
        terms = np.abs(np.cos(x) * x**p) + np.abs(p * np.sin(x) * x ** (p - 1))  # the two cancel near roots
        assert_close(tape.gradient(target, v).numpy(), expected, f64(terms), what=f"tape {k} of {n_tapes}")


# ---------------------------------------------------------------- persistent


@pytest.mark.claim("autodiff.tape.persistent")
@given(x=arrays(1), calls=st.integers(2, 5))
def test_persistent_tape_allows_repeated_gradient_and_jacobian_calls(tf, x, calls):
    v = tf.Variable(x)
    with tf.GradientTape(persistent=True) as tape:
        y = tf.exp(tf.tanh(v))
        total = tf.reduce_sum(y)
    expected = np.exp(np.tanh(x)) * (1 - np.tanh(x) ** 2)
    # 1 - tanh(x)**2 cancels for |x| ~ 3 (1e-2 from terms of size 1): both the tape's and the
    # reference's error are u times exp(tanh(x)) * (1 + tanh(x)**2), not times the result.
    tol = f64(np.exp(np.tanh(x)) * (1 + np.tanh(x) ** 2))
    for i in range(calls):
        assert_close(tape.gradient(total, v).numpy(), expected, tol, what=f"gradient call {i + 1}")
    jac = tape.jacobian(y, v).numpy()
    assert_close(jac, np.diag(expected.ravel()).reshape(x.shape + x.shape), tol, what="jacobian after repeated gradient calls")
    del tape


@pytest.mark.claim("autodiff.tape.persistent")
@given(x=arrays(1))
def test_plain_tape_raises_on_second_gradient_call(tf, x):
    v = tf.Variable(x)
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(v**2)
    tape.gradient(y, v)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.gradient(y, v)


# ---------------------------------------------------------------- unconnected


@pytest.mark.claim("autodiff.tape.unconnected")
@given(x=arrays(), u=arrays(), dtype=st.sampled_from(["float32", "float64"]))
def test_unconnected_sources_get_none_or_typed_zeros(tf, x, u, dtype):
    a, b = tf.Variable(x.astype(dtype)), tf.Variable(u.astype(dtype))
    with tf.GradientTape(persistent=True) as tape:
        y = tf.reduce_sum(a * a)
    assert tape.gradient(y, [a, b])[1] is None, "an unconnected source got a gradient by default"
    _, zero = tape.gradient(y, [a, b], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert zero is not None and zero.shape == b.shape and zero.dtype == b.dtype, (
        f"UnconnectedGradients.ZERO gave {zero!r}, but should be zeros of shape {b.shape} and dtype {b.dtype}"
    )
    assert not np.any(zero.numpy()), "UnconnectedGradients.ZERO gave non-zero values"


@pytest.mark.claim("autodiff.tape.unconnected")
@given(x=arrays(), u=arrays())
def test_torch_unused_inputs_raise_unless_allowed(torch, x, u):
    a, b = torch.tensor(x, requires_grad=True), torch.tensor(u, requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        torch.autograd.grad((a * a).sum(), [a, b])
    assert torch.autograd.grad((a * a).sum(), [a, b], allow_unused=True)[1] is None
    zero = torch.autograd.grad((a * a).sum(), [a, b], allow_unused=True, materialize_grads=True)[1]
    assert zero.shape == b.shape and zero.dtype == b.dtype and not zero.any(), f"materialize_grads gave {zero!r}"


# ---------------------------------------------------------------- output_gradients (VJP)


def _mlp_case(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n_in, n_out, batch = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return rng.normal(size=(batch, n_in)), rng.normal(size=(n_in, n_out)), rng.normal(size=n_out), rng.normal(size=(batch, n_out))


mlp_cases = st.composite(_mlp_case)()


@pytest.mark.claim("autodiff.tape.output-gradients")
@given(case=mlp_cases)
def test_output_gradients_give_the_vector_jacobian_product(tf, case):
    x, w, b, v = case
    xt = tf.Variable(x)
    with tf.GradientTape(persistent=True) as tape:
        y = tf.tanh(xt @ w + b)
    vjp = tape.gradient(y, xt, output_gradients=tf.constant(v)).numpy()
    jac = tape.jacobian(y, xt).numpy()  # shape y.shape + x.shape
    # v·J sums terms of both signs: its rounding is relative to |v|·|J|, not to v·J.
    terms = np.tensordot(np.abs(v), np.abs(jac), axes=v.ndim)
    assert_close(vjp, np.tensordot(v, jac, axes=v.ndim), f64(terms), what="gradient(output_gradients=v) vs v·J")


@pytest.mark.claim("autodiff.tape.output-gradients")
@given(case=mlp_cases)
def test_torch_grad_outputs_and_backward_gradient_give_the_vjp(torch, case):
    x, w, b, v = case
    f = lambda t: torch.tanh(t @ torch.tensor(w) + torch.tensor(b))
    xt = torch.tensor(x, requires_grad=True)
    (vjp,) = torch.autograd.grad(f(xt), xt, grad_outputs=torch.tensor(v))
    jac = torch.autograd.functional.jacobian(f, torch.tensor(x)).cpu().numpy()
    expected = np.tensordot(v, jac, axes=v.ndim)
    tol = f64(np.tensordot(np.abs(v), np.abs(jac), axes=v.ndim))  # v·J cancels: rounding is relative to |v|·|J|
    assert_close(vjp.cpu().numpy(), expected, tol, what="autograd.grad(grad_outputs=v) vs v·J")
    f(xt).backward(gradient=torch.tensor(v))
    assert_close(xt.grad.cpu().numpy(), expected, tol, what="Tensor.backward(gradient=v) vs v·J")


# ---------------------------------------------------------------- implicit gradients in graph mode


@pytest.mark.claim("autodiff.graph.implicit")
@given(x=arrays(1))
def test_tf_gradients_inside_tf_function_matches_the_tape(tf, x):
    @tf.function
    def graph_grad(t):
        y = tf.reduce_sum(tf.sin(t) * t)
        return tf.gradients(y, t)[0]

    v = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(v)
        y = tf.reduce_sum(tf.sin(v) * v)
    tol = f64(np.abs(np.cos(x) * x) + np.abs(np.sin(x)))  # x*cos(x) + sin(x) cancels near x = 2.03
    assert_close(graph_grad(v).numpy(), tape.gradient(y, v).numpy(), tol, what="tf.gradients in graph vs GradientTape")
    assert_close(graph_grad(v).numpy(), np.cos(x) * x + np.sin(x), tol, what="tf.gradients in graph vs analytic")


@pytest.mark.claim("autodiff.graph.implicit")
def test_tf_gradients_raises_eagerly(tf):
    x = tf.constant([1.0, 2.0])
    with pytest.raises(RuntimeError, match="eager execution"):
        tf.gradients(x * x, x)
