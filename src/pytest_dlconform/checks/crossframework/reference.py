"""The float64 reference: a numpy forward pass that shares no code with either framework,
with each framework's documented moving-statistics update and the case's conditioning."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .architectures import Case, Layer, Loss, Result


def rounded(values: Mapping[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """What a framework holds after converting float64 data to ``dtype``, back in float64."""
    return {k: np.asarray(v, dtype=dtype).astype(np.float64) for k, v in values.items()}


def _act(name: str, x: np.ndarray) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 0.5 * (1.0 + np.tanh(0.5 * x))
    if name == "gelu":  # exact (erf) GELU: Keras approximate=False, torch approximate='none'
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    return x


def _conv(x: np.ndarray, kernel: np.ndarray, layer: Layer) -> np.ndarray:
    span = layer.dilation * (layer.kernel - 1) + 1
    if layer.padding == "same":  # TF and torch both put the odd pixel at the end
        before, after = (span - 1) // 2, (span - 1) - (span - 1) // 2
        x = np.pad(x, ((0, 0), (before, after), (before, after), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(x, (span, span), axis=(1, 2))
    win = win[:, :: layer.stride, :: layer.stride, :, :: layer.dilation, :: layer.dilation]
    return np.einsum("nhwcij,ijco->nhwo", win, kernel)


@dataclass
class Reference:
    """The float64 reference of one case: per-framework expectations and the conditioning."""

    keras: Result
    torch: Result
    condition: float  # product over layers of how much each magnifies relative rounding errors
    factors: dict[str, float] = field(default_factory=dict)  # extra magnification of single keys


def reference(case: Case, dtype: str) -> Reference:
    """float64 forward pass of ``case`` on its inputs and weights rounded to ``dtype``.

    Logits and loss are shared; the moving statistics follow each framework's documented
    update (Keras: biased batch variance; torch: unbiased batch variance in
    ``running_var``). ``condition`` estimates, layer by layer, how much a relative
    rounding error in a layer's input grows in its output: ``max(|W||h| + |b|) / max|Wh + b|``
    for a product (cancellation), ``max|h| / (min sigma * max|h_hat|)`` for a
    normalisation (division by a small spread), ``max|x f'(x)| / max|f(x)|`` for an
    activation; tolerances are multiplied by it (squared for gradients).
    """
    w = rounded(case.weights(), dtype)
    x, labels = case.inputs()
    h = np.asarray(x, dtype=dtype).astype(np.float64)
    states: dict[str, dict[str, np.ndarray]] = {"keras": {}, "torch": {}}
    condition = 1.0
    for i, layer in enumerate(case.arch.layers):
        h, magnification = _ref_layer(i, layer, h, w, case.training, states)
        condition *= magnification
    loss = np.asarray(reference_loss(h, labels, case.arch.loss))
    # The loss is log-sum-exp minus a logit: its rounding error is relative to the logits,
    # so a small loss (confident, correct logits) is known only to u * max|logits|.
    # Backwards, everything starts from softmax(z) - target, rounded relative to its terms:
    # saturated logits make it small and its relative error large.
    p, target, keep = _softmax_target(h, labels, case.arch.loss)
    factors = {"loss": _ratio(float(np.abs(h).max()), float(abs(loss))),
               "grad": _ratio(float((p + target)[keep].max()), float(np.abs(p - target)[keep].max()))}
    return Reference({"logits": h, "loss": loss, **states["keras"]}, {"logits": h, "loss": loss, **states["torch"]},
                     condition, factors)


def _ratio(num: float, den: float) -> float:
    return 1.0 if den == 0.0 else max(1.0, num / den)


def _ref_layer(i: int, layer: Layer, h: np.ndarray, w: Mapping[str, np.ndarray], training: bool,
               states: dict[str, dict[str, np.ndarray]]) -> tuple[np.ndarray, float]:
    if layer.kind == "flatten":
        return h.reshape(h.shape[0], -1), 1.0
    if layer.kind in ("dense", "conv"):
        kernel, bias = w[f"{i}.kernel"], w.get(f"{i}.bias") if layer.use_bias else None
        prod = (lambda a, k: a @ k) if layer.kind == "dense" else (lambda a, k: _conv(a, k, layer))
        z, z_abs = prod(h, kernel), prod(np.abs(h), np.abs(kernel))
        if bias is not None:
            z, z_abs = z + bias, z_abs + np.abs(bias)
        out = _act(layer.activation, z)
        slope = np.abs(_act(layer.activation, z * (1 + 1e-6)) - out) / 1e-6  # |x f'(x)|
        return out, _ratio(float(z_abs.max()), float(np.abs(z).max())) * _ratio(float(slope.max()), float(np.abs(out).max()))
    axes = tuple(range(h.ndim - 1)) if layer.kind == "batchnorm" else (h.ndim - 1,)
    mean, var = h.mean(axis=axes, keepdims=True), h.var(axis=axes, keepdims=True)
    if layer.kind == "batchnorm":
        mean, var = _batchnorm_stats(i, layer, h, mean, var, w, training, states)
    sigma = np.sqrt(var + layer.epsilon)
    h_hat = (h - mean) / sigma
    gamma, beta = w[f"{i}.gamma"], w[f"{i}.beta"]
    out = h_hat * gamma + beta
    # Rounding in h is relative to each row's (or channel's) own magnitude; dividing by
    # that row's sigma magnifies it.
    spread = np.abs(h).max(axis=axes, keepdims=True) / sigma
    magnification = _ratio(float(spread.max()), float(np.abs(h_hat).max()))
    magnification *= _ratio(float((np.abs(h_hat * gamma) + np.abs(beta)).max()), float(np.abs(out).max()))
    return out, magnification


def _batchnorm_stats(i: int, layer: Layer, h: np.ndarray, mean: np.ndarray, var: np.ndarray,
                     w: Mapping[str, np.ndarray], training: bool,
                     states: dict[str, dict[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    mm, mv, m = w[f"{i}.moving_mean"], w[f"{i}.moving_variance"], layer.momentum
    if not training:
        for fw in states:
            states[fw].update({f"state/{i}.moving_mean": mm, f"state/{i}.moving_variance": mv})
        return mm, mv
    n = h.size // h.shape[-1]
    bm, bv = mean.reshape(-1), var.reshape(-1)
    states["keras"].update({f"state/{i}.moving_mean": m * mm + (1 - m) * bm,
                            f"state/{i}.moving_variance": m * mv + (1 - m) * bv})
    states["torch"].update({f"state/{i}.moving_mean": m * mm + (1 - m) * bm,
                            f"state/{i}.moving_variance": m * mv + (1 - m) * bv * n / max(n - 1, 1)})
    return mean, var


def _softmax_target(logits: np.ndarray, labels: np.ndarray, loss: Loss) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """softmax(logits), the (smoothed) target distribution, and which examples count."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    classes = logits.shape[-1]
    target = np.eye(classes)[labels]
    if loss.kind == "categorical":
        target = target * (1.0 - loss.label_smoothing) + loss.label_smoothing / classes
    keep = labels != loss.ignore_class if loss.ignore_class is not None else np.ones(len(labels), bool)
    return p, target, keep


def reference_loss(logits: np.ndarray, labels: np.ndarray, loss: Loss) -> float:
    """Mean softmax cross-entropy over the examples not ignored; label smoothing as both
    frameworks document it: target = (1 - s) * one_hot + s / classes."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    _, target, keep = _softmax_target(logits, labels, loss)
    per_example = -(target * logp).sum(axis=-1)
    return float(per_example[keep].sum() / keep.sum())
