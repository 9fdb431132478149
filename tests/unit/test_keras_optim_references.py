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
    assert {r["optimizer"] for r in suite.SHARED_ROWS} == {i.name for i in suite.INFOS}


# ----------------------------------------------------------------- Muon, ScheduleFreeAdamW, subclass


def test_newton_schulz_orthogonalises_and_transposes_tall_matrices():
    """With the classic cubic (1.5, -0.5, 0) and many steps the iteration converges to U V^T of
    the SVD; a tall matrix gives the transpose of its transpose's result."""
    g = np.random.default_rng(0).normal(size=(3, 4))
    u, _, vt = np.linalg.svd(g, full_matrices=False)
    np.testing.assert_allclose(ref.newton_schulz(g, 60, 1.5, -0.5, 0.0), u @ vt, atol=1e-9)
    np.testing.assert_allclose(ref.newton_schulz(g.T, 5, *ref.MUON_ABC), ref.newton_schulz(g, 5, *ref.MUON_ABC).T,
                               atol=1e-15)


MUON_ROUTING = [{"_adamw": False}, {"_adamw": False}, {"_adamw": True, "_weight_decay": None},
                {"_adamw": True, "_weight_decay": None}]
MUON_DATA = ref.problem(suite.MUON_SHAPES)
MUON_OPTS: dict[str, Any] = dict(suite.BY_NAME["Muon"].fixed)


def _muon_history(opts: Mapping[str, Any], routing=MUON_ROUTING, base=BASE) -> list[list[np.ndarray]]:
    return ref.reference_run("Muon", MUON_DATA, opts, base, suite.STEPS, per_variable=routing)[0]


@pytest.mark.parametrize("wrong", [
    {"nesterov": False},  # plain momentum for Nesterov
    {"muon_a": 3.4445, "muon_b": -4.7750, "muon_c": 2.0},  # a rounded coefficient
    {"ns_steps": 4},  # one Newton-Schulz iteration short
    {"rms_rate": 0.25},  # an unrequested rms scaling
    {"momentum": 0.5},
])
def test_muon_check_fails_wrong_rules(wrong):
    right = _muon_history(MUON_OPTS)
    with pytest.raises(ToleranceExceeded, match="Muon wrong twin"):
        suite.compare_history("Muon", _muon_history(MUON_OPTS | wrong), right, "Muon wrong twin")


def test_muon_check_fails_wrong_routing_and_the_adam_fallback_learning_rate():
    """A 1-D variable sent through Newton-Schulz (as a 1x4 matrix would be), an embedding left to
    Muon, and adam_lr_ratio ignored: each fails."""
    right = _muon_history(MUON_OPTS | {"adam_lr_ratio": 0.5})
    no_ratio = _muon_history(MUON_OPTS | {"adam_lr_ratio": 1.0})
    with pytest.raises(ToleranceExceeded, match="variable 2"):
        suite.compare_history("Muon", no_ratio, right, "Muon wrong twin")
    emb_muon = [*MUON_ROUTING[:3], {"_adamw": False}]
    with pytest.raises(ToleranceExceeded, match="variable 3"):
        suite.compare_history("Muon", _muon_history(MUON_OPTS, emb_muon), _muon_history(MUON_OPTS), "Muon wrong twin")


def test_muon_routing_follows_the_docstring():
    assert ref.muon_takes_adamw((4,), "bias", {})
    assert ref.muon_takes_adamw((5, 3), "tok_embedding", {})
    assert not ref.muon_takes_adamw((5, 3), "tok_embedding", {"exclude_embeddings": False})
    assert ref.muon_takes_adamw((4, 3), "tall", {"exclude_layers": ["tall"]})
    assert not ref.muon_takes_adamw((3, 4), "kernel", {"exclude_layers": ["tall"]})


SF_OPTS = {"beta_1": 0.875, "beta_2": 0.9921875, "epsilon": 0.0, "warmup_steps": 3}


def _sf_aliased(opts: Mapping[str, Any], base: Mapping[str, Any]) -> list[list[np.ndarray]]:
    """Keras 3.15.1's ScheduleFreeAdamW (the finding): x from the updated z, weights 1/t."""
    b1, b2 = opts["beta_1"], opts["beta_2"]
    ys = [np.array(d["theta0"]) for d in DATA]
    zs, vs, out = [y.copy() for y in ys], [np.zeros_like(y) for y in ys], []
    for t in range(1, suite.STEPS + 1):
        grads = [ref.gradient(y, d, t) for y, d in zip(ys, DATA)]
        lr = base["learning_rate"] * min(1.0, t / opts["warmup_steps"])
        for i, g in enumerate(grads):
            vs[i] = b2 * vs[i] + (1 - b2) * g * g
            zs[i] = zs[i] - lr * g / (np.sqrt(vs[i] / (1 - b2 ** t)) + opts["epsilon"])
            x = (1 - 1 / t) * (ys[i] - (1 - b1) * zs[i]) / b1 + zs[i] / t
            ys[i] = (1 - b1) * zs[i] + b1 * x
        out.append([y.copy() for y in ys])
    return out


def test_schedule_free_check_fails_the_keras_recursion_and_accepts_the_paper():
    right = ref.schedule_free_run(DATA, SF_OPTS, BASE, suite.STEPS)
    suite.compare_history("ScheduleFreeAdamW", right, right, "the reference itself")
    with pytest.raises(ToleranceExceeded, match="after call 2"):
        suite.compare_history("ScheduleFreeAdamW", _sf_aliased(SF_OPTS, BASE), right, "ScheduleFreeAdamW wrong twin")


def test_schedule_free_reference_first_call_is_the_z_step():
    """At t = 1, c = 1: x = z and y = z = theta0 - gamma_1 g / (sqrt(v_1) + eps)."""
    opts = SF_OPTS | {"warmup_steps": 0}
    got = ref.schedule_free_run(DATA, opts, BASE, 1)[0][0]
    g = ref.gradient(DATA[0]["theta0"], DATA[0], 1)
    gamma = 0.125 * math.sqrt(1 - 0.9921875)
    np.testing.assert_allclose(got, DATA[0]["theta0"] - gamma * g / np.sqrt((1 - 0.9921875) * g * g), rtol=1e-14)


def test_covering_arrays_of_the_new_tests_cover_every_pair():
    assert not optim.uncovered(suite.MUON_ROWS, suite.MUON_FACTORS, suite._muon_valid)
    assert not optim.uncovered(suite.SF_ROWS, suite.SF_FACTORS)
    assert not optim.uncovered(suite.USER_ROWS, suite.USER_FACTORS)
