"""Keras 3 on the JAX backend (JAX's defaults) accepts a float64 layer and computes it in float32.

Claim (dlconform interop.keras-backends.float64): a float64 Keras model computes in float64
on every backend.
Documentation: https://keras.io/api/layers/base_layer/ (keras.layers.Layer)
    "dtype: The dtype of the layer's computations and weights."
  JAX itself documents that without jax_enable_x64 "jax.numpy array creation functions
  return 32-bit values" (https://docs.jax.dev/en/latest/default_dtypes.html), so the
  documented outcomes are float64 results or a refusal; Keras gives neither.
Observed on keras 3.15.1 with jax/jaxlib 0.10.2 (CPU), JAX_ENABLE_X64 unset: a
Dense(3, dtype="float64") reports float64 everywhere (layer.dtype, layer.compute_dtype,
layer.kernel.dtype) while its kernel holds a float32 array and its output is a float32
tensor with float32 accuracy (relative error 4.3e-8). The only signal is JAX's UserWarning
"Explicitly requested dtype float64 is not available, and will be truncated to dtype
float32", once per call site; Keras raises nothing.
Upstream: a known JAX limitation to Keras (fchollet in keras-team/keras#18482: "In JAX it
is an unfortunate limitation inherited from historical reasons"); no issue about the
float64 variable that holds float32 found. Newer Keras documents keras.config.set_x64_mode
(tf-nightly API docs: "off" caps results to 32 bits on JAX, "explicit_x64" turns on JAX's
flag), which is not in keras 3.15.1.
Found by: suites/interop/test_keras_backends.py::test_float64_keras_model_computes_in_float64_on_both_backends[cpu-jax]

Run: python keras_jax_float64_without_x64.py   (sets KERAS_BACKEND=jax, JAX_ENABLE_X64=0 itself)
Exit 1 while the bug is there, 0 once fixed (float64 results, or a refusal to build the
float64 layer), 2 if keras or jax cannot be imported.
"""

import os
import sys

import numpy as np

os.environ["KERAS_BACKEND"] = "jax"  # before keras is imported
os.environ["JAX_ENABLE_X64"] = "0"  # JAX's default, whatever the shell says
os.environ.setdefault("JAX_PLATFORMS", "cpu")
rng = np.random.default_rng(8)
X = rng.uniform(-1.0, 1.0, size=(4, 5))
KERNEL = rng.normal(size=(5, 3)) / np.sqrt(5.0)
BIAS = rng.normal(size=3) * 0.1
# 5 products and 5 additions per output, entries O(1): 16 * 11 float64 round-offs is generous.
RTOL = 16 * 11 * np.finfo(np.float64).eps / 2


def observed():
    import warnings

    import keras

    if keras.backend.backend() != "jax":
        raise ImportError(f"Keras runs on {keras.backend.backend()!r}, not jax (is jax installed?)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX's truncation warnings: the outcome is judged below
        try:
            layer = keras.layers.Dense(3, dtype="float64")
            layer.build((None, 5))
            layer.set_weights([KERNEL, BIAS])
            out = layer(X)
        except Exception as exc:  # a refusal is one of the documented outcomes
            return None, f"refused: {type(exc).__name__}: {exc}", ""
    said = f"layer.compute_dtype {layer.compute_dtype}, layer.kernel.dtype {layer.kernel.dtype}"
    return np.asarray(keras.ops.convert_to_numpy(out)), str(keras.backend.standardize_dtype(out.dtype)), said


def expected():
    return X @ KERNEL + BIAS, "float64"


def judge(got, want):
    (values, dtype, said), (ref, ref_dtype) = got, want
    if values is None:
        return True, f"keras Dense(3, dtype='float64') on the jax backend without x64 {dtype}"
    err = float(np.max(np.abs(np.asarray(values, dtype=np.float64) - ref)) / np.max(np.abs(ref)))
    holds = err <= RTOL and dtype == ref_dtype
    return holds, (f"keras Dense(3, dtype='float64') on the jax backend, JAX_ENABLE_X64=0, float64 input ({said}): "
                   f"output dtype {dtype} (documented {ref_dtype}), normwise relative error {err:.3g} against "
                   f"float64 numpy (allowed {RTOL:.2g}), no error raised")


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
