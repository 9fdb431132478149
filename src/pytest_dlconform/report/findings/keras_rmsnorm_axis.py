"""keras.layers.RMSNormalization(axis=1) raises on a rank-3 input: its scale is not aligned to the axis.

Claim (dlconform modules.keras.layer-contract): every public keras.layers layer runs on the inputs
its docstring describes and returns the documented shape, in float32, mixed_float16 and float64.
Documentation: help(keras.layers.RMSNormalization), https://keras.io/api/layers/normalization_layers/
    "rms_normalization(x) = x * rsqrt(mean(square(x))) * scale"; "axis: int. The axis on which to
    perform the normalization."; build() creates `scale` of shape (input_shape[axis],).
  So RMSNormalization(axis=1) on a (2, 4, 3) input normalises over axis 1 and multiplies by a
  (4,) scale aligned with axis 1: output shape (2, 4, 3).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): InvalidArgumentError
"Incompatible shapes: [2,4,3] vs. [4]" in float32, mixed_float16 and float64:
keras/src/ops/nn.py `_rms_normalization` multiplies the normalised x by `scale` as it is
(`backend.numpy.multiply(outputs, scale)`), which broadcasts against the LAST axis only; the
torch backend's F.rms_norm path is taken only for a trailing ("continuous") axis. axis=-1 works.
A functional model holding the layer cannot be built, so it cannot be saved either.
Found by: suites/modules/test_keras_layer_records.py::test_layer_contract[*-RMSNormalization]
(variant 1, axis=1) and test_keras_save_roundtrip[*-norm].

Run: python keras_rmsnorm_axis.py
Exit 1 while RMSNormalization(axis=1) raises or differs from the documented formula, 0 once it
matches it, 2 if keras cannot be imported.
"""

import os
import re
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

AXIS, EPS = 1, 1e-6
X = np.random.default_rng(0).standard_normal((2, 4, 3))
RTOL = 1e-12  # float64 layer against the float64 formula: a few roundings of 4-term means


def _short(exc):
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    noise = ("Exception encountered", "Arguments received", "\u2022")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(noise)]
    line = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", lines[0] if lines else text)
    return f"{type(exc).__name__}: {line[:120]}"


def observed():
    """The float64 layer's output, or the error it raises."""
    import keras

    layer = keras.layers.RMSNormalization(axis=AXIS, epsilon=EPS, dtype="float64")
    try:
        return np.asarray(layer(X))
    except Exception as exc:  # the finding is an exception from the documented call
        return _short(exc)


def expected():
    """x * rsqrt(mean(square(x), axis) + eps) * scale, scale = ones((4,)) aligned with axis 1."""
    return X / np.sqrt(np.mean(X * X, axis=AXIS, keepdims=True) + EPS)


def judge(got, want):
    head = f"keras.layers.RMSNormalization(axis={AXIS}) on a {X.shape} float64 input"
    if isinstance(got, str):
        return False, f"{head} raised {got}; documented: x * rsqrt(mean(square(x), axis=1)) * scale, shape {want.shape}"
    got = np.asarray(got, dtype=np.float64)
    if got.shape != want.shape:
        return False, f"{head} returned shape {got.shape}; documented {want.shape}"
    err = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300)))
    return err <= RTOL, f"{head}: relative error {err:.3g} against the documented formula (allowed {RTOL:.0e})"


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
