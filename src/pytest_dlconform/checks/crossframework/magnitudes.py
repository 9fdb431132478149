"""Gradient magnitudes: the scale each gradient tensor's rounding error is measured against.

Backpropagation computes every gradient entry as sums of products (over the batch, the
positions of a convolution, the units of the next layer). Rounding in a sum is bounded by
its terms, not by its result (Higham: ``|fl(sum) - sum| <= gamma_n sum |terms|``), and a
gradient whose terms cancel (a bias before saturated logits, a batch-normalised layer's
bias) is small while its error is not. :func:`gradient_magnitudes` runs the backward pass
of the float64 reference on magnitudes, as :func:`checks.roundtrip.forward_magnitude`
does forwards: it starts from ``(p + t) / count`` (the terms of softmax minus target) and
replaces every step by the sum of the absolute values of its terms:

- dense / conv: ``Dz = D |f'(z)|``; kernel ``|h|^T Dz`` (conv: over windows and the batch);
  bias ``sum Dz``; input ``Dz |K|^T`` (conv: the transposed convolution with ``|K|``);
- layer / batch normalisation with ``G = D |gamma|``: input
  ``(G + mean G + |h_hat| mean(G |h_hat|)) / sigma`` (means over the normalised axes; in
  inference batch normalisation only ``G / sqrt(moving_variance + eps)``); gamma
  ``sum D |h_hat|``; beta ``sum D``.

Each entry bounds the sum of absolute terms of the corresponding gradient entry, so its
computed value errs by at most the backward tolerance (ops, longest sum, conditioning:
:func:`tolerances.tolerances`) times it: the per-tensor bound of :func:`tolerances.compare`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .architectures import Case, Layer
from .reference import _act, _conv, _softmax_target, rounded


def gradient_magnitudes(case: Case, dtype: str) -> dict[str, np.ndarray]:
    """``grad/x`` and ``grad/<i>.<weight>`` -> the sum of absolute terms of each entry."""
    w = rounded(case.weights(), dtype)
    x, labels = case.inputs()
    h = np.asarray(x, dtype=dtype).astype(np.float64)
    tape = []
    for i, layer in enumerate(case.arch.layers):
        h_in = h
        h, saved = _forward(i, layer, h, w, case.training)
        tape.append((i, layer, h_in, saved))
    p, target, keep = _softmax_target(h, labels, case.arch.loss)
    d = (p + target) * keep[:, None] / keep.sum()
    out: dict[str, np.ndarray] = {}
    for i, layer, h_in, saved in reversed(tape):
        d = _backward(i, layer, h_in, saved, d, w, case.training, out)
    out["grad/x"] = d
    return out


def _forward(i: int, layer: Layer, h: np.ndarray, w: Mapping[str, np.ndarray],
             training: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    if layer.kind == "flatten":
        return h.reshape(h.shape[0], -1), {}
    if layer.kind in ("dense", "conv"):
        z = h @ w[f"{i}.kernel"] if layer.kind == "dense" else _conv(h, w[f"{i}.kernel"], layer)
        if layer.use_bias:
            z = z + w[f"{i}.bias"]
        return _act(layer.activation, z), {"z": z}
    axes = tuple(range(h.ndim - 1)) if layer.kind == "batchnorm" else (h.ndim - 1,)
    if layer.kind == "batchnorm" and not training:
        mean, var = w[f"{i}.moving_mean"], w[f"{i}.moving_variance"]
    else:
        mean, var = h.mean(axis=axes, keepdims=True), h.var(axis=axes, keepdims=True)
    sigma = np.sqrt(var + layer.epsilon)
    h_hat = (h - mean) / sigma
    return h_hat * w[f"{i}.gamma"] + w[f"{i}.beta"], {"h_hat": h_hat, "sigma": sigma}


def _slope(name: str, z: np.ndarray) -> np.ndarray:
    """|f'(z)| of each activation."""
    if name == "relu":
        return (z > 0).astype(np.float64)
    if name == "tanh":
        return 1.0 - np.tanh(z) ** 2
    if name == "sigmoid":
        s = _act("sigmoid", z)
        return s * (1.0 - s)
    if name == "gelu":  # Phi(z) + z phi(z)
        phi = 0.5 * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(z / math.sqrt(2.0)))
        return np.abs(phi + z * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi))
    return np.ones_like(z)


def _backward(i: int, layer: Layer, h: np.ndarray, saved: Mapping[str, np.ndarray], d: np.ndarray,
              w: Mapping[str, np.ndarray], training: bool, out: dict[str, np.ndarray]) -> np.ndarray:
    if layer.kind == "flatten":
        return d.reshape(h.shape)
    if layer.kind in ("dense", "conv"):
        dz = d * _slope(layer.activation, saved["z"])
        kernel = np.abs(w[f"{i}.kernel"])
        if layer.use_bias:
            out[f"grad/{i}.bias"] = dz.reshape(-1, dz.shape[-1]).sum(axis=0)
        if layer.kind == "dense":
            out[f"grad/{i}.kernel"] = np.abs(h).T @ dz
            return dz @ kernel.T
        out[f"grad/{i}.kernel"], d_in = _conv_backward(np.abs(h), dz, kernel, layer)
        return d_in
    h_hat, sigma = np.abs(saved["h_hat"]), saved["sigma"]
    axes = tuple(range(h.ndim - 1)) if layer.kind == "batchnorm" else (h.ndim - 1,)
    per_channel = tuple(range(d.ndim - 1))
    out[f"grad/{i}.gamma"] = (d * h_hat).sum(axis=per_channel)
    out[f"grad/{i}.beta"] = d.sum(axis=per_channel)
    g = d * np.abs(w[f"{i}.gamma"])
    if layer.kind == "batchnorm" and not training:
        return g / sigma
    return (g + g.mean(axis=axes, keepdims=True) + h_hat * (g * h_hat).mean(axis=axes, keepdims=True)) / sigma


def _conv_backward(h_abs: np.ndarray, dz: np.ndarray, kernel: np.ndarray, layer: Layer) -> tuple[np.ndarray, np.ndarray]:
    """Kernel and input magnitudes of a convolution (the padding, stride and dilation of reference._conv)."""
    span = layer.dilation * (layer.kernel - 1) + 1
    before = after = 0
    if layer.padding == "same":
        before, after = (span - 1) // 2, (span - 1) - (span - 1) // 2
    padded = np.pad(h_abs, ((0, 0), (before, after), (before, after), (0, 0)))
    d_pad = np.zeros_like(padded)
    d_kernel = np.zeros_like(kernel)
    rows, cols = dz.shape[1], dz.shape[2]
    s, dil = layer.stride, layer.dilation
    for a in range(layer.kernel):
        for b in range(layer.kernel):
            ra, cb = a * dil, b * dil
            region = (slice(None), slice(ra, ra + s * (rows - 1) + 1, s), slice(cb, cb + s * (cols - 1) + 1, s))
            d_kernel[a, b] = np.einsum("nhwc,nhwo->co", padded[region], dz)
            d_pad[region] += dz @ kernel[a, b].T
    d_in = d_pad[:, before:before + h_abs.shape[1], before:before + h_abs.shape[2]]
    return d_kernel, d_in
