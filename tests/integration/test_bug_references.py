"""Bug references against the real framework and against wrong answers: a known divergence
with a ``reference`` matches only an observation equal to the finding's computation."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.checks import bug_references

TWO_ROUNDINGS = 2 * 2.0**-53  # the per-op suite's tolerance for a gradient against its bug reference


def test_the_hardsigmoid_reference_is_torchs_gradient_and_no_other() -> None:
    """torch 2.13's own float64 gradient equals the reference to the bit; the documented 1/6,
    zeros, a sign flip and one NaN are each far outside two float64 roundings."""
    torch = pytest.importorskip("torch")
    name = bug_references.op_vjp_reference("torch", "hardsigmoid")
    assert name == "torch-hardsigmoid-vjp"
    x = np.array([-7.5, -3.0, -2.999, -0.85, 0.0, 0.21, 2.999, 3.0, 7.9])
    w = np.random.default_rng(0).standard_normal(x.shape)
    want = bug_references.bug_reference(name)([x], w)
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(torch.nn.functional.hardsigmoid(t), t, grad_outputs=torch.tensor(w))
    if torch.__version__.startswith("2.13"):
        assert bug_references.relative_deviation([got.numpy()], want) <= TWO_ROUNDINGS  # the finding, as shipped
    documented = np.where((x > -3) & (x < 3), w / 6, 0.0)
    nan_one = np.where(np.arange(x.size) == 3, np.nan, want[0])
    for wrong in (documented, np.zeros_like(x), -want[0], nan_one, want[0] + (np.abs(x) > 3)):
        assert bug_references.relative_deviation([wrong], want) > 1e6 * TWO_ROUNDINGS, wrong
    assert bug_references.op_vjp_reference("tensorflow", "hardsigmoid") is None
