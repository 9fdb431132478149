"""Numpy references of the torch.nn and keras.losses loss functions, each written from the formula
its docstring states (the suite test_losses.py cites which), in float64.

Every torch reference returns a :class:`Pointwise`: the unreduced loss (the ``reduction='none'``
output, shape as documented), the denominator the documented ``'mean'`` divides by (the element
count, the batch size, or the weighted count of non-ignored targets), and per element the
magnitude of the intermediates its value is computed from (the terms that cancel; the absolute
floor of the error model, docs/tolerances.md). :func:`reduce` applies a reduction to it.

Every keras reference returns the per-sample loss (the function form's output); :func:`keras_reduce`
applies a keras reduction with sample weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

LOG_CLAMP = -100.0  # BCELoss: "clamps its log function outputs to be greater than or equal to -100"


@dataclass(frozen=True)
class Pointwise:
    loss: np.ndarray  # the reduction='none' output
    denominator: float  # what reduction='mean' divides the sum by
    magnitude: np.ndarray  # per element, the size of the intermediates (>= |loss|)


def reduce(p: Pointwise, reduction: str, batch: int | None = None) -> tuple[np.ndarray, float]:
    """The documented reduction of ``p`` and the magnitude of its intermediates (for the floor)."""
    loss, mag = np.asarray(p.loss, dtype=np.float64), np.asarray(p.magnitude, dtype=np.float64)
    if reduction == "none":
        return loss, float(mag.max(initial=0.0))
    total, mag_total = float(loss.sum()), float(mag.sum())
    if reduction == "sum":
        return np.asarray(total), mag_total
    if reduction == "mean":
        return np.asarray(total / p.denominator), mag_total / p.denominator
    if reduction == "batchmean":  # KLDivLoss: "the output will be divided by batchsize"
        assert batch is not None
        return np.asarray(total / batch), mag_total / batch
    raise ValueError(f"unknown reduction {reduction!r}")


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


# ----------------------------------------------------------------- torch.nn


def elementwise(fn, x: np.ndarray, y: np.ndarray) -> Pointwise:
    loss = fn(x, y)
    return Pointwise(loss, float(loss.size), np.abs(x) + np.abs(y) + np.abs(loss))


def l1(x: np.ndarray, y: np.ndarray) -> Pointwise:
    """L1Loss: l_n = |x_n - y_n|."""
    return elementwise(lambda a, b: np.abs(a - b), x, y)


def mse(x: np.ndarray, y: np.ndarray) -> Pointwise:
    """MSELoss: l_n = (x_n - y_n)^2."""
    return elementwise(lambda a, b: (a - b) ** 2, x, y)


def huber(x: np.ndarray, y: np.ndarray, delta: float = 1.0) -> Pointwise:
    """HuberLoss: 0.5 (x-y)^2 if |x-y| < delta, else delta (|x-y| - 0.5 delta)."""
    def f(a, b):
        d = np.abs(a - b)
        return np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))
    return elementwise(f, x, y)


def smooth_l1(x: np.ndarray, y: np.ndarray, beta: float = 1.0) -> Pointwise:
    """SmoothL1Loss: 0.5 (x-y)^2 / beta if |x-y| < beta, else |x-y| - 0.5 beta (beta = 0: L1Loss)."""
    def f(a, b):
        d = np.abs(a - b)
        if beta == 0:
            return d
        return np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return elementwise(f, x, y)


def soft_margin(x: np.ndarray, y: np.ndarray) -> Pointwise:
    """SoftMarginLoss: log(1 + exp(-y x)), the mean over x.nelement()."""
    return elementwise(lambda a, b: np.logaddexp(0.0, -b * a), x, y)


def cross_entropy(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None, ignore_index: int = -100,
                  label_smoothing: float = 0.0) -> Pointwise:
    """CrossEntropyLoss, x of shape (C), (N, C) or (N, C, d1, ...): class indices (integer target) or
    probabilities (float target, same shape as x). Label smoothing mixes the target with the uniform
    distribution: q = (1 - eps) onehot(y) + eps / C (or (1 - eps) y + eps / C); the loss of an element
    is -sum_c w_c q_c log softmax(x)_c, zero for an ignored target; 'mean' divides by
    sum_n w_{y_n} 1{y_n != ignore_index} for class indices and by N (the elements) for probabilities."""
    unbatched = x.ndim == 1
    xb = x[None] if unbatched else x
    c = xb.shape[1]
    w = np.ones(c) if weight is None else np.asarray(weight, dtype=np.float64)
    wshape = (1, c) + (1,) * (xb.ndim - 2)
    logp = log_softmax(xb, 1)
    if np.issubdtype(target.dtype, np.integer):
        t = target[None] if unbatched else target
        keep = t != ignore_index
        safe = np.where(keep, t, 0)
        onehot = np.moveaxis(np.eye(c)[safe], -1, 1)
        q = (1 - label_smoothing) * onehot + label_smoothing / c
        wy = w[safe] * keep
        denom = float(wy.sum())
    else:
        t = target[None] if unbatched else target
        keep = np.ones(t.shape[:1] + t.shape[2:], dtype=bool)
        q = (1 - label_smoothing) * t + label_smoothing / c
        denom = float(keep.size)
    terms = -w.reshape(wshape) * q * logp
    loss = np.where(keep, terms.sum(axis=1), 0.0)
    mag = np.where(keep, (np.abs(w.reshape(wshape) * q) * (np.abs(xb) + np.abs(xb - logp))).sum(axis=1), 0.0)
    if unbatched:
        loss, mag = loss[0], mag[0]
    return Pointwise(loss, denom, mag)


def cross_entropy_grad(x: np.ndarray, target: np.ndarray, reduction: str, weight: np.ndarray | None = None,
                       ignore_index: int = -100, label_smoothing: float = 0.0) -> np.ndarray:
    """d(sum of the reduced CrossEntropyLoss)/dx, analytic: per element,
    coef * (softmax(x) * sum_c w_c q_c - w q), coef = 1{kept} / denominator ('mean') or 1{kept}."""
    p = cross_entropy(x, target, weight, ignore_index, label_smoothing)
    unbatched = x.ndim == 1
    xb = x[None] if unbatched else x
    c = xb.shape[1]
    w = np.ones(c) if weight is None else np.asarray(weight, dtype=np.float64)
    wshape = (1, c) + (1,) * (xb.ndim - 2)
    t = target[None] if unbatched else target
    if np.issubdtype(target.dtype, np.integer):
        keep = t != ignore_index
        q = (1 - label_smoothing) * np.moveaxis(np.eye(c)[np.where(keep, t, 0)], -1, 1) + label_smoothing / c
    else:
        keep = np.ones(t.shape[:1] + t.shape[2:], dtype=bool)
        q = (1 - label_smoothing) * t + label_smoothing / c
    soft = np.exp(log_softmax(xb, 1))
    wq = w.reshape(wshape) * q
    g = soft * wq.sum(axis=1, keepdims=True) - wq
    g = g * np.expand_dims(keep, 1)
    if reduction == "mean":
        g = g / p.denominator
    return g[0] if unbatched else g


def nll(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None, ignore_index: int = -100) -> Pointwise:
    """NLLLoss: l_n = -w_{y_n} x_{n, y_n} 1{y_n != ignore_index}; 'mean' divides by sum_n w_{y_n} 1{...}."""
    unbatched = x.ndim == 1
    xb, t = (x[None], target[None]) if unbatched else (x, target)
    c = xb.shape[1]
    w = np.ones(c) if weight is None else np.asarray(weight, dtype=np.float64)
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    picked = np.take_along_axis(xb, np.expand_dims(safe, 1), axis=1)[:, 0]
    wy = w[safe] * keep
    loss = -wy * picked
    if unbatched:
        loss = loss[0]
    return Pointwise(loss, float(wy.sum()), np.abs(loss))


def bce(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None) -> Pointwise:
    """BCELoss: l_n = -w_n (y_n log x_n + (1 - y_n) log(1 - x_n)), each log clamped to >= -100."""
    with np.errstate(divide="ignore"):
        lx, l1x = np.maximum(np.log(x), LOG_CLAMP), np.maximum(np.log1p(-x), LOG_CLAMP)
    w = 1.0 if weight is None else weight
    loss = -w * (y * lx + (1 - y) * l1x)
    mag = np.abs(w) * (np.abs(y * lx) + np.abs((1 - y) * l1x))
    return Pointwise(loss * np.ones_like(x), float(x.size), mag * np.ones_like(x))


def bce_with_logits(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None,
                    pos_weight: np.ndarray | None = None) -> Pointwise:
    """BCEWithLogitsLoss: l_{n,c} = -w_{n,c} (p_c y_{n,c} log sigma(x_{n,c}) + (1 - y_{n,c}) log(1 - sigma(x_{n,c})))."""
    w = 1.0 if weight is None else weight
    pc = 1.0 if pos_weight is None else pos_weight
    a, b = pc * y * _log_sigmoid(x), (1 - y) * _log_sigmoid(-x)
    loss = -w * (a + b)
    return Pointwise(loss, float(x.size), np.abs(w) * (np.abs(a) + np.abs(b) + np.abs(x)))


def bce_with_logits_grad(x: np.ndarray, y: np.ndarray, reduction: str, weight: np.ndarray | None = None,
                         pos_weight: np.ndarray | None = None) -> np.ndarray:
    """d(sum of the reduced loss)/dx = w ((p_c y + 1 - y) sigma(x) - p_c y) (/ numel for 'mean')."""
    w = 1.0 if weight is None else weight
    pc = 1.0 if pos_weight is None else pos_weight
    s = 1.0 / (1.0 + np.exp(-x))
    g = w * ((pc * y + 1 - y) * s - pc * y)
    return g / x.size if reduction == "mean" else g


def kl_div(x: np.ndarray, y: np.ndarray, log_target: bool = False) -> Pointwise:
    """KLDivLoss: L = y (log y - x) (0 where y = 0), or with log_target exp(y) (y - x)."""
    if log_target:
        loss = np.exp(y) * (y - x)
        mag = np.exp(y) * (np.abs(y) + np.abs(x))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            ylogy = np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0)), 0.0)
        loss = ylogy - y * x
        mag = np.abs(ylogy) + np.abs(y * x)
    return Pointwise(loss, float(x.size), mag)


def poisson_nll(x: np.ndarray, y: np.ndarray, log_input: bool = True, full: bool = False, eps: float = 1e-8) -> Pointwise:
    """PoissonNLLLoss: exp(x) - y x (log_input), x - y log(x + eps) otherwise; full adds the Stirling
    term y log y - y + 0.5 log(2 pi y) where y > 1."""
    if log_input:
        a, b = np.exp(x), y * x
    else:
        a, b = x, y * np.log(x + eps)
    loss = a - b
    mag = np.abs(a) + np.abs(b)
    if full:
        safe = np.where(y > 1, y, 2.0)
        st = np.where(y > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * math.pi * safe), 0.0)
        loss = loss + st
        mag = mag + np.where(y > 1, safe * np.abs(np.log(safe)) + safe + np.abs(0.5 * np.log(2 * math.pi * safe)), 0.0)
    return Pointwise(loss, float(x.size), mag)


def gaussian_nll(x: np.ndarray, y: np.ndarray, var: np.ndarray | float, full: bool = False, eps: float = 1e-6) -> Pointwise:
    """GaussianNLLLoss: 0.5 (log max(var, eps) + (x - y)^2 / max(var, eps)) (+ 0.5 log(2 pi) if full);
    var of x's shape, with a last dimension 1, one dimension fewer (broadcast over the last) or a scalar."""
    v = np.asarray(var, dtype=np.float64)
    if v.ndim == x.ndim - 1 and v.ndim > 0:
        v = v[..., None]
    v = np.maximum(v, eps) * np.ones_like(x)
    a, b = np.log(v), (x - y) ** 2 / v
    loss = 0.5 * (a + b) + (0.5 * math.log(2 * math.pi) if full else 0.0)
    return Pointwise(loss, float(x.size), 0.5 * (np.abs(a) + b) + 1.0 + (np.abs(x) + np.abs(y)) ** 2 / v)


def multilabel_soft_margin(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None) -> Pointwise:
    """MultiLabelSoftMarginLoss: l = -1/C sum_i w_i (y_i log sigma(x_i) + (1 - y_i) log sigma(-x_i)), per sample."""
    w = 1.0 if weight is None else weight
    a, b = y * _log_sigmoid(x), (1 - y) * _log_sigmoid(-x)
    c = x.shape[-1]
    loss = -(w * (a + b)).sum(axis=-1) / c
    mag = (np.abs(w) * (np.abs(a) + np.abs(b) + np.abs(x))).sum(axis=-1) / c
    return Pointwise(loss, float(loss.size), mag)


def multilabel_margin(x: np.ndarray, y: np.ndarray) -> Pointwise:
    """MultiLabelMarginLoss: sum_{i,j} max(0, 1 - (x[y[j]] - x[i])) / C over the targets j (up to the
    first -1) and the non-targets i, per sample."""
    xb, yb = (x[None], y[None]) if x.ndim == 1 else (x, y)
    c = xb.shape[-1]
    out, mag = [], []
    for row, tg in zip(xb, yb):
        targets = []
        for v in tg:
            if v < 0:
                break
            targets.append(int(v))
        others = [i for i in range(c) if i not in targets]
        terms = [max(0.0, 1 - (row[j] - row[i])) for j in targets for i in others]
        out.append(sum(terms) / c)
        mag.append(sum(1 + abs(row[j]) + abs(row[i]) for j in targets for i in others) / c)
    loss = np.asarray(out)
    m = np.asarray(mag)
    if x.ndim == 1:
        loss, m = loss[0], m[0]
    return Pointwise(loss, float(np.size(loss)), m)


def multi_margin(x: np.ndarray, y: np.ndarray, p: int = 1, margin: float = 1.0,
                 weight: np.ndarray | None = None) -> Pointwise:
    """MultiMarginLoss: sum_{i != y} w[y] max(0, margin - x[y] + x[i])^p / C, per sample."""
    xb, yb = (x[None], np.atleast_1d(y)) if x.ndim == 1 else (x, y)
    c = xb.shape[-1]
    w = np.ones(c) if weight is None else weight
    xy = np.take_along_axis(xb, yb[:, None], axis=1)
    h = np.maximum(0.0, margin - xy + xb) ** p
    h[np.arange(len(yb)), yb] = 0.0
    loss = w[yb] * h.sum(axis=1) / c
    mag = w[yb] * ((margin + np.abs(xy) + np.abs(xb)) ** p).sum(axis=1) / c
    if x.ndim == 1:
        loss, mag = loss[0], mag[0]
    return Pointwise(loss, float(np.size(loss)), mag)


def margin_ranking(x1: np.ndarray, x2: np.ndarray, y: np.ndarray, margin: float = 0.0) -> Pointwise:
    """MarginRankingLoss: max(0, -y (x1 - x2) + margin)."""
    loss = np.maximum(0.0, -y * (x1 - x2) + margin)
    return Pointwise(loss, float(loss.size), np.abs(x1) + np.abs(x2) + abs(margin))


def hinge_embedding(x: np.ndarray, y: np.ndarray, margin: float = 1.0) -> Pointwise:
    """HingeEmbeddingLoss: x where y = 1, max(0, margin - x) where y = -1."""
    loss = np.where(y == 1, x, np.maximum(0.0, margin - x))
    return Pointwise(loss, float(loss.size), np.abs(x) + abs(margin))


def cosine_embedding(x1: np.ndarray, x2: np.ndarray, y: np.ndarray, margin: float = 0.0) -> Pointwise:
    """CosineEmbeddingLoss: 1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1."""
    cos = (x1 * x2).sum(-1) / (np.linalg.norm(x1, axis=-1) * np.linalg.norm(x2, axis=-1))
    loss = np.where(y == 1, 1 - cos, np.maximum(0.0, cos - margin))
    return Pointwise(loss, float(loss.size), np.ones_like(loss) * (2 + abs(margin)))


def pairwise_distance(a: np.ndarray, b: np.ndarray, p: float = 2.0, eps: float = 1e-6) -> np.ndarray:
    """PairwiseDistance: ||a - b + eps||_p over the last dimension."""
    return (np.abs(a - b + eps) ** p).sum(-1) ** (1.0 / p)


def triplet_margin(a: np.ndarray, pos: np.ndarray, neg: np.ndarray, margin: float = 1.0, p: float = 2.0,
                   eps: float = 1e-6, swap: bool = False, distance=None) -> Pointwise:
    """TripletMarginLoss(WithDistance): max(d(a, p) - d(a, n) + margin, 0), d(a, n) replaced by
    min(d(a, n), d(p, n)) with swap; d = pairwise_distance(p, eps) unless ``distance`` is given."""
    d = distance if distance is not None else (lambda u, v: pairwise_distance(u, v, p, eps))
    dap, dan = d(a, pos), d(a, neg)
    if swap:
        dan = np.minimum(dan, d(pos, neg))
    loss = np.maximum(dap - dan + margin, 0.0)
    return Pointwise(loss, float(loss.size), dap + dan + abs(margin) + 3 * (np.abs(a) + np.abs(pos) + np.abs(neg)).sum(-1))


def cosine_distance(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return 1 - (u * v).sum(-1) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1))


def ctc(log_probs: np.ndarray, targets: list[list[int]], input_lengths: list[int], blank: int = 0,
        zero_infinity: bool = False) -> Pointwise:
    """CTCLoss: -log of the sum over all alignments of the target (blanks between and around the
    labels, repeats collapsed) of the product of the per-frame probabilities (Graves et al.), by the
    forward recursion in log space; log_probs (T, N, C). 'mean' divides each loss by its target
    length, then averages over the batch (the denominator returned is N; the losses of 'mean' are
    returned already divided, see :func:`ctc_mean`). zero_infinity: infinite losses become 0."""
    out, mag = [], []
    for n, tg in enumerate(targets):
        ext = [blank]
        for lab in tg:
            ext += [lab, blank]
        s_len, t_len = len(ext), input_lengths[n]
        alpha = np.full(s_len, -np.inf)
        alpha[0] = log_probs[0, n, ext[0]]
        if s_len > 1:
            alpha[1] = log_probs[0, n, ext[1]]
        for t in range(1, t_len):
            new = np.full(s_len, -np.inf)
            for s in range(s_len):
                cands = [alpha[s]]
                if s >= 1:
                    cands.append(alpha[s - 1])
                if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                    cands.append(alpha[s - 2])
                new[s] = np.logaddexp.reduce(cands) + log_probs[t, n, ext[s]]
            alpha = new
        ll = np.logaddexp(alpha[-1], alpha[-2]) if s_len > 1 else alpha[-1]
        loss = -ll
        if zero_infinity and not np.isfinite(loss):
            loss = 0.0
        out.append(loss)
        mag.append(float(np.abs(log_probs[:t_len, n]).max() * t_len) if np.isfinite(loss) else 0.0)
    return Pointwise(np.asarray(out), float(len(out)), np.asarray(mag))


def ctc_mean(p: Pointwise, target_lengths: list[int]) -> Pointwise:
    """CTCLoss 'mean': "the output losses will be divided by the target lengths and then the mean over
    the batch is taken"."""
    tl = np.asarray(target_lengths, dtype=np.float64)
    return Pointwise(p.loss / tl, p.denominator, p.magnitude / tl)


# ----------------------------------------------------------------- keras.losses


KERAS_EPSILON = 1e-7  # keras.config.epsilon()


def keras_reduce(per_sample: np.ndarray, reduction: str | None, sample_weight: np.ndarray | float | None,
                 mask: np.ndarray | None = None) -> np.ndarray:
    """keras.losses.Loss: the loss times the sample weight (broadcast over the loss's trailing
    dimensions), then "sum" sums, "sum_over_batch_size" and "mean" "sum the loss and divide by the
    sample size", "mean_with_sample_weight" "sums the loss and divides by the sum of the sample
    weights" (as given); None/"none": no aggregation. ``mask``: entries ignored (ignore_class)
    weigh 0 and are not counted in the sample size or the weights' sum."""
    loss = np.asarray(per_sample, dtype=np.float64)
    if sample_weight is None:
        sw = np.ones_like(loss)
    else:
        w = np.asarray(sample_weight, dtype=np.float64)
        sw = np.broadcast_to(w.reshape(w.shape + (1,) * (loss.ndim - w.ndim)), loss.shape)
    m = np.ones_like(loss) if mask is None else np.asarray(mask, dtype=np.float64)
    weighted = loss * sw * m
    if reduction in (None, "none") or loss.ndim == 0:
        return weighted
    if reduction == "sum":
        return np.asarray(weighted.sum())
    if reduction in ("sum_over_batch_size", "mean"):
        return np.asarray(weighted.sum() / m.sum())
    if reduction == "mean_with_sample_weight":
        if sample_weight is None:
            return np.asarray(weighted.sum() / m.sum())
        if mask is None:
            return np.asarray(weighted.sum() / np.sum(sample_weight))
        return np.asarray(weighted.sum() / (sw * m).sum())
    raise ValueError(f"unknown reduction {reduction!r}")


def _clip(p: np.ndarray) -> np.ndarray:
    return np.clip(p, KERAS_EPSILON, 1 - KERAS_EPSILON)


def k_mse(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.mean((y - p) ** 2, axis=-1)


def k_mae(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.mean(np.abs(y - p), axis=-1)


def k_mape(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """100 * mean(|(y_true - y_pred) / max(|y_true|, epsilon)|)."""
    return 100.0 * np.mean(np.abs((y - p) / np.maximum(np.abs(y), KERAS_EPSILON)), axis=-1)


def k_msle(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """mean(square(log(y_true + 1) - log(y_pred + 1))), each argument at least epsilon."""
    return np.mean((np.log(np.maximum(y, KERAS_EPSILON) + 1) - np.log(np.maximum(p, KERAS_EPSILON) + 1)) ** 2, axis=-1)


def k_cosine_similarity(y: np.ndarray, p: np.ndarray, axis: int = -1) -> np.ndarray:
    """-sum(l2_norm(y_true) * l2_norm(y_pred), axis)."""
    return -np.sum(y / np.linalg.norm(y, axis=axis, keepdims=True) * p / np.linalg.norm(p, axis=axis, keepdims=True),
                   axis=axis)


def k_huber(y: np.ndarray, p: np.ndarray, delta: float = 1.0) -> np.ndarray:
    """mean of 0.5 x^2 if |x| <= delta else delta |x| - 0.5 delta^2, x = y_true - y_pred."""
    d = np.abs(y - p)
    return np.mean(np.where(d <= delta, 0.5 * d * d, delta * d - 0.5 * delta * delta), axis=-1)


def k_log_cosh(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """mean(log(cosh(y_pred - y_true)))."""
    return np.mean(np.log(np.cosh(p - y)), axis=-1)


def _pm1(y: np.ndarray) -> np.ndarray:
    """Hinge losses: "If binary (0 or 1) labels are provided they will be converted to -1 or 1"."""
    return np.where(y == 0, -1.0, y) if np.all((y == 0) | (y == 1)) else y


def k_hinge(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.mean(np.maximum(1 - _pm1(y) * p, 0.0), axis=-1)


def k_squared_hinge(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.mean(np.maximum(1 - _pm1(y) * p, 0.0) ** 2, axis=-1)


def k_categorical_hinge(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """max(neg - pos + 1, 0), pos = sum(y_true * y_pred), neg = max((1 - y_true) * y_pred)."""
    pos = np.sum(y * p, axis=-1)
    neg = np.max((1 - y) * p, axis=-1)
    return np.maximum(neg - pos + 1, 0.0)


def k_kl_divergence(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """sum(y_true * log(y_true / y_pred)), both clipped to [epsilon, 1]."""
    yc, pc = np.clip(y, KERAS_EPSILON, 1), np.clip(p, KERAS_EPSILON, 1)
    return np.sum(yc * np.log(yc / pc), axis=-1)


def k_poisson(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """mean(y_pred - y_true * log(y_pred + epsilon))."""
    return np.mean(p - y * np.log(p + KERAS_EPSILON), axis=-1)


def _probs(p: np.ndarray, from_logits: bool, axis: int) -> np.ndarray:
    if from_logits:
        return np.exp(log_softmax(p, axis))
    return p / p.sum(axis=axis, keepdims=True)


def k_categorical_crossentropy(y: np.ndarray, p: np.ndarray, from_logits: bool = False, label_smoothing: float = 0.0,
                               axis: int = -1) -> np.ndarray:
    """-sum(y' log p) over axis, y' = y (1 - ls) + ls / C; p = softmax(logits), or y_pred scaled to sum
    to 1 and clipped to [epsilon, 1 - epsilon]."""
    c = y.shape[axis]
    ys = y * (1 - label_smoothing) + label_smoothing / c
    if from_logits:
        logp = log_softmax(p, axis)
    else:
        logp = np.log(_clip(p / p.sum(axis=axis, keepdims=True)))
    return -np.sum(ys * logp, axis=axis)


def k_sparse_categorical_crossentropy(y: np.ndarray, p: np.ndarray, from_logits: bool = False,
                                      ignore_class: int | None = None, axis: int = -1) -> np.ndarray:
    """-log p[y]; entries whose label is ignore_class contribute 0 (documented: "ignored")."""
    pm = np.moveaxis(p, axis, -1)
    logp = log_softmax(pm, -1) if from_logits else np.log(_clip(pm / pm.sum(-1, keepdims=True)))
    yi = y.astype(np.int64)
    keep = np.ones(yi.shape, bool) if ignore_class is None else yi != ignore_class
    safe = np.where(keep, yi, 0)
    loss = -np.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    return np.where(keep, loss, 0.0)


def k_binary_crossentropy(y: np.ndarray, p: np.ndarray, from_logits: bool = False, label_smoothing: float = 0.0,
                          axis: int = -1) -> np.ndarray:
    """mean over axis of -(y' log p + (1 - y') log(1 - p)), y' = y (1 - ls) + 0.5 ls; p = sigmoid(logits)
    or y_pred clipped to [epsilon, 1 - epsilon]."""
    ys = y * (1 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        lp, l1p = _log_sigmoid(p), _log_sigmoid(-p)
    else:
        pc = _clip(p)
        lp, l1p = np.log(pc), np.log(1 - pc)
    return np.mean(-(ys * lp + (1 - ys) * l1p), axis=axis)


def k_binary_focal_crossentropy(y: np.ndarray, p: np.ndarray, apply_class_balancing: bool = False, alpha: float = 0.25,
                                gamma: float = 2.0, from_logits: bool = False, label_smoothing: float = 0.0,
                                axis: int = -1) -> np.ndarray:
    """focal = (1 - p_t)^gamma * bce(y', p), p_t = y' p + (1 - y') (1 - p) with the smoothed labels y'
    ("smooth the labels by squeezing them towards 0.5"); with apply_class_balancing, times
    alpha y' + (1 - alpha)(1 - y') (alpha for class 1, 1 - alpha for class 0); the mean over axis."""
    ys = y * (1 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        prob = 1 / (1 + np.exp(-p))
        lp, l1p = _log_sigmoid(p), _log_sigmoid(-p)
    else:
        prob = p
        pc = _clip(p)
        lp, l1p = np.log(pc), np.log(1 - pc)
    bce_ = -(ys * lp + (1 - ys) * l1p)
    pt = ys * prob + (1 - ys) * (1 - prob)
    focal = (1 - pt) ** gamma * bce_
    if apply_class_balancing:
        focal = (alpha * ys + (1 - alpha) * (1 - ys)) * focal
    return np.mean(focal, axis=axis)


def k_categorical_focal_crossentropy(y: np.ndarray, p: np.ndarray, alpha: float = 0.25, gamma: float = 2.0,
                                     from_logits: bool = False, label_smoothing: float = 0.0,
                                     axis: int = -1) -> np.ndarray:
    """sum over axis of -alpha (1 - p)^gamma y' log p, p = softmax or y_pred scaled to sum 1 and clipped."""
    c = y.shape[axis]
    ys = y * (1 - label_smoothing) + label_smoothing / c
    prob = _clip(_probs(p, from_logits, axis))
    return np.sum(-alpha * (1 - prob) ** gamma * ys * np.log(prob), axis=axis)


def k_generalized_cross_entropy(y: np.ndarray, p: np.ndarray, q: float = 0.5) -> np.ndarray:
    """CategoricalGeneralizedCrossEntropy: (1 - p_y^q) / q, y integer labels, p probabilities."""
    py = np.take_along_axis(p, y.astype(np.int64)[..., None], axis=-1)[..., 0]
    return (1 - np.clip(py, KERAS_EPSILON, 1.0) ** q) / q


def k_dice(y: np.ndarray, p: np.ndarray, axis: tuple[int, ...] | None = None) -> np.ndarray:
    """1 - 2 sum(y p) / (sum(y) + sum(p)) over axis (every axis when None)."""
    return 1 - 2 * np.sum(y * p, axis=axis) / (np.sum(y, axis=axis) + np.sum(p, axis=axis))


def k_tversky(y: np.ndarray, p: np.ndarray, alpha: float = 0.5, beta: float = 0.5,
              axis: tuple[int, ...] | None = None) -> np.ndarray:
    """1 - TP / (TP + alpha FP + beta FN), TP = sum(y p), FP = sum((1 - y) p), FN = sum(y (1 - p))."""
    tp = np.sum(y * p, axis=axis)
    fp = np.sum((1 - y) * p, axis=axis)
    fn = np.sum(y * (1 - p), axis=axis)
    return 1 - tp / (tp + alpha * fp + beta * fn)


def k_ctc(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """keras.losses.ctc: y_true (batch, max_length) integer labels, 0 the blank/mask index (padding);
    y_pred (batch, time, classes) logits "not normalized via softmax": the CTC negative log-likelihood
    of the non-zero labels over every frame (:func:`ctc` with blank 0)."""
    lp = np.transpose(log_softmax(p, -1), (1, 0, 2))
    targets = [[int(v) for v in row if v != 0] for row in y]
    return ctc(lp, targets, [p.shape[1]] * p.shape[0], blank=0).loss


# ----------------------------------------------------------------- elementwise derivatives


def elementwise_grad(name: str, x: np.ndarray, y: np.ndarray, **opt) -> tuple[np.ndarray, np.ndarray]:
    """d l_n / d x_n of the documented elementwise formula, and the magnitude of its terms.

    MSELoss 2 (x - y); HuberLoss x - y inside delta, delta sign(x - y) outside; SmoothL1Loss
    (x - y) / beta inside beta, sign(x - y) outside; PoissonNLLLoss exp(x) - y (log_input) or
    1 - y / (x + eps); KLDivLoss -y (or -exp(y) with log_target)."""
    d = x - y
    if name == "MSELoss":
        return 2 * d, 2 * (np.abs(x) + np.abs(y))
    if name == "HuberLoss":
        delta = opt["delta"]
        return np.where(np.abs(d) < delta, d, delta * np.sign(d)), np.abs(x) + np.abs(y) + delta
    if name == "SmoothL1Loss":
        beta = opt["beta"]
        if beta == 0:
            return np.sign(d), np.ones_like(d)
        return np.where(np.abs(d) < beta, d / beta, np.sign(d)), (np.abs(x) + np.abs(y)) / beta + 1
    if name == "PoissonNLLLoss":
        if opt["log_input"]:
            return np.exp(x) - y, np.exp(x) + np.abs(y)
        return 1 - y / (x + opt["eps"]), 1 + np.abs(y / (x + opt["eps"]))
    if name == "KLDivLoss":
        g = -np.exp(y) if opt["log_target"] else -y
        return g * np.ones_like(x), np.abs(g) * np.ones_like(x)
    raise KeyError(name)


def gaussian_nll_grads(x: np.ndarray, y: np.ndarray, var: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """GaussianNLLLoss, var of x's shape: d/dx = (x - y) / v and d/dvar = 0.5 (1 / v - (x - y)^2 / v^2),
    v = max(var, eps). "The clamping of var is ignored with respect to autograd, and so the gradients are
    unaffected by it": the var gradient passes the clamp as if it were the identity."""
    v = np.maximum(var, eps)
    d = x - y
    return d / v, 0.5 * (1 / v - d * d / (v * v))


# ----------------------------------------------------------------- keras.losses.Circle


def k_circle(y: np.ndarray, p: np.ndarray, gamma: float = 80.0, margin: float = 0.4, remove_diagonal: bool = True,
             ref_labels: np.ndarray | None = None, ref_embeddings: np.ndarray | None = None) -> np.ndarray:
    """keras.losses.circle / Circle, by the paper its docstring cites (Sun et al. 2020, eq. 6 with
    the recommended O_p = 1 + m, O_n = -m, Delta_p = 1 - m, Delta_n = m): for each anchor i, with
    s the cosine similarities s_ij = <p_i, r_j> of the L2-normalised embeddings, positives the
    references of the same label (without the anchor itself when remove_diagonal) and negatives
    the others, alpha_p = [1 + m - s_p]_+, alpha_n = [s_n + m]_+,
    loss_i = log(1 + sum_n exp(gamma alpha_n (s_n - m)) sum_p exp(-gamma alpha_p (s_p - 1 + m))).
    ``ref_labels`` / ``ref_embeddings`` default to the batch's own."""
    r = p if ref_embeddings is None else ref_embeddings
    rl = y if ref_labels is None else ref_labels
    s = p @ r.T
    pos = y.astype(np.int64)[:, None] == rl.astype(np.int64)[None, :]
    neg = ~pos
    if remove_diagonal:
        pos = pos & ~np.eye(len(y), len(rl), dtype=bool)
    ap = np.maximum(1 + margin - s, 0.0)
    an = np.maximum(s + margin, 0.0)
    lp = np.where(pos, -gamma * ap * (s - (1 - margin)), -np.inf)
    ln = np.where(neg, gamma * an * (s - margin), -np.inf)
    out = []
    for i in range(len(y)):
        terms = np.concatenate([ln[i][neg[i]][:, None] + lp[i][pos[i]][None, :]]).ravel()
        out.append(np.logaddexp(0.0, _logsumexp(terms)) if terms.size else 0.0)
    return np.asarray(out)


def _logsumexp(x: np.ndarray) -> float:
    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x - m))))


def k_circle_scale(y: np.ndarray, p: np.ndarray, gamma: float = 80.0, margin: float = 0.4, **_: Any) -> float:
    """The magnitude of the exponents that cancel in k_circle: gamma (1 + 2 m)(2 + m) bounds
    |gamma alpha (s - Delta)| for |s| <= 1, twice (one positive and one negative exponent)."""
    return 2 * gamma * (1 + 2 * margin) * (2 + margin)
