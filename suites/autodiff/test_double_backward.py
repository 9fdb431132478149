"""autodiff.torch.double-backward: create_graph=True makes gradients differentiable.

The seed's WGAN-GP advice depends on it: the gradient penalty
``(||d critic(x_hat) / d x_hat|| - 1)**2`` is itself differentiated with respect to the
critic's parameters. The oracle is our finite-difference gradient check applied to that
penalty as a function of the parameters.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, check_vjp, evidence


@st.composite
def critics(draw: st.DrawFn) -> tuple[list[np.ndarray], np.ndarray]:
    n_in, hidden, batch = draw(st.integers(1, 6)), draw(st.integers(1, 8)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    params = [rng.normal(size=(n_in, hidden)), rng.normal(size=hidden), rng.normal(size=(hidden, 1)), rng.normal(size=1)]
    return params, rng.normal(size=(batch, n_in))


def _penalty(torch, params, x_hat, *, create_graph: bool):
    w1, b1, w2, b2 = params
    x = x_hat.clone().requires_grad_(True)
    score = torch.tanh(x @ w1 + b1) @ w2 + b2  # a smooth critic (the penalty needs a second derivative)
    (grad_x,) = torch.autograd.grad(score.sum(), x, create_graph=create_graph)
    return ((grad_x.norm(dim=1) - 1.0) ** 2).mean()


@pytest.mark.claim("autodiff.torch.double-backward")
@budget(10)
@given(case=critics())
def test_gradient_penalty_gradient_matches_finite_differences(torch, case):
    params, x_hat = case
    x_hat_t = torch.tensor(x_hat)

    def f(xs):  # the penalty's value needs a first-order gradient, so no torch.no_grad() here
        return _penalty(torch, [torch.tensor(p) for p in xs], x_hat_t, create_graph=False).detach().cpu().numpy()

    def vjp(xs, w):
        ps = [torch.tensor(p, requires_grad=True) for p in xs]
        gp = _penalty(torch, ps, x_hat_t, create_graph=True)
        # b2 shifts the score but not its input gradient: its penalty gradient is exactly zero.
        grads = torch.autograd.grad(gp, ps, grad_outputs=torch.tensor(w), allow_unused=True, materialize_grads=True)
        return [g.detach().cpu().numpy() for g in grads]

    result = check_vjp(f, params, vjp, names=["w1", "b1", "w2", "b2"])
    evidence.check("penalty gradient vs finite differences", observed=result.max_error_ratio, tolerance=1.0,
                   directions=result.directions, evaluations=result.evaluations)


@pytest.mark.claim("autodiff.torch.double-backward")
@given(case=critics())
def test_without_create_graph_the_gradient_cannot_be_differentiated(torch, case):
    params, x_hat = case
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    gp = _penalty(torch, ps, torch.tensor(x_hat), create_graph=False)
    assert not gp.requires_grad, "the penalty built from a create_graph=False gradient requires grad"
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        gp.backward()
