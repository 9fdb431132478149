"""tf.function fuses x * tanh(softplus(x)) (mish) with oneDNN and loses float32 accuracy for x < -9.

Claim (dlconform execution.function.eager-equivalence): tf.function(f)(xs) equals f(xs) run
eagerly within the sum of their forward-error bounds for the dtype.
Documentation: https://www.tensorflow.org/api_docs/python/tf/function ("tf.function ...
compiles a function into a callable TensorFlow graph"; results are those of the ops it calls)
and https://www.tensorflow.org/api_docs/python/tf/math/softplus ("log(exp(features) + 1)").
Observed on tensorflow 2.21.0 (CPU, oneDNN custom operations on, the default): in float32,
eager x * tanh(softplus(x)) is accurate to 5e-7 relative everywhere, the same expression under
tf.function is wrong by more than 1e-3 relative for every x <= -9.85 (6% at x = -16, and
exactly -0.0 for x <= -20, where mish(-20) = -4.1e-8). With TF_ENABLE_ONEDNN_OPTS=0 the
tf.function result equals eager. The traced graph holds Softplus, Tanh and Mul; grappler's
oneDNN remapper fuses them, and the fused kernel behaves as if it computed log(1 + exp(x))
in float32 (1 + exp(x) rounds to 1 once exp(x) < 2**-24), not softplus's log1p.
Found by: suites/execution/test_function.py::test_function_equals_eager_on_generated_programs,
example mish(x0) + x1 at x0 = -57.96, float32, jit_compile=None (a parametrised run).

Run: python tf_onednn_fused_mish_float32.py
x <= -4 already errs by more than 64 u relative (the error grows like u / exp(x)).
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
X = np.linspace(-25.0, 5.0, 3001).astype(np.float32)
X = X[X != 0]  # mish(0) = 0: relative errors are measured elsewhere
# float32 mish through three ops (softplus, tanh, product) and their documented accuracy:
# 64 round-offs relative (3.8e-6) is generous; the fused kernel errs by up to 100%.
RTOL = 64 * 2.0**-24


def observed():
    import tensorflow as tf

    def mish(x):
        return x * tf.tanh(tf.math.softplus(x))

    x = tf.constant(X)
    return mish(x).numpy(), tf.function(mish)(x).numpy()


def main(observe=observed) -> int:
    try:
        eager, graph = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    x64 = X.astype(np.float64)
    ref = x64 * np.tanh(np.logaddexp(0.0, x64))
    rel = np.abs(graph - ref) / np.abs(ref)
    rel_eager = np.abs(eager - ref) / np.abs(ref)
    stats = f"eager: max relative error {rel_eager.max():.2e}; tf.function: {rel.max():.2e} at x = {X[np.argmax(rel)]:g}"
    bad = X[rel > RTOL]
    if bad.size:
        print(f"BUG PRESENT: tf.function mish is off by more than {RTOL:.1e} relative for {bad.size} of {X.size} inputs, "
              f"x in [{bad.min():g}, {bad.max():g}] (x = -16: {graph[np.argmin(np.abs(X + 16))]:.7g}, "
              f"float64 {ref[np.argmin(np.abs(X + 16))]:.7g}); {stats}")
        return 1
    print(f"FIXED: tf.function mish agrees with eager and float64; {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
