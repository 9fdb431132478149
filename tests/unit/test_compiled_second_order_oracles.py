"""The compiled-second-order oracles (suites/execution/_compiled_hvp.py) fed wrong Hessian-vector
products: a sign flip, zeros, a NaN, a 1 % scaling, and a product for another tangent. numpy only.

f(x) = sin(x) * x elementwise, L = <w, f>: grad L = w (cos x x + sin x), H v = w (2 cos x - x sin x) v.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import check_hvp
from suites.execution import _compiled_hvp as ch

X = [np.linspace(-1.3, 1.7, 7)]
W = np.linspace(0.5, -0.9, 7)
SEED = 11


def grad(xs: list[np.ndarray], w: np.ndarray) -> list[np.ndarray]:
    x = xs[0]
    return [w * (np.cos(x) * x + np.sin(x))]


def exact(vs: list[np.ndarray]) -> list[np.ndarray]:
    x = X[0]
    return [W * (2 * np.cos(x) - x * np.sin(x)) * vs[0]]


def _bound(hvps: list[list[np.ndarray]]) -> ch.Bound:
    return ch.hvp_bound(1, X[0].size, [ch.element_scales(x) for x in X], hvps, 0.0, 4 * ch.EPS, W)


@pytest.fixture
def vs() -> list[np.ndarray]:
    return ch.fd_tangents(check_hvp, X, X[0].shape, W, SEED)


def test_tangents_are_those_check_hvp_asks_for(vs: list[np.ndarray]) -> None:
    right = exact(vs)
    result = ch.judge_against_fd(check_hvp, grad, right, vs, X, X[0].shape, W, SEED, 4 * ch.EPS, "right")
    assert result.max_error_ratio <= 1.0
    assert ch.compare_hvp(right, [h.copy() for h in right], [ch.element_scales(x) for x in X], _bound([right]),
                          "same") == 0.0


def test_a_product_for_another_tangent_is_a_harness_error(vs: list[np.ndarray]) -> None:
    with pytest.raises(RuntimeError, match="another tangent than the compiled batch computed"):
        ch.judge_against_fd(check_hvp, grad, exact(vs), [2 * vs[0]], X, X[0].shape, W, SEED, 0.0, "wrong v")


@pytest.mark.parametrize(("name", "wrong", "fd_message", "eager_message"), [
    ("sign flip", lambda h: -h, "points the wrong way", "opposite sign"),
    ("zeros", np.zeros_like, "product is zero there", "zero where eager is not"),
    ("1% too large", lambda h: 1.01 * h, "too large", "x the allowed"),
])
def test_wrong_products_fail_both_oracles(vs: list[np.ndarray], name: str, wrong: Any, fd_message: str,
                                         eager_message: str) -> None:
    right = exact(vs)
    bad = [wrong(h) for h in right]
    with pytest.raises(AssertionError, match=fd_message):
        ch.judge_against_fd(check_hvp, grad, bad, vs, X, X[0].shape, W, SEED, 4 * ch.EPS, f"compiled ({name})")
    with pytest.raises(ch.HvpMismatch, match=f"compiled vs eager.*{eager_message}"):
        ch.compare_hvp(bad, right, [ch.element_scales(x) for x in X], _bound([bad, right]), "compiled vs eager")


def test_nan_fails_both_oracles(vs: list[np.ndarray]) -> None:
    right = exact(vs)
    bad = [right[0].copy()]
    bad[0][3] = np.nan
    with pytest.raises(AssertionError, match="non-finite values"):
        ch.judge_against_fd(check_hvp, grad, bad, vs, X, X[0].shape, W, SEED, 4 * ch.EPS, "compiled (NaN)")
    with pytest.raises(ch.HvpMismatch, match=r"H v for input 0 is nan at index \(3,\)"):
        ch.compare_hvp(bad, right, [ch.element_scales(x) for x in X], _bound([right]), "compiled vs eager")


def test_bound_admits_rounding_and_rejects_a_few_thousand_ulps(vs: list[np.ndarray]) -> None:
    right = exact(vs)
    scales = [ch.element_scales(x) for x in X]
    bound = _bound([right])
    ulps = [h + 8 * ch.EPS * np.abs(h) * np.sign(np.cos(np.arange(h.size))) for h in right]
    assert ch.compare_hvp(ulps, right, scales, bound, "a few ulps") <= 1.0
    far = [h * (1 + 4096 * ch.EPS) + 1e-12 for h in right]
    with pytest.raises(ch.HvpMismatch, match="x the allowed"):
        ch.compare_hvp(far, right, scales, bound, "far")


def test_xla_unsupported_names_the_program_under_the_tapes_scopes() -> None:
    msg = ("Detected unsupported operations when trying to compile graph __inference on XLA_CPU_JIT: "
           "Foo (No registered 'Foo' OpKernel) {{node gradient_tape/op3/Foo}}{{node op5/Bar}}")
    assert ch.xla_unsupported(msg) == {3: "Foo (No registered 'Foo' OpKernel)", 5: "Foo (No registered 'Foo' OpKernel)"}
    assert ch.xla_unsupported("something else") == {}
