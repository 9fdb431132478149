"""modules.tf.nn-functions: tf.nn's public functions (TensorFlow 2.21, eager, CPU, float64 where the
kernel has it) against numpy references written from their docstrings (``_tf_nn_reference``).

Table-driven: one record per function (``RECORDS``: the call, the reference, the inputs and the
error model, each a small function below); ``test_tf_nn_function`` runs one record and records the
function's mode and the option modes it checked; ``test_table_complete`` fails when a function of
the list has neither a record nor a reason in ``OUT_OF_SCOPE``.

Error model (docs/tolerances.md). Every float check is ``assert_close`` with
``tolerance("float64", ops, reduction=n, magnitude=M)``: ``ops`` the longest chain of rounded
operations of the documented formula (an elementary function counts as one operation of at most
2 ulp), ``n`` the longest sum (a convolution's kernel volume times its input channels, a pool's
window, a reduction's length), ``M`` the largest sum of absolute terms the result is computed from
(for a convolution ``conv(|x|, |w|)``, for moments the second moment), since a sum of terms of both
signs can cancel. At the inputs below (uniform in [-1, 1], shapes of at most a few hundred entries)
these bounds are below 1e-12 of the output scale, so a dropped term, a sign flip, a wrong padding
offset or a wrong divisor fails. Integer results (indices, lengths, labels, booleans, shapes) are
compared bitwise. The exhaustive CTC reference sums at most 3^4 paths (the same model, n = 81).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import assert_close, assert_equal, evidence, tolerance

from . import _tf_nn_reference as ref
from ._tf_math_reference import mp_map as _mp_map  # fn elementwise at 40 mpmath digits

CLAIM = "modules.tf.nn-functions"

LISTED = [
    "RNNCellDeviceWrapper", "RNNCellDropoutWrapper", "RNNCellResidualWrapper", "all_candidate_sampler",
    "approx_max_k", "approx_min_k", "atrous_conv2d", "atrous_conv2d_transpose", "avg_pool", "avg_pool1d",
    "avg_pool3d", "batch_norm_with_global_normalization", "bias_add", "collapse_repeated",
    "compute_accidental_hits", "conv1d", "conv1d_transpose", "conv3d", "conv3d_transpose", "conv_transpose",
    "crelu", "ctc_beam_search_decoder", "ctc_greedy_decoder", "ctc_loss", "ctc_unique_labels", "depth_to_space",
    "depthwise_conv2d", "depthwise_conv2d_backprop_filter", "depthwise_conv2d_backprop_input", "dilation2d",
    "embedding_lookup_sparse", "erosion2d", "fixed_unigram_candidate_sampler", "fractional_avg_pool",
    "fractional_max_pool", "gelu", "in_top_k", "isotonic_regression", "l2_loss", "l2_normalize",
    "learned_unigram_candidate_sampler", "local_response_normalization", "log_poisson_loss", "lrn", "max_pool",
    "max_pool1d", "max_pool3d", "max_pool_with_argmax", "nce_loss", "normalize_moments",
    "safe_embedding_lookup_sparse", "sampled_softmax_loss", "scale_regularization_loss", "separable_conv2d",
    "silu", "softmax_cross_entropy_with_logits", "space_to_batch", "space_to_depth",
    "sparse_softmax_cross_entropy_with_logits", "sufficient_statistics", "swish", "weighted_moments",
    "with_space_to_batch", "zero_fraction"
]

OUT_OF_SCOPE = {
    "RNNCellDeviceWrapper": "deprecated (docstring: 'THIS FUNCTION IS DEPRECATED ... use tf.keras.layers.RNN')",
    "RNNCellDropoutWrapper": "deprecated (docstring: 'THIS FUNCTION IS DEPRECATED ... use tf.keras.layers.RNN')",
    "RNNCellResidualWrapper": "deprecated (docstring: 'THIS FUNCTION IS DEPRECATED ... use tf.keras.layers.RNN')",
}

RECORDS: dict[str, Callable[[Any], list[str]]] = {}


def record(name: str) -> Callable[[Callable[[Any], list[str]]], Callable[[Any], list[str]]]:
    def deco(fn: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
        RECORDS[name] = fn
        return fn
    return deco


def vals(shape: tuple[int, ...], seed: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def tol(ops: int, n: int = 1, mag: float = 0.0) -> Any:
    return tolerance("float64", ops=ops, reduction=n, magnitude=mag)


def np_(t: Any) -> np.ndarray:
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


# ----------------------------------------------------------------------------- convolutions


def _check_conv(got: Any, x: np.ndarray, w: np.ndarray, strides: list[int], padding: str,
                dil: list[int] | None, what: str) -> None:
    want = ref.conv(x, w, strides, padding, dil)
    mag = float(np.max(ref.conv(np.abs(x), np.abs(w), strides, padding, dil), initial=0.0))
    n = int(np.prod(w.shape[:-1]))
    assert_close(np_(got), want, tol(2, n, mag), what=what)


CONV_CASES = [  # (strides, padding, dilations)
    (1, "SAME", 1), (2, "SAME", 1), (1, "VALID", 2), (2, "VALID", 1),
]


@record("conv1d")
def _conv1d(tf: Any) -> list[str]:
    x, w = vals((2, 8, 3), 1), vals((3, 3, 4), 2)  # length 8, stride 2, SAME: pad 0 before, 1 after
    for s, p, d in CONV_CASES:
        got = tf.nn.conv1d(x, w, stride=s, padding=p, dilations=d)
        _check_conv(got, x, w, [s], p, [d], f"conv1d stride={s} padding={p} dilations={d}")
    return ["conv1d", "conv1d.padding=SAME", "conv1d.padding=VALID"]


@record("conv3d")
def _conv3d(tf: Any) -> list[str]:
    x, w = vals((1, 5, 4, 5, 2), 3), vals((2, 3, 2, 2, 3), 4)
    for s, p, d in [(1, "SAME", 1), (2, "SAME", 1), (1, "VALID", 1), (2, "VALID", 1)]:
        got = tf.nn.conv3d(x, w, strides=[1, s, s, s, 1], padding=p, dilations=[1, d, d, d, 1])
        _check_conv(got, x, w, [s] * 3, p, [d] * 3, f"conv3d stride={s} padding={p}")
    return ["conv3d", "conv3d.padding=SAME", "conv3d.padding=VALID"]


def _check_transpose(got: Any, y: np.ndarray, w: np.ndarray, out: list[int], strides: list[int], padding: str,
                     dil: list[int] | None, what: str) -> None:
    want = ref.conv_transpose(y, w, out, strides, padding, dil)
    mag = float(np.max(ref.conv_transpose(np.abs(y), np.abs(w), out, strides, padding, dil), initial=0.0))
    assert_equal(np.asarray(np_(got).shape), np.asarray(want.shape), what=f"{what}: output shape")
    assert_close(np_(got), want, tol(2, int(np.prod(w.shape[:-2])) * w.shape[-1], mag), what=what)


@record("conv1d_transpose")
def _conv1d_t(tf: Any) -> list[str]:
    w = vals((3, 2, 4), 5)  # [k, out_channels, in_channels]
    for s, p, n_out in [(1, "SAME", 6), (2, "SAME", 12), (2, "VALID", 13), (1, "VALID", 8)]:
        n_in = ref.out_and_pad(n_out, 3, s, 1, p)[0]
        y = vals((2, n_in, 4), 6)
        got = tf.nn.conv1d_transpose(y, w, [2, n_out, 2], strides=s, padding=p)
        _check_transpose(got, y, w, [2, n_out, 2], [s], p, None, f"conv1d_transpose stride={s} padding={p}")
    return ["conv1d_transpose", "conv1d_transpose.padding=SAME", "conv1d_transpose.padding=VALID"]


@record("conv3d_transpose")
def _conv3d_t(tf: Any) -> list[str]:
    w = vals((2, 3, 2, 2, 3), 7)
    for s, p, sp in [(1, "SAME", (4, 3, 4)), (2, "SAME", (6, 5, 4)), (2, "VALID", (6, 7, 6))]:
        n_in = [ref.out_and_pad(sp[i], w.shape[i], s, 1, p)[0] for i in range(3)]
        y = vals((1, *n_in, 3), 8)
        out = [1, *sp, 2]
        got = tf.nn.conv3d_transpose(y, w, out, strides=[1, s, s, s, 1], padding=p)
        _check_transpose(got, y, w, out, [s] * 3, p, None, f"conv3d_transpose stride={s} padding={p}")
    return ["conv3d_transpose", "conv3d_transpose.padding=SAME", "conv3d_transpose.padding=VALID"]


@record("conv_transpose")
def _conv_t(tf: Any) -> list[str]:
    for nd, ks in [(1, (3,)), (2, (3, 2)), (3, (2, 2, 2))]:
        w = vals((*ks, 2, 3), 9 + nd)
        for s, p in [(1, "SAME"), (2, "VALID")]:
            sp = [5] * nd
            n_in = [ref.out_and_pad(sp[i], ks[i], s, 1, p)[0] for i in range(nd)]
            y = vals((2, *n_in, 3), 20 + nd)
            out = [2, *sp, 2]
            got = tf.nn.conv_transpose(y, w, out, strides=s, padding=p)
            _check_transpose(got, y, w, out, [s] * nd, p, None, f"conv_transpose {nd}-D stride={s} padding={p}")
    return ["conv_transpose", "conv_transpose.padding=SAME", "conv_transpose.padding=VALID"]


@record("atrous_conv2d")
def _atrous(tf: Any) -> list[str]:
    x, w = vals((2, 7, 6, 2), 30), vals((3, 2, 2, 3), 31)
    for rate in (1, 2, 3):
        for p in ("SAME", "VALID"):
            got = tf.nn.atrous_conv2d(x, w, rate=rate, padding=p)
            _check_conv(got, x, w, [1, 1], p, [rate, rate], f"atrous_conv2d rate={rate} padding={p}")
    return ["atrous_conv2d", "atrous_conv2d.padding=SAME", "atrous_conv2d.padding=VALID"]


@record("atrous_conv2d_transpose")
def _atrous_t(tf: Any) -> list[str]:
    w = vals((3, 3, 2, 3), 32)  # [h, w, out_channels, in_channels]
    for rate in (1, 2):
        for p, hw in (("SAME", (6, 5)), ("VALID", (8, 9))):
            n_in = [ref.out_and_pad(hw[i], 3, 1, rate, p)[0] for i in range(2)]
            y = vals((1, *n_in, 3), 33)
            out = [1, *hw, 2]
            got = tf.nn.atrous_conv2d_transpose(y, w, out, rate=rate, padding=p)
            _check_transpose(got, y, w, out, [1, 1], p, [rate, rate], f"atrous_conv2d_transpose rate={rate} padding={p}")
    return ["atrous_conv2d_transpose", "atrous_conv2d_transpose.padding=SAME", "atrous_conv2d_transpose.padding=VALID"]


@record("depthwise_conv2d")
def _depthwise(tf: Any) -> list[str]:
    x, f = vals((2, 6, 5, 3), 40), vals((3, 2, 3, 2), 41)
    full = ref.depthwise_filter(f)
    for s, p, d in [(1, "SAME", 1), (2, "SAME", 1), (1, "VALID", 2)]:
        got = tf.nn.depthwise_conv2d(x, f, strides=[1, s, s, 1], padding=p, dilations=[d, d])
        _check_conv(got, x, full, [s, s], p, [d, d], f"depthwise_conv2d stride={s} padding={p} dilations={d}")
    return ["depthwise_conv2d", "depthwise_conv2d.padding=SAME", "depthwise_conv2d.padding=VALID"]


@record("separable_conv2d")
def _separable(tf: Any) -> list[str]:
    x, f, pw = vals((2, 6, 5, 2), 42), vals((3, 3, 2, 2), 43), vals((1, 1, 4, 3), 44)
    for s, p in [(1, "SAME"), (2, "VALID")]:
        got = tf.nn.separable_conv2d(x, f, pw, strides=[1, s, s, 1], padding=p)
        mid = ref.conv(x, ref.depthwise_filter(f), [s, s], p)
        want = ref.conv(mid, pw, [1, 1], "VALID")
        mag = float(np.max(ref.conv(ref.conv(np.abs(x), np.abs(ref.depthwise_filter(f)), [s, s], p), np.abs(pw),
                                    [1, 1], "VALID")))
        assert_close(np_(got), want, tol(4, 9 + 4, mag), what=f"separable_conv2d stride={s} padding={p}")
    return ["separable_conv2d", "separable_conv2d.padding=SAME", "separable_conv2d.padding=VALID"]


def _linear_map_matrix(fn: Callable[[np.ndarray], np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """The matrix of a linear numpy map, column j its value at the j-th unit vector."""
    cols = []
    for j in range(int(np.prod(shape))):
        e = np.zeros(int(np.prod(shape)))
        e[j] = 1.0
        cols.append(fn(e.reshape(shape)).ravel())
    return np.stack(cols, axis=1)


@record("depthwise_conv2d_backprop_input")
def _dw_bp_input(tf: Any) -> list[str]:
    """The gradient of depthwise_conv2d with respect to its input: J^T dy with J the reference's matrix."""
    xs, f = (1, 5, 4, 2), vals((3, 2, 2, 2), 45)
    for s, p in [(1, "SAME"), (2, "VALID")]:
        jac = _linear_map_matrix(lambda x, s=s, p=p: ref.conv(x, ref.depthwise_filter(f), [s, s], p), xs)
        dy = vals(ref.conv(np.zeros(xs), ref.depthwise_filter(f), [s, s], p).shape, 46)
        got = tf.nn.depthwise_conv2d_backprop_input(xs, f, dy, strides=[1, s, s, 1], padding=p)
        mag = float(np.max(np.abs(jac).T @ np.abs(dy).ravel()))
        assert_close(np_(got).ravel(), jac.T @ dy.ravel(), tol(2, 12, mag),
                     what=f"depthwise_conv2d_backprop_input stride={s} padding={p}")
    return ["depthwise_conv2d_backprop_input", "depthwise_conv2d_backprop_input.padding=SAME",
            "depthwise_conv2d_backprop_input.padding=VALID"]


@record("depthwise_conv2d_backprop_filter")
def _dw_bp_filter(tf: Any) -> list[str]:
    """The gradient of depthwise_conv2d with respect to its filter: J^T dy, J the matrix of f -> conv(x, f)."""
    x, fs = vals((2, 5, 4, 2), 47), (3, 2, 2, 2)
    for s, p in [(1, "SAME"), (2, "VALID")]:
        jac = _linear_map_matrix(lambda f, s=s, p=p: ref.conv(x, ref.depthwise_filter(f), [s, s], p), fs)
        dy = vals(ref.conv(x, np.zeros((3, 2, 2, 4)), [s, s], p).shape, 48)
        got = tf.nn.depthwise_conv2d_backprop_filter(x, fs, dy, strides=[1, s, s, 1], padding=p)
        mag = float(np.max(np.abs(jac).T @ np.abs(dy).ravel()))
        assert_close(np_(got).ravel(), jac.T @ dy.ravel(), tol(2, dy.size, mag),
                     what=f"depthwise_conv2d_backprop_filter stride={s} padding={p}")
    return ["depthwise_conv2d_backprop_filter", "depthwise_conv2d_backprop_filter.padding=SAME",
            "depthwise_conv2d_backprop_filter.padding=VALID"]


@record("with_space_to_batch")
def _with_s2b(tf: Any) -> list[str]:
    """with_space_to_batch(x, dilation_rate, padding, op) with op a VALID undilated convolution is the
    dilated convolution (the docstring's equivalence)."""
    x, w = vals((2, 7, 8, 2), 49), vals((2, 3, 2, 3), 50)
    for rate, p in [((2, 2), "SAME"), ((2, 3), "VALID"), ((1, 1), "SAME")]:
        got = tf.nn.with_space_to_batch(x, rate, p, lambda inp, num_spatial_dims, padding: tf.nn.convolution(
            inp, w, padding=padding), filter_shape=w.shape[:2])
        _check_conv(got, x, w, [1, 1], p, list(rate), f"with_space_to_batch dilation_rate={rate} padding={p}")
    return ["with_space_to_batch", "with_space_to_batch.padding=SAME", "with_space_to_batch.padding=VALID"]


@record("dilation2d")
def _dilation(tf: Any) -> list[str]:
    x, f = vals((2, 6, 5, 2), 51), vals((3, 2, 2), 52)
    for s, p, d in [(1, "SAME", 1), (2, "VALID", 1), (1, "VALID", 2), (2, "SAME", 1)]:
        got = tf.nn.dilation2d(x, f, strides=[1, s, s, 1], padding=p, data_format="NHWC", dilations=[1, d, d, 1])
        assert_close(np_(got), ref.dilation2d(x, f, [s, s], p, [d, d]), tol(1, 1, 2.0),
                     what=f"dilation2d stride={s} padding={p} dilations={d}")
    return ["dilation2d", "dilation2d.padding=SAME", "dilation2d.padding=VALID"]


@record("erosion2d")
def _erosion(tf: Any) -> list[str]:
    x, f = vals((2, 6, 5, 2), 53), vals((3, 2, 2), 54)
    for s, p, d in [(1, "SAME", 1), (2, "VALID", 1), (1, "VALID", 2)]:
        got = tf.nn.erosion2d(x, f, strides=[1, s, s, 1], padding=p, data_format="NHWC", dilations=[1, d, d, 1])
        assert_close(np_(got), ref.erosion2d(x, f, [s, s], p, [d, d]), tol(1, 1, 2.0),
                     what=f"erosion2d stride={s} padding={p} dilations={d}")
    return ["erosion2d", "erosion2d.padding=SAME", "erosion2d.padding=VALID"]


# ----------------------------------------------------------------------------- pooling


def _check_pool(got: Any, x: np.ndarray, k: list[int], s: list[int], p: str, kind: str, what: str) -> None:
    want = ref.pool(x.astype(np.float64), k, s, p, kind)
    dt = "float32" if x.dtype == np.float32 else "float64"
    mag = float(np.max(ref.pool(np.abs(x.astype(np.float64)), k, s, p, "avg")))
    t = tolerance(dt, ops=1) if kind == "max" else tolerance(dt, ops=2, reduction=int(np.prod(k)), magnitude=mag)
    assert_close(np_(got), want, t, what=what)


POOL_CASES = [(2, 2, "VALID"), (3, 2, "SAME"), (2, 1, "SAME"), (3, 3, "VALID")]


def _pool_record(fname: str, nd: int, kind: str, shape: tuple[int, ...]) -> Callable[[Any], list[str]]:
    def run(tf: Any) -> list[str]:
        # MaxPool3D/AvgPool3D have float32 (half, bfloat16) CPU kernels only (tf.raw_ops.MaxPool3D's T)
        x = vals(shape, 60 + nd).astype(np.float32 if nd == 3 else np.float64)
        for k, s, p in POOL_CASES:
            kk = k if fname in ("max_pool", "avg_pool") else [k] * nd
            got = getattr(tf.nn, fname)(tf.constant(x), kk, s, p)
            assert got.dtype == tf.as_dtype(x.dtype), f"{fname}: output dtype {got.dtype} for a {x.dtype} input"
            _check_pool(got, x, [k] * nd, [s] * nd, p, kind, f"{fname} ksize={k} strides={s} padding={p}")
        return [fname, f"{fname}.padding=SAME", f"{fname}.padding=VALID"]
    return run


for _name, _nd, _kind, _shape in [("max_pool", 2, "max", (2, 7, 6, 2)), ("avg_pool", 2, "avg", (2, 7, 6, 2)),
                                  ("max_pool1d", 1, "max", (2, 9, 3)), ("avg_pool1d", 1, "avg", (2, 9, 3)),
                                  ("max_pool3d", 3, "max", (1, 5, 6, 4, 2)), ("avg_pool3d", 3, "avg", (1, 5, 6, 4, 2))]:
    record(_name)(_pool_record(_name, _nd, _kind, _shape))


@record("max_pool_with_argmax")
def _mpa(tf: Any) -> list[str]:
    x = vals((2, 5, 6, 3), 70)
    for k, s, p, inc in [(2, 2, "VALID", False), (3, 2, "SAME", True), (2, 1, "SAME", False)]:
        out, arg = tf.nn.max_pool_with_argmax(x, k, s, p, include_batch_in_index=inc)
        wv, wa = ref.max_pool_argmax(x, [k, k], [s, s], p, inc)
        assert_close(np_(out), wv, tol(1), what=f"max_pool_with_argmax values k={k} s={s} {p}")
        assert_equal(np_(arg).astype(np.int64), wa, what=f"max_pool_with_argmax argmax k={k} s={s} {p} include_batch={inc}")
    return ["max_pool_with_argmax", "max_pool_with_argmax.include_batch_in_index"]


def _fractional(tf: Any, fname: str, kind: str) -> list[str]:
    x = vals((2, 9, 7, 2), 71)
    for ratio, overlapping in [([1.0, 1.5, 1.7, 1.0], False), ([1.0, 2.0, 1.4, 1.0], True)]:
        outs = [getattr(tf.nn, fname)(x, ratio, pseudo_random=pr, overlapping=overlapping, seed=5) for pr in (False, True)]
        for pr, (out, rows, cols) in zip((False, True), outs):
            n_r, n_c = int(9 / ratio[1]), int(7 / ratio[2])
            for seq, n_in, n_out in ((rows, 9, n_r), (cols, 7, n_c)):
                bad = ref.pooling_sequence_ok(np_(seq), n_in, n_out)
                assert bad is None, f"{fname} pseudo_random={pr}: {bad}"
            want = ref.fractional_pool(x, list(np_(rows)), list(np_(cols)), overlapping, kind)
            assert_close(np_(out), want, tol(2, 9, 1.0), what=f"{fname} over its own pooling sequences "
                         f"(ratio={ratio}, overlapping={overlapping}, pseudo_random={pr})")
        again = getattr(tf.nn, fname)(x, ratio, pseudo_random=True, overlapping=overlapping, seed=5)
        for a, b in zip(again, outs[1]):
            assert_equal(np_(a), np_(b), what=f"{fname}: same non-zero seed, same result")
    return [fname, f"{fname}.overlapping", f"{fname}.pseudo_random"]


record("fractional_max_pool")(lambda tf: _fractional(tf, "fractional_max_pool", "max"))
record("fractional_avg_pool")(lambda tf: _fractional(tf, "fractional_avg_pool", "avg"))


# ----------------------------------------------------------------------------- activations, normalisation


@record("bias_add")
def _bias_add(tf: Any) -> list[str]:
    x, b = vals((2, 3, 4, 5), 80), vals((5,), 81)
    assert_close(np_(tf.nn.bias_add(x, b)), x + b, tol(1), what="bias_add NHWC")
    b3 = vals((3,), 82)
    assert_close(np_(tf.nn.bias_add(x, b3, data_format="NCHW")), x + b3[None, :, None, None], tol(1),
                 what="bias_add NCHW (channels at axis 1)")
    return ["bias_add", "bias_add.data_format=NHWC", "bias_add.data_format=NCHW"]


@record("crelu")
def _crelu(tf: Any) -> list[str]:
    x = vals((3, 4), 83)
    assert_equal(np_(tf.nn.crelu(x)), np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=-1), what="crelu axis=-1")
    assert_equal(np_(tf.nn.crelu(x, axis=0)), np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=0), what="crelu axis=0")
    return ["crelu"]


@record("gelu")
def _gelu(tf: Any) -> list[str]:
    import mpmath

    x = np.concatenate([vals((20,), 84, -6, 6), [0.0, -0.0, 1e-300]])
    x32 = x.astype(np.float32)  # float64: test_gelu_float64
    approx32 = _mp_map(lambda v: v / 2 * (1 + mpmath.tanh(mpmath.sqrt(2 / mpmath.pi) * (v + mpmath.mpf("0.044715") * v ** 3))),
                       x32.astype(np.float64))
    assert_close(np_(tf.nn.gelu(x32, approximate=True)), approx32, tolerance("float32", ops=8, magnitude=6.0),
                 what="gelu approximate=True, float32: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))")
    exact32 = _mp_map(lambda v: v / 2 * (1 + mpmath.erf(v / mpmath.sqrt(2))), x32.astype(np.float64))
    assert_close(np_(tf.nn.gelu(x32)), exact32, tolerance("float32", ops=6, magnitude=6.0),
                 what="gelu approximate=False, float32: x/2 (1 + erf(x/sqrt 2))")
    return ["gelu", "gelu.approximate"]


@record("silu")
def _silu(tf: Any) -> list[str]:
    import mpmath

    x = np.concatenate([vals((20,), 85, -30, 30), [0.0]])
    for beta in (1.0, 0.5, 2.0):
        want = _mp_map(lambda v, beta=beta: v / (1 + mpmath.exp(-beta * v)), x)
        assert_close(np_(tf.nn.silu(x, beta=beta)), want, tol(4), what=f"silu beta={beta}: x sigmoid(beta x)")
    return ["silu", "silu.beta"]


@record("swish")
def _swish(tf: Any) -> list[str]:
    import mpmath

    x = vals((20,), 86, -30, 30)
    want = _mp_map(lambda v: v / (1 + mpmath.exp(-v)), x)
    assert_close(np_(tf.nn.swish(x)), want, tol(4), what="swish: x sigmoid(x)")
    assert_close(np_(tf.nn.swish(x, beta=1.5)), _mp_map(lambda v: v / (1 + mpmath.exp(-1.5 * v)), x), tol(4),
                 what="swish beta=1.5")
    return ["swish"]


@record("l2_loss")
def _l2_loss(tf: Any) -> list[str]:
    x = vals((4, 5), 87)
    assert_close(np_(tf.nn.l2_loss(x)), np.sum(x ** 2) / 2, tol(2, x.size), what="l2_loss sum(t**2)/2")
    assert_close(np_(tf.nn.l2_loss(x.astype(np.float32))), np.sum(x.astype(np.float32).astype(np.float64) ** 2) / 2,
                 tolerance("float32", ops=2, reduction=x.size), what="l2_loss float32")
    return ["l2_loss"]


@record("l2_normalize")
def _l2_normalize(tf: Any) -> list[str]:
    x = vals((3, 4), 88)
    for axis in (-1, 0, (0, 1)):
        want = x / np.sqrt(np.maximum(np.sum(x ** 2, axis=axis, keepdims=True), 1e-12))
        assert_close(np_(tf.nn.l2_normalize(x, axis=axis)), want, tol(4, 12), what=f"l2_normalize axis={axis}")
    tiny = np.array([1e-8, -2e-8, 0.0])
    want = tiny / math.sqrt(1e-12)
    assert_close(np_(tf.nn.l2_normalize(tiny, epsilon=1e-12)), want, tol(4, 3),
                 what="l2_normalize: sum of squares below epsilon divides by sqrt(epsilon)")
    assert_equal(np_(tf.nn.l2_normalize(np.zeros(3))), np.zeros(3), what="l2_normalize of zeros is zeros")
    return ["l2_normalize", "l2_normalize.epsilon"]


def _lrn_check(tf: Any, fname: str) -> list[str]:
    x = vals((2, 3, 3, 6), 89)
    for r, b, a, be in [(5, 1.0, 1.0, 0.5), (1, 2.0, 0.3, 0.75), (2, 0.5, 1e-4, 1.0)]:
        got = getattr(tf.nn, fname)(x.astype(np.float32), depth_radius=r, bias=b, alpha=a, beta=be)
        want = ref.lrn(x.astype(np.float32).astype(np.float64), r, b, a, be)
        assert_close(np_(got), want, tolerance("float32", ops=8, reduction=2 * r + 1),
                     what=f"{fname} r={r} bias={b} alpha={a} beta={be}")
    return [fname]


record("local_response_normalization")(lambda tf: _lrn_check(tf, "local_response_normalization"))
record("lrn")(lambda tf: _lrn_check(tf, "lrn"))


@record("batch_norm_with_global_normalization")
def _bn_global(tf: Any) -> list[str]:
    x = vals((2, 3, 4, 5), 90)
    m, v, beta, gamma = vals((5,), 91), vals((5,), 92, 0.1, 2), vals((5,), 93), vals((5,), 94)
    for scale in (True, False):
        got = tf.nn.batch_norm_with_global_normalization(x, m, v, beta, gamma, 1e-3, scale)
        want = (x - m) / np.sqrt(v + 1e-3) * (gamma if scale else 1.0) + beta
        mag = float(np.max((np.abs(x) + np.abs(m)) / np.sqrt(v + 1e-3) * (np.abs(gamma) if scale else 1.0) + np.abs(beta)))
        assert_close(np_(got), want, tol(6, 1, mag),
                     what=f"batch_norm_with_global_normalization scale_after_normalization={scale}")
    return ["batch_norm_with_global_normalization", "batch_norm_with_global_normalization.scale_after_normalization"]


@record("normalize_moments")
def _normalize_moments(tf: Any) -> list[str]:
    x = vals((6, 3), 95, 2, 4)
    shift = np.array([3.0, 2.5, 3.5])
    c, ms, vs = 6.0, np.sum(x - shift, axis=0), np.sum((x - shift) ** 2, axis=0)
    for sh in (None, shift):
        mss = ms if sh is not None else np.sum(x, axis=0)
        vss = vs if sh is not None else np.sum(x ** 2, axis=0)
        mean, var = tf.nn.normalize_moments(tf.constant(c, tf.float64), mss, vss, sh)
        want_mean = mss / c + (sh if sh is not None else 0.0)
        assert_close(np_(mean), want_mean, tol(3), what=f"normalize_moments mean (shift={sh is not None})")
        assert_close(np_(var), vss / c - (mss / c) ** 2, tol(4, 1, float(np.max(vss / c))),
                     what=f"normalize_moments variance (shift={sh is not None})")
    return ["normalize_moments", "normalize_moments.shift"]


@record("sufficient_statistics")
def _suff(tf: Any) -> list[str]:
    x = vals((4, 3, 2), 96)
    shift = vals((2,), 97)
    for axes, keep, sh in [([0, 1], False, None), ([0, 1], True, shift), ([2], False, None)]:
        count, m, v, s = tf.nn.sufficient_statistics(x, axes, shift=sh, keepdims=keep)
        d = x - (sh if sh is not None else 0.0)
        assert_close(np_(count), float(np.prod([x.shape[a] for a in axes])), tol(1), what="sufficient_statistics count")
        assert_close(np_(m), np.sum(d, axis=tuple(axes), keepdims=keep), tol(2, 12, float(np.sum(np.abs(d)))),
                     what=f"sufficient_statistics mean_ss axes={axes} keepdims={keep}")
        assert_close(np_(v), np.sum(d * d, axis=tuple(axes), keepdims=keep), tol(3, 12),
                     what=f"sufficient_statistics variance_ss axes={axes} keepdims={keep}")
        if sh is None:
            assert s is None, "sufficient_statistics: shift is None when none was given"
        else:
            assert_close(np_(s), sh, tol(1), what="sufficient_statistics returns the shift")
    return ["sufficient_statistics", "sufficient_statistics.shift", "sufficient_statistics.keepdims"]


@record("weighted_moments")
def _wmoments(tf: Any) -> list[str]:
    x, w = vals((5, 3), 98), vals((5, 3), 99, 0, 2)
    for axes, keep in [([0], False), ([0, 1], True)]:
        mean, var = tf.nn.weighted_moments(x, axes, w, keepdims=keep)
        ax = tuple(axes)
        wm = np.sum(w * x, axis=ax, keepdims=True) / np.sum(w, axis=ax, keepdims=True)
        wv = np.sum(w * (x - wm) ** 2, axis=ax, keepdims=True) / np.sum(w, axis=ax, keepdims=True)
        shape = wm.shape if keep else np.squeeze(wm, axis=ax).shape
        assert_close(np_(mean), wm.reshape(shape), tol(4, 15, 1.0), what=f"weighted_moments mean axes={axes}")
        assert_close(np_(var), wv.reshape(shape), tol(6, 15, 4.0), what=f"weighted_moments variance axes={axes}")
    return ["weighted_moments", "weighted_moments.keepdims"]


@record("zero_fraction")
def _zero_fraction(tf: Any) -> list[str]:
    x = np.array([[0.0, 1.0, -0.0], [2.0, 0.0, 3.0]])
    assert_close(np_(tf.nn.zero_fraction(x)), 0.5, tol(2), what="zero_fraction (-0.0 counts as zero)")
    assert_close(np_(tf.nn.zero_fraction(np.array([0, 0, 7], np.int32))), 2 / 3, tolerance("float32", ops=2),
                 what="zero_fraction int32")
    return ["zero_fraction"]


@record("scale_regularization_loss")
def _scale_reg(tf: Any) -> list[str]:
    losses = vals((4,), 100, 0, 1)
    assert_close(np_(tf.nn.scale_regularization_loss(losses)), np.sum(losses), tol(1, 4),
                 what="scale_regularization_loss: the sum over 1 replica (default strategy)")
    assert_close(np_(tf.nn.scale_regularization_loss(losses[0])), losses[0], tol(1), what="scale_regularization_loss scalar")
    return ["scale_regularization_loss"]


# ----------------------------------------------------------------------------- layout


@record("space_to_depth")
def _s2d(tf: Any) -> list[str]:
    x = vals((2, 4, 6, 3), 101)
    for b in (2,):
        assert_equal(np_(tf.nn.space_to_depth(x, b)), ref.space_to_depth(x, b), what=f"space_to_depth block_size={b}")
    x3 = vals((1, 6, 3, 2), 102)
    assert_equal(np_(tf.nn.space_to_depth(x3, 3)), ref.space_to_depth(x3, 3), what="space_to_depth block_size=3")
    return ["space_to_depth"]


@record("depth_to_space")
def _d2s(tf: Any) -> list[str]:
    x = vals((2, 2, 3, 12), 103)
    for b in (2,):
        assert_equal(np_(tf.nn.depth_to_space(x, b)), ref.depth_to_space(x, b), what=f"depth_to_space block_size={b}")
    assert_equal(np_(tf.nn.space_to_depth(tf.nn.depth_to_space(x, 2), 2)), x, what="space_to_depth inverts depth_to_space")
    return ["depth_to_space"]


@record("space_to_batch")
def _s2b(tf: Any) -> list[str]:
    x = vals((2, 3, 5, 2), 104)
    for block, pads in [([2, 2], [[1, 0], [1, 0]]), ([3, 1], [[0, 0], [0, 0]]), ([1, 2], [[0, 1], [2, 1]])]:
        assert_equal(np_(tf.nn.space_to_batch(x, block, pads)), ref.space_to_batch(x, block, pads),
                     what=f"space_to_batch block_shape={block} paddings={pads}")
    return ["space_to_batch"]


# ----------------------------------------------------------------------------- losses and classification


@record("softmax_cross_entropy_with_logits")
def _sce(tf: Any) -> list[str]:
    logits = vals((3, 5), 110, -20, 20)
    labels = vals((3, 5), 111, 0, 1)
    labels /= labels.sum(axis=1, keepdims=True)
    assert_close(np_(tf.nn.softmax_cross_entropy_with_logits(labels, logits)), ref.softmax_xent(labels, logits),
                 tol(6, 5, 40.0), what="softmax_cross_entropy_with_logits axis=-1")
    assert_close(np_(tf.nn.softmax_cross_entropy_with_logits(labels.T, logits.T, axis=0)),
                 ref.softmax_xent(labels.T, logits.T, axis=0), tol(6, 5, 40.0), what="softmax_cross_entropy_with_logits axis=0")
    return ["softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits.axis"]


@record("sparse_softmax_cross_entropy_with_logits")
def _ssce(tf: Any) -> list[str]:
    logits = vals((4, 5), 112, -20, 20)
    labels = np.array([0, 4, 2, 2])
    want = ref.softmax_xent(np.eye(5)[labels], logits)
    assert_close(np_(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)), want, tol(6, 5, 40.0),
                 what="sparse_softmax_cross_entropy_with_logits")
    assert_close(np_(tf.nn.sparse_softmax_cross_entropy_with_logits(labels.astype(np.int64), logits)), want,
                 tol(6, 5, 40.0), what="sparse_softmax_cross_entropy_with_logits int64 labels")
    return ["sparse_softmax_cross_entropy_with_logits"]


@record("log_poisson_loss")
def _log_poisson(tf: Any) -> list[str]:
    z = np.array([0.0, 0.5, 1.0, 1.5, 3.0, 7.0])
    c = vals((6,), 113, -2, 2)
    for full in (False, True):
        got = tf.nn.log_poisson_loss(z, c, compute_full_loss=full)
        mag = float(np.max(np.exp(c) + np.abs(z * c) + (np.abs(z * np.log(np.maximum(z, 1))) + z + 3 if full else 0)))
        assert_close(np_(got), ref.log_poisson(z, c, full), tol(8, 1, mag), what=f"log_poisson_loss compute_full_loss={full}")
    return ["log_poisson_loss", "log_poisson_loss.compute_full_loss"]


@record("in_top_k")
def _in_top_k(tf: Any) -> list[str]:
    pred = np.array([[0.1, 0.9, 0.9, 0.3], [0.5, 0.2, 0.7, 0.7], [0.1, np.nan, 0.2, 0.3], [1.0, 2.0, 3.0, np.inf]],
                    np.float32)
    targets = np.array([2, 0, 3, 3], np.int32)
    for k in (1, 2, 3):
        assert_equal(np_(tf.nn.in_top_k(targets, pred, k)), ref.in_top_k(targets, pred, k),
                     what=f"in_top_k k={k} (ties straddling k are in; non-finite rows are out)")
    return ["in_top_k"]


@record("isotonic_regression")
def _isotonic(tf: Any) -> list[str]:
    x = vals((3, 6), 114)
    for dec in (True, False):
        y, seg = tf.nn.isotonic_regression(x, decreasing=dec)
        refs = [ref.isotonic(r, dec) for r in x]
        assert_close(np_(y), np.stack([r[0] for r in refs]), tol(2, 6, 1.0), what=f"isotonic_regression decreasing={dec}")
        assert_equal(np_(seg).astype(np.int64), np.stack([r[1] for r in refs]).astype(np.int64),
                     what=f"isotonic_regression segments decreasing={dec}")
    y0, _ = tf.nn.isotonic_regression(x.T, axis=0)
    assert_close(np_(y0), np.stack([ref.isotonic(r, True)[0] for r in x]).T, tol(2, 6, 1.0), what="isotonic_regression axis=0")
    return ["isotonic_regression", "isotonic_regression.decreasing=False", "isotonic_regression.axis"]


# ----------------------------------------------------------------------------- CTC


@record("collapse_repeated")
def _collapse(tf: Any) -> list[str]:
    labels = np.array([[1, 1, 2, 2, 1], [1, 2, 3, 4, 5], [3, 3, 3, 0, 0]], np.int32)
    lens = np.array([5, 5, 3], np.int32)
    got, glen = tf.nn.collapse_repeated(labels, lens)
    want, wlen = ref.collapse_repeated(labels, lens)
    assert_equal(np_(glen).astype(np.int64), wlen.astype(np.int64), what="collapse_repeated new lengths")
    g = np_(got)
    assert_equal(g[:, :want.shape[1]].astype(np.int64), want.astype(np.int64), what="collapse_repeated labels, zero padded")
    return ["collapse_repeated"]


@record("ctc_unique_labels")
def _ctc_unique(tf: Any) -> list[str]:
    labels = np.array([[3, 1, 3, 2, 1], [4, 4, 4, 0, 1]], np.int32)
    u, idx = tf.nn.ctc_unique_labels(labels)
    wu, wi = ref.unique_labels(labels)
    assert_equal(np_(u).astype(np.int64), wu.astype(np.int64), what="ctc_unique_labels unique labels")
    assert_equal(np_(idx).astype(np.int64), wi.astype(np.int64), what="ctc_unique_labels indices")
    return ["ctc_unique_labels"]


CTC_LOGITS = vals((4, 2, 3), 120, -2, 2)  # [T, batch, classes]
CTC_CASES = [(0, np.array([[1, 2], [2, 2]]), np.array([2, 2])), (2, np.array([[1, 0], [0, 1]]), np.array([1, 2]))]


@record("ctc_loss")
def _ctc_loss(tf: Any) -> list[str]:
    cases = CTC_CASES
    return _ctc_loss_cases(tf, cases, ("float32",))


def _ctc_loss_cases(tf: Any, cases: list[Any], dtypes: tuple[str, ...]) -> list[str]:
    for dtype, blank, labels, lab_len in [(d, *c) for d in dtypes for c in cases]:
        logit_len = np.array([4, 3])
        for major in (True, False):
            lg = (CTC_LOGITS if major else CTC_LOGITS.transpose(1, 0, 2)).astype(dtype)
            got = tf.nn.ctc_loss(labels.astype(np.int32), lg, lab_len.astype(np.int32), logit_len.astype(np.int32),
                                 logits_time_major=major, blank_index=blank)
            exact = CTC_LOGITS.astype(dtype).astype(np.float64)
            want = [-ref.ctc_label_logprobs(exact[:logit_len[b], b], blank).get(tuple(labels[b, :lab_len[b]]), -np.inf)
                    for b in range(2)]
            assert_close(np_(got), np.array(want), tolerance(dtype, ops=8, reduction=81, magnitude=20.0),
                         what=f"ctc_loss {dtype} blank_index={blank} time_major={major}")
    return ["ctc_loss", "ctc_loss.blank_index", "ctc_loss.logits_time_major=False"]


def _sparse_rows(st: Any, batch: int) -> list[tuple[int, ...]]:
    rows: list[list[int]] = [[] for _ in range(batch)]
    for (b, _), v in zip(np_(st.indices), np_(st.values)):
        rows[int(b)].append(int(v))
    return [tuple(r) for r in rows]


@record("ctc_greedy_decoder")
def _greedy(tf: Any) -> list[str]:
    lg = vals((6, 2, 3), 121, -2, 2)
    lg[1] = lg[0]  # a repeated best class
    lens = np.array([6, 4], np.int32)
    for merge in (True, False):
        for blank in (None, 0):
            kw = {} if blank is None else {"blank_index": blank}
            (dec,), neg = tf.nn.ctc_greedy_decoder(lg, lens, merge_repeated=merge, **kw)
            b = 2 if blank is None else blank
            want = [ref.greedy_decode(lg[:lens[i], i], b, merge) for i in range(2)]
            assert_equal(np.array(_sparse_rows(dec, 2), dtype=object), np.array([w[0] for w in want], dtype=object),
                         what=f"ctc_greedy_decoder merge_repeated={merge} blank_index={blank}")
            f32 = tolerance("float32", ops=1, reduction=6, magnitude=12.0)  # neg_sum_logits is a float32 matrix
            assert_close(np_(neg).ravel(), np.array([w[1] for w in want]), f32,
                         what=f"ctc_greedy_decoder neg_sum_logits merge={merge}")
    return ["ctc_greedy_decoder", "ctc_greedy_decoder.merge_repeated=False", "ctc_greedy_decoder.blank_index"]


@record("ctc_beam_search_decoder")
def _beam(tf: Any) -> list[str]:
    """With a beam wider than every prefix (3^4 paths), the top paths are the most probable labels and
    their log probabilities the exhaustive sums (blank = the last class)."""
    lens = np.array([4, 3], np.int32)
    dec, logp = tf.nn.ctc_beam_search_decoder(CTC_LOGITS, lens, beam_width=100, top_paths=3)
    for b in range(2):
        exact = ref.ctc_label_logprobs(CTC_LOGITS[:lens[b], b], 2)
        best = sorted(exact.items(), key=lambda kv: -kv[1])[:3]
        got_labels = [_sparse_rows(d, 2)[b] for d in dec]
        assert_equal(np.array(got_labels, dtype=object), np.array([k for k, _ in best], dtype=object),
                     what=f"ctc_beam_search_decoder top 3 labels, batch {b}")
        assert_close(np_(logp)[b], np.array([v for _, v in best]), tolerance("float32", ops=8, reduction=81, magnitude=20.0),
                     what=f"ctc_beam_search_decoder log probabilities, batch {b}")
    return ["ctc_beam_search_decoder", "ctc_beam_search_decoder.top_paths"]


# ----------------------------------------------------------------------------- embeddings


EMB = vals((6, 3), 130)
EMB_ROWS = [[0, 2, 2], [5], [], [1, 3]]
EMB_W = [[0.5, 2.0, 1.0], [3.0], [], [0.25, 1.5]]


def _sparse(tf: Any, rows: list[list[Any]], dtype: Any) -> Any:
    idx = [[r, j] for r, row in enumerate(rows) for j in range(len(row))]
    vals_ = [v for row in rows for v in row]
    return tf.SparseTensor(np.array(idx, np.int64).reshape(-1, 2), np.array(vals_, dtype), [len(rows), 3])


@record("embedding_lookup_sparse")
def _emb_sparse(tf: Any) -> list[str]:
    ids = _sparse(tf, EMB_ROWS, np.int64)
    modes = ["embedding_lookup_sparse"]
    for combiner in ("sum", "mean", "sqrtn"):
        for weighted in (False, True):
            w = _sparse(tf, EMB_W, np.float64) if weighted else None
            got = np_(tf.nn.embedding_lookup_sparse(EMB, ids, w, combiner=combiner))
            want = ref.embedding_sparse(EMB, EMB_ROWS, EMB_W if weighted else None, combiner, 4)
            nonempty = [r for r in range(4) if EMB_ROWS[r]]
            assert_close(got[nonempty], want[nonempty], tol(4, 3, 8.0),
                         what=f"embedding_lookup_sparse combiner={combiner} weights={weighted}")
            modes.append(f"embedding_lookup_sparse.combiner={combiner}")
    return modes


@record("safe_embedding_lookup_sparse")
def _safe_emb(tf: Any) -> list[str]:
    modes = ["safe_embedding_lookup_sparse"]
    for combiner in ("sum", "mean", "sqrtn"):
        # non-positive weights under combiner="sum": test_safe_embedding_sum_prunes_non_positive_weights
        rows = [[0, -1, 2], [5], [], [1, 3]] if combiner != "sum" else [[0, -1, 2], [-3], [], [1, 3]]
        weights = [[0.5, 2.0, 1.0], [0.0], [], [0.25, 1.5]] if combiner != "sum" else [[0.5, 2.0, 1.0], [1.0], [], [0.25, 1.5]]
        ids, w = _sparse(tf, rows, np.int64), _sparse(tf, weights, np.float64)
        pruned = [[0, 2], [], [], [1, 3]]
        pruned_w = [[0.5, 1.0], [], [], [0.25, 1.5]]
        for default in (None, 4):
            got = np_(tf.nn.safe_embedding_lookup_sparse(EMB, ids, w, combiner=combiner, default_id=default))
            want = ref.embedding_sparse(EMB, pruned, pruned_w, combiner, 4)
            if default is not None:
                want[[1, 2]] = EMB[default]
            assert_close(got, want, tol(4, 3, 8.0), what=f"safe_embedding_lookup_sparse combiner={combiner} default_id={default} "
                         "(negative ids and non-positive weights pruned; empty rows default or zero)")
            modes.append(f"safe_embedding_lookup_sparse.combiner={combiner}")
        modes.append("safe_embedding_lookup_sparse.default_id")
    return modes


# ----------------------------------------------------------------------------- candidate sampling


@record("compute_accidental_hits")
def _hits(tf: Any) -> list[str]:
    true = np.array([[1, 4], [2, 5], [0, 3]], np.int64)
    sampled = np.array([4, 2, 7, 3, 1], np.int64)
    idx, ids, w = tf.nn.compute_accidental_hits(true, sampled, num_true=2)
    want = sorted((b, j) for b in range(3) for j, s in enumerate(sampled) if s in true[b])
    got = sorted(zip(np_(idx).tolist(), np_(ids).tolist()))
    assert got == want, f"compute_accidental_hits (row, sampled position) pairs: got {got}, want {want}"
    assert_equal(np_(w).astype(np.float64), np.full(len(want), -ref.FLOAT_MAX), what="compute_accidental_hits weights -FLOAT_MAX")
    return ["compute_accidental_hits"]


def _sampler_common(tf: Any, fname: str, kwargs: dict[str, Any], range_max: int, unique: bool, seed: int) -> tuple[Any, ...]:
    true = np.array([[0, 3], [5, 1]], np.int64)
    tf.random.set_seed(1)
    out = getattr(tf.nn, fname)(true, 2, 6, unique, **kwargs, seed=seed)
    s, te, se = (np_(t) for t in out)
    assert s.shape == (6,) and te.shape == (2, 2) and se.shape == (6,), f"{fname}: shapes {s.shape} {te.shape} {se.shape}"
    assert np.all((s >= 0) & (s < range_max)), f"{fname}: sampled {s} outside [0, {range_max})"
    if unique:
        assert len(set(s.tolist())) == 6, f"{fname} unique=True: repeated candidates {s}"
    tf.random.set_seed(1)
    again = getattr(tf.nn, fname)(true, 2, 6, unique, **kwargs, seed=seed)
    assert_equal(np_(again[0]), s, what=f"{fname}: same seeds, same candidates")
    return true, s, te, se


@record("all_candidate_sampler")
def _all_sampler(tf: Any) -> list[str]:
    true = np.array([[0, 3], [5, 1]], np.int64)
    s, te, se = (np_(t) for t in tf.nn.all_candidate_sampler(true, 2, 7, True))
    assert_equal(s.astype(np.int64), np.arange(7, dtype=np.int64),
                 what="all_candidate_sampler returns every class 0..num_sampled-1")
    assert_equal(te.astype(np.float64), np.ones((2, 2)), what="all_candidate_sampler true_expected_count 1")
    assert_equal(se.astype(np.float64), np.ones(7), what="all_candidate_sampler sampled_expected_count 1")
    return ["all_candidate_sampler"]


@record("fixed_unigram_candidate_sampler")
def _fixed_unigram(tf: Any) -> list[str]:
    unigrams = [1.0, 0.0, 3.0, 2.0, 0.0, 4.0, 1.0, 5.0]
    for unique in (False, True):
        for distortion in (1.0, 0.5):
            true, s, te, se = _sampler_common(tf, "fixed_unigram_candidate_sampler",
                                              {"range_max": 8, "unigrams": unigrams, "distortion": distortion}, 8, unique, 3)
            assert not set(s.tolist()) & {1, 4}, f"fixed_unigram_candidate_sampler: zero-probability classes sampled: {s}"
            if not unique:
                p = np.array(unigrams) ** distortion
                p = p / p.sum()
                assert_close(te, 6 * p[true], tolerance("float32", ops=4, reduction=8),
                             what=f"fixed_unigram_candidate_sampler true_expected_count = 6 p(c), distortion={distortion}")
                assert_close(se, 6 * p[s], tolerance("float32", ops=4, reduction=8),
                             what=f"fixed_unigram_candidate_sampler sampled_expected_count distortion={distortion}")
    return ["fixed_unigram_candidate_sampler", "fixed_unigram_candidate_sampler.unique",
            "fixed_unigram_candidate_sampler.distortion"]


@record("learned_unigram_candidate_sampler")
def _learned_unigram(tf: Any) -> list[str]:
    for unique in (False, True):
        _, _s, te, se = _sampler_common(tf, "learned_unigram_candidate_sampler", {"range_max": 9}, 9, unique, 4)
        for name, e in (("true", te), ("sampled", se)):
            assert np.all((e > 0) & (e <= 6 + 1e-6)), \
                f"learned_unigram_candidate_sampler {name}_expected_count {e} outside (0, num_sampled]"
    return ["learned_unigram_candidate_sampler", "learned_unigram_candidate_sampler.unique"]


def _sampled_case() -> tuple[np.ndarray, ...]:
    w, b, x = vals((7, 3), 140), vals((7,), 141), vals((3, 3), 142)
    labels = np.array([[1, 4], [2, 6], [0, 3]], np.int64)
    sampled = np.array([4, 5, 0, 2], np.int64)
    te, se = vals((3, 2), 143, 0.2, 1.5), vals((4,), 144, 0.2, 1.5)
    return w, b, x, labels, sampled, te, se


@record("nce_loss")
def _nce(tf: Any) -> list[str]:
    w, b, x, labels, sampled, te, se = _sampled_case()
    for hits in (False, True):
        got = tf.nn.nce_loss(w, b, labels, x, num_sampled=4, num_classes=7, num_true=2,
                             sampled_values=(sampled, te, se), remove_accidental_hits=hits)
        logits, lab = ref.sampled_logits(w, b, labels, x, sampled, te, se, hits)
        want = np.sum(ref.sigmoid_xent(lab, logits), axis=1)
        finite = np.where(np.abs(logits) < 1e30, np.abs(logits), 0)
        assert_close(np_(got), want, tol(8, 6, float(np.max(finite)) * 6 + 6), what=f"nce_loss remove_accidental_hits={hits}")
    return ["nce_loss", "nce_loss.remove_accidental_hits"]


@record("sampled_softmax_loss")
def _ssl(tf: Any) -> list[str]:
    w, b, x, labels, sampled, te, se = _sampled_case()
    for hits in (True, False):
        got = tf.nn.sampled_softmax_loss(w, b, labels, x, num_sampled=4, num_classes=7, num_true=2,
                                         sampled_values=(sampled, te, se), remove_accidental_hits=hits)
        logits, lab = ref.sampled_logits(w, b, labels, x, sampled, te, se, hits)
        want = ref.softmax_xent(lab, logits)
        finite = np.where(np.abs(logits) < 1e30, np.abs(logits), 0)
        assert_close(np_(got), want, tol(8, 6, float(np.max(finite)) * 2 + 2),
                     what=f"sampled_softmax_loss remove_accidental_hits={hits}")
    return ["sampled_softmax_loss", "sampled_softmax_loss.remove_accidental_hits"]


def _approx_k(tf: Any, fname: str) -> list[str]:
    x = vals((3, 40), 150).astype(np.float32)  # ApproxTopK's T: half, bfloat16, float32
    sign = 1 if fname == "approx_max_k" else -1
    for k, axis, recall in [(5, -1, 0.95), (5, -1, 1.0), (3, 0, 0.9)]:
        # the docstring's usage: wrapped in tf.function(jit_compile=True) (the eager CPU kernel has only
        # approx_max_k along the last axis)
        call = tf.function(lambda t, k=k, axis=axis, recall=recall: getattr(tf.nn, fname)(
            t, k, reduction_dimension=axis, recall_target=recall), jit_compile=True)
        v, i = call(tf.constant(x))
        v, i = np_(v), np_(i).astype(np.int64)
        assert v.shape == tuple(k if d == (axis % 2) else x.shape[d] for d in range(2)), f"{fname}: shape {v.shape}"
        assert_equal(v, np.take_along_axis(x, i, axis=axis), what=f"{fname}: values are the operand at the indices")
        exact = np.argsort(-sign * x, axis=axis).take(range(k), axis=axis)
        xs = np.moveaxis(i, axis, -1), np.moveaxis(exact, axis, -1)
        found = np.mean([len(set(a) & set(b)) / k for a, b in zip(xs[0].reshape(-1, k), xs[1].reshape(-1, k))])
        assert found >= recall, f"{fname} k={k} axis={axis}: recall {found} below recall_target {recall}"
    return [fname]


record("approx_max_k")(lambda tf: _approx_k(tf, "approx_max_k"))
record("approx_min_k")(lambda tf: _approx_k(tf, "approx_min_k"))


# ----------------------------------------------------------------------------- tests


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", sorted(RECORDS))
def test_tf_nn_function(tf: Any, name: str) -> None:
    """One record: the function called as documented, against its numpy reference."""
    fn = getattr(tf.nn, name)
    assert callable(fn), f"tf.nn.{name} is not public"
    modes = RECORDS[name](tf)
    evidence.covers(*modes)


@pytest.mark.claim(CLAIM)
def test_table_complete(tf: Any) -> None:
    """Every listed function has a record or a reason; each exists in tf.nn; the three RNNCell wrappers
    are documented deprecated."""
    missing = [n for n in LISTED if n not in RECORDS and n not in OUT_OF_SCOPE]
    assert not missing, f"tf.nn functions without a record or an out-of-scope reason: {missing}"
    absent = [n for n in LISTED if not hasattr(tf.nn, n)]
    assert not absent, f"listed names not in tf.nn: {absent}"
    for n in OUT_OF_SCOPE:
        assert "DEPRECATED" in (getattr(tf.nn, n).__doc__ or ""), \
            f"tf.nn.{n} is out of scope as deprecated, but its docstring no longer says so"
    evidence.covers("table-complete")


# ----------------------------------------------------------------------------- single documented properties
# (each its own test, so that a divergence in one leaves the record's modes checked)


@pytest.mark.claim(CLAIM)
def test_max_pool_keeps_a_float64_tensor_float64(tf: Any) -> None:
    """tf.nn.max_pool of a float64 Tensor (its docstring: "input: Tensor of rank N+2") is a float64
    Tensor of the window maxima, bitwise. A numpy float64 array is not a Tensor: TF 2.21 returns
    float32 for one through max_pool2d's explicit_paddings path, which no docstring of the public
    function contradicts (only tf.raw_ops.MaxPool says "Has the same type as input"), so for it
    only the values are checked, at the output's own precision."""
    x = vals((1, 4, 4, 1), 160)
    want = ref.pool(x, [2, 2], [2, 2], "VALID", "max")
    out = tf.nn.max_pool(tf.constant(x), 2, 2, "VALID")
    assert out.dtype == tf.float64, f"max_pool on a float64 Tensor: output dtype {out.dtype}"
    assert_equal(np_(out), want, what="max_pool of a float64 Tensor, bitwise")
    from_numpy = np_(tf.nn.max_pool(x, 2, 2, "VALID"))
    assert_equal(from_numpy, want.astype(from_numpy.dtype), what=f"max_pool of a numpy float64 array ({from_numpy.dtype})")


@pytest.mark.claim(CLAIM)
def test_ctc_loss_float64(tf: Any) -> None:
    """ctc_loss takes float64 logits (its docstring names no dtype restriction) and matches the exhaustive sum."""
    _ctc_loss_cases(tf, CTC_CASES, ("float64",))


@pytest.mark.claim(CLAIM)
def test_gelu_float64(tf: Any) -> None:
    """gelu in float64 is x/2 (1 + erf(x / sqrt 2)) (approximate=False) and x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3))) (approximate=True) to float64 rounding (mpmath, 40 digits)."""
    import mpmath

    x = np.concatenate([vals((20,), 84, -6, 6), [0.0, -0.0, 1e-300]])
    approx = _mp_map(lambda v: v / 2 * (1 + mpmath.tanh(mpmath.sqrt(2 / mpmath.pi) * (v + mpmath.mpf("0.044715") * v ** 3))), x)
    assert_close(np_(tf.nn.gelu(x, approximate=True)), approx, tol(8, 1, 6.0),
                 what="gelu approximate=True, float64: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))")
    exact = _mp_map(lambda v: v / 2 * (1 + mpmath.erf(v / mpmath.sqrt(2))), x)
    assert_close(np_(tf.nn.gelu(x)), exact, tol(6, 1, 6.0), what="gelu approximate=False, float64: x/2 (1 + erf(x/sqrt 2))")


@pytest.mark.claim(CLAIM)
def test_safe_embedding_sum_prunes_non_positive_weights(tf: Any) -> None:
    """safe_embedding_lookup_sparse prunes 'any IDs with non-positive weight' whatever the combiner; a row left
    without features gets default_id's vector."""
    rows, weights = [[1, 2], [0]], [[1.0, -1.0], [0.0]]
    for combiner in ("sum", "mean"):
        got = np_(tf.nn.safe_embedding_lookup_sparse(EMB, _sparse(tf, rows, np.int64), _sparse(tf, weights, np.float64),
                                                     combiner=combiner, default_id=4))
        assert_close(got, np.stack([EMB[1], EMB[4]]), tol(4, 3, 8.0),
                     what=f"safe_embedding_lookup_sparse combiner={combiner}: weight -1 and 0 pruned, empty row default_id")
