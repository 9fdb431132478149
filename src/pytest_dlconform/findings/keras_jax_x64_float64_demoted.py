"""Keras 3 on the JAX backend, with JAX's 64-bit mode on, computes a float64 tanh in float32.

Claim (dlconform interop.keras-backends.float64): a float64 Keras model computes in float64
on every backend; on JAX that needs jax_enable_x64 (JAX_ENABLE_X64=1), which this script sets.
Documentation: https://keras.io/api/layers/base_layer/ (keras.layers.Layer)
    "dtype: The dtype of the layer's computations and weights."
  and https://docs.jax.dev/en/latest/default_dtypes.html: with jax_enable_x64 set to True,
  float64 arrays are float64 (jnp.tanh of a float64 array is float64 here, error 3e-16).
Observed on keras 3.15.1 with jax/jaxlib 0.10.2 (CPU), JAX_ENABLE_X64=1:
Dense(3, activation="tanh", dtype="float64") on float64 inputs returns a float32 tensor with
float32 accuracy (relative error 7.6e-8); Dense with activation linear, relu, sigmoid or
gelu stays float64 (error ~1e-16). keras.ops.tanh itself returns float32 for a float64
array: keras/src/backend/jax/numpy.py tanh() casts its input to
dtypes.result_type(x.dtype, float), and result_type maps float64 to float32 on every backend
but TensorFlow (BIT64_TO_BIT32_DTYPE in keras/src/backend/common/dtypes.py), the root cause
of keras-team/keras#23704 on the torch backend.
Upstream: no report for the JAX backend found (keras-team/keras#23704 is the torch one).
Found by: suites/interop/test_keras_backends.py::test_float64_keras_model_computes_in_float64_on_both_backends[cpu-jax-x64]
(model 8 of the ci batch: Dense(tanh), Dense); this is the smallest model that shows it.

Run: python keras_jax_x64_float64_tanh.py   (sets KERAS_BACKEND=jax and JAX_ENABLE_X64=1 itself)
Exit 1 while the bug is there, 0 once fixed, 2 if keras or jax cannot be imported.
"""

import os
import sys

import numpy as np

os.environ["KERAS_BACKEND"] = "jax"  # before keras is imported
os.environ["JAX_ENABLE_X64"] = "1"  # JAX's documented switch for float64 arrays
os.environ.setdefault("JAX_PLATFORMS", "cpu")
rng = np.random.default_rng(8)
X = rng.uniform(-1.0, 1.0, size=(4, 5))
KERNEL = rng.normal(size=(5, 3)) / np.sqrt(5.0)
BIAS = rng.normal(size=3) * 0.1
# 5 products, 5 additions and a tanh per output, entries O(1): 16 * 12 float64 round-offs is generous.
RTOL = 16 * 12 * np.finfo(np.float64).eps / 2


def observed():
    import keras

    if keras.backend.backend() != "jax":
        raise ImportError(f"Keras runs on {keras.backend.backend()!r}, not jax (is jax installed?)")
    layer = keras.layers.Dense(3, activation="tanh", dtype="float64")
    layer.build((None, 5))
    layer.set_weights([KERNEL, BIAS])
    out = layer(X)
    return np.asarray(keras.ops.convert_to_numpy(out)), str(keras.backend.standardize_dtype(out.dtype))


def expected():
    return np.tanh(X @ KERNEL + BIAS), "float64"


def judge(got, want):
    (values, dtype), (ref, ref_dtype) = got, want
    err = float(np.max(np.abs(np.asarray(values, dtype=np.float64) - ref)) / np.max(np.abs(ref)))
    holds = err <= RTOL and dtype == ref_dtype
    return holds, (f"keras Dense(3, activation='tanh', dtype='float64') on the jax backend with JAX_ENABLE_X64=1, "
                   f"float64 input: output dtype {dtype} (documented {ref_dtype}), normwise relative error {err:.3g} "
                   f"against float64 numpy (allowed {RTOL:.2g})")


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
