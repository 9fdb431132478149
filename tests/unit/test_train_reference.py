"""The train step's independent reference (suites/execution/_train_reference.py): a float32
step computed as documented passes its rounding bound; deliberately wrong optimizers (Adam
without bias correction, momentum with the wrong sign, a summed instead of averaged loss,
SGD at twice the rate) fail with the tensor named."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from suites.execution._train_reference import StepMismatch, assert_step, hyper, reference_step

F = np.float32


def _grads32(ws: list[np.ndarray], x: np.ndarray, y: np.ndarray, mean: bool = True) -> list[np.ndarray]:
    w1, b1, w2, b2 = ws
    z = x @ w1 + b1
    h = np.maximum(z, F(0))
    r = (h @ w2 + b2) - y
    dp = F(2) * r / F(x.shape[0] if mean else 1)
    dz = (dp @ w2.T) * (z > 0)
    return [x.T @ dz, dz.sum(axis=0), h.T @ dp, dp.sum(axis=0)]


def _step32(name: str, ws, slots, t, x, y, *, bias_correction=True, momentum_sign=1, lr_factor=1, mean=True):
    """Keras 3's update rules evaluated in float32 (or a wrong variant)."""
    hp = hyper(name, 0.05, momentum=0.9 if name == "sgd-momentum" else 0.0, epsilon=1.0 if name == "adam" else 1e-7)
    lr, out = F(hp.lr * lr_factor), []
    for k, (w, g) in enumerate(zip(ws, _grads32(ws, x, y, mean))):
        if name == "sgd":
            out.append(w - g * lr)
        elif name == "sgd-momentum":
            m = F(hp.momentum) * slots["momentum"][k] * F(momentum_sign) - g * lr
            out.append(w + m)
        else:
            b1, b2 = F(hp.beta_1), F(hp.beta_2)
            p1, p2 = b1 ** F(t + 1), b2 ** F(t + 1)
            alpha = lr * np.sqrt(F(1) - p2) / (F(1) - p1) if bias_correction else lr
            m = slots["momentum"][k] + (g - slots["momentum"][k]) * (F(1) - b1)
            v = slots["velocity"][k] + (g * g - slots["velocity"][k]) * (F(1) - b2)
            out.append(w - (m * alpha) / (np.sqrt(v) + F(hp.epsilon)))
    return hp, out


def _state(seed: int, batch: int) -> tuple[list[np.ndarray], dict[str, list[np.ndarray]], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal(s).astype(F) * F(0.7) for s in ((3, 4), (4,), (4, 1), (1,))]
    slots = {k: [(rng.standard_normal(w.shape) * 0.01).astype(F) for w in ws] for k in ("momentum", "velocity")}
    slots["velocity"] = [np.abs(v) for v in slots["velocity"]]
    return ws, slots, rng.standard_normal((batch, 3)).astype(F), rng.standard_normal((batch, 1)).astype(F)


@pytest.mark.parametrize("name", ["sgd", "sgd-momentum", "adam"])
@pytest.mark.parametrize("seed", range(15))
def test_a_documented_float32_step_is_within_its_bound(name, seed):
    ws, slots, x, y = _state(seed, 2 + seed % 4)
    t = seed % 3
    hp, new = _step32(name, ws, slots, t, x, y)
    _, expected, bounds, margin = reference_step(hp, ws, slots, t, x, y)
    if margin > 1:
        assert assert_step(new, expected, bounds, what=f"{name} seed {seed}") <= 1.0


WRONG: dict[str, tuple[str, dict[str, object], str]] = {
    "adam without bias correction": ("adam", {"bias_correction": False}, "adam update"),
    "momentum with the wrong sign": ("sgd-momentum", {"momentum_sign": -1}, "sgd-momentum update"),
    "loss summed, not averaged": ("sgd", {"mean": False}, "sgd update"),
    "sgd at twice the rate": ("sgd", {"lr_factor": 2}, "sgd update"),
}


@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_a_wrong_optimizer_fails_with_the_tensor_named(wrong):
    name, variant, label = WRONG[wrong]
    ws, slots, x, y = _state(3, 4)
    step: Callable[..., tuple[object, list[np.ndarray]]] = _step32
    hp, new = step(name, ws, slots, 0, x, y, **variant)
    _, expected, bounds, _ = reference_step(hp, ws, slots, 0, x, y)
    with pytest.raises(StepMismatch, match=rf"{label}: weight \d: max\|float32 step - documented update in float64\|"):
        assert_step(new, expected, bounds, what=label)
