"""Numpy references of torch.nn.functional functions, each written from its docstring's formula
(or the docstring of the module class it points to), float64 throughout.

Used by suites/modules/test_torch_functional.py; tests/unit/test_torch_functional_reference.py feeds
them deliberately wrong implementations. No framework import here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from . import _loss_reference

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


# ------------------------------------------------------------------ elementwise


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def glu(x: np.ndarray, dim: int = -1) -> np.ndarray:
    a, b = np.split(x, 2, axis=dim)
    return a * sigmoid(b)


def softmin(x: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(-(x - x.min(axis=dim, keepdims=True)))
    return e / e.sum(axis=dim, keepdims=True)


def hardshrink(x: np.ndarray, lambd: float = 0.5) -> np.ndarray:
    return np.where(np.abs(x) > lambd, x, 0.0)


def softshrink(x: np.ndarray, lambd: float = 0.5) -> np.ndarray:
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, 0.0))


def threshold(x: np.ndarray, thr: float, value: float) -> np.ndarray:
    return np.where(x > thr, x, value)


def elu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def celu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.maximum(0, x) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


def selu(x: np.ndarray) -> np.ndarray:
    return SELU_SCALE * (np.maximum(0, x) + np.minimum(0, SELU_ALPHA * np.expm1(np.minimum(x, 0))))


def leaky_relu(x: np.ndarray, slope: float = 0.01) -> np.ndarray:
    return np.where(x >= 0, x, slope * x)


def hardtanh(x: np.ndarray, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return np.clip(x, lo, hi)


# ------------------------------------------------------------------ normalisation, distances


def normalize(x: np.ndarray, p: float, dim: int, eps: float = 1e-12) -> np.ndarray:
    n = np.sum(np.abs(x) ** p, axis=dim, keepdims=True) ** (1.0 / p)
    return x / np.maximum(n, eps)


def rms_norm(x: np.ndarray, ndim: int, weight: np.ndarray | None, eps: float) -> np.ndarray:
    axes = tuple(range(x.ndim - ndim, x.ndim))
    y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps)
    return y * weight if weight is not None else y


def local_response_norm(x: np.ndarray, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    """b_c = a_c (k + alpha/n sum_{c'=max(0,c-n/2)}^{min(N-1,c+n/2)} a_c'^2)^-beta (LocalResponseNorm);
    the window is size wide: floor((size-1)/2) before and ceil((size-1)/2) after, zero padded."""
    c = x.shape[1]
    sq = x * x
    out = np.empty_like(x)
    before, after = size // 2, (size - 1) // 2
    for ch in range(c):
        lo, hi = max(0, ch - before), min(c, ch + after + 1)
        s = sq[:, lo:hi].sum(axis=1)
        out[:, ch] = x[:, ch] / (k + alpha / size * s) ** beta
    return out


def pairwise_distance(x1: np.ndarray, x2: np.ndarray, p: float, eps: float, keepdim: bool) -> np.ndarray:
    """F.pairwise_distance: PairwiseDistance's ||x1 - x2 + eps||_p (the loss references' formula),
    the reduced last dimension kept with keepdim."""
    d = _loss_reference.pairwise_distance(x1, x2, p, eps)
    return np.expand_dims(d, -1) if keepdim else d


def pdist(x: np.ndarray, p: float) -> np.ndarray:
    n = x.shape[0]
    out = [np.sum(np.abs(x[i] - x[j]) ** p) ** (1.0 / p) if p != np.inf else np.max(np.abs(x[i] - x[j]))
           for i in range(n) for j in range(i + 1, n)]
    return np.array(out)


# ------------------------------------------------------------------ rearrangements


def pixel_shuffle(x: np.ndarray, r: int) -> np.ndarray:
    """out[..., c, h*r + i, w*r + j] = in[..., c*r*r + i*r + j, h, w] (PixelShuffle)."""
    *b, c, h, w = x.shape
    out = np.empty((*b, c // (r * r), h * r, w * r), dtype=x.dtype)
    for co in range(c // (r * r)):
        for i in range(r):
            for j in range(r):
                out[..., co, i::r, j::r] = x[..., co * r * r + i * r + j, :, :]
    return out


def pixel_unshuffle(x: np.ndarray, r: int) -> np.ndarray:
    *b, c, h, w = x.shape
    out = np.empty((*b, c * r * r, h // r, w // r), dtype=x.dtype)
    for ci in range(c):
        for i in range(r):
            for j in range(r):
                out[..., ci * r * r + i * r + j, :, :] = x[..., ci, i::r, j::r]
    return out


def channel_shuffle(x: np.ndarray, g: int) -> np.ndarray:
    """(*, C, ...) -> view as (*, g, C/g, ...), transpose the two, flatten back."""
    n, c = x.shape[0], x.shape[1]
    rest = x.shape[2:]
    return x.reshape(n, g, c // g, *rest).swapaxes(1, 2).reshape(n, c, *rest)


def one_hot(idx: np.ndarray, num_classes: int) -> np.ndarray:
    if num_classes < 0:
        num_classes = int(idx.max()) + 1
    return (idx[..., None] == np.arange(num_classes)).astype(np.int64)


def _pair(v: int | Sequence[int], n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, Sequence) else (v,) * n


def unfold(x: np.ndarray, k: int | Sequence[int], dilation: int | Sequence[int] = 1,
           padding: int | Sequence[int] = 0, stride: int | Sequence[int] = 1) -> np.ndarray:
    """(N, C, H, W) -> (N, C * prod(k), L): the blocks, channel-major then kernel row-major."""
    kh, kw = _pair(k, 2)
    dh, dw = _pair(dilation, 2)
    ph, pw = _pair(padding, 2)
    sh, sw = _pair(stride, 2)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, c, h, w = xp.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
    return cols.reshape(n, c * kh * kw, oh * ow)


def fold(cols: np.ndarray, output_size: Sequence[int], k: int | Sequence[int], dilation: int | Sequence[int] = 1,
         padding: int | Sequence[int] = 0, stride: int | Sequence[int] = 1) -> np.ndarray:
    """The adjoint of unfold: sums every block's value into its place."""
    kh, kw = _pair(k, 2)
    dh, dw = _pair(dilation, 2)
    ph, pw = _pair(padding, 2)
    sh, sw = _pair(stride, 2)
    h, w = output_size[0] + 2 * ph, output_size[1] + 2 * pw
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    n = cols.shape[0]
    c = cols.shape[1] // (kh * kw)
    blocks = cols.reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, h, w), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw] += blocks[:, :, i, j]
    return out[:, :, ph: ph + output_size[0], pw: pw + output_size[1]]


# ------------------------------------------------------------------ pooling


def adaptive_bins(n_in: int, n_out: int) -> list[tuple[int, int]]:
    """Bin i covers [floor(i n_in / n_out), ceil((i+1) n_in / n_out))."""
    return [((i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)) for i in range(n_out)]


def adaptive_pool(x: np.ndarray, out: Sequence[int], kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Adaptive average or max over the trailing len(out) dims; also the flat argmax per plane."""
    d = len(out)
    spatial = x.shape[-d:]
    lead = x.shape[:-d]
    bins = [adaptive_bins(s, o) for s, o in zip(spatial, out)]
    val = np.empty((*lead, *out))
    idx = np.zeros((*lead, *out), dtype=np.int64)
    strides = [int(np.prod(spatial[i + 1:])) for i in range(d)]
    for pos in itertools.product(*(range(o) for o in out)):
        sl = tuple(slice(*bins[i][p]) for i, p in enumerate(pos))
        win = x[(..., *sl)]
        flat = win.reshape(*lead, -1)
        if kind == "avg":
            val[(..., *pos)] = flat.mean(axis=-1)
        else:
            a = np.argmax(flat, axis=-1)
            val[(..., *pos)] = np.take_along_axis(flat, a[..., None], -1)[..., 0]
            local = np.unravel_index(a, win.shape[-d:])
            idx[(..., *pos)] = sum((bins[i][p][0] + local[i]) * strides[i] for i, p in enumerate(pos))
    return val, idx


def avg_pool1d(x: np.ndarray, k: int, stride: int, padding: int, ceil_mode: bool, count_include_pad: bool) -> np.ndarray:
    n = x.shape[-1]
    span = n + 2 * padding - k
    lout = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (lout - 1) * stride >= n + padding:
        lout -= 1  # the last window must start inside the input or the left padding
    out = np.empty((*x.shape[:-1], lout))
    for i in range(lout):
        s = i * stride - padding
        e = min(s + k, n + padding)
        lo, hi = max(s, 0), min(e, n)
        div = (e - s) if count_include_pad else (hi - lo)
        out[..., i] = x[..., lo:hi].sum(axis=-1) / div
    return out


def lp_pool(x: np.ndarray, p: float, k: Sequence[int], stride: Sequence[int], ceil_mode: bool = False) -> np.ndarray:
    """f(X) = (sum_{x in X} x^p)^(1/p) over each window X, no padding; ceil_mode=True uses ceil for
    the output size (a last window must start inside the input) and X is then the part of the
    window inside the input."""
    d = len(k)
    spatial = x.shape[-d:]
    if ceil_mode:
        out = [-(-(s - kk) // st) + 1 for s, kk, st in zip(spatial, k, stride)]
        out = [o - 1 if (o - 1) * st >= s else o for o, s, st in zip(out, spatial, stride)]
    else:
        out = [(s - kk) // st + 1 for s, kk, st in zip(spatial, k, stride)]
    res = np.empty((*x.shape[:-d], *out))
    for pos in itertools.product(*(range(o) for o in out)):
        sl = tuple(slice(p_ * st, p_ * st + kk) for p_, st, kk in zip(pos, stride, k))
        w = x[(..., *sl)].reshape(*x.shape[:-d], -1)
        res[(..., *pos)] = np.sum(w ** p, axis=-1) ** (1.0 / p)
    return res


def max_unpool(vals: np.ndarray, idx: np.ndarray, out_spatial: Sequence[int]) -> np.ndarray:
    """Zeros everywhere except out.flat_plane[idx] = vals (MaxUnpool: non-maximal values set to zero)."""
    d = len(out_spatial)
    lead = vals.shape[: vals.ndim - d]
    out = np.zeros((*lead, int(np.prod(out_spatial))))
    v = vals.reshape(*lead, -1)
    ix = idx.reshape(*lead, -1)
    np.put_along_axis(out, ix, v, axis=-1)
    return out.reshape(*lead, *out_spatial)


# ------------------------------------------------------------------ resampling


def _cubic(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    """Keys' convolution weights for taps at -1, 0, 1, 2 (A = -0.75)."""
    def near(s: np.ndarray) -> np.ndarray:
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s: np.ndarray) -> np.ndarray:
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def interp_matrix(n_in: int, n_out: int, mode: str, align_corners: bool) -> np.ndarray:
    """The (n_out, n_in) matrix of one dimension of interpolate(size=...)."""
    m = np.zeros((n_out, n_in))
    dst = np.arange(n_out, dtype=np.float64)
    scale = n_in / n_out
    if mode == "nearest":
        m[np.arange(n_out), np.minimum(np.floor(dst * scale).astype(int), n_in - 1)] = 1
        return m
    if mode == "nearest-exact":
        m[np.arange(n_out), np.minimum(np.floor((dst + 0.5) * scale).astype(int), n_in - 1)] = 1
        return m
    if mode == "area":
        for i, (lo, hi) in enumerate(adaptive_bins(n_in, n_out)):
            m[i, lo:hi] = 1.0 / (hi - lo)
        return m
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = (dst + 0.5) * scale - 0.5
    if mode == "linear":
        src = np.maximum(src, 0.0)
        i0 = np.floor(src).astype(int)
        t = src - i0
        i0 = np.minimum(i0, n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        np.add.at(m, (np.arange(n_out), i0), 1 - t)
        np.add.at(m, (np.arange(n_out), i1), t)
        return m
    # cubic: taps clamped to the border
    i0 = np.floor(src).astype(int)
    t = src - i0
    for off, wt in zip((-1, 0, 1, 2), _cubic(t)):
        np.add.at(m, (np.arange(n_out), np.clip(i0 + off, 0, n_in - 1)), wt)
    return m


def interpolate(x: np.ndarray, size: Sequence[int], mode: str, align_corners: bool) -> np.ndarray:
    base = {"bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    d = len(size)
    for i, s in enumerate(size):
        axis = x.ndim - d + i
        m = interp_matrix(x.shape[axis], s, base, align_corners)
        x = np.moveaxis(np.tensordot(x, m, axes=([axis], [1])), -1, axis)
    return x


def affine_grid(theta: np.ndarray, size: Sequence[int], align_corners: bool) -> np.ndarray:
    """Base grid of normalised coordinates (x fastest, last), times theta^T."""
    spatial = size[2:]

    def lin(n: int) -> np.ndarray:
        v = np.linspace(-1, 1, n) if n > 1 else np.zeros(1)
        return v if align_corners else v * (n - 1) / n

    axes = [lin(n) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
    coords = [mesh[i] for i in reversed(range(len(spatial)))]  # x (W), y (H), z (D)
    base = np.stack([*coords, np.ones_like(mesh[0])], axis=-1)
    return np.einsum("...k,njk->n...j", base, theta)


def _unnormalize(c: np.ndarray, n: int, align: bool) -> np.ndarray:
    return (c + 1) / 2 * (n - 1) if align else ((c + 1) * n - 1) / 2


def _reflect(c: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    c = np.abs(c - lo)
    flips = np.floor(c / span)
    extra = np.fmod(c, span)
    return np.where(flips % 2 == 0, extra + lo, span - extra + lo)


def _pad_coord(c: np.ndarray, n: int, padding: str, align: bool) -> np.ndarray:
    if padding == "border":
        return np.clip(c, 0, n - 1)
    if padding == "reflection":
        c = _reflect(c, 0, n - 1) if align else _reflect(c, -0.5, n - 0.5)
        return np.clip(c, 0, n - 1)
    return c


def grid_sample(x: np.ndarray, grid: np.ndarray, mode: str, padding: str, align: bool) -> np.ndarray:
    """x (N, C, *spatial), grid (N, *out, d) with coordinates (x, y[, z]) in [-1, 1]."""
    d = grid.shape[-1]
    spatial = x.shape[2:]
    n, c = x.shape[:2]
    taps_per_dim = []
    for k in range(d):
        size = spatial[d - 1 - k]
        coord = _unnormalize(grid[..., k], size, align)
        if mode == "bicubic":
            i0 = np.floor(coord)
            t = coord - i0
            taps = [(_pad_coord(i0 + off, size, padding, align), wt) for off, wt in zip((-1, 0, 1, 2), _cubic(t))]
        else:
            coord = _pad_coord(coord, size, padding, align)
            if mode == "nearest":
                taps = [(np.rint(coord), np.ones_like(coord))]
            else:
                i0 = np.floor(coord)
                t = coord - i0
                taps = [(i0, 1 - t), (i0 + 1, t)]
        taps_per_dim.append((size, taps))
    out = np.zeros((n, c, *grid.shape[1:-1]))
    batch = np.arange(n).reshape((n,) + (1,) * (grid.ndim - 2))
    for combo in itertools.product(*(t for _, t in taps_per_dim)):
        w = np.ones(grid.shape[:-1])
        valid = np.ones(grid.shape[:-1], dtype=bool)
        index = []
        for k, (pos, wt) in enumerate(combo):
            size = taps_per_dim[k][0]
            ip = pos.astype(np.int64)
            valid &= (ip >= 0) & (ip < size)
            index.append(np.clip(ip, 0, size - 1))
            w = w * wt
        vals = _gather(x, batch, list(reversed(index)))
        out += np.where(valid[:, None], vals * w[:, None], 0.0)
    return out


def _gather(x: np.ndarray, batch: np.ndarray, index: list[np.ndarray]) -> np.ndarray:
    # x[n, :, i_D.., i_H, i_W] -> (N, out..., C), moved to (N, C, out...)
    xs = np.moveaxis(x, 1, -1)
    g = xs[(batch, *index)]
    return np.moveaxis(g, -1, 1)


# ------------------------------------------------------------------ others


def bilinear(x1: np.ndarray, x2: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    y = np.einsum("ni,oij,nj->no", x1, w, x2)
    return y + b if b is not None else y


def conv_tbc(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    """x (T, B, Cin), w (K, Cin, Cout): out[t] = b + sum_k xpad[t + k] @ w[k]."""
    xp = np.pad(x, ((pad, pad), (0, 0), (0, 0)))
    k = w.shape[0]
    t_out = xp.shape[0] - k + 1
    return np.stack([b + sum(xp[t + j] @ w[j] for j in range(k)) for t in range(t_out)])


def embedding_bag(idx: np.ndarray, weight: np.ndarray, offsets: np.ndarray | None, mode: str,
                  per_sample_weights: np.ndarray | None, include_last_offset: bool,
                  padding_idx: int | None) -> np.ndarray:
    """Bags from 2D input rows or 1D input split at offsets; padding_idx entries excluded; empty bag -> 0."""
    if idx.ndim == 2:
        bags = [(list(r), None if per_sample_weights is None else list(pw))
                for r, pw in zip(idx, per_sample_weights if per_sample_weights is not None else idx)]
    else:
        assert offsets is not None
        starts = list(offsets[:-1]) if include_last_offset else list(offsets)
        ends = list(offsets[1:]) if include_last_offset else [*offsets[1:], len(idx)]
        bags = [(list(idx[s:e]), None if per_sample_weights is None else list(per_sample_weights[s:e]))
                for s, e in zip(starts, ends)]
    out = np.zeros((len(bags), weight.shape[1]))
    for b, (ids, pws) in enumerate(bags):
        rows = [(weight[i] * (pws[j] if pws is not None else 1.0)) for j, i in enumerate(ids) if i != padding_idx]
        if not rows:
            continue
        r = np.stack(rows)
        out[b] = r.sum(0) if mode == "sum" else r.mean(0) if mode == "mean" else r.max(0)
    return out


def alpha_dropout_params(p: float) -> tuple[float, float, float]:
    """Klambauer et al. (cited by AlphaDropout): a' = -lambda alpha; dropped units set to a', then
    y = a x + b with a = ((1 - p)(1 + p a'^2))^-1/2, b = -a a' p. Returns (a, b, a')."""
    ap = -SELU_SCALE * SELU_ALPHA
    a = 1.0 / math.sqrt((1 - p) * (1 + p * ap * ap))
    return a, -a * ap * p, ap


def _softmax(s: np.ndarray) -> np.ndarray:
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)


def multi_head_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int, wq: np.ndarray, wk: np.ndarray,
                         wv: np.ndarray, b_in: np.ndarray | None, wo: np.ndarray, bo: np.ndarray | None, *,
                         bias_k: np.ndarray | None = None, bias_v: np.ndarray | None = None,
                         add_zero_attn: bool = False, key_padding_mask: np.ndarray | None = None,
                         attn_mask: np.ndarray | None = None, average: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_head) + mask) V per head, Q = q Wq^T + bq (and K, V),
    heads concatenated and projected by Wo (MultiheadAttention). q (L, N, E), k and v (S, N, *).
    bias_k/bias_v append one key/value; add_zero_attn one zero key/value per head; the masks get a
    zero (allowed) column for each. Boolean masks: True is not allowed. Returns the output (L, N, E)
    and the weights (N, L, S') averaged over heads or (N, heads, L, S')."""
    e = wq.shape[0]
    d = e // heads
    bq, bk, bv = (np.zeros(e),) * 3 if b_in is None else np.split(b_in, 3)
    qp, kp, vp = q @ wq.T + bq, k @ wk.T + bk, v @ wv.T + bv
    n = q.shape[1]
    kpm = None if key_padding_mask is None else np.where(key_padding_mask, -np.inf, 0.0) \
        if key_padding_mask.dtype == bool else key_padding_mask.astype(np.float64)
    am = None if attn_mask is None else np.where(attn_mask, -np.inf, 0.0) if attn_mask.dtype == bool \
        else attn_mask.astype(np.float64)

    def pad_masks(kpm: np.ndarray | None, am: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
        kpm = None if kpm is None else np.concatenate([kpm, np.zeros((n, 1))], axis=1)
        am = None if am is None else np.concatenate([am, np.zeros((*am.shape[:-1], 1))], axis=-1)
        return kpm, am

    if bias_k is not None and bias_v is not None:
        kp = np.concatenate([kp, np.broadcast_to(bias_k.reshape(1, 1, e), (1, n, e))])
        vp = np.concatenate([vp, np.broadcast_to(bias_v.reshape(1, 1, e), (1, n, e))])
        kpm, am = pad_masks(kpm, am)

    def split(x: np.ndarray) -> np.ndarray:  # (T, N, E) -> (N, H, T, d)
        return x.reshape(x.shape[0], n, heads, d).transpose(1, 2, 0, 3)

    qh, kh, vh = split(qp), split(kp), split(vp)
    if add_zero_attn:
        kh = np.concatenate([kh, np.zeros((n, heads, 1, d))], axis=2)
        vh = np.concatenate([vh, np.zeros((n, heads, 1, d))], axis=2)
        kpm, am = pad_masks(kpm, am)
    scores = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(d)
    if am is not None:
        scores = scores + (am.reshape(n, heads, *am.shape[-2:]) if am.ndim == 3 else am)
    if kpm is not None:
        scores = scores + kpm[:, None, None, :]
    p = _softmax(scores)
    out = (p @ vh).transpose(2, 0, 1, 3).reshape(q.shape[0], n, e)
    out = out @ wo.T + (bo if bo is not None else 0.0)
    return out, (p.mean(axis=1) if average else p)
