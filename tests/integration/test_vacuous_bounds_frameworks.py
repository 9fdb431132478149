"""Issue 28 with the real frameworks: the recurrent magnitude (roundtrip.forward_magnitude's
LSTM/GRU recursion) holds what torch and Keras compute in float32, and a deliberately wrong
LSTM (forget-gate bias off by 1e-3) falls outside it. Each evaluation is compared with the
float64 reference against its own share of the suite's budget, rtol / 2 (model_tolerance
combines two evaluations)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks.roundtrip import models as M
from pytest_dlconform.checks.roundtrip.builders import build_keras, build_torch
from pytest_dlconform.checks.roundtrip.zoo import coverage_specs

RECURRENT = M.ModelSpec(3, (M.Layer("lstm", 4, sequences=True), M.Layer("gru", 3), M.Layer("dense", 2)),
                        seed=7, shape=(16,))


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


def _ratio(spec: M.ModelSpec, x: np.ndarray, got: np.ndarray) -> float:
    """observed error / (rtol / 2 * max(max|y|, forward_magnitude)) for one evaluation."""
    y = M.numpy_forward(spec, x, bn_eps=M.KERAS_BN_EPS, ln_eps=M.KERAS_LN_EPS)
    scale = M.forward_magnitude(spec, x, bn_eps=M.KERAS_BN_EPS, ln_eps=M.KERAS_LN_EPS)
    bound = M.model_tolerance(spec).rtol / 2 * max(float(np.max(np.abs(y))), scale)
    return float(np.max(np.abs(np.asarray(got, np.float64) - y))) / bound


def _torch_run(torch: Any, model: Any, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("layers", [1, 2, 3], ids=["lstm", "lstm-gru", "lstm-gru-dense"])
def test_torch_recurrent_error_is_within_the_recurrent_magnitude(torch, layers):
    spec = dataclasses.replace(RECURRENT, layers=RECURRENT.layers[:layers])
    for seed in (0, 1):
        x = M.example_inputs(spec, [4], seed)[0]
        assert _ratio(spec, x, _torch_run(torch, build_torch(spec, torch), x)) <= 1.0


def test_an_lstm_with_its_forget_bias_off_by_1e_3_fails_the_bound(torch):
    spec = dataclasses.replace(RECURRENT, layers=RECURRENT.layers[:1])
    x = M.example_inputs(spec, [4], 0)[0]
    model = build_torch(spec, torch)
    right = _ratio(spec, x, _torch_run(torch, model, x))
    rnn = next(m for m in model.modules() if isinstance(m, torch.nn.LSTM))
    units = rnn.hidden_size
    with torch.no_grad():
        rnn.bias_ih_l0[units:2 * units] += 1e-3  # gates i f g o: f
    wrong = _ratio(spec, x, _torch_run(torch, model, x))
    assert right <= 1.0 < wrong, f"right {right:.3g}, wrong {wrong:.3g} (observed / bound)"


def test_keras_recurrent_coverage_model_is_within_its_bound():
    keras = pytest.importorskip("keras")
    for seed in (0, 3):
        spec = coverage_specs("keras", seed)[1]
        x = M.example_inputs(spec, [3], seed)[0]
        model = build_keras(spec, keras, batch_size=3)
        assert _ratio(spec, x, np.asarray(model(x, training=False))) <= 1.0
