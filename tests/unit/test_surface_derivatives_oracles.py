"""The derivative table of suites/modules/test_surface_derivatives.py and its checks can fail:
wrong gradients, wrong H v, a wrong linear classification, a refusal that is not one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_dlconform.checks.gradients.vjp import GradientMismatch

ROOT = Path(__file__).resolve().parents[2]


def _module():
    name = "surface_derivatives_table"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "suites" / "modules" / "_surface_derivatives.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


sd = _module()
X = [np.array([0.3, -1.2, 0.8]), np.array([1.5, 0.7, 2.0])]


def f(xs):  # x * y^2: smooth, H nonzero
    return xs[0] * xs[1] ** 2


def vjp(xs, w):
    return [w * xs[1] ** 2, 2 * w * xs[0] * xs[1]]


def hvp(xs, w, vs):
    return [2 * w * xs[1] * vs[1], 2 * w * xs[1] * vs[0] + 2 * w * xs[0] * vs[1]]


def lin(xs):
    return 3 * xs[0] - xs[1]


def lin_vjp(xs, w):
    return [3 * w, -w]


def _spec(kind="smooth"):
    return sd.Spec("tf.math", "demo", kind, "unit test", fn=lambda m, x: x, inputs=lambda: X)


def _bounds(spec, fn, v):
    fx = fn(X)
    return sd.Bounds.of(spec, fx, v(X, np.ones(fx.shape)))


def test_right_derivatives_pass():
    s = _spec()
    b = _bounds(s, f, vjp)
    assert sd.check_first_order(s, f, vjp, X, b) <= 1.0
    res = sd.check_second_order(s, vjp, hvp, X, (3,), b, "reverse-over-reverse")
    assert res.max_error_ratio <= 1.0


def test_wrong_gradient_fails():
    s = _spec()
    wrong = lambda xs, w: [w * xs[1] ** 2, w * xs[0] * xs[1]]  # drops the factor 2
    with pytest.raises(GradientMismatch, match="reverse mode"):
        sd.check_first_order(s, f, wrong, X, _bounds(s, f, vjp))


def test_wrong_hvp_fails():
    s = _spec()
    wrong = lambda xs, w, vs: [2 * w * xs[1] * vs[1], 2 * w * xs[0] * vs[1]]  # drops a mixed term
    with pytest.raises(GradientMismatch, match="reverse-over-reverse"):
        sd.check_second_order(s, vjp, wrong, X, (3,), _bounds(s, f, vjp), "reverse-over-reverse")


def test_wrong_linear_classification_is_caught():
    """A smooth function classified linear: its (correct) H v is nonzero, and the table's claim fails."""
    s = _spec("linear")
    with pytest.raises(AssertionError, match="classifies it linear, so its second derivative is zero"):
        sd.check_second_order(s, vjp, hvp, X, (3,), _bounds(s, f, vjp), "reverse-over-reverse")


def test_linear_function_with_nonzero_hvp_fails():
    """A linear function whose framework H v is not 0: finite differences of the gradient say 0."""
    s = _spec("linear")
    wrong = lambda xs, w, vs: [1e-3 * vs[0], 0 * vs[1]]
    with pytest.raises(AssertionError):
        sd.check_second_order(s, lin_vjp, wrong, X, (3,), _bounds(s, lin, lin_vjp), "reverse-over-reverse")
    zero = lambda xs, w, vs: [0 * vs[0], 0 * vs[1]]
    assert sd.check_second_order(s, lin_vjp, zero, X, (3,), _bounds(s, lin, lin_vjp), "r").max_abs_hvp == 0.0


def test_refusals():
    assert sd.is_refusal("tensorflow", LookupError("No gradient defined for operation 'X' (op type: Foo)"))
    assert not sd.is_refusal("tensorflow", LookupError("gradient registry has no entry for: SoftsignGrad"))
    assert sd.is_refusal("tensorflow", LookupError("gradient registry has no entry for: DenseBincount"),
                         ("DenseBincount",))
    assert not sd.is_refusal("tensorflow", AttributeError("'NoneType' object has no attribute 'decode'"))
    assert sd.is_refusal("torch", RuntimeError("the derivative for 'grid_sampler_2d_backward' is not implemented"))
    assert not sd.is_refusal("torch", RuntimeError("one of the variables needed for gradient computation has been "
                                                   "modified by an inplace operation"))


def test_table_validation_catches_errors():
    good = _spec()
    assert sd.validate([good]) == []
    bad = [sd.Spec("tf.math", "a", "smooth", "x", None, None), sd.Spec("tf.math", "b", "weird", "x"),
           sd.Spec("tf.math", "c", "not-differentiable", "", lambda m, x: x), good, good]
    msgs = " | ".join(sd.validate(bad))
    for part in ("a: smooth but no function", "unknown kind 'weird'", "c: no reason", "c: not-differentiable but has a "
                 "function", "demo: listed twice"):
        assert part in msgs, msgs


def test_real_tables_are_consistent_and_quick_samples_rotate():
    for ns, table in sd.TABLES.items():
        assert sd.validate(table) == [], ns
        picks = {tuple(sd.quick_sample(ns, seed)) for seed in range(5)}
        assert len(picks) > 1, ns
        for seed in range(3):
            kinds = {sd.spec(ns, n).kind for n in sd.quick_sample(ns, seed)}
            assert "smooth" in kinds and kinds & set(sd.ZERO_HESSIAN), (ns, kinds)
