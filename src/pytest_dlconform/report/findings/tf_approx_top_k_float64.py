"""tf.math.approx_max_k / approx_min_k refuse float64 ("Must be a floating number type").

Claim (dlconform modules.tf.math-functions): every tf.math function accepts the dtypes its
docstring states; a refusal is "not applicable" only where the documentation excludes the dtype.
Documentation: help(tf.math.approx_max_k), help(tf.math.approx_min_k) (also tf.nn.*),
  https://www.tensorflow.org/api_docs/python/tf/math/approx_max_k
    "operand : Array to search for max-k. Must be a floating number type."
    (approx_min_k: "Array to search for min-k. Must be a floating number type.")
    "We encourage users to wrap `approx_max_k` with jit."
  float64 is a floating type (tf.float64.is_floating); no page lists the accepted types.
Observed on tensorflow-cpu 2.21.0: a float64 operand is refused on every path, before any
device is chosen: under tf.function(jit_compile=True) (the docstring's own way to call it)
TypeError "Value passed to parameter 'input' has DataType float64 not in list of allowed values:
float16, bfloat16, float32", eagerly InvalidArgumentError "Value for attr 'T' of double is not in
the list of allowed values: half, bfloat16, float". The ApproxTopK op definition allows
T in {half, bfloat16, float}, and so do its XLA kernels (tf2xla, TypeConstraint("T", {DT_FLOAT,
DT_HALF, DT_BFLOAT16})); the CPU kernel registered for DT_DOUBLE (an eager max-k kernel, see
tf_approx_top_k_cpu.py) can never be reached. float16, bfloat16 and float32 work.
Found by: suites/modules/test_tf_math.py::test_approx_k_float64[cpu-approx_max_k] and
[cpu-approx_min_k] (jit_compile=True).

Run: python tf_approx_top_k_float64.py
Exit 1 while float64 is refused, 0 once a float64 call returns float64 values that are the
operand at the returned indices, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# distinct values that float32 cannot hold (1 + 2^-40 ...): a float32 computation would show
X = np.array([[3.0, 9.0, 1.0, 7.0, 5.0, 0.0],
              [8.0, 2.0, 6.0, 4.0, 11.0, 10.0]]) * (1.0 + 2.0**-40)
K = 2
# (function, how): the eager max-k kernel exists for double, so that call depends on the op
# definition alone; eager min-k (no CPU kernel at all) is finding tf_approx_top_k_cpu.py's.
CASES = (("approx_max_k", "jit_compile"), ("approx_min_k", "jit_compile"), ("approx_max_k", "eager"))


def observed():
    """'name (how)' -> (values, indices, values' dtype name) of the float64 call, or its error."""
    import tensorflow as tf

    out = {}
    for name, how in CASES:
        fn = getattr(tf.math, name)
        call = tf.function(lambda v, fn=fn: fn(v, K), jit_compile=True) if how == "jit_compile" else (
            lambda v, fn=fn: fn(v, K))
        try:
            with tf.device("/CPU:0"):
                values, indices = call(tf.constant(X, tf.float64))
            out[f"{name} ({how})"] = (values.numpy().astype(np.float64), indices.numpy(), values.dtype.name)
        except (tf.errors.OpError, TypeError) as exc:
            first = str(exc).strip().splitlines()
            first = [ln.strip() for ln in first if "allowed values" in ln][:1] or first[:1]
            text = first[0].removeprefix(f"{type(exc).__name__}: ")[:200]
            out[f"{name} ({how})"] = f"{type(exc).__name__}: {text}"
    return out


def expected():
    """The exact k extreme values of each row in float64 and their indices."""
    out = {}
    for name, how in CASES:
        idx = np.argsort(-X if name == "approx_max_k" else X, axis=-1, kind="stable")[:, :K]
        out[f"{name} ({how})"] = (np.take_along_axis(X, idx, -1), idx, "float64")
    return out


def judge(got, want):
    bad = []
    for label in want:
        g = got[label]
        if isinstance(g, str):
            bad.append(f"{label}: {g}")
            continue
        values, indices, dtype = g
        values, indices = np.asarray(values, np.float64), np.asarray(indices)
        if dtype != "float64":
            bad.append(f"{label}: returns {dtype}")
        elif values.shape != (X.shape[0], K) or indices.shape != values.shape:
            bad.append(f"{label}: shapes {values.shape}, {indices.shape} instead of {(X.shape[0], K)}")
        elif not np.array_equal(values, np.take_along_axis(X, indices.astype(np.int64), -1)):
            bad.append(f"{label}: values {values.tolist()} are not the float64 operand[indices {indices.tolist()}]")
    line = (f"float64 tf.math.approx_max_k / approx_min_k on CPU, x of shape {X.shape}, k={K} (documented: "
            "'Must be a floating number type'): "
            + ("; ".join(bad) if bad else "all of " + ", ".join(want) + " return float64 operand[indices]"))
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
