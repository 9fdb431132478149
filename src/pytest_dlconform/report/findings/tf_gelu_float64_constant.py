"""tf.nn.gelu(approximate=False) in float64 uses 1/sqrt(2) rounded to float32.

Claim (dlconform interop.same-model.activations): an activation computes its documented
formula to the rounding of its dtype.
Documentation: https://www.tensorflow.org/api_docs/python/tf/nn/gelu
    "Gaussian error linear unit (GELU) computes x * P(X <= x), where P(X) ~ N(0, 1)."
  and https://www.tensorflow.org/api_docs/python/tf/keras/activations/gelu (what the
  suite calls; on the TensorFlow backend it is tf.nn.gelu):
    "gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2)))"
Observed on tensorflow 2.21.0 (keras 3.15.1): errors of about 5e-9 relative in float64,
where float64 arithmetic stays near 1e-16. tensorflow/python/ops/nn_ops.py, gelu():
`math_ops.erfc(-features * math_ops.cast(0.7071067811865476, features.dtype))`: cast()
first converts the Python float to a float32 tensor, so the float64 constant is
float32(1/sqrt(2)) = 0.7071067690849304 (off by 1.2e-8). The approximate=True branch has the
same cast (coeff = math_ops.cast(0.044715, features.dtype): float32(0.044715)); this script
checks the exact branch only.
Found by: suites/interop/test_same_model.py::test_activation_computes_its_formula[tf-cpu],
shrunk example spread = 1.0, seed = 0: x = numpy.random.default_rng(0).uniform(-1, 1, 257).

Run: python tf_gelu_float64_constant.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import math
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
X = np.random.default_rng(0).uniform(-1.0, 1.0, size=257)  # the suite's inputs for spread=1, seed=0
# Normwise, relative to max|gelu|: a division, erf(c), an add and two products in float64,
# plus math.erf's own ~1 ulp: 64 round-offs (7e-15) is generous; float32(1/sqrt 2) gives 5e-9.
RTOL = 64 * np.finfo(np.float64).eps / 2


def observed():
    import tensorflow as tf

    return tf.nn.gelu(tf.constant(X, dtype=tf.float64), approximate=False).numpy()


def expected():
    """0.5 x (1 + erf(x / sqrt 2)) in float64, without TensorFlow."""
    return np.array([0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))) for x in X])


def judge(got, want):
    got = np.asarray(got, dtype=np.float64)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    k = int(np.argmax(np.abs(got - want)))
    return err <= RTOL, (f"tf.nn.gelu(approximate=False) in float64 on 257 points of [-1, 1]: normwise relative error "
                         f"{err:.3g} (allowed {RTOL:.2g}); worst at x={float(X[k])!r}: {float(got[k])!r}, "
                         f"documented {float(want[k])!r}")


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
