"""tf.math.approx_min_k, and approx_max_k along any reduction_dimension but -1: no CPU kernel.

Claim (dlconform modules.tf.math-functions): every tf.math function does what its docstring
states, on CPU, eagerly (TensorFlow 2's default mode); a refusal is "not applicable" only where
the documentation excludes the use.
Documentation: help(tf.math.approx_min_k), help(tf.math.approx_max_k) (also tf.nn.*),
  https://www.tensorflow.org/api_docs/python/tf/math/approx_min_k
    "Returns min `k` values and their indices of the input `operand` in an approximate manner.
     See https://arxiv.org/abs/2206.14286 for the algorithm details. This op is only optimized
     on TPU currently."
    "operand : Array to search for min-k. Must be a floating number type."
    "reduction_dimension: Integer dimension along which to search. Default: -1."
    "We encourage users to wrap `approx_min_k` with jit."
  (approx_max_k the same with max-k). Only optimised on TPU, jit encouraged: neither excludes
  an eager call on CPU, and no page says the CPU lacks min-k or a reduction_dimension.
Observed on tensorflow-cpu 2.21.0: eagerly on CPU approx_max_k(x, k) along the default -1 works
(exact top-k), but approx_min_k(x, k) raises NotFoundError "Could not find device for node:
{{node ApproxTopK}} = ApproxTopK[..., is_max_k=false, ...]", and approx_max_k with
reduction_dimension=0, or =1 on a 2-D operand (the same last axis as -1), raises the same
NotFoundError. The kernel registry (tensorflow.python.framework.kernels.
get_registered_kernels_for_op("ApproxTopK"), listed in the error) has CPU kernels for
ApproxTopK only under the constraints reduction_dimension in [-1] and is_max_k in [true]; the
other kernel is XLA's (XLA_CPU_JIT), so every one of these calls works under
tf.function(jit_compile=True). A tf.function without jit_compile raises InvalidArgumentError
"No OpKernel was registered to support Op 'ApproxTopK'".
Found by: suites/modules/test_tf_math.py::test_approx_k_eager[cpu-approx_max_k] (reduction_dimension=0)
and [cpu-approx_min_k] (the first call).

Run: python tf_approx_top_k_cpu.py
Exit 1 while an eager CPU call refuses, 0 once every call returns the k extreme values of each
row, 2 if tensorflow cannot be imported.
"""

import os
import re
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

X = np.array([[3.0, 9.0, 1.0, 7.0, 5.0, 0.0],
              [8.0, 2.0, 6.0, 4.0, 11.0, 10.0]], dtype=np.float32)  # distinct values, exact in float32
K = 2
# (function, reduction_dimension): the default max-k is the control, it runs today
CASES = (("approx_max_k", -1), ("approx_min_k", -1), ("approx_max_k", 0), ("approx_max_k", 1),
         ("approx_min_k", 0))


def _label(name, dim):
    return f"{name}(x, {K}" + (f", reduction_dimension={dim})" if dim != -1 else ")")


def observed():
    """label -> (values, indices) of the eager CPU call, or the error it raised."""
    import tensorflow as tf

    out = {}
    for name, dim in CASES:
        try:
            with tf.device("/CPU:0"):
                values, indices = getattr(tf.math, name)(tf.constant(X), K, reduction_dimension=dim)
            out[_label(name, dim)] = (values.numpy().astype(np.float64), indices.numpy())
        except tf.errors.OpError as exc:
            out[_label(name, dim)] = _error(exc)
    return out


def _error(exc):
    """The error's type and first line, the node's attributes cut to the two that pick a kernel."""
    first = str(exc).strip().splitlines()[0]
    attrs = dict(re.findall(r"(is_max_k|reduction_dimension)=(-?\w+)", first))
    head = first.split(" = ApproxTopK[")[0][:160]
    return f"{type(exc).__name__}: {head}" + (f" ({', '.join(f'{k}={v}' for k, v in attrs.items())})" if attrs else "")


def expected():
    """The exact k extreme values and their indices (what an approximation with recall 1 returns;
    on CPU, XLA's fallback under jit_compile returns exactly these)."""
    out = {}
    for name, dim in CASES:
        order = np.argsort(-X if name == "approx_max_k" else X, axis=dim, kind="stable")
        idx = np.take(order, range(K), axis=dim)
        out[_label(name, dim)] = (np.take_along_axis(X, idx, dim).astype(np.float64), idx)
    return out


def _wrong(got, name, dim):
    """Why (values, indices) is not a documented result: k values along dim, equal to the operand
    at distinct indices, sorted; the recall itself is only a target, so it is not judged."""
    values, indices = (np.asarray(a) for a in got)
    axis = dim % X.ndim
    shape = tuple(K if i == axis else n for i, n in enumerate(X.shape))
    if values.shape != shape or indices.shape != shape:
        return f"shapes {values.shape}, {indices.shape} instead of {shape}"
    if not np.array_equal(values, np.take_along_axis(X, indices.astype(np.int64), axis).astype(np.float64)):
        return f"values {values.tolist()} are not operand[indices {indices.tolist()}]"
    lines = np.moveaxis(indices, axis, -1).reshape(-1, K)
    if any(len(set(r)) != K for r in lines.tolist()):
        return f"repeated indices {indices.tolist()}"
    ordered = np.moveaxis(values, axis, -1)
    if not np.all(np.diff(ordered, axis=-1) <= 0 if name == "approx_max_k" else np.diff(ordered, axis=-1) >= 0):
        return f"values {values.tolist()} are not sorted"
    return None


def judge(got, want):
    bad = []
    for name, dim in CASES:
        label = _label(name, dim)
        g = got[label]
        why = g if isinstance(g, str) else _wrong(g, name, dim)
        if why:
            bad.append(f"{label}: {why}")
    line = (f"eager tf.math.approx_max_k / approx_min_k on CPU, float32 x of shape {X.shape} (documented: "
            "min-k and any reduction_dimension; only optimised on TPU): "
            + ("; ".join(bad) if bad else "all of " + ", ".join(want) + " return k values per row"))
    return not bad, line


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    holds, line = judge(got, expected())
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
