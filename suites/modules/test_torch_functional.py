"""modules.torch.functional: the torch.nn.functional functions that no other claim calls directly,
each called directly and checked against a numpy reference of its docstring's formula
(suites/modules/_torch_functional_reference.py), or, for random functions, against the
deterministic properties and the frequencies its docstring documents.

Table-driven: one record per function (its call, its reference, its inputs, its error model) in
RECORDS; ``test_record`` runs each and records the function's mode and its option modes.
``test_table_complete`` fails when a public function of the assigned list has neither a record nor
a reason in OUT_OF_SCOPE.

Error model (docs/tolerances.md). float64 inputs of magnitude <= 3. A record states ``ops``, the
chained elementwise operations of its formula (OP_ROUNDING units of u each) and ``reduction``, the
number of summed terms (pool windows, norms, matrix products, interpolation taps), so the bound is
``(4 ops + reduction) u max|want|``. Where a result can be much smaller than its terms (interpolation
and grid-sample weights of mixed sign, bicubic; bilinear forms; distances), ``magnitude`` is the
size of the terms, giving the absolute floor ``rtol * M``. Rearrangements, max pools, indices,
one_hot, thresholds, masks and identities are exact: ``assert_equal``. Statistical checks (dropout
masks, gumbel_softmax frequencies) are exact binomial tests at TEST_ALPHA = 1e-6 per test
(``assert_frequencies``, Bonferroni over its categories).
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import TEST_ALPHA, assert_close, assert_equal, assert_frequencies, evidence, tolerance

from . import _torch_functional_reference as ref

CLAIM = "modules.torch.functional"
RNG = np.random.default_rng(20261207)

# The functions this claim is about (torch 2.13's torch.nn.functional names that no other claim's
# tests called directly when it was written).
FUNCTIONS = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "affine_grid", "alpha_dropout",
    "assert_int_or_pair", "avg_pool1d", "bilinear", "celu_", "channel_shuffle", "conv_tbc", "dropout1d",
    "dropout2d", "dropout3d", "elu_", "embedding_bag", "feature_alpha_dropout", "fold",
    "fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices", "glu", "grid_sample", "grouped_mm", "gumbel_softmax", "hardshrink",
    "hardtanh_", "interpolate", "leaky_relu_", "local_response_norm", "lp_pool1d", "lp_pool2d", "lp_pool3d",
    "max_unpool1d", "max_unpool2d", "max_unpool3d", "multi_head_attention_forward", "native_channel_shuffle",
    "normalize", "one_hot", "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "relu_",
    "rms_norm", "rrelu", "rrelu_", "scaled_grouped_mm", "scaled_mm", "selu_", "sigmoid", "softmin",
    "softshrink", "tanh", "threshold", "threshold_", "unfold"]

OUT_OF_SCOPE = {
    "grouped_mm": "docstring: inputs 'expected to be torch.bfloat16 values on CUDA devices with SM >= 80' (CUDA only)",
    "scaled_mm": "FP8/MX scaled matmul whose scale recipes and swizzles target CUDA kernels; no CPU contract",
    "scaled_grouped_mm": "grouped FP8 scaled matmul for CUDA grouped-GEMM kernels; no CPU contract",
    "assert_int_or_pair": "private argument-validation helper with no docstring (no documented contract)",
}


def _t(torch: Any, a: np.ndarray) -> Any:
    return torch.from_numpy(np.ascontiguousarray(a))


def _close(got: Any, want: np.ndarray, what: str, *, ops: int = 1, reduction: int = 1,
           magnitude: float = 0.0) -> None:
    g = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    assert g.shape == want.shape, f"{what}: shape {g.shape}, expected {want.shape}"
    assert_close(g, want, tolerance("float64", ops=ops, reduction=reduction, magnitude=magnitude), what=what)


def _equal(got: Any, want: np.ndarray, what: str) -> None:
    g = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    assert g.shape == want.shape, f"{what}: shape {g.shape}, expected {want.shape}"
    assert_equal(g, want, what=what)


def _float32(torch: Any, fn: Callable[[Any], Any], want: Callable[[np.ndarray], np.ndarray], what: str, *,
             ops: int, reduction: int = 1) -> None:
    """The float32 call against the float64 reference of the same (float32-rounded) input, within the
    float32 rounding model: a float32 result, not computed in a lower precision."""
    x32 = X.astype(np.float32)
    got = fn(_t(torch, x32))
    assert got.dtype == torch.float32, f"{what} on float32 returned {got.dtype}"
    assert_close(got.detach().cpu().numpy().astype(np.float64), want(x32.astype(np.float64)),
                 tolerance("float32", ops=ops, reduction=reduction), what=f"{what} float32")


def _x(*shape: int, scale: float = 3.0) -> np.ndarray:
    return RNG.uniform(-scale, scale, size=shape)


@dataclass(frozen=True)
class Record:
    name: str
    run: Callable[[Any, Any], list[str]]  # (torch, F) -> the option modes checked, besides ``name``
    modes: tuple[str, ...] = ()  # option modes this record may cover (declared in the claim)


RECORDS: list[Record] = []


def record(name: str, *modes: str) -> Callable[[Callable[[Any, Any], list[str]]], Callable[[Any, Any], list[str]]]:
    def add(fn: Callable[[Any, Any], list[str]]) -> Callable[[Any, Any], list[str]]:
        RECORDS.append(Record(name, fn, modes))
        return fn
    return add


# ------------------------------------------------------------------ elementwise and in-place


X = _x(3, 4, 5)


@record("sigmoid")
def _sigmoid(torch: Any, F: Any) -> list[str]:
    _close(F.sigmoid(_t(torch, X)), ref.sigmoid(X), "sigmoid", ops=3)
    _float32(torch, F.sigmoid, ref.sigmoid, "sigmoid", ops=3)
    return []


@record("tanh")
def _tanh(torch: Any, F: Any) -> list[str]:
    _close(F.tanh(_t(torch, X)), np.tanh(X), "tanh", ops=1)
    _float32(torch, F.tanh, np.tanh, "tanh", ops=1)
    return []


@record("glu")
def _glu(torch: Any, F: Any) -> list[str]:
    for dim in (-1, 1, 0):
        x = _x(4, 6, 2)
        _close(F.glu(_t(torch, x), dim=dim), ref.glu(x, dim), f"glu dim={dim}", ops=4)
    _float32(torch, lambda t: F.glu(t, dim=1), lambda a: ref.glu(a, 1), "glu", ops=4)
    return []


@record("softmin")
def _softmin(torch: Any, F: Any) -> list[str]:
    for dim in (0, 1, 2):
        _close(F.softmin(_t(torch, X), dim=dim), ref.softmin(X, dim), f"softmin dim={dim}", ops=4, reduction=X.shape[dim])
    got = F.softmin(_t(torch, X), dim=1, dtype=torch.float32)
    assert got.dtype == torch.float32, f"softmin dtype=float32 returned {got.dtype}"
    # dtype: 'the input tensor is casted to dtype before the operation'
    assert_close(got.detach().cpu().numpy().astype(np.float64), ref.softmin(X.astype(np.float32).astype(np.float64), 1),
                 tolerance("float32", ops=4, reduction=X.shape[1]), what="softmin dtype=float32 (input cast first)")
    _float32(torch, lambda t: F.softmin(t, dim=1), lambda a: ref.softmin(a, 1), "softmin", ops=4, reduction=4)
    return []


@record("hardshrink")
def _hardshrink(torch: Any, F: Any) -> list[str]:
    x = np.concatenate([X.ravel(), [0.5, -0.5, 1.25, -1.25, 0.0]])
    for lambd in (0.5, 1.25):
        _equal(F.hardshrink(_t(torch, x), lambd), ref.hardshrink(x, lambd), f"hardshrink lambd={lambd}")
    return []


@record("softshrink")
def _softshrink(torch: Any, F: Any) -> list[str]:
    x = np.concatenate([X.ravel(), [0.5, -0.5, 1.25, -1.25, 0.0]])
    for lambd in (0.5, 1.25):
        _close(F.softshrink(_t(torch, x), lambd), ref.softshrink(x, lambd), f"softshrink lambd={lambd}",
               magnitude=3.0)
    return []


def _inplace(torch: Any, fn: Callable[[Any], Any], want: np.ndarray, what: str, ops: int, x: np.ndarray = X) -> None:
    """The in-place variant returns its input tensor, modified to the out-of-place values."""
    t = _t(torch, x.copy())
    ptr = t.data_ptr()
    out = fn(t)
    assert out is t or out.data_ptr() == ptr, f"{what}: did not return its input (not in place)"
    _close(t, want, f"{what} (the input after the call)", ops=ops)


@record("threshold")
def _threshold(torch: Any, F: Any) -> list[str]:
    x = np.concatenate([X.ravel(), [0.5, 0.4999]])
    _equal(F.threshold(_t(torch, x), 0.5, -7.0), ref.threshold(x, 0.5, -7.0), "threshold(0.5, -7)")
    return []


@record("threshold_")
def _threshold_(torch: Any, F: Any) -> list[str]:
    _inplace(torch, lambda t: F.threshold_(t, 0.5, -7.0), ref.threshold(X, 0.5, -7.0), "threshold_", 0)
    return []


@record("relu_")
def _relu_(torch: Any, F: Any) -> list[str]:
    _inplace(torch, F.relu_, np.maximum(X, 0), "relu_", 0)
    return []


@record("elu_")
def _elu_(torch: Any, F: Any) -> list[str]:
    _inplace(torch, lambda t: F.elu_(t, 0.7), ref.elu(X, 0.7), "elu_(alpha=0.7)", 2)
    return []


@record("celu_")
def _celu_(torch: Any, F: Any) -> list[str]:
    _inplace(torch, lambda t: F.celu_(t, 1.5), ref.celu(X, 1.5), "celu_(alpha=1.5)", 3)
    return []


@record("selu_")
def _selu_(torch: Any, F: Any) -> list[str]:
    _inplace(torch, F.selu_, ref.selu(X), "selu_", 3)
    return []


@record("leaky_relu_")
def _leaky_relu_(torch: Any, F: Any) -> list[str]:
    _inplace(torch, lambda t: F.leaky_relu_(t, 0.2), ref.leaky_relu(X, 0.2), "leaky_relu_(0.2)", 1)
    return []


@record("hardtanh_")
def _hardtanh_(torch: Any, F: Any) -> list[str]:
    _inplace(torch, lambda t: F.hardtanh_(t, -0.5, 2.0), ref.hardtanh(X, -0.5, 2.0), "hardtanh_(-0.5, 2)", 0)
    return []


@record("rrelu", "rrelu.training=False", "rrelu.training=True")
def _rrelu(torch: Any, F: Any) -> list[str]:
    lo, hi = 0.1, 0.4
    _close(F.rrelu(_t(torch, X), lo, hi, training=False), ref.leaky_relu(X, (lo + hi) / 2), "rrelu eval slope (l+u)/2",
           ops=2)
    got = F.rrelu(_t(torch, X), lo, hi, training=True).detach().cpu().numpy()
    pos = X >= 0
    _equal(got[pos], X[pos], "rrelu training: non-negative inputs unchanged")
    slope = got[~pos] / X[~pos]
    bad = (slope < lo * (1 - 1e-15)) | (slope > hi * (1 + 1e-15))
    assert not bad.any(), f"rrelu training: slopes outside [lower, upper]: {slope[bad]}"
    return ["rrelu.training=False", "rrelu.training=True"]


@record("rrelu_")
def _rrelu_(torch: Any, F: Any) -> list[str]:
    _inplace(torch, lambda t: F.rrelu_(t, 0.1, 0.4, training=False), ref.leaky_relu(X, 0.25), "rrelu_ eval", 2)
    return []


# ------------------------------------------------------------------ normalisation, distances


@record("normalize")
def _normalize(torch: Any, F: Any) -> list[str]:
    for p, dim in ((2.0, 1), (1.0, 0), (3.0, -1)):
        _close(F.normalize(_t(torch, X), p=p, dim=dim), ref.normalize(X, p, dim), f"normalize p={p} dim={dim}",
               ops=6, reduction=X.shape[dim])
    z = np.zeros((2, 3))
    _equal(F.normalize(_t(torch, z), dim=1), z, "normalize of a zero vector (divided by eps, not 0)")
    return []


@record("rms_norm")
def _rms_norm(torch: Any, F: Any) -> list[str]:
    w = _x(4, 5)
    for shape, weight, eps in (((5,), None, 1e-5), ((4, 5), w, 0.1)):
        got = F.rms_norm(_t(torch, X), shape, None if weight is None else _t(torch, weight), eps)
        _close(got, ref.rms_norm(X, len(shape), weight, eps), f"rms_norm {shape} eps={eps}", ops=5,
               reduction=int(np.prod(shape)))
    got = F.rms_norm(_t(torch, X), (5,))
    _close(got, ref.rms_norm(X, 1, None, float(np.finfo(np.float64).eps)), "rms_norm eps=None -> finfo.eps", ops=5,
           reduction=5)
    return []


@record("local_response_norm")
def _lrn(torch: Any, F: Any) -> list[str]:
    x = _x(2, 6, 3, 2)
    for size in (1, 2, 3, 4):
        got = F.local_response_norm(_t(torch, x), size, alpha=0.3, beta=0.75, k=2.0)
        _close(got, ref.local_response_norm(x, size, 0.3, 0.75, 2.0), f"local_response_norm size={size}", ops=6,
               reduction=size)
    x3 = _x(2, 5, 4)
    _close(F.local_response_norm(_t(torch, x3), 3, 0.2, 0.5, 1.0), ref.local_response_norm(x3, 3, 0.2, 0.5, 1.0),
           "local_response_norm on a 3D input", ops=6, reduction=3)
    return []


@record("pairwise_distance")
def _pairwise_distance(torch: Any, F: Any) -> list[str]:
    a, b = _x(4, 6), _x(4, 6)
    for p, eps, keep in ((2.0, 1e-6, False), (1.0, 0.0, True), (3.0, 1e-3, False)):
        got = torch.nn.functional.pairwise_distance(_t(torch, a), _t(torch, b), p=p, eps=eps, keepdim=keep)
        _close(got, ref.pairwise_distance(a, b, p, eps, keep), f"pairwise_distance p={p} eps={eps} keepdim={keep}",
               ops=6, reduction=6)
    return []


@record("pdist")
def _pdist(torch: Any, F: Any) -> list[str]:
    x = _x(5, 3)
    for p in (2.0, 1.0, 0.5, np.inf):
        _close(F.pdist(_t(torch, x), p=p), ref.pdist(x, p), f"pdist p={p}", ops=6, reduction=3, magnitude=6.0)
    return []


# ------------------------------------------------------------------ rearrangements


@record("pixel_shuffle")
def _pixel_shuffle(torch: Any, F: Any) -> list[str]:
    x = _x(2, 8, 3, 2)
    _equal(F.pixel_shuffle(_t(torch, x), 2), ref.pixel_shuffle(x, 2), "pixel_shuffle r=2")
    x = _x(9, 2, 2)
    _equal(F.pixel_shuffle(_t(torch, x), 3), ref.pixel_shuffle(x, 3), "pixel_shuffle r=3 unbatched")
    return []


@record("pixel_unshuffle")
def _pixel_unshuffle(torch: Any, F: Any) -> list[str]:
    x = _x(2, 2, 4, 6)
    _equal(F.pixel_unshuffle(_t(torch, x), 2), ref.pixel_unshuffle(x, 2), "pixel_unshuffle r=2")
    _equal(F.pixel_unshuffle(F.pixel_shuffle(_t(torch, x), 1), 1), x, "r=1 identity")
    return []


@record("channel_shuffle")
def _channel_shuffle(torch: Any, F: Any) -> list[str]:
    x = _x(2, 6, 2, 3)
    for g in (1, 2, 3, 6):
        _equal(F.channel_shuffle(_t(torch, x), g), ref.channel_shuffle(x, g), f"channel_shuffle groups={g}")
    doc_in = np.arange(1, 17, dtype=np.float64).reshape(1, 4, 2, 2)
    want = doc_in[:, [0, 2, 1, 3]]  # the docstring's example: channels 1, 3, 2, 4
    _equal(F.channel_shuffle(_t(torch, doc_in), 2), want, "channel_shuffle docstring example")
    return []


@record("native_channel_shuffle")
def _native_channel_shuffle(torch: Any, F: Any) -> list[str]:
    x = _x(2, 6, 2, 3)
    for g in (2, 3):
        _equal(F.native_channel_shuffle(_t(torch, x), g), ref.channel_shuffle(x, g), f"native_channel_shuffle g={g}")
    return []


@record("one_hot")
def _one_hot(torch: Any, F: Any) -> list[str]:
    idx = np.array([[0, 3, 1], [2, 2, 0]])
    got = F.one_hot(_t(torch, idx), 5)
    assert got.dtype == torch.int64, f"one_hot dtype {got.dtype}, documented LongTensor"
    _equal(got, ref.one_hot(idx, 5), "one_hot num_classes=5")
    _equal(F.one_hot(_t(torch, idx)), ref.one_hot(idx, -1), "one_hot num_classes=-1 (max + 1)")
    return []


@record("unfold")
def _unfold(torch: Any, F: Any) -> list[str]:
    x = _x(2, 3, 5, 6)
    for k, d, p, s in ((2, 1, 0, 1), ((2, 3), (2, 1), (1, 0), (1, 2)), (3, 1, 1, 2)):
        got = F.unfold(_t(torch, x), k, dilation=d, padding=p, stride=s)
        _equal(got, ref.unfold(x, k, d, p, s), f"unfold k={k} dilation={d} padding={p} stride={s}")
    return []


@record("fold")
def _fold(torch: Any, F: Any) -> list[str]:
    for k, d, p, s, size in ((2, 1, 0, 1, (5, 6)), ((2, 3), (2, 1), (1, 0), (1, 2), (5, 6)), (3, 1, 1, 2, (5, 5))):
        cols = ref.unfold(np.zeros((1, 1, *size)), k, d, p, s)
        c = _x(2, 2 * cols.shape[1], cols.shape[2])
        got = F.fold(_t(torch, c), size, k, dilation=d, padding=p, stride=s)
        kk = np.prod(ref._pair(k, 2))
        _close(got, ref.fold(c, size, k, d, p, s), f"fold k={k} dilation={d} padding={p} stride={s}",
               reduction=int(kk), magnitude=3.0 * kk)
    return []


# ------------------------------------------------------------------ pooling


def _adaptive(torch: Any, F: Any, d: int) -> list[str]:
    shape = (2, 3, 7, 5, 6)[: 2 + d]
    x = _x(*shape)
    outs = [(3, 2, 4)[:d], (1, 5, 6)[:d], tuple(shape[2:])]
    for out in outs:
        osz = out[0] if d == 1 else out
        avg, _ = ref.adaptive_pool(x, out, "avg")
        _close(getattr(F, f"adaptive_avg_pool{d}d")(_t(torch, x), osz), avg, f"adaptive_avg_pool{d}d {out}",
               ops=2, reduction=int(np.prod(shape[2:])))
        mx, idx = ref.adaptive_pool(x, out, "max")
        _equal(getattr(F, f"adaptive_max_pool{d}d")(_t(torch, x), osz), mx, f"adaptive_max_pool{d}d {out}")
        v, i = getattr(F, f"adaptive_max_pool{d}d")(_t(torch, x), osz, return_indices=True)
        _equal(v, mx, f"adaptive_max_pool{d}d return_indices values")
        _equal(i, idx, f"adaptive_max_pool{d}d return_indices indices")
        v, i = getattr(F, f"adaptive_max_pool{d}d_with_indices")(_t(torch, x), osz)
        _equal(v, mx, f"adaptive_max_pool{d}d_with_indices values")
        _equal(i, idx, f"adaptive_max_pool{d}d_with_indices indices")
    if d > 1:
        none_out = (None, *tuple(outs[0][1:]))
        avg, _ = ref.adaptive_pool(x, (shape[2], *outs[0][1:]), "avg")
        _close(getattr(F, f"adaptive_avg_pool{d}d")(_t(torch, x), none_out), avg,
               f"adaptive_avg_pool{d}d output_size with None (keeps the input size)", ops=2,
               reduction=int(np.prod(shape[2:])))
    return []


for _d in (1, 2, 3):
    for _n in (f"adaptive_avg_pool{_d}d", f"adaptive_max_pool{_d}d", f"adaptive_max_pool{_d}d_with_indices"):
        RECORDS.append(Record(_n, (lambda d: lambda torch, F: _adaptive(torch, F, d))(_d)))


@record("avg_pool1d", "avg_pool1d.ceil_mode", "avg_pool1d.count_include_pad=False")
def _avg_pool1d(torch: Any, F: Any) -> list[str]:
    x = _x(2, 3, 10)
    rows = [(3, 2, 1, False, True), (3, 2, 1, True, False), (4, 3, 2, True, True), (2, 2, 0, False, False),
            (4, 3, 2, False, False), (3, 1, 0, True, True)]
    for k, s, p, ceil, incl in rows:
        got = F.avg_pool1d(_t(torch, x), k, s, p, ceil_mode=ceil, count_include_pad=incl)
        _close(got, ref.avg_pool1d(x, k, s, p, ceil, incl),
               f"avg_pool1d k={k} stride={s} padding={p} ceil_mode={ceil} count_include_pad={incl}",
               ops=2, reduction=k)
    return ["avg_pool1d.ceil_mode", "avg_pool1d.count_include_pad=False"]


def _lp(torch: Any, F: Any, d: int) -> list[str]:
    x = np.abs(_x(*(2, 3, 7, 6, 5)[: 2 + d])) + 0.1
    for p, k, s in ((2.0, 2, None), (3.0, 3, 2), (1.0, 2, 1)):
        kk, ss = (k,) * d, ((s if s is not None else k),) * d
        got = getattr(F, f"lp_pool{d}d")(_t(torch, x), p, k, s)
        _close(got, ref.lp_pool(x, p, kk, ss), f"lp_pool{d}d p={p} k={k} stride={s}", ops=6, reduction=k ** d)
    evidence.covers(f"lp_pool{d}d")  # floor mode held; ceil_mode below is an option of its own
    # ceil_mode: 'when True, will use ceil instead of floor to compute the output shape'; the last
    # windows are partial and f sums what they hold
    got = getattr(F, f"lp_pool{d}d")(_t(torch, x), 2.0, 2, 3, ceil_mode=True)
    _close(got, ref.lp_pool(x, 2.0, (2,) * d, (3,) * d, ceil_mode=True), f"lp_pool{d}d p=2 k=2 stride=3 ceil_mode=True",
           ops=6, reduction=2 ** d)
    return ["lp_pool.ceil_mode"]


for _d in (1, 2, 3):
    RECORDS.append(Record(f"lp_pool{_d}d", (lambda d: lambda torch, F: _lp(torch, F, d))(_d), ("lp_pool.ceil_mode",)))


def _unpool(torch: Any, F: Any, d: int) -> list[str]:
    shape = (2, 3, 8, 6, 4)[: 2 + d]
    x = _x(*shape)
    pool = getattr(F, f"max_pool{d}d")
    unpool = getattr(F, f"max_unpool{d}d")
    v, i = pool(_t(torch, x), 2, return_indices=True)
    _equal(unpool(v, i, 2), ref.max_unpool(v.detach().cpu().numpy(), i.detach().cpu().numpy(), shape[2:]), f"max_unpool{d}d k=2")
    bigger = tuple(s + 1 for s in shape[2:])
    got = unpool(v, i, 2, output_size=bigger)
    _equal(got, ref.max_unpool(v.detach().cpu().numpy(), i.detach().cpu().numpy(), bigger),
           f"max_unpool{d}d output_size={bigger}")
    return []


for _d in (1, 2, 3):
    RECORDS.append(Record(f"max_unpool{_d}d", (lambda d: lambda torch, F: _unpool(torch, F, d))(_d)))


def _fractional(torch: Any, F: Any, d: int, number_ratio: bool) -> list[str]:
    """Documented properties (Graham's pseudo-random pooling regions, sampled): output of output_size,
    or floor(input * output_ratio); each output is the maximum of one k-window inside the input, and
    its index points at that maximum; the indices variant agrees with return_indices=True."""
    shape = (2, 2, 9, 8, 7)[: 2 + d]
    x = _x(*shape)
    k = 2
    fn = getattr(F, f"fractional_max_pool{d}d")
    spatial = shape[2:]
    for kind, kw in (("output_size", {"output_size": (4, 3, 5)[:d]}), ("output_ratio", {"output_ratio": (0.5,) * d})):
        out = kw.get("output_size") or tuple(int(s * 0.5) for s in spatial)
        g = torch.Generator().manual_seed(3)
        samples = torch.rand(shape[0], shape[1], d, generator=g, dtype=torch.float64)
        v, i = fn(_t(torch, x), k, return_indices=True, _random_samples=samples, **kw)
        v2, i2 = getattr(F, f"fractional_max_pool{d}d_with_indices")(_t(torch, x), k, _random_samples=samples, **kw)
        v3 = fn(_t(torch, x), k, _random_samples=samples, **kw)
        _equal(v2, v.detach().cpu().numpy(), f"fractional_max_pool{d}d_with_indices values")
        _equal(i2, i.detach().cpu().numpy(), f"fractional_max_pool{d}d_with_indices indices")
        _equal(v3, v.detach().cpu().numpy(), f"fractional_max_pool{d}d values without indices")
        assert tuple(v.shape[2:]) == tuple(out), f"fractional_max_pool{d}d {kind}: output {tuple(v.shape)}"
        vn, inn = v.detach().cpu().numpy(), i.detach().cpu().numpy()
        flat = x.reshape(*shape[:2], -1)
        _equal(np.take_along_axis(flat, inn.reshape(*shape[:2], -1), -1).reshape(vn.shape), vn,
               f"fractional_max_pool{d}d {kind}: value at the returned index")
        coords = np.unravel_index(inn, spatial)
        for n, c in itertools.product(range(shape[0]), range(shape[1])):
            for pos in itertools.product(*(range(o) for o in out)):
                at = tuple(int(coords[j][(n, c, *pos)]) for j in range(d))
                starts = [range(max(0, a - k + 1), min(a, s - k) + 1) for a, s in zip(at, spatial)]
                ok = any(np.max(x[(n, c, *(slice(s0, s0 + k) for s0 in st))]) == vn[(n, c, *pos)]
                         for st in itertools.product(*starts))
                assert ok, f"fractional_max_pool{d}d {kind}: output {pos} is not the max of a {k}-window at {at}"
    evidence.covers(f"fractional_max_pool{d}d{'' if number_ratio else '_with_indices'}",
                    f"fractional_max_pool{d}d.output_ratio")
    if number_ratio:  # Args: output_ratio 'has to be a number or tuple in the range (0, 1)'
        g = torch.Generator().manual_seed(3)
        samples = torch.rand(shape[0], shape[1], d, generator=g, dtype=torch.float64)
        want = fn(_t(torch, x), k, output_ratio=(0.5,) * d, _random_samples=samples)
        got = fn(_t(torch, x), k, output_ratio=0.5, _random_samples=samples)
        _equal(got, want.detach().cpu().numpy(), f"fractional_max_pool{d}d output_ratio=0.5 (a number) as (0.5,) * {d}")
    return [f"fractional_max_pool{d}d.output_ratio"]


for _d in (2, 3):
    RECORDS.append(Record(f"fractional_max_pool{_d}d", (lambda d: lambda torch, F: _fractional(torch, F, d, True))(_d),
                          (f"fractional_max_pool{_d}d.output_ratio",)))
    RECORDS.append(Record(f"fractional_max_pool{_d}d_with_indices",
                          (lambda d: lambda torch, F: _fractional(torch, F, d, False))(_d),
                          (f"fractional_max_pool{_d}d.output_ratio",)))


# ------------------------------------------------------------------ resampling

INTERP = [("nearest", 1, None), ("nearest-exact", 1, None), ("area", 1, None), ("linear", 1, False),
          ("linear", 1, True), ("bilinear", 2, False), ("bilinear", 2, True), ("bicubic", 2, False),
          ("bicubic", 2, True), ("trilinear", 3, False), ("trilinear", 3, True), ("nearest", 2, None),
          ("nearest-exact", 3, None), ("area", 2, None)]
INTERP_MODES = tuple(sorted({f"interpolate.mode={m}" for m, _, _ in INTERP} | {"interpolate.align_corners=True",
                                                                                "interpolate.scale_factor"}))


@record("interpolate", *INTERP_MODES)
def _interpolate(torch: Any, F: Any) -> list[str]:
    covered = []
    for mode, d, align in INTERP:
        x = _x(*(2, 2, 5, 4, 3)[: 2 + d])
        for size in ((7, 9, 5)[:d], (3, 2, 2)[:d]):
            kw = {} if align is None else {"align_corners": align}
            got = F.interpolate(_t(torch, x), size=size, mode=mode, **kw)
            want = ref.interpolate(x, size, mode, bool(align))
            taps = 4 ** d if mode == "bicubic" else 2 ** d
            _close(got, want, f"interpolate mode={mode} align_corners={align} size={size}", ops=4 * d,
                   reduction=taps if mode != "area" else int(np.prod(x.shape[2:])),
                   magnitude=3.0 * (1.5 ** d if mode == "bicubic" else 1.0))
        covered.append(f"interpolate.mode={mode}")
        if align:
            covered.append("interpolate.align_corners=True")
    x = _x(2, 2, 4, 3)
    got = F.interpolate(_t(torch, x), scale_factor=2.0, mode="bilinear")
    _close(got, ref.interpolate(x, (8, 6), "bilinear", False), "interpolate scale_factor=2 bilinear", ops=8,
           reduction=4, magnitude=3.0)
    return [*covered, "interpolate.scale_factor"]


@record("affine_grid", "affine_grid.align_corners=True", "affine_grid.3d")
def _affine_grid(torch: Any, F: Any) -> list[str]:
    for size in ((2, 1, 4, 5), (2, 1, 3, 4, 2)):
        d = len(size) - 2
        theta = _x(2, d, d + 1, scale=1.0)
        for align in (False, True):
            got = F.affine_grid(_t(torch, theta), list(size), align_corners=align)
            _close(got, ref.affine_grid(theta, size, align), f"affine_grid size={size} align_corners={align}",
                   ops=3, reduction=d + 1, magnitude=float(d + 1))
    return ["affine_grid.align_corners=True", "affine_grid.3d"]


GRID_MODES = (*(f"grid_sample.{k}={v}" for k, vs in (
    ("mode", ("bilinear", "nearest", "bicubic")), ("padding_mode", ("zeros", "border", "reflection")),
    ("align_corners", ("True", "False"))) for v in vs), "grid_sample.3d")


@record("grid_sample", *GRID_MODES)
def _grid_sample(torch: Any, F: Any) -> list[str]:
    covered = []
    x = _x(2, 2, 4, 5)
    grid = RNG.uniform(-1.3, 1.3, size=(2, 3, 6, 2))  # some points outside [-1, 1] for the padding modes
    for mode, pad, align in itertools.product(("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection"),
                                              (False, True)):
        got = F.grid_sample(_t(torch, x), _t(torch, grid), mode=mode, padding_mode=pad, align_corners=align)
        taps = 16 if mode == "bicubic" else 4
        _close(got, ref.grid_sample(x, grid, mode, pad, align),
               f"grid_sample mode={mode} padding_mode={pad} align_corners={align}", ops=12, reduction=taps,
               magnitude=3.0 * (2.0 if mode == "bicubic" else 1.0))
        covered += [f"grid_sample.mode={mode}", f"grid_sample.padding_mode={pad}", f"grid_sample.align_corners={align}"]
    x3 = _x(1, 2, 3, 4, 5)
    grid3 = RNG.uniform(-1.2, 1.2, size=(1, 2, 3, 2, 3))
    for mode, pad in (("bilinear", "zeros"), ("nearest", "border"), ("bilinear", "reflection")):
        got = F.grid_sample(_t(torch, x3), _t(torch, grid3), mode=mode, padding_mode=pad, align_corners=False)
        _close(got, ref.grid_sample(x3, grid3, mode, pad, False), f"grid_sample 3D mode={mode} padding_mode={pad}",
               ops=12, reduction=8, magnitude=3.0)
    return [*covered, "grid_sample.3d"]


# ------------------------------------------------------------------ others


@record("bilinear")
def _bilinear(torch: Any, F: Any) -> list[str]:
    x1, x2, w, b = _x(4, 3), _x(4, 5), _x(2, 3, 5), _x(2)
    for bias in (b, None):
        got = F.bilinear(_t(torch, x1), _t(torch, x2), _t(torch, w), None if bias is None else _t(torch, bias))
        _close(got, ref.bilinear(x1, x2, w, bias), f"bilinear bias={bias is not None}", ops=3, reduction=16,
               magnitude=27.0 * 15)
    return []


@record("conv_tbc")
def _conv_tbc(torch: Any, F: Any) -> list[str]:
    x, w, b = _x(6, 2, 3), _x(3, 3, 4), _x(4)
    for pad in (0, 1, 2):
        got = F.conv_tbc(_t(torch, x), _t(torch, w), _t(torch, b), pad)
        _close(got, ref.conv_tbc(x, w, b, pad), f"conv_tbc pad={pad}", ops=1, reduction=10, magnitude=9.0 * 10)
    return []


EB_MODES = ("embedding_bag.mode=sum", "embedding_bag.mode=mean", "embedding_bag.mode=max",
            "embedding_bag.per_sample_weights", "embedding_bag.include_last_offset", "embedding_bag.padding_idx",
            "embedding_bag.2d-input", "embedding_bag.empty-bag")


@record("embedding_bag", *EB_MODES)
def _embedding_bag(torch: Any, F: Any) -> list[str]:
    w = _x(7, 3)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 6, 0])
    offs = np.array([0, 2, 2, 5])  # the second bag is empty
    psw = _x(9)
    for mode, pw, last, pad in (("sum", None, False, None), ("mean", None, True, 4), ("max", None, False, 2),
                                ("sum", psw, True, 2), ("mean", None, False, None), ("max", None, True, None),
                                ("sum", None, False, 4)):
        o = np.append(offs, len(idx)) if last else offs
        got = F.embedding_bag(_t(torch, idx), _t(torch, w), _t(torch, o), mode=mode,
                              per_sample_weights=None if pw is None else _t(torch, pw), include_last_offset=last,
                              padding_idx=pad)
        _close(got, ref.embedding_bag(idx, w, o, mode, pw, last, pad),
               f"embedding_bag mode={mode} per_sample_weights={pw is not None} include_last_offset={last} "
               f"padding_idx={pad}", ops=2, reduction=3, magnitude=9.0 * 3)
    idx2 = np.array([[0, 3, 3], [6, 1, 2]])
    for mode in ("sum", "mean", "max"):
        got = F.embedding_bag(_t(torch, idx2), _t(torch, w), mode=mode)
        _close(got, ref.embedding_bag(idx2, w, None, mode, None, False, None), f"embedding_bag 2D mode={mode}",
               ops=2, reduction=3, magnitude=9.0)
    return list(EB_MODES)


@record("gumbel_softmax", "gumbel_softmax.hard=True", "gumbel_softmax.frequencies")
def _gumbel_softmax(torch: Any, F: Any) -> list[str]:
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    n = 4000
    lt = _t(torch, np.tile(logits, (n, 1)))
    soft = F.gumbel_softmax(lt, tau=0.5).detach().cpu().numpy()
    assert (soft >= 0).all(), "gumbel_softmax: negative probabilities"
    _close(soft.sum(-1), np.ones(n), "gumbel_softmax rows sum to 1", ops=4, reduction=4)
    hard = F.gumbel_softmax(lt, tau=0.7, hard=True).detach().cpu().numpy()
    _equal(hard, np.eye(4)[np.argmax(hard, -1)], "gumbel_softmax hard=True returns one-hot rows")
    # argmax of a Gumbel-perturbed logit vector is distributed as softmax(logits), whatever tau
    counts = np.bincount(np.argmax(soft, -1), minlength=4)
    assert_frequencies(list(counts), list(np.exp(logits)), alpha=TEST_ALPHA, what="gumbel_softmax argmax frequencies")
    hard_counts = np.bincount(np.argmax(hard, -1), minlength=4)
    assert_frequencies(list(hard_counts), list(np.exp(logits)), alpha=TEST_ALPHA,
                       what="gumbel_softmax hard=True frequencies")
    return ["gumbel_softmax.hard=True", "gumbel_softmax.frequencies"]


def _channel_dropout(torch: Any, F: Any, name: str, shape: tuple[int, ...], alpha: bool) -> list[str]:
    """training=False: identity. training=True: each (sample, channel) plane is either kept, scaled
    by 1/(1-p) (alpha: a x + b), or dropped (0; alpha: a a' + b), as a whole; dropped planes
    ~ Binomial(planes, p)."""
    p = 0.3
    x = _x(*shape) + 5.0 * np.sign(_x(*shape))  # |x| >= 2: no element is 0 or a' by chance
    fn = getattr(F, name)
    _equal(fn(_t(torch, x), p, training=False), x, f"{name} training=False is the identity")
    got = fn(_t(torch, x), p, training=True).detach().cpu().numpy()
    if alpha:
        a, b, ap = ref.alpha_dropout_params(p)
        kept_val, dropped_val = a * x + b, np.full_like(x, a * ap + b)
    else:
        kept_val, dropped_val = x / (1 - p), np.zeros_like(x)
    tol = 8 * 1.2e-16
    kept = np.abs(got - kept_val) <= tol * (np.abs(kept_val) + 3)
    dropped = np.abs(got - dropped_val) <= tol * (np.abs(dropped_val) + 3)
    assert (kept | dropped).all(), f"{name}: values neither kept-and-scaled nor dropped: {got[~(kept | dropped)][:5]}"
    planes = (shape[0], shape[1]) if len(shape) > 2 and name != "alpha_dropout" else shape
    kp = kept.reshape(*planes, -1)
    assert (kp.all(-1) | (~kp).all(-1)).all(), f"{name}: a channel is partly dropped (masks must be channel-wise)"
    n_dropped = int((~kp.all(-1)).sum())
    total = int(np.prod(planes))
    assert_frequencies([n_dropped, total - n_dropped], [p, 1 - p], alpha=TEST_ALPHA, what=f"{name} dropped planes")
    return []


for _name, _shape, _alpha in (("dropout1d", (40, 30, 4), False), ("dropout2d", (40, 30, 2, 3), False),
                              ("dropout3d", (40, 30, 2, 2, 2), False), ("alpha_dropout", (40, 30), True),
                              ("feature_alpha_dropout", (40, 30, 2, 3), True)):
    RECORDS.append(Record(_name, (lambda n, s, a: lambda torch, F: _channel_dropout(torch, F, n, s, a))(
        _name, _shape, _alpha)))


MHA_MODES = ("multi_head_attention_forward.key_padding_mask", "multi_head_attention_forward.attn_mask",
             "multi_head_attention_forward.average_attn_weights=False",
             "multi_head_attention_forward.use_separate_proj_weight", "multi_head_attention_forward.bias_kv",
             "multi_head_attention_forward.add_zero_attn", "multi_head_attention_forward.unbatched",
             "multi_head_attention_forward.training=False")


@record("multi_head_attention_forward", *MHA_MODES)
def _mha(torch: Any, F: Any) -> list[str]:
    e, heads, lq, s, n = 6, 2, 3, 4, 2
    q, k, v = _x(lq, n, e, scale=1.0), _x(s, n, e, scale=1.0), _x(s, n, e, scale=1.0)
    w_in, b_in, wo, bo = _x(3 * e, e, scale=0.5), _x(3 * e, scale=0.5), _x(e, e, scale=0.5), _x(e, scale=0.5)
    wq, wk, wv = np.split(w_in, 3)
    bk, bv = _x(e, scale=0.5), _x(e, scale=0.5)
    kpm = np.array([[False, False, True, False], [False, False, False, True]])
    am_f = _x(lq, s, scale=1.0)
    am_b = np.array([[False, True, False, False], [False, False, True, False], [True, False, False, False]])
    cases = [
        ("plain", {}, {}),
        ("key_padding_mask+attn_mask(float), per head", {"key_padding_mask": kpm, "attn_mask": am_f,
                                                        "average_attn_weights": False}, {}),
        ("attn_mask(bool)", {"attn_mask": am_b}, {}),
        ("bias_k/bias_v + add_zero_attn + key_padding_mask", {"bias_k": bk[None, None], "bias_v": bv[None, None],
                                                              "add_zero_attn": True, "key_padding_mask": kpm}, {}),
        ("use_separate_proj_weight", {"use_separate_proj_weight": True}, {}),
        ("dropout_p=0.5, training=False", {"dropout_p": 0.5, "training": False}, {}),
    ]
    T = (lambda a: _t(torch, a))
    for what, kw, _ in cases:
        args = dict(kw)
        tkw = {key: T(val) if isinstance(val, np.ndarray) else val for key, val in args.items()}
        sep = tkw.pop("use_separate_proj_weight", False)
        extra = {"use_separate_proj_weight": True, "q_proj_weight": T(wq), "k_proj_weight": T(wk),
                 "v_proj_weight": T(wv)} if sep else {}
        bias_k, bias_v = tkw.pop("bias_k", None), tkw.pop("bias_v", None)
        zero = tkw.pop("add_zero_attn", False)
        dropout_p = tkw.pop("dropout_p", 0.0)
        out, wts = F.multi_head_attention_forward(T(q), T(k), T(v), e, heads, None if sep else T(w_in), T(b_in), bias_k,
                                                  bias_v, zero, dropout_p, T(wo), T(bo), need_weights=True, **extra,
                                                  **tkw)
        want, want_w = ref.multi_head_attention(
            q, k, v, heads, wq, wk, wv, b_in, wo, bo, bias_k=None if bias_k is None else bk,
            bias_v=None if bias_v is None else bv, add_zero_attn=zero, key_padding_mask=kw.get("key_padding_mask"),
            attn_mask=kw.get("attn_mask"), average=kw.get("average_attn_weights", True))
        # two projections of e terms, a softmax over S' <= 6 and a weighted sum of S' rows: the
        # intermediates are at most ~ (1 + e * 0.5) in size
        _close(out, want, f"multi_head_attention_forward {what}: output", ops=12, reduction=3 * e + 6,
               magnitude=4.0 * e)
        _close(wts, want_w, f"multi_head_attention_forward {what}: attention weights", ops=8, reduction=e + 6,
               magnitude=1.0)
    out, wts = F.multi_head_attention_forward(T(q[:, 0]), T(k[:, 0]), T(v[:, 0]), e, heads, T(w_in), T(b_in), None,
                                              None, False, 0.0, T(wo), T(bo))
    want, want_w = ref.multi_head_attention(q[:, :1], k[:, :1], v[:, :1], heads, wq, wk, wv, b_in, wo, bo)
    _close(out, want[:, 0], "multi_head_attention_forward unbatched (L, E): output", ops=12, reduction=3 * e + 6,
           magnitude=4.0 * e)
    _close(wts, want_w[0], "multi_head_attention_forward unbatched: weights (L, S)", ops=8, reduction=e + 6,
           magnitude=1.0)
    return list(MHA_MODES)


# ------------------------------------------------------------------ the tests


def _id(r: Record) -> str:
    return r.name


RECORD_IDS = [r.name for r in RECORDS]


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("rec", RECORDS, ids=[_id(r) for r in RECORDS])
def test_record(torch: Any, rec: Record) -> None:
    import torch.nn.functional as F

    global RNG
    assert hasattr(F, rec.name), f"torch.nn.functional.{rec.name} is missing"
    RNG = np.random.default_rng(zlib.crc32(rec.name.encode()))  # each record's inputs whatever else runs
    extra = rec.run(torch, F)
    unknown = set(extra) - set(rec.modes)
    assert not unknown, f"record {rec.name} covers undeclared modes {unknown} (a bug in the table)"
    evidence.covers(rec.name, *extra)


@pytest.mark.claim(CLAIM)
def test_table_complete(torch: Any) -> None:
    import torch.nn.functional as F

    missing = [n for n in FUNCTIONS if n not in RECORD_IDS and n not in OUT_OF_SCOPE]
    assert not missing, f"functions with neither a record nor an OUT_OF_SCOPE reason: {missing}"
    both = sorted(set(RECORD_IDS) & set(OUT_OF_SCOPE))
    assert not both, f"both recorded and out of scope: {both}"
    absent = [n for n in FUNCTIONS if not hasattr(F, n)]
    assert not absent, f"listed functions not in torch.nn.functional: {absent}"
    evidence.covers("table-complete")
