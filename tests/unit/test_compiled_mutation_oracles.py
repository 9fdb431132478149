"""The numpy references and the state oracle of suites/execution/test_compiled_mutation.py, each
reproducing its documented rule, and each fed a deliberately wrong implementation (a wrong
twin) that must fail with a message naming the wrong quantity: an input mutation not written
back, a second call that does not see the first's mutation, a view mutation applied to the
whole tensor, a gradient through a relu that ignores the kink, BatchNorm's running variance
biased, momentum=None taken as 0.1, a read of a variable before its assign, a gradient through
the variable's history, a Keras moving average with the momentum swapped. numpy only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import Tolerance, tolerance
from suites.execution import test_compiled_mutation as cm

X = np.array([0.5, -1.25, 0.75, -0.3, 1.1])
A = np.array([1.5, 0.5, 2.0, 1.0, 0.75])
B = np.array([0.25, -0.5, 0.0, 1.0, -1.0])
W = np.array([-0.8, 0.6, 1.2, -0.4, 0.9])
TOL = tolerance("float64", ops=6, reduction=5, magnitude=10.0)


def _tols(want: Mapping[str, Any]) -> dict[str, Tolerance]:
    return dict.fromkeys(want, TOL)


def test_input_mutation_reference_and_its_wrong_twins() -> None:
    new, out = cm.input_mutation_reference(X, A, B)
    np.testing.assert_allclose(new, X * A + B)
    np.testing.assert_allclose(out, 2 * np.sin(X * A + B))
    want = {"input": new, "output": out}
    cm.check_state({"input": new.copy(), "output": out.copy()}, want, _tols(want), "right")
    with pytest.raises(AssertionError, match="dropped: input"):  # the caller's tensor left untouched
        cm.check_state({"input": X, "output": out}, want, _tols(want), "dropped")
    second_new, second_out = cm.input_mutation_reference(new, A, B)
    stale_new, stale_out = cm.input_mutation_reference(X, A, B)  # the second call reads the stale input
    with pytest.raises(AssertionError, match="stale: input"):
        cm.check_state({"input": stale_new, "output": stale_out}, {"input": second_new, "output": second_out},
                       _tols(want), "stale")


def test_view_mutation_reference_and_its_wrong_twin() -> None:
    new, out = cm.view_mutation_reference(X)
    assert new[0] == X[0] and np.array_equal(new[1:], X[1:] + 1)
    np.testing.assert_allclose(out, np.cos(new))
    want = {"viewed input": new, "cos output": out}
    whole = X + 1  # the mutation applied to the whole tensor, not the view
    with pytest.raises(AssertionError, match="whole: viewed input"):
        cm.check_state({"viewed input": whole, "cos output": np.cos(whole)}, want, _tols(want), "whole")


def test_intermediate_reference_matches_finite_differences_and_rejects_a_wrong_gradient() -> None:
    loss, gx, gw = cm.intermediate_reference(X, W)
    h = 1e-6
    for i in range(X.size):
        e = np.zeros_like(X)
        e[i] = h
        fdx = (cm.intermediate_reference(X + e, W)[0] - cm.intermediate_reference(X - e, W)[0]) / (2 * h)
        fdw = (cm.intermediate_reference(X, W + e)[0] - cm.intermediate_reference(X, W - e)[0]) / (2 * h)
        assert abs(fdx - gx[i]) < 1e-6 and abs(fdw - gw[i]) < 1e-6
    want = {"loss": loss, "dL/dx": gx, "dL/dw": gw}
    r = X * W * X
    no_kink = {"loss": loss, "dL/dx": 4 * r * X * W, "dL/dw": 2 * r * X * X}  # relu's zero branch ignored
    with pytest.raises(AssertionError, match="no kink: dL/dx"):
        cm.check_state(no_kink, want, _tols(want), "no kink")
    with pytest.raises(AssertionError, match="missing: dL/dw is missing"):
        cm.check_state({"loss": loss, "dL/dx": gx}, want, _tols(want), "missing")


BATCHES = [np.array([[1.0, 2.0], [3.0, 6.0], [0.0, -1.0], [2.0, 1.0]]), np.array([[0.5, 0.0], [1.5, 4.0],
                                                                                    [-1.0, 2.0], [3.0, -2.0]])]


def test_batchnorm_reference_follows_the_docstring() -> None:
    w, b = np.array([1.0, 2.0]), np.array([0.0, -1.0])
    first, second = cm.batchnorm_reference(BATCHES, 0.1, 1e-5, w, b)
    np.testing.assert_allclose(first["running_mean"], 0.1 * BATCHES[0].mean(0))
    np.testing.assert_allclose(first["running_var"], 0.9 + 0.1 * BATCHES[0].var(0, ddof=1))  # unbiased
    np.testing.assert_allclose(first["output"], (BATCHES[0] - BATCHES[0].mean(0)) / np.sqrt(BATCHES[0].var(0) + 1e-5)
                               * w + b)
    assert second["num_batches_tracked"] == 2
    cumulative = cm.batchnorm_reference(BATCHES, None, 1e-5, w, b)
    np.testing.assert_allclose(cumulative[1]["running_mean"], (BATCHES[0].mean(0) + BATCHES[1].mean(0)) / 2)


def test_batchnorm_wrong_twins_fail() -> None:
    w, b = np.array([1.0, 2.0]), np.array([0.0, -1.0])
    want = cm.batchnorm_reference(BATCHES, 0.1, 1e-5, w, b)[0]
    biased = dict(want, running_var=0.9 + 0.1 * BATCHES[0].var(0))
    with pytest.raises(AssertionError, match="biased: running_var"):
        cm.check_state(biased, want, _tols(want), "biased")
    want_none = cm.batchnorm_reference(BATCHES, None, 1e-5, w, b)[1]
    as_01 = cm.batchnorm_reference(BATCHES, 0.1, 1e-5, w, b)[1]  # momentum=None taken as 0.1
    with pytest.raises(AssertionError, match=r"momentum None as 0\.1: running_mean"):
        cm.check_state(as_01, want_none, _tols(want_none), "momentum None as 0.1")
    not_counted = dict(want, num_batches_tracked=np.array(0))
    with pytest.raises(AssertionError, match="not counted: num_batches_tracked"):
        cm.check_state(not_counted, want, _tols(want), "not counted")


def test_variable_order_reference_and_its_wrong_twins() -> None:
    v0 = np.array([0.5, 1.0, -1.5, 2.0, 0.75])
    want = cm.variable_order_reference(v0, X)
    np.testing.assert_allclose(want["variable"], 2 * v0 + 2 * X)
    np.testing.assert_allclose(want["output"], 2 * v0 * X * (2 * v0 + 2 * X))
    # a read before the assign: y = v0 * x, the final read sees the two assign_adds on 2 v0
    stale = {"output": v0 * X * want["variable"], "variable": want["variable"], "dy/dx": v0 * want["variable"],
             "dy/dv": want["dy/dv"]}
    with pytest.raises(AssertionError, match="read before assign: output"):
        cm.check_state(stale, want, _tols(want), "read before assign")
    one_add = dict(want, variable=2 * v0 + X)  # only one of the two assign_adds applied
    with pytest.raises(AssertionError, match="one add: variable"):
        cm.check_state(one_add, want, _tols(want), "one add")
    # a gradient through the variable's history (v2 = 2 v0 + 2x differentiated): state stops gradients
    through_state = dict(want, **{"dy/dx": want["dy/dx"] + 2 * 2 * v0 * X})
    with pytest.raises(AssertionError, match="through state: dy/dx"):
        cm.check_state(through_state, want, _tols(want), "through state")


def test_keras_batchnorm_reference_and_a_swapped_momentum() -> None:
    g, b = np.array([1.0, 2.0]), np.array([0.0, -1.0])
    first = cm.keras_batchnorm_reference(BATCHES, 0.99, 1e-3, g, b)[0]
    np.testing.assert_allclose(first["moving_mean"], 0.01 * BATCHES[0].mean(0))
    np.testing.assert_allclose(first["moving_variance"], 0.99 + 0.01 * BATCHES[0].var(0))
    swapped = cm.keras_batchnorm_reference(BATCHES, 0.01, 1e-3, g, b)[0]  # torch's convention, momentum 1 - m
    with pytest.raises(AssertionError, match="swapped: moving_mean"):
        cm.check_state(swapped, first, _tols(first), "swapped")


def test_doubled_tolerance_is_twice_the_bound() -> None:
    t = tolerance("float64", ops=3, magnitude=2.0)
    d = cm._doubled(t)
    assert d.rtol == 2 * t.rtol and d.atol == 2 * t.atol and "2 x" in d.why
