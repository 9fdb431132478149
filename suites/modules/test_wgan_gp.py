"""modules.wgan-gp: the WGAN-GP gradient penalty trains through a double backward.

penalty(theta) = lam * mean_i (||d critic_theta(x_hat_i) / d x_hat_i||_2 - 1)^2 at
x_hat = eps * real + (1 - eps) * fake. Its gradient with respect to the critic's
parameters theta needs the derivative of a derivative: torch.autograd.grad with
create_graph=True, or nested GradientTapes. Oracles: central finite differences in
float64 (checks.gradients.check_vjp), and an Armijo test that the negative gradient lowers
the penalty.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, check_vjp, evidence

from ._host import host

CLAIM = "modules.wgan-gp"
LAMBDA = 10.0  # the paper's default weight


@st.composite
def problems(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch, dim, hidden = draw(st.integers(1, 6)), draw(st.integers(1, 5)), draw(st.integers(1, 8))
    params = [rng.normal(size=(dim, hidden)), rng.normal(size=hidden) * 0.5,
              rng.normal(size=(hidden, 1)), rng.normal(size=1)]
    real, fake = rng.normal(1.0, 1.0, (batch, dim)), rng.normal(-1.0, 1.0, (batch, dim))
    eps = rng.uniform(0, 1, (batch, 1))
    return {"params": params, "x_hat": eps * real + (1 - eps) * fake, "seed": int(rng.integers(2**31))}


def torch_penalty(torch) -> Callable[..., object]:
    def penalty(params, x_hat, create_graph: bool = True):
        w1, b1, w2, b2 = params
        x = x_hat.clone().requires_grad_(True)
        critic = torch.tanh(x @ w1 + b1) @ w2 + b2  # a smooth critic: finite differences apply
        (g,) = torch.autograd.grad(critic.sum(), x, create_graph=create_graph)
        return LAMBDA * ((g.norm(2, dim=1) - 1) ** 2).mean()

    return penalty


def tf_penalty(tf) -> Callable[..., object]:
    def penalty(params, x_hat):
        w1, b1, w2, b2 = params
        with tf.GradientTape() as inner:
            inner.watch(x_hat)
            critic = tf.tanh(x_hat @ w1 + b1) @ w2 + b2
        g = inner.gradient(critic, x_hat)  # recorded by the outer tape, if one is open
        return LAMBDA * tf.reduce_mean((tf.norm(g, axis=1) - 1) ** 2)

    return penalty


def _armijo(f: Callable[[list[np.ndarray]], float], params: list[np.ndarray], grads: list[np.ndarray]) -> int:
    """The first halving k at which a step along -g lowers f by half its first-order estimate."""
    __tracebackhide__ = True
    p0, gg = f(params), sum(float(np.sum(g * g)) for g in grads)
    if gg == 0.0:
        return 0  # a stationary point: nothing to descend (rare: |grad| exactly 1 everywhere)
    for k in range(40):
        eta = 2.0**-k * max(p0, 1e-3) / gg
        if f([p - eta * g for p, g in zip(params, grads)]) <= p0 - 0.5 * eta * gg:
            return k
    raise AssertionError(f"no step along the negative penalty gradient lowers the penalty {p0!r} (|g|^2 = {gg!r})")


@pytest.mark.claim(CLAIM)
@budget(10)
@given(problem=problems())
def test_torch_gradient_penalty_double_backward(torch, problem):
    penalty = torch_penalty(torch)
    x_hat = torch.tensor(problem["x_hat"])

    def f(ps):
        return penalty([torch.tensor(p) for p in ps], x_hat).detach().item()

    def vjp(ps, w):
        leaves = [torch.tensor(p, requires_grad=True) for p in ps]
        # b2 shifts the critic but not its input gradient: unused, so its gradient is zero.
        grads = torch.autograd.grad(penalty(leaves, x_hat), leaves, allow_unused=True, materialize_grads=True)
        return [host(g) * float(w) for g in grads]

    result = check_vjp(lambda ps: np.asarray(f(ps)), problem["params"], vjp, seed=problem["seed"],
                       names=["W1", "b1", "W2", "b2"])
    evidence.check("penalty gradient vs finite differences", observed=result.max_error_ratio, tolerance=1.0)
    steps = _armijo(f, problem["params"], vjp(problem["params"], np.ones(())))
    evidence.note(armijo_halvings=steps)
    evidence.covers("torch.create_graph=True", "torch.descent")
    # Without create_graph the returned input gradient is a constant: no second backward.
    leaves = [torch.tensor(p, requires_grad=True) for p in problem["params"]]
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        torch.autograd.grad(penalty(leaves, x_hat, create_graph=False), leaves, allow_unused=True)
    evidence.covers("torch.create_graph=False")


@pytest.mark.claim(CLAIM)
@budget(6)
@given(problem=problems())
def test_tf_gradient_penalty_nested_tapes(tf, problem):
    penalty = tf_penalty(tf)
    x_hat = tf.constant(problem["x_hat"])

    def f(ps):
        return float(penalty([tf.constant(p) for p in ps], x_hat))

    def vjp(ps, w):
        ts = [tf.constant(p) for p in ps]
        with tf.GradientTape() as outer:
            outer.watch(ts)
            value = penalty(ts, x_hat)
        grads = outer.gradient(value, ts, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return [g.numpy() * float(w) for g in grads]

    result = check_vjp(lambda ps: np.asarray(f(ps)), problem["params"], vjp, seed=problem["seed"],
                       names=["W1", "b1", "W2", "b2"])
    evidence.check("penalty gradient vs finite differences", observed=result.max_error_ratio, tolerance=1.0)
    evidence.note(armijo_halvings=_armijo(f, problem["params"], vjp(problem["params"], np.ones(()))))
    evidence.covers("tf.nested-tapes", "tf.descent")
