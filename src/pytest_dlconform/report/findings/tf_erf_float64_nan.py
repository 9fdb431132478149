"""tf.math.erf in float64 returns NaN for |x| above about 1.5e154 (erf(x) = +-1 there).

Claim (dlconform autodiff.ops.edge-cases, mode extreme): an op's value at extreme finite
magnitudes is the documented function's wherever that function is finite.
Documentation: https://www.tensorflow.org/api_docs/python/tf/math/erf
    "Computes the Gauss error function of x element-wise."  (erf maps the reals onto [-1, 1])
Observed on tensorflow 2.21.0 (CPU): tf.math.erf(float64 1e155) is nan (1e154 gives 1.0);
float32 is not affected (erf(1e30) = 1). The float64 kernel squares x (x * x overflows to
inf past 1.34e154) and then divides inf by inf. torch.erf gives +-1 at the same inputs.
Found by: suites/autodiff/test_op_edges.py::test_tensorflow_op_edge_cases[cpu-extreme-erf].

Run: python tf_erf_float64_nan.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
X = np.array([1e154, 1e155, 1e200, 1e300, -1e155, -1e300])


def observed():
    import tensorflow as tf

    return tf.math.erf(tf.constant(X, dtype=tf.float64)).numpy()


def expected():
    return np.sign(X)  # |erf(x) - sign(x)| < erfc(1e154), far below float64's smallest number


def judge(got, want):
    got = np.asarray(got, dtype=np.float64)
    bad = [(float(x), float(g)) for x, g, w in zip(X, got, want) if g != w]
    return not bad, (f"tf.math.erf in float64 at {len(X)} magnitudes 1e154..1e300: {len(bad)} differ from +-1, "
                     f"e.g. {bad[:3]!r}")


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
