"""Ops that the generated-program properties leave out, each checked on its own.

:data:`pytest_dlconform.programs.KNOWN_LIMITS` lists framework behaviour that fails a
property for one op (found by the generated suites). The general properties exclude
those ops so that one known limitation does not hide everything else; here each of them
is checked directly against the same claim, so the verdict stays visible (violated) until
the framework fixes it. Each has a claim of its own, so that a known-divergences entry
for it (known_divergences.toml) cannot mask a new failure of the general property.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, check_vjp, evidence, tolerance


@pytest.mark.claim("autodiff.gradient.float64-backward")
# Magnitudes from 0.1: the oracle steps relative to each element, and a lone element of
# 1e-19 would make its finite differences drown in rounding (inconclusive, not a verdict).
@given(x=st.lists(st.floats(0.1, 2.9), min_size=1, max_size=8).map(np.array), sign=st.sampled_from([1.0, -1.0]))
def test_torch_hardsigmoid_float64_gradient(torch, x, sign):
    x = sign * x
    # hardsigmoid(x) = x/6 + 1/2 on (-3, 3): its derivative there is exactly 1/6.
    f = lambda xs: torch.nn.functional.hardsigmoid(torch.tensor(xs[0])).cpu().numpy()

    def vjp(xs, w):
        t = torch.tensor(xs[0], requires_grad=True)
        (g,) = torch.autograd.grad(torch.nn.functional.hardsigmoid(t), t, grad_outputs=torch.tensor(w))
        return [g.cpu().numpy()]

    result = check_vjp(f, [x], vjp, names=["x"])
    evidence.check("hardsigmoid float64 gradient vs finite differences", observed=result.max_error_ratio, tolerance=1.0)


@pytest.mark.claim("autodiff.gradient.forward-mode-coverage")
@given(x=st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=8).map(np.array))
def test_tensorflow_forward_mode_through_softsign(tf, x):
    v, u = tf.constant(x), tf.constant(np.ones_like(x))
    try:
        with tf.autodiff.ForwardAccumulator(v, u) as acc:
            y = tf.nn.softsign(v)
        jvp = acc.jvp(y).numpy()
    except LookupError as exc:  # the framework cannot do what the claim says: a violation, not a harness error
        raise AssertionError(f"forward mode through tf.nn.softsign raised {type(exc).__name__}: {exc}") from exc
    # d/dx x/(1+|x|) = 1/(1+|x|)**2: a division, a square, an addition.
    assert_close(jvp, 1.0 / (1.0 + np.abs(x)) ** 2, tolerance("float64", ops=3), what="J u of softsign")


@pytest.mark.claim("autodiff.gradient.forward-mode-accuracy")
@given(x=st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=8).map(np.array))
def test_torch_forward_mode_through_logcumsumexp(torch, x):
    # y_i = log sum_{j<=i} exp(x_j), so along u = ones, (J u)_i = sum_{j<=i} exp(x_j - y_i) = 1
    # exactly: n exponentials, their sum and a division per entry.
    t = torch.tensor(x, dtype=torch.float64)
    _, ju = torch.func.jvp(lambda v: torch.logcumsumexp(v, 0), (t,), (torch.ones_like(t),))
    assert_close(ju.cpu().numpy(), np.ones_like(x), tolerance("float64", ops=3, reduction=x.size),
                 what=f"J u of torch.logcumsumexp along ones at x={x.tolist()}")
