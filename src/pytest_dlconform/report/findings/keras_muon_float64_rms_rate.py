"""keras.optimizers.Muon cannot update a float64 2-D variable while rms_rate is set (its default).

Claim (dlconform modules.keras.optimizer-update-rules): Muon updates float64 variables by its
documented rule, the update "scaled by sqrt(max(n, m)) * rms_rate" (lr_adjust's docstring).
Documentation: help(keras.optimizers.Muon): rms_rate "Defaults to 0.2. Set to None to disable
    this feature"; nothing restricts the variables' dtype (every other keras.optimizers optimizer
    updates float64 variables).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): lr_adjust computes
ops.sqrt(ops.maximum(x.shape[0], x.shape[1])) from Python ints, a float32 tensor, and multiplies
the float64 update by it: apply_gradients raises InvalidArgumentError "cannot compute Mul as
input #1(zero-based) was expected to be a double tensor but is a float tensor". rms_rate=None
and float32 variables work. No upstream report found (Muon came with keras-team/keras PR #21037).
Found by: suites/modules/test_keras_optimizers.py::test_keras_muon_rms_rate_on_float64_variables

Run: python keras_muon_float64_rms_rate.py
Exit 1 while the update raises or leaves the rule, 0 once it follows it, 2 if keras cannot be
imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

LR, RMS = 0.125, 0.25
W0 = np.array([[0.5, -1.0, 0.25, 2.0], [1.5, 0.75, -0.5, 1.0], [-2.0, 0.5, 1.25, -0.25]])
G = np.array([[1.0, -0.5, 0.25, 0.75], [0.5, 1.5, -1.0, 0.25], [-0.25, 0.5, 1.0, -1.5]])


def observed():
    """The float64 variable after one apply_gradients call, or the error it raised."""
    import keras

    opt = keras.optimizers.Muon(learning_rate=LR, rms_rate=RMS, weight_decay=0.0, momentum=0.5)
    v = keras.Variable(W0.copy(), dtype="float64", name="kernel")
    try:
        opt.apply_gradients([(keras.ops.convert_to_tensor(G, dtype="float64"), v)])
    except Exception as exc:  # the symptom
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    return v.numpy()


def expected():
    """W0 - lr rms sqrt(4) NS5(g + 0.5 g) (Nesterov, first call: buf = g)."""
    x = 1.5 * G
    x = x / (np.linalg.norm(x) + 1e-7)
    a, b, c = 3.4445, -4.775, 2.0315
    for _ in range(5):
        aa = x @ x.T
        x = a * x + (b * aa + c * aa @ aa) @ x
    return W0 - LR * RMS * 2.0 * x


def judge(got, want):
    if isinstance(got, str):
        return False, f"Muon(rms_rate={RMS}) on a float64 3x4 variable: apply_gradients raised {got}"
    err = float(np.max(np.abs(got - want)))
    return err <= 1e-12, f"Muon(rms_rate={RMS}) on a float64 3x4 variable: max |got - documented| = {err:.2e}"


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
