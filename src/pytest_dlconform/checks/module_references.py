"""Independent float64 numpy references for the modules claims (layers, a seed network,
training callbacks), written from the documented formulas only (never from a framework's
source): batch normalisation's normalisation and running statistics (torch and Keras
conventions), the seed's GAN generator, and Keras's EarlyStopping rule.

Meta-tests: tests/integration/test_modules_data_oracles.py. Importing this module imports
no framework.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# ----------------------------------------------------------------- batch normalisation


@dataclass
class BatchNormState:
    """Running statistics per channel and the number of training batches seen."""

    mean: np.ndarray
    var: np.ndarray
    batches: int = 0


def bn_moments(x: np.ndarray, channel_axis: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per-channel mean and biased variance over every other axis, and the count per channel."""
    axes = tuple(i for i in range(x.ndim) if i != channel_axis % x.ndim)
    count = int(np.prod([x.shape[i] for i in axes]))
    return x.mean(axis=axes), x.var(axis=axes), count


def bn_normalise(x: np.ndarray, mean: np.ndarray, var: np.ndarray, eps: float, gamma: np.ndarray | None,
                 beta: np.ndarray | None, channel_axis: int) -> np.ndarray:
    shape = [1] * x.ndim
    shape[channel_axis % x.ndim] = -1
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if gamma is not None:
        y = y * gamma.reshape(shape)
    if beta is not None:
        y = y + beta.reshape(shape)
    return y


def torch_running_update(state: BatchNormState, mean: np.ndarray, var: np.ndarray, count: int,
                         momentum: float | None) -> BatchNormState:
    """torch: running = (1 - m) * running + m * batch, variance unbiased; momentum=None: cumulative mean."""
    batches = state.batches + 1
    m = 1.0 / batches if momentum is None else momentum
    unbiased = var * count / (count - 1)
    return BatchNormState((1 - m) * state.mean + m * mean, (1 - m) * state.var + m * unbiased, batches)


def keras_moving_update(state: BatchNormState, mean: np.ndarray, var: np.ndarray, momentum: float) -> BatchNormState:
    """Keras: moving = moving * momentum + batch * (1 - momentum), variance as computed for the batch."""
    return BatchNormState(state.mean * momentum + mean * (1 - momentum), state.var * momentum + var * (1 - momentum),
                          state.batches + 1)


# ----------------------------------------------------------------- the seed's GAN generator


def generator_forward(z: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, *,
                      activation: bool = True) -> np.ndarray:
    """Linear-ReLU-Linear-Tanh with torch's Linear convention (y = x W^T + b), then view(-1,1,28,28);
    ``activation=False`` stops before the final tanh."""
    a = np.maximum(z @ w1.T + b1, 0.0) @ w2.T + b2
    return (np.tanh(a) if activation else a).reshape(-1, 1, 28, 28)


# ----------------------------------------------------------------- early stopping


@dataclass
class EarlyStopOutcome:
    epochs_run: int
    best_epoch: int | None  # the epoch whose weights restore_best_weights restores
    stopped: bool
    trace: list[str] = field(default_factory=list)


def early_stopping(values: Sequence[float], *, patience: int, min_delta: float = 0.0, mode: str = "min",
                   baseline: float | None = None, start_from_epoch: int = 0) -> EarlyStopOutcome:
    """Replay keras.callbacks.EarlyStopping's documented rule over per-epoch monitored values.

    Documented: an improvement is a change in the direction of ``mode`` by more than
    ``min_delta`` over the best value so far; training stops after ``patience`` epochs
    with no improvement; epochs before ``start_from_epoch`` are not monitored; with a
    baseline, an epoch must also improve on it ("If no epoch improves on baseline,
    training will run for patience epochs"). The first monitored epoch always improves on
    "no value yet", so it never stops training by itself. Returns how many epochs fit runs.
    """
    sign = 1.0 if mode == "min" else -1.0
    best: float | None = None
    best_epoch: int | None = None
    first: int | None = None  # the first monitored epoch
    since = 0  # monitored epochs since the last counted improvement
    trace: list[str] = []
    for epoch, value in enumerate(values):
        if epoch < start_from_epoch or value is None or math.isnan(value):
            continue
        first = epoch if first is None else first
        since += 1
        if best is None or sign * (best - value) > min_delta:
            best, best_epoch = value, epoch
            if baseline is None or sign * (baseline - value) > min_delta:
                since = 0
                trace.append(f"epoch {epoch}: improvement to {value!r}")
                continue
        trace.append(f"epoch {epoch}: no counted improvement ({since} of patience {patience})")
        if since >= patience and epoch > first:
            return EarlyStopOutcome(epoch + 1, best_epoch, True, trace)
    return EarlyStopOutcome(len(values), best_epoch, False, trace)
