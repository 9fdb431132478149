"""Numpy references of tf.nn functions, written from their TensorFlow 2.21 docstrings (claim
modules.tf.nn-functions; suite suites/modules/test_tf_nn.py).

Layouts are channels-last (``[batch, *spatial, channels]``) unless a function says otherwise; a
filter is ``[*kernel, in_channels, out_channels]`` (a transposed convolution's
``[*kernel, out_channels, in_channels]``). Padding as TensorFlow documents it
(https://www.tensorflow.org/api_docs/python/tf/nn#notes_on_padding_2): VALID, ``out =
ceil((in - (k - 1) d) / s)``, no padding; SAME, ``out = ceil(in / s)``, ``pad_total = max((out - 1) s +
(k - 1) d + 1 - in, 0)``, ``pad_before = pad_total // 2`` (the extra one after). Nothing here imports
a framework.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

FLOAT_MAX = float(np.finfo(np.float32).max)


def out_and_pad(n: int, k: int, s: int, d: int, padding: str) -> tuple[int, int, int]:
    """(output size, padding before, padding after) of one spatial dimension."""
    span = (k - 1) * d + 1
    if padding == "VALID":
        return max(-(-(n - span + 1) // s), 0), 0, 0
    out = -(-n // s)
    total = max((out - 1) * s + span - n, 0)
    return out, total // 2, total - total // 2


def windows(x: np.ndarray, ksize: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
            padding: str, fill: float) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The windows of channels-last ``x``: an array ``[*kernel, batch, *out, channels]`` (padded
    entries ``fill``) and the kernel offsets in the same order."""
    nsp = x.ndim - 2
    geo = [out_and_pad(x.shape[1 + i], ksize[i], strides[i], dilations[i], padding) for i in range(nsp)]
    pad = [(0, 0)] + [(b, a) for _, b, a in geo] + [(0, 0)]
    xp = np.pad(x.astype(np.float64) if x.dtype.kind != "f" else x, pad, constant_values=fill)
    offs = list(itertools.product(*[range(k) for k in ksize]))
    out = []
    for off in offs:
        sl = tuple(slice(off[i] * dilations[i], off[i] * dilations[i] + strides[i] * (geo[i][0] - 1) + 1, strides[i])
                   for i in range(nsp))
        out.append(xp[(slice(None), *sl, slice(None))])
    return np.stack(out).reshape(tuple(ksize) + out[0].shape), offs


def conv(x: np.ndarray, w: np.ndarray, strides: Sequence[int], padding: str,
         dilations: Sequence[int] | None = None) -> np.ndarray:
    """N-d cross-correlation (tf.nn.convolution): ``out[b, o, co] = sum_{k, ci} x[b, s o + d k - pad, ci] w[k, ci, co]``."""
    nsp = x.ndim - 2
    d = list(dilations or [1] * nsp)
    win, _offs = windows(x, w.shape[:nsp], strides, d, padding, 0.0)
    flat = win.reshape((-1, *win.shape[nsp:]))
    wf = w.reshape((-1, *w.shape[nsp:]))
    return np.einsum("k...i,kio->...o", flat, wf)


def conv_transpose(y: np.ndarray, w: np.ndarray, out_shape: Sequence[int], strides: Sequence[int], padding: str,
                   dilations: Sequence[int] | None = None) -> np.ndarray:
    """The adjoint of :func:`conv` (the gradient of conv with respect to its input), as tf.nn.conv_transpose
    documents it: ``w`` is ``[*kernel, out_channels, in_channels]``; ``out_shape`` the full output shape."""
    nsp = y.ndim - 2
    d = list(dilations or [1] * nsp)
    ks = w.shape[:nsp]
    pads = [out_and_pad(out_shape[1 + i], ks[i], strides[i], d[i], padding)[1] for i in range(nsp)]
    size = [max(pads[i] + out_shape[1 + i], (ks[i] - 1) * d[i] + strides[i] * (y.shape[1 + i] - 1) + 1) for i in range(nsp)]
    buf = np.zeros((y.shape[0], *size, w.shape[-2]))
    for off in itertools.product(*[range(k) for k in ks]):
        sl = tuple(slice(off[i] * d[i], off[i] * d[i] + strides[i] * (y.shape[1 + i] - 1) + 1, strides[i]) for i in range(nsp))
        buf[(slice(None), *sl, slice(None))] += y @ w[off].T
    crop = tuple(slice(pads[i], pads[i] + out_shape[1 + i]) for i in range(nsp))
    return buf[(slice(None), *crop, slice(None))]


def depthwise_filter(f: np.ndarray) -> np.ndarray:
    """A depthwise filter ``[kh, kw, C, M]`` as the ordinary filter ``[kh, kw, C, C*M]`` it documents:
    output channel ``c * M + m`` sees only input channel ``c`` through ``f[..., c, m]``."""
    kh, kw, c, m = f.shape
    full = np.zeros((kh, kw, c, c * m))
    for ci in range(c):
        full[:, :, ci, ci * m:(ci + 1) * m] = f[:, :, ci, :]
    return full


def pool(x: np.ndarray, ksize: Sequence[int], strides: Sequence[int], padding: str, kind: str) -> np.ndarray:
    """max pooling (padding never wins) or average pooling over the window's in-bounds entries only
    (TensorFlow's SAME average does not count the padding)."""
    nsp = x.ndim - 2
    ones = [1] * nsp
    if kind == "max":
        win, _ = windows(x, ksize, strides, ones, padding, -np.inf)
        return win.reshape((-1, *win.shape[nsp:])).max(axis=0)
    win, _ = windows(x, ksize, strides, ones, padding, 0.0)
    cnt, _ = windows(np.ones_like(x, dtype=np.float64), ksize, strides, ones, padding, 0.0)
    return win.reshape((-1, *win.shape[nsp:])).sum(axis=0) / cnt.reshape((-1, *cnt.shape[nsp:])).sum(axis=0)


def max_pool_argmax(x: np.ndarray, ksize: Sequence[int], strides: Sequence[int], padding: str,
                    include_batch_in_index: bool) -> tuple[np.ndarray, np.ndarray]:
    """Values and flattened argmax ``((b * height + y) * width + x) * channels + c`` (b only with
    include_batch_in_index) of 2-D max pooling; ties resolved to the first (lowest) flat index."""
    _n, h, w, c = x.shape
    vals = pool(x, ksize, strides, padding, "max")
    idx = np.zeros(vals.shape, dtype=np.int64)
    (_, ph, _), (_, pw, _) = (out_and_pad(h, ksize[0], strides[0], 1, padding), out_and_pad(w, ksize[1], strides[1], 1, padding))
    for b, oy, ox, ch in itertools.product(*[range(s) for s in vals.shape]):
        best, arg = -np.inf, -1
        for dy, dx in itertools.product(range(ksize[0]), range(ksize[1])):
            yy, xx = oy * strides[0] + dy - ph, ox * strides[1] + dx - pw
            if 0 <= yy < h and 0 <= xx < w and x[b, yy, xx, ch] > best:
                best, arg = x[b, yy, xx, ch], (yy * w + xx) * c + ch
        idx[b, oy, ox, ch] = arg + (b * h * w * c if include_batch_in_index else 0)
    return vals, idx


def dilation2d(x: np.ndarray, f: np.ndarray, strides: Sequence[int], padding: str, dilations: Sequence[int]) -> np.ndarray:
    """``out[b, y, x, c] = max_{dy, dx} x[b, s y + r dy - pad, s x + r dx - pad, c] + f[dy, dx, c]``."""
    win, offs = windows(x, f.shape[:2], strides, dilations, padding, -np.inf)
    return np.max(np.stack([win[o] + f[o] for o in offs]), axis=0)


def erosion2d(x: np.ndarray, f: np.ndarray, strides: Sequence[int], padding: str, dilations: Sequence[int]) -> np.ndarray:
    """The documented duality: the erosion of x by f is the negation of the dilation of -x by the
    reflected f."""
    return -dilation2d(-x, f[::-1, ::-1, :], strides, padding, dilations)


def lrn(x: np.ndarray, depth_radius: int, bias: float, alpha: float, beta: float) -> np.ndarray:
    """``sqr_sum[a, b, c, d] = sum(input[a, b, c, d - depth_radius : d + depth_radius + 1] ** 2)``;
    ``output = input / (bias + alpha * sqr_sum) ** beta``."""
    sq = np.zeros_like(x)
    depth = x.shape[-1]
    for dd in range(depth):
        sq[..., dd] = np.sum(x[..., max(0, dd - depth_radius):dd + depth_radius + 1] ** 2, axis=-1)
    return x / (bias + alpha * sq) ** beta


def space_to_depth(x: np.ndarray, b: int) -> np.ndarray:
    """NHWC: ``out[n, i, j, (di * b + dj) * C + c] = x[n, i b + di, j b + dj, c]``."""
    n, h, w, c = x.shape
    return x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, h // b, w // b, b * b * c)


def depth_to_space(x: np.ndarray, b: int) -> np.ndarray:
    """The inverse of :func:`space_to_depth`."""
    n, h, w, c = x.shape
    return x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5).reshape(n, h * b, w * b, c // (b * b))


def space_to_batch(x: np.ndarray, block: Sequence[int], paddings: Sequence[Sequence[int]]) -> np.ndarray:
    """The documented steps: zero-pad the block dimensions, reshape to ``[batch, p1/b1, b1, ..., rest]``,
    move the block factors to the front, fold them into the batch (batch index ``(i1 * b2 + i2) * batch + n``)."""
    m = len(block)
    xp = np.pad(x, [(0, 0)] + [tuple(p) for p in paddings] + [(0, 0)] * (x.ndim - 1 - m))
    shape = [xp.shape[0]]
    for i, b in enumerate(block):
        shape += [xp.shape[1 + i] // b, b]
    rest = list(xp.shape[1 + m:])
    r = xp.reshape(shape + rest)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, r.ndim))
    r = r.transpose(perm)
    return r.reshape([xp.shape[0] * int(np.prod(block))] + [shape[1 + 2 * i] for i in range(m)] + rest)


def softmax_xent(labels: np.ndarray, logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """``-sum(labels * log_softmax(logits), axis)`` with the max subtracted first."""
    z = logits - logits.max(axis=axis, keepdims=True)
    logsm = z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))
    return -np.sum(labels * logsm, axis=axis)


def in_top_k(targets: np.ndarray, predictions: np.ndarray, k: int) -> np.ndarray:
    """True where the target's prediction is finite and fewer than k classes are strictly larger
    (ties straddling the boundary are all in the top k)."""
    out = []
    for t, row in zip(targets, predictions):
        p = row[t]
        out.append(bool(np.all(np.isfinite(row))) and int(np.sum(row > p)) < k)
    return np.array(out)


def isotonic(x: np.ndarray, decreasing: bool) -> tuple[np.ndarray, np.ndarray]:
    """Pool-adjacent-violators on one row: argmin over y_1 >= ... >= y_n (decreasing) of sum (x - y)^2,
    and the segment ids (0, 1, ... left to right)."""
    v = x if decreasing else -x
    blocks: list[list[float]] = []  # [sum, count]
    for val in v:
        blocks.append([float(val), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    y = np.concatenate([np.full(int(c), s / c) for s, c in blocks])
    seg = np.concatenate([np.full(int(c), i) for i, (_, c) in enumerate(blocks)])
    return (y if decreasing else -y), seg


def collapse_repeated(labels: np.ndarray, seq_length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, lens = [], []
    for row, n in zip(labels, seq_length):
        keep = [int(row[i]) for i in range(int(n)) if i == 0 or row[i] != row[i - 1]]
        rows.append(keep)
        lens.append(len(keep))
    width = max(lens) if lens else 0
    return np.array([r + [0] * (width - len(r)) for r in rows]), np.array(lens)


def unique_labels(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the distinct labels in order of first appearance, zero-padded, and each entry's index
    into them (tf.unique applied to each row)."""
    us, ids = [], []
    for row in labels:
        u: list[int] = []
        idx = []
        for v in row:
            if int(v) not in u:
                u.append(int(v))
            idx.append(u.index(int(v)))
        us.append(u + [0] * (labels.shape[1] - len(u)))
        ids.append(idx)
    return np.array(us), np.array(ids)


def ctc_collapse(path: Sequence[int], blank: int, merge_repeated: bool = True) -> tuple[int, ...]:
    out: list[int] = []
    prev = None
    for p in path:
        if p != blank and not (merge_repeated and p == prev):
            out.append(p)
        prev = p
    return tuple(out)


def ctc_label_logprobs(logits: np.ndarray, blank: int) -> dict[tuple[int, ...], float]:
    """Exhaustive CTC: for logits ``[T, C]``, log P(label) = log sum over all C^T frame paths that
    collapse (merge repeats, drop blanks) to the label of prod_t softmax(logits_t)[path_t]."""
    t_len, c = logits.shape
    logp = logits - logits.max(axis=1, keepdims=True)
    logp = logp - np.log(np.sum(np.exp(logp), axis=1, keepdims=True))
    acc: dict[tuple[int, ...], list[float]] = {}
    for path in itertools.product(range(c), repeat=t_len):
        acc.setdefault(ctc_collapse(path, blank), []).append(float(sum(logp[t, p] for t, p in enumerate(path))))
    return {k: float(np.logaddexp.reduce(v)) for k, v in acc.items()}


def greedy_decode(logits: np.ndarray, blank: int, merge_repeated: bool) -> tuple[tuple[int, ...], float]:
    """Best path: argmax per frame, then merge repeats (if asked) and drop blanks; the score is
    -sum_t max_c logits[t, c]."""
    path = [int(np.argmax(r)) for r in logits]
    return ctc_collapse(path, blank, merge_repeated), -float(np.sum(logits.max(axis=1)))


def log_poisson(z: np.ndarray, c: np.ndarray, full: bool) -> np.ndarray:
    """``exp(c) - z c [+ z log z - z + 0.5 log(2 pi z)]``, the Stirling term only where z > 1."""
    out = np.exp(c) - z * c
    if full:
        zs = np.where(z > 1, z, 1.0)
        out = out + np.where(z > 1, zs * np.log(zs) - zs + 0.5 * np.log(2 * np.pi * zs), 0.0)
    return out


def embedding_sparse(params: np.ndarray, rows: Sequence[Sequence[int]], weights: Sequence[Sequence[float]] | None,
                     combiner: str, n_rows: int) -> np.ndarray:
    """Per row of the sparse ids: sum w_i params[id_i] (sum), divided by sum w_i (mean), or by
    sqrt(sum w_i^2) (sqrtn); a row with no ids gives zeros."""
    out = np.zeros((n_rows, params.shape[1]))
    for r in range(n_rows):
        ids = list(rows[r]) if r < len(rows) else []
        if not ids:
            continue
        w = np.array(weights[r] if weights is not None else [1.0] * len(ids))
        s = np.sum(w[:, None] * params[ids], axis=0)
        out[r] = {"sum": s, "mean": s / w.sum(), "sqrtn": s / math.sqrt(float(np.sum(w * w)))}[combiner]
    return out


def sigmoid_xent(labels: np.ndarray, logits: np.ndarray) -> np.ndarray:
    return np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))


def sampled_logits(weights: np.ndarray, biases: np.ndarray, labels: np.ndarray, inputs: np.ndarray,
                   sampled: np.ndarray, true_expected: np.ndarray, sampled_expected: np.ndarray,
                   remove_accidental_hits: bool, subtract_log_q: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The documented candidate-sampling logits: true logits ``x . w[label] + b[label] - log Q(label)``,
    sampled ``x . w[s] + b[s] - log Q(s)``, an accidental hit (a sampled class that is one of the row's
    true classes) gets -FLOAT_MAX added; labels ``1/num_true`` for each true class, 0 for sampled."""
    num_true = labels.shape[1]
    tl = np.einsum("bd,btd->bt", inputs, weights[labels]) + biases[labels]
    sl = inputs @ weights[sampled].T + biases[sampled]
    if subtract_log_q:
        tl = tl - np.log(true_expected)
        sl = sl - np.log(sampled_expected)[None, :]
    if remove_accidental_hits:
        for b in range(labels.shape[0]):
            for j, s in enumerate(sampled):
                if s in labels[b]:
                    sl[b, j] += -FLOAT_MAX
    logits = np.concatenate([tl, sl], axis=1)
    lab = np.concatenate([np.full(tl.shape, 1.0 / num_true), np.zeros(sl.shape)], axis=1)
    return logits, lab


def pooling_sequence_ok(seq: Sequence[int], n_in: int, n_out: int) -> str | None:
    """The documented pooling sequence of fractional pooling: starts at 0, ends at the input size,
    n_out + 1 entries, every step floor(alpha) or ceil(alpha) with alpha = n_in / n_out; None if it is."""
    s = [int(v) for v in seq]
    alpha = n_in / n_out
    if len(s) != n_out + 1 or s[0] != 0 or s[-1] != n_in:
        return f"sequence {s}: expected {n_out + 1} entries from 0 to {n_in}"
    bad = [b - a for a, b in itertools.pairwise(s) if b - a not in (math.floor(alpha), math.ceil(alpha))]
    return f"sequence {s}: steps {bad} not floor/ceil of alpha={alpha}" if bad else None


def fractional_pool(x: np.ndarray, rows: Sequence[int], cols: Sequence[int], overlapping: bool, kind: str) -> np.ndarray:
    """Pooling over the cells ``[rows[i], rows[i+1])`` x ``[cols[j], cols[j+1])`` (one more row/column
    each when overlapping: ``rows[i+1]`` itself belongs to both cells)."""
    n, _, _, c = x.shape
    out = np.zeros((n, len(rows) - 1, len(cols) - 1, c))
    f: Callable[..., Any] = np.max if kind == "max" else np.mean
    for i in range(len(rows) - 1):
        for j in range(len(cols) - 1):
            r1 = rows[i + 1] + (1 if overlapping and rows[i + 1] < x.shape[1] else 0)
            c1 = cols[j + 1] + (1 if overlapping and cols[j + 1] < x.shape[2] else 0)
            out[:, i, j, :] = f(x[:, rows[i]:r1, cols[j]:c1, :], axis=(1, 2))
    return out
