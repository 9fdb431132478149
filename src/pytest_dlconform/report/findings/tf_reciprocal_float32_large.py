"""tf.math.reciprocal in float32 (and so the gradient of tf.math.log, log1p, ...) is only
accurate to about 1e-4 for |x| above about 1.2e34, in the vectorised kernel.

Claim (dlconform autodiff.ops.edge-cases, mode extreme): the gradient of log(x**2 + c) and
log1p(x**2) at |x| = 1e18 in float32 (x**2 = 1e36, finite) is the derivative within a few
float32 round-offs.
Documentation: https://www.tensorflow.org/api_docs/python/tf/math/reciprocal
    "Computes the reciprocal of x element-wise. I.e., y = 1 / x."
  and tf.math.log's gradient, grad * reciprocal(x) (tensorflow/python/ops/math_grad.py).
Observed on tensorflow 2.21.0 (CPU, AVX-512): on a 64-element float32 tensor, relative errors
of 1e-5..2.4e-4 for 1.2e34 < |x| < 8.5e37, where float32 division is exact to 6e-8
(1.0 / x is accurate; so is reciprocal on a 5-element tensor, which takes the scalar path).
The size of the error is that of a 14-bit reciprocal estimate without its Newton step.
Found by: suites/autodiff/test_op_edges.py::test_tensorflow_op_edge_cases[cpu-extreme-log_c]
and [cpu-extreme-log1p_sq] (x = 1e18 in float32).

Run: python tf_reciprocal_float32_large.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
X = (10.0 ** np.linspace(30.0, 37.9, 64)).astype(np.float32)  # 1/x stays normal in float32
RTOL = 4 * 2.0**-24  # a few float32 round-offs


def observed():
    import tensorflow as tf

    x = tf.Variable(tf.constant(X))
    with tf.GradientTape() as tape:
        y = tf.math.log(x)
    return tf.math.reciprocal(tf.constant(X)).numpy(), tape.gradient(y, x).numpy()


def expected():
    return 1.0 / X.astype(np.float64)


def judge(got, want):
    recip, grad = (np.asarray(g, dtype=np.float64) for g in got)
    err = np.maximum(np.abs(recip - want), np.abs(grad - want)) / want
    k = int(np.argmax(err))
    return bool(np.all(err <= RTOL)), (
        f"float32 tf.math.reciprocal and the gradient of tf.math.log on 64 values 1e30..8e37: largest relative error "
        f"{float(err[k]):.3g} at x={float(X[k]):.4g} (allowed {RTOL:.2g}); {int(np.sum(err > RTOL))} values exceed it")


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
