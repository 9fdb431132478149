"""Keras 3 on the JAX backend, with JAX's 64-bit mode on, computes float64 tanh and normalisation in float32.

Claim (dlconform interop.keras-backends.float64): a float64 Keras model computes in float64
on every backend; on JAX that needs jax_enable_x64 (JAX_ENABLE_X64=1), which this script sets.
Documentation: https://keras.io/api/layers/base_layer/ (keras.layers.Layer)
    "dtype: The dtype of the layer's computations and weights."
  and https://docs.jax.dev/en/latest/default_dtypes.html: with jax_enable_x64 True, float64
  arrays stay float64 (jnp.tanh of a float64 array is float64 here, error 3e-16).
Observed on keras 3.15.1 with jax/jaxlib 0.10.2 (CPU), JAX_ENABLE_X64=1, float64 inputs:
  - Dense(3, activation="tanh", dtype="float64") returns a float32 tensor, relative error
    7.6e-8 (linear, relu, sigmoid and gelu stay float64, ~1e-16): keras.ops.tanh casts to
    dtypes.result_type(x.dtype, float) (keras/src/backend/jax/numpy.py);
  - BatchNormalization(dtype="float64") returns float64 tensors with float32 accuracy
    (6e-8, inference too): BatchNormalization.call computes in
    backend.result_type(inputs.dtype, "float32"); LayerNormalization does the same
    (keras/src/ops/nn.py _layer_normalization), and keras.ops.var returns float32.
  result_type maps float64 to float32 on every backend but TensorFlow (BIT64_TO_BIT32_DTYPE
  in keras/src/backend/common/dtypes.py), the root cause of keras-team/keras#23704 on torch.
Upstream: no report for the JAX backend found (keras-team/keras#23704 is the torch one).
Found by: suites/interop/test_keras_backends.py::test_float64_keras_model_computes_in_float64_on_both_backends[cpu-jax-x64]
(7 of the 8 float64 models of the ci batch; model 8: Dense(tanh), Dense).

Run: python keras_jax_x64_float64_demoted.py   (sets KERAS_BACKEND=jax and JAX_ENABLE_X64=1 itself)
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
EPS = 1e-3
# At most 5 products, 5 additions and a tanh (or a normalisation's 6 steps) per output,
# entries O(1): 16 * 12 float64 round-offs is generous.
RTOL = 16 * 12 * np.finfo(np.float64).eps / 2


def observed():
    import keras

    if keras.backend.backend() != "jax":
        raise ImportError(f"Keras runs on {keras.backend.backend()!r}, not jax (is jax installed?)")
    dense = keras.layers.Dense(3, activation="tanh", dtype="float64")
    dense.build((None, 5))
    dense.set_weights([KERNEL, BIAS])
    norm = keras.layers.BatchNormalization(epsilon=EPS, dtype="float64")  # moving mean 0, variance 1
    norm.build((None, 5))
    outs = {"Dense(activation='tanh')": dense(X), "BatchNormalization (inference)": norm(X, training=False)}
    return {k: (np.asarray(keras.ops.convert_to_numpy(v)), str(keras.backend.standardize_dtype(v.dtype)))
            for k, v in outs.items()}


def expected():
    return {"Dense(activation='tanh')": (np.tanh(X @ KERNEL + BIAS), "float64"),
            "BatchNormalization (inference)": (X / np.sqrt(1.0 + EPS), "float64")}


def judge(got, want):
    holds, parts = True, []
    for name, (ref, ref_dtype) in want.items():
        values, dtype = got[name]
        err = float(np.max(np.abs(np.asarray(values, dtype=np.float64) - ref)) / np.max(np.abs(ref)))
        holds = holds and err <= RTOL and dtype == ref_dtype
        parts.append(f"{name}: dtype {dtype}, normwise relative error {err:.3g}")
    return holds, (f"keras float64 layers on the jax backend with JAX_ENABLE_X64=1, float64 input (documented: float64, "
                   f"error <= {RTOL:.2g} against float64 numpy): " + "; ".join(parts))


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
