"""keras.optimizers.Ftrl: the update divides by (beta + sqrt(n)) / alpha + 2 lambda_2, not + lambda_2.

Claim (dlconform modules.keras.optimizer-update-rules): every keras.optimizers optimizer updates
its variables by the rule its docstring states.
Documentation: help(keras.optimizers.Ftrl), https://keras.io/api/optimizers/ftrl/
    "Update rule for one variable w: prev_n = n; n = n + g ** 2;
     sigma = (n ** -lr_power - prev_n ** -lr_power) / lr; z = z + g - sigma * w;
     if abs(z) < lambda_1: w = 0 else: w = (sgn(z) * lambda_1 - z) / ((beta + sqrt(n)) / alpha + lambda_2)";
    "lambda_2 is the L2 regularization strength" (l2_regularization_strength).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): keras/src/optimizers/ftrl.py
sets `l2_reg = l2_regularization_strength + beta / (2.0 * lr)` and `quadratic = n ** -lr_power / lr
+ 2 * l2_reg`: the beta term comes out as the box's beta / alpha, but lambda_2 enters twice,
(beta + sqrt(n)) / alpha + 2 lambda_2. TensorFlow's ApplyFtrl kernel has the same 2 * l2 (an
L2 penalty l2 ||w||^2, whose gradient is 2 l2 w); the box's lambda_2 is McMahan et al.'s.
Found by: suites/modules/test_keras_optimizers.py::test_keras_optimizer_follows_its_documented_rule
[*-Ftrl[...l2_regularization_strength=0.125...]] (all 4 rows with l2 > 0: max|actual - expected|
from 2.753e-03 to 1.510e-02; the rows with l2 = 0 hold).

Run: python keras_ftrl_l2_doubled.py
Exit 1 while lambda_2 is doubled, 0 once the step follows the box, 2 if keras cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

THETA0 = np.zeros(4)
GRAD = np.array([1.0, -2.0, 0.5, 3.0])
# The box's "n = 0" start (initial_accumulator_value=0.0), lr_power = -0.5 (sqrt(n)), no l1, no beta:
# the first step is w = -g / (|g| / lr + lambda_2). Dyadic values: exact in float32.
LR, L2 = 0.5, 0.25
# One step from 0 is ~10 float64 operations per element: allow 20 units of round-off of |w| <= 2.
ATOL = 20 * np.finfo(np.float64).eps / 2 * 2.0


def observed():
    """The float64 variable after one Ftrl step with gradient GRAD."""
    import keras

    var = keras.Variable(THETA0.copy(), dtype="float64")
    opt = keras.optimizers.Ftrl(learning_rate=LR, learning_rate_power=-0.5, initial_accumulator_value=0.0,
                                l1_regularization_strength=0.0, l2_regularization_strength=L2, beta=0.0)
    opt.apply_gradients([(keras.ops.convert_to_tensor(GRAD, dtype="float64"), var)])
    return {"theta": np.asarray(var.numpy(), dtype=np.float64), "keras": keras.__version__,
            "backend": keras.backend.backend()}


def _box(l2):
    n = GRAD * GRAD  # from n = 0
    sigma = np.sqrt(n) / LR  # (n^0.5 - 0^0.5) / lr
    z = GRAD - sigma * THETA0
    return (np.sign(z) * 0.0 - z) / ((0.0 + np.sqrt(n)) / LR + l2)


def expected():
    """The box: w = (sgn(z) lambda_1 - z) / ((beta + sqrt(n)) / alpha + lambda_2)."""
    return _box(L2)


def judge(got, want):
    theta = np.asarray(got["theta"], dtype=np.float64)
    err = float(np.max(np.abs(theta - want)))
    doubled = float(np.max(np.abs(theta - _box(2 * L2))))
    line = (f"keras {got.get('keras', '?')} ({got.get('backend', '?')}) Ftrl(learning_rate={LR}, "
            f"initial_accumulator_value=0.0, l2_regularization_strength={L2}) step 1 from 0 with g={GRAD.tolist()}: "
            f"{theta.tolist()}; documented (sgn(z) l1 - z) / ((beta + sqrt(n)) / alpha + lambda_2) = {want.tolist()}; "
            f"max|error| {err:.3g} (allowed {ATOL:.2g}); |actual - the same with 2 lambda_2| = {doubled:.3g}")
    return err <= ATOL, line


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
