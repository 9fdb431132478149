"""Keras 3 on the torch backend computes a float64 Dense layer in float32.

Claim (dlconform interop.keras-backends.float64): a float64 Keras model computes in float64
on every backend.
Documentation: https://keras.io/api/layers/base_layer/ (keras.layers.Layer)
    "dtype: The dtype of the layer's computations and weights."
  and https://keras.io/getting_started/ "Keras 3 ... can run on top of JAX, TensorFlow, and
  PyTorch": the same model, the same float64 arithmetic.
Observed on keras 3.15.1 with torch 2.13.0+cpu: Dense(dtype="float64") on float64 inputs
returns values only float32-accurate, a relative error of 4.5e-8 against float64 here (the
suite saw 8e-8 on model 8 of its batch, a dense model): the matmul runs in float32 (the
output is a float64 tensor again after the bias add). keras/src/backend/common/dtypes.py result_type()
maps float64 to float32 on every backend but TensorFlow, and the torch backend's binary
ops take their result dtype from it (since keras PR #23225).
Upstream: keras-team/keras#23704 (open).
Found by: suites/interop/test_keras_backends.py::test_float64_keras_model_computes_in_float64_on_both_backends
(coverage models, not a hypothesis example); this is the smallest model that shows it.

Run: python keras_torch_float64_dense.py   (sets KERAS_BACKEND=torch itself)
Exit 1 while the bug is there, 0 once fixed, 2 if keras or torch cannot be imported.
"""

import os
import sys

import numpy as np

rng = np.random.default_rng(8)
X = rng.uniform(-1.0, 1.0, size=(4, 5))
KERNEL = rng.normal(size=(5, 3)) / np.sqrt(5.0)
BIAS = rng.normal(size=3) * 0.1
# 5 products and 5 additions per output, entries O(1): 16 * 11 float64 round-offs is generous.
RTOL = 16 * 11 * np.finfo(np.float64).eps / 2


def observed():
    os.environ["KERAS_BACKEND"] = "torch"  # before keras is imported (a fresh interpreter: python SCRIPT)
    import keras

    if keras.backend.backend() != "torch":
        raise ImportError(f"keras was imported with the {keras.backend.backend()} backend before this script set torch")

    layer = keras.layers.Dense(3, dtype="float64")
    layer.build((None, 5))
    layer.set_weights([KERNEL, BIAS])
    out = layer(X)
    return np.asarray(keras.ops.convert_to_numpy(out)), str(keras.backend.standardize_dtype(out.dtype))


def expected():
    return X @ KERNEL + BIAS, "float64"


def judge(got, want):
    (values, dtype), (ref, ref_dtype) = got, want
    err = float(np.max(np.abs(np.asarray(values, dtype=np.float64) - ref)) / np.max(np.abs(ref)))
    holds = err <= RTOL and dtype == ref_dtype
    return holds, (f"keras Dense(3, dtype='float64') on the torch backend, float64 input: output dtype {dtype} "
                   f"(documented {ref_dtype}), normwise relative error {err:.3g} against float64 numpy (allowed {RTOL:.2g})")


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
