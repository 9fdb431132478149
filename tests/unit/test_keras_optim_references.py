"""The keras.optimizers suite's oracle can fail: its numpy references
(suites/modules/_keras_optim_reference.py) and its comparison (``compare_history`` with the
suite's float64 error model) reject deliberately wrong implementations of the documented rules
and shared options, accept the rule itself, and the covering arrays cover every pair. No
framework runs here (numpy only)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import ToleranceExceeded
from suites.modules import _keras_optim_reference as ref
from suites.modules import _optim_reference as optim
from suites.modules import test_keras_optimizers as suite

DATA = ref.problem(suite.SHAPES)
BASE: dict[str, Any] = {"learning_rate": 0.125}


def _run(name: str, opts: Mapping[str, Any], base: Mapping[str, Any], rule: Callable[..., np.ndarray] | None = None,
         monkeypatch: pytest.MonkeyPatch | None = None) -> list[list[np.ndarray]]:
    if rule is not None and monkeypatch is not None:
        monkeypatch.setitem(ref.RULES, name, rule)
    history, _ = ref.reference_run(name, DATA, opts, base, suite.STEPS)
    if monkeypatch is not None:
        monkeypatch.undo()
    return history


def _fails(name: str, wrong: list[list[np.ndarray]], opts: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    right = _run(name, opts, base)
    with pytest.raises(ToleranceExceeded) as info:
        suite.compare_history(name, wrong, right, f"{name} wrong twin")
    return str(info.value)


def test_sgd_and_adam_first_steps_by_hand():
    g = ref.gradient(DATA[0]["theta0"], DATA[0], 1)
    th = DATA[0]["theta0"]
    sgd = _run("SGD", {}, BASE)[0][0]
    np.testing.assert_array_equal(sgd, th - 0.125 * g)
    b1, b2, eps = 0.875, 0.9921875, 2.0 ** -23
    adam = _run("Adam", {"beta_1": b1, "beta_2": b2, "epsilon": eps}, BASE)[0][0]
    # Step 1: alpha m / (sqrt(v) + eps) = lr g / (|g| + eps / sqrt(1 - b2)).
    np.testing.assert_allclose(adam, th - 0.125 * g / (np.abs(g) + eps / math.sqrt(1 - b2)), rtol=1e-14)


def test_the_rule_itself_and_rounding_pass():
    opts = {"beta_1": 0.875, "beta_2": 0.9921875, "amsgrad": True}
    right = _run("Adam", opts, BASE)
    nudged = [[a * (1 + 4e-16) for a in step] for step in right]
    assert suite.compare_history("Adam", nudged, right, "Adam rounded") < 1


def _adam_no_bias_correction(theta, g, s, t, lr, o):
    m = 0.875 * s.get("m", 0.0) + 0.125 * g
    v = 0.9921875 * s.get("v", 0.0) + 0.0078125 * g * g
    s["m"], s["v"] = m, v
    return theta - lr * m / (np.sqrt(v) + o.get("epsilon", 1e-7))


def _sgd_nesterov_sign_flip(theta, g, s, t, lr, o):
    v = o["momentum"] * s.get("v", 0.0) - lr * g
    s["v"] = v
    return theta - o["momentum"] * v - lr * g


def _adagrad_ignores_initial(theta, g, s, t, lr, o):
    return ref.adagrad(theta, g, s, t, lr, {**o, "initial_accumulator_value": 0.0})


def _ftrl_doubled_l2(theta, g, s, t, lr, o):
    return ref.ftrl(theta, g, s, t, lr, {**o, "l2_regularization_strength": 2 * o["l2_regularization_strength"]})


def _nan(theta, g, s, t, lr, o):
    out = ref.sgd(theta, g, s, t, lr, o)
    return np.where(np.arange(out.size).reshape(out.shape) == 1, np.nan, out)


WRONG_RULES = [
    ("Adam", {"beta_1": 0.875, "beta_2": 0.9921875}, _adam_no_bias_correction, "Adam without bias correction"),
    ("SGD", {"momentum": 0.875, "nesterov": True}, _sgd_nesterov_sign_flip, "nesterov look-ahead sign flipped"),
    ("Adagrad", {"initial_accumulator_value": 1.0}, _adagrad_ignores_initial, "initial_accumulator_value dropped"),
    ("Ftrl", {"l2_regularization_strength": 0.125}, _ftrl_doubled_l2, "lambda_2 doubled (Keras's form)"),
    ("SGD", {}, _nan, "a NaN"),
]


@pytest.mark.parametrize(("name", "opts", "rule", "what"), WRONG_RULES, ids=[w[3] for w in WRONG_RULES])
def test_a_wrong_rule_fails(monkeypatch, name, opts, rule, what):
    wrong = _run(name, opts, BASE, rule, monkeypatch)
    message = _fails(name, wrong, opts, BASE)
    assert "vs the documented rule" in message and "after call" in message, message


def _run_base_variant(base: Mapping[str, Any], variant: Mapping[str, Any]) -> list[list[np.ndarray]]:
    return _run("SGD", {"momentum": 0.875}, {**base, **variant})


@pytest.mark.parametrize(("base", "wrong", "what"), [
    ({"clipnorm": 0.5}, {"clipnorm": None}, "clipnorm ignored"),
    ({"global_clipnorm": 0.5}, {"global_clipnorm": None, "clipnorm": 0.5}, "global norm clipped per tensor"),
    ({"clipvalue": 0.375}, {"clipvalue": 0.75}, "clipvalue doubled"),
    ({"weight_decay": 0.0625}, {"weight_decay": None}, "weight decay dropped"),
    ({"use_ema": True, "ema_momentum": 0.5, "ema_overwrite_frequency": 3}, {"ema_overwrite_frequency": None},
     "ema_overwrite_frequency ignored"),
    ({"learning_rate": ("exp", 0.125, 2.0, 0.5)}, {"learning_rate": ("exp", 0.125, 1.0, 0.5)},
     "schedule read at twice the step"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_a_wrong_shared_option_fails(base, wrong, what):
    full = {**BASE, **base}
    bad = _run_base_variant(full, wrong)
    _fails("SGD", bad, {"momentum": 0.875}, full)


def test_accumulation_summed_instead_of_averaged_fails():
    full = {**BASE, "gradient_accumulation_steps": 2}
    right = _run("SGD", {}, full)
    # Summing the two gradients is the mean with twice the learning rate, for plain SGD.
    summed = _run("SGD", {}, {**full, "learning_rate": 0.25})
    with pytest.raises(ToleranceExceeded, match="after call 2"):
        suite.compare_history("SGD", summed, right, "accumulation summed")
    # Nothing moves on the first call of each window.
    np.testing.assert_array_equal(right[0][0], DATA[0]["theta0"])


def test_ema_average_starts_at_the_first_update():
    base = {**BASE, "use_ema": True, "ema_momentum": 0.5}
    history, avg = ref.reference_run("SGD", DATA, {}, base, 2)
    assert avg is not None
    np.testing.assert_allclose(avg[0], 0.5 * history[0][0] + 0.5 * history[1][0], rtol=1e-15)


def test_loss_scale_reference_halves_skips_and_grows():
    history, scales = ref.loss_scale_run(DATA, 0.125, 1.0, 3, suite.PATTERN)
    assert scales == [1.0, 1.0, 0.5, 0.5, 0.5, 1.0, 0.5, 0.25, 0.25, 0.25], scales
    np.testing.assert_array_equal(history[2][0], history[1][0])  # a non-finite call is skipped
    assert not np.array_equal(history[3][0], history[2][0])


def test_covering_arrays_cover_every_pair():
    for info in suite.INFOS:
        factors = suite._own_factors(info)
        assert not optim.uncovered(optim.pairwise(factors), factors), info.name
    assert not optim.uncovered(suite.SHARED_ROWS, suite.SHARED, suite._shared_valid)
    assert {r["optimizer"] for r in suite.SHARED_ROWS} == set(suite.BY_NAME)
