"""tf.nn.moments: the variance's second derivative is wrong (its first derivative is right).

Claim (dlconform autodiff.gradient.second-order): a Hessian-vector product by nested
tf.GradientTape (reverse over reverse) or tf.autodiff.ForwardAccumulator around a
GradientTape (forward over reverse) is the derivative of the gradient.
Documentation: https://www.tensorflow.org/api_docs/python/tf/nn/moments
    "Calculates the mean and variance of `x`." ... "Returns: Two `Tensor` objects: `mean` and
     `variance`." (nothing about gradients or stop_gradient), so var = mean((x - mean(x))**2)
  and its Hessian is 2/n (I - 1 1^T / n); https://www.tensorflow.org/api_docs/python/tf/GradientTape:
  "GradientTapes can be nested to compute higher-order derivatives"; the autodiff guide's
  Hessian-vector product is a ForwardAccumulator around a GradientTape.
Observed on tensorflow 2.21.0: tensorflow/python/ops/nn_impl.py computes the variance as
reduce_mean(squared_difference(y, stop_gradient(mean))) ("stop_gradient does not change the
gradient that gets backpropagated to the mean from the variance calculation, because that
gradient is zero"): true of the first derivative at the mean, not of the second, so both
modes give H v = 2/n v, dropping the -(2/n^2) 1 1^T v term. Every normalisation written with
tf.nn.moments (layer, batch, group, instance norm by tf.nn.batch_normalization) has a wrong
second derivative (relative error up to 1 in the suite).
Found by: suites/autodiff/test_second_order.py::test_tensorflow_op_hvp_reverse_over_reverse
and ::test_tensorflow_op_hvp_forward_over_reverse, [*-layer_norm], [*-batch_norm],
[*-group_norm], [*-instance_norm] (e.g. layer_norm: <c, H v> = 0.0684, finite differences of the
gradient -1.45e-06).

Run: python tf_moments_second_derivative.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
X = np.array([0.3, -1.2, 0.8, 2.0])
V = np.array([1.0, 0.5, -0.25, 0.75])
# 2/n (v - mean(v)): a sum of n terms, a subtraction and a scaling, twice differentiated: 16 u is generous.
RTOL = 16 * np.finfo(np.float64).eps / 2


def observed():
    """H v of the variance tf.nn.moments(x, axes=[0])[1], by nested tapes and forward over reverse."""
    import tensorflow as tf

    x, v = tf.constant(X), tf.constant(V)

    def var(z):
        return tf.nn.moments(z, axes=[0])[1]

    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = var(x)
        g = inner.gradient(y, x)
    nested = outer.gradient(g, x, output_gradients=v)
    with tf.autodiff.ForwardAccumulator(x, v) as acc:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = var(x)
        g2 = tape.gradient(y, x)
    return {"nested GradientTape": nested.numpy(), "ForwardAccumulator over GradientTape": acc.jvp(g2).numpy()}


def expected():
    n = X.size
    return 2.0 / n * (np.eye(n) - np.ones((n, n)) / n) @ V


def judge(got, want):
    errs = {k: float(np.max(np.abs(np.asarray(h, dtype=np.float64) - want)) / np.max(np.abs(want)))
            for k, h in got.items()}
    seen = "; ".join(f"{k}: {np.asarray(h).tolist()}" for k, h in got.items())
    return max(errs.values()) <= RTOL, (
        f"H v of tf.nn.moments' variance at x={X.tolist()}, v={V.tolist()}: {seen}; documented "
        f"2/n (I - 1 1^T/n) v = {want.tolist()}; relative error {max(errs.values()):.3g} (allowed {RTOL:.2g})")


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
