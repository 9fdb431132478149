"""Keras log_cosh / LogCosh in float64 subtracts float32(log 2): every element is 1.9e-9 off.

Claim (dlconform modules.keras.losses): every keras.losses loss built with dtype='float64', and its
function form, computes the formula its docstring states within the float64 error model.
Documentation: keras.losses.log_cosh, https://keras.io/api/losses/regression_losses/#log_cosh-function
    "loss = mean(log(cosh(y_pred - y_true)), axis=-1)";
  keras.losses.LogCosh: "logcosh = mean(log((exp(error) + exp(-error))/2), axis=-1)" and
    "dtype: The dtype of the loss's computations."
Observed on keras 3.15.1 (TensorFlow 2.21.0 backend): on float64 inputs, and with
LogCosh(dtype="float64"), every element of the loss is off by float64(log 2) - float32(log 2)
= -1.905e-09 (log(cosh(0)) = 0 comes out as -1.905e-09): keras/src/losses/losses.py log_cosh
computes `log2 = ops.convert_to_tensor(ops.log(2.0), dtype=y_pred.dtype)`, and ops.log(2.0)
of a Python float runs in floatx (float32) before the cast, so the constant of
x + softplus(-2x) - log(2) carries float32 rounding. Unchanged on keras master (2026-08-21).
Upstream: no report found.
Found by: suites/modules/test_losses.py::test_keras_loss_matches_documented_formula[*-LogCosh[*]]
(all 15 rows: max|actual - expected| = 1.905e-09 per element, relative errors 7.7e-11 to 2.9e-10
against float64 error models of ~4e-15).

Run: python keras_log_cosh_float64_log2.py   (sets KERAS_BACKEND=tensorflow unless it is set)
Exit 1 while the float64 loss carries float32(log 2), 0 once it is float64-accurate, 2 if keras
cannot be imported.
"""

import math
import os
import sys

import numpy as np

ERROR = np.array([[0.0], [0.3], [-1.2], [2.5], [-7.0]])  # y_pred - y_true, one element per sample
Y_TRUE = np.array([[0.25], [-0.5], [1.0], [0.0], [2.0]])
Y_PRED = Y_TRUE + ERROR
# x + softplus(-2x) - log 2: a handful of float64 operations on values of size <= |x| + 1;
# 16 units of round-off of that size (1.4e-14 at |x| = 7) is generous.
ATOL = 16 * np.finfo(np.float64).eps / 2 * (1.0 + float(np.max(np.abs(ERROR))))


def observed():
    """keras.losses.log_cosh on float64 arrays and LogCosh(dtype='float64', reduction=None)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # before keras is imported
    import keras

    fn = keras.losses.log_cosh(Y_TRUE, Y_PRED)
    cls = keras.losses.LogCosh(dtype="float64", reduction=None)(Y_TRUE, Y_PRED)
    return {
        "backend": keras.backend.backend(),
        "log_cosh": np.asarray(keras.ops.convert_to_numpy(fn)),
        "LogCosh": np.asarray(keras.ops.convert_to_numpy(cls)),
        "dtypes": f"{keras.backend.standardize_dtype(fn.dtype)}, {keras.backend.standardize_dtype(cls.dtype)}",
    }


def expected():
    """mean(log(cosh(x)), axis=-1) in float64: log(cosh x) = logaddexp(x, -x) - log 2 (no overflow)."""
    return np.mean(np.logaddexp(ERROR, -ERROR) - math.log(2.0), axis=-1)


def judge(got, want):
    errs = {k: np.asarray(got[k], dtype=np.float64) - want for k in ("log_cosh", "LogCosh")}
    worst = max(float(np.max(np.abs(e))) for e in errs.values())
    shift = math.log(2.0) - float(np.float32(math.log(2.0)))
    line = (f"keras {got.get('backend', '?')} backend, float64 y_pred - y_true = {ERROR.ravel().tolist()} "
            f"(one element per sample; results {got.get('dtypes', '?')}): log_cosh - documented "
            f"mean(log(cosh(x))) = {[float(f'{v:.4g}') for v in errs['log_cosh']]}, LogCosh(dtype='float64', "
            f"reduction=None) - documented = {[float(f'{v:.4g}') for v in errs['LogCosh']]}; "
            f"float64(log 2) - float32(log 2) = {shift:.4g}; worst |error| {worst:.3g} (allowed {ATOL:.2g})")
    return worst <= ATOL, line


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
