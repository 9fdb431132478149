"""The gradient of logcumsumexp loses about u |x| (relative) in torch and TensorFlow alike:
wrong in the first digit at |x| >= 1e16 (float64) and 1e7 (float32).

Claim (dlconform autodiff.ops.edge-cases, mode extreme): the reverse-mode gradient of the
log-sum-exp family (documented as numerically stable) at large magnitudes is the derivative
within the error model.
Documentation: https://www.tensorflow.org/api_docs/python/tf/math/cumulative_logsumexp
    "This operation is significantly more numerically stable than the equivalent Tensorflow
    operation tf.math.log(tf.math.cumsum(tf.math.exp(x)))"
  https://pytorch.org/docs/stable/generated/torch.logcumsumexp.html (log sum_{k<=j} exp(x_k));
  the gradient of sum_j w_j y_j is g_i = sum_{j>=i} w_j exp(x_i - y_j).
Observed on torch 2.13.0 and tensorflow 2.21.0 (CPU): for x = [X, 0, 0] and w = [1, 2, 3] the
exact gradient is [6, 0, 0] (every y_j = X to within exp(-X)); both return 6.0014 at X = 1e4 in
float32, 7.389 (e**2) at X = 1e7 and 1 at X = 1e8; in float64 7.389 at X = 1e16 and 1 at 1e20
or 1e300. Both backward formulas work in log space, adding log(w_j) to -y_j: at |y_j| = X the
sum keeps only log(w_j) rounded to an ulp of X, so the weights are lost.
Found by: suites/autodiff/test_op_edges.py::test_torch_op_edge_cases[cpu-extreme-logcumsumexp]
and test_tensorflow_op_edge_cases[cpu-extreme-logcumsumexp] (x = [1e300, -1e300, 0]).

Run: python logcumsumexp_backward_large.py
Exit 1 while the bug is there in either framework, 0 once fixed in both, 2 if neither imports.
"""

import sys

import numpy as np

CASES = [("float32", 1e4), ("float32", 1e7), ("float64", 1e16), ("float64", 1e300)]
W = np.array([1.0, 2.0, 3.0])
# Exact: [6, 0, 0]; a conforming float32 backward is a few ulps off (its inputs are exact).
RTOL = {"float32": 16 * 2.0**-24, "float64": 16 * 2.0**-53}


def _torch(dtype, big):
    import torch

    x = torch.tensor([big, 0.0, 0.0], dtype=getattr(torch, dtype), requires_grad=True)
    (g,) = torch.autograd.grad((torch.logcumsumexp(x, 0) * torch.tensor(W, dtype=x.dtype)).sum(), x)
    return g.double().numpy()


def _tf(dtype, big):
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    x = tf.Variable(tf.constant([big, 0.0, 0.0], getattr(tf, dtype)))
    with tf.GradientTape() as tape:
        s = tf.reduce_sum(tf.math.cumulative_logsumexp(x) * tf.constant(W, getattr(tf, dtype)))
    return tape.gradient(s, x).numpy().astype(np.float64)


def observed():
    out = {}
    for name, fn in (("torch", _torch), ("tensorflow", _tf)):
        try:
            out[name] = [fn(d, big) for d, big in CASES]
        except ImportError:
            continue
    if not out:
        raise ImportError("neither torch nor tensorflow imports")
    return out


def judge(got):
    bad = [(fw, d, big, float(g[0])) for fw, gs in got.items() for (d, big), g in zip(CASES, gs)
           if abs(g[0] - 6.0) > 6.0 * RTOL[d] or np.any(g[1:] != 0)]
    return not bad, (f"gradient of sum(w * logcumsumexp([X, 0, 0])), w = [1, 2, 3], exact [6, 0, 0]: "
                     f"{len(bad)} of {len(CASES) * len(got)} wrong, (framework, dtype, X, g_0) = {bad!r}")


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    holds, line = judge(got)
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
