"""keras.optimizers.Adafactor: relative_step=False still caps the step size at 1/sqrt(t).

Claim (dlconform modules.keras.optimizer-update-rules): every keras.optimizers optimizer updates
its variables by the rule its docstring states (or the paper it cites where it defers).
Documentation: help(keras.optimizers.Adafactor), https://keras.io/api/optimizers/adafactor/
    "relative_step: bool, defaults to True. If learning_rate is a constant and relative_step=True,
     learning rate will be adjusted based on current iterations. This is a default learning rate
     decay in Adafactor."
  Shazeer & Stern (arXiv:1804.04235), Algorithm 4/5 and Section 8: alpha_t = max(eps_2, RMS(X_{t-1}))
  rho_t, with the relative step rho_t = min(10^-2, 1/sqrt(t)) as the decay; so with
  relative_step=False a constant learning rate is used as it is: rho_t = learning_rate.
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): keras/src/optimizers/
adafactor.py applies `lr = ops.minimum(lr, 1 / ops.sqrt(local_step))` under `if not
callable(self._learning_rate) and self.relative_step`, and then, unconditionally, `rho_t =
ops.minimum(lr, 1 / ops.sqrt(local_step))`: relative_step=False and True give bitwise the same
updates, and the step size drops below a constant learning rate as soon as 1/sqrt(t) < lr
(from step 5 for lr = 0.5; for the default lr = 0.001 only after 10^6 steps).
Found by: suites/modules/test_keras_optimizers.py::test_keras_optimizer_follows_its_documented_rule
[*-Adafactor[...relative_step=False,learning_rate=0.5...]] (max|actual - expected| = 2.413e-02 after
call 5; the relative_step=False rows with lr = 0.015625 or the schedule never reach 1/sqrt(t) < lr
in 6 calls and hold).

Run: python keras_adafactor_relative_step_ignored.py
Exit 1 while relative_step=False still caps the step size, 0 once rho_t = learning_rate there,
2 if keras cannot be imported.
"""

import math
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

THETA0 = np.array([1.0, -2.0, 0.5, 3.0])
GRAD = np.array([1.0, -2.0, 0.5, 4.0])  # the same gradient at every step
LR, STEPS = 0.5, 6  # 1/sqrt(t) < lr from t = 5
# Dyadic options (exact in float32: Keras casts some Python floats through float32).
OPTS = {"beta_2_decay": -0.75, "epsilon_1": 2.0 ** -100, "epsilon_2": 2.0 ** -10, "clip_threshold": 1.0}
# 6 steps of ~30 float64 operations each, rounding carried forward (at most x2 per step here):
# allow 64 x 30 x 4 units of round-off of max|theta| <= 4.
ATOL = 64 * 30 * 4 * np.finfo(np.float64).eps / 2 * 4.0


def observed():
    """The float64 vector after STEPS Adafactor steps with relative_step=False, and with True."""
    import keras

    out = {"keras": keras.__version__, "backend": keras.backend.backend()}
    for flag in (False, True):
        var = keras.Variable(THETA0.copy(), dtype="float64")
        opt = keras.optimizers.Adafactor(learning_rate=LR, relative_step=flag, **OPTS)
        for _ in range(STEPS):
            opt.apply_gradients([(keras.ops.convert_to_tensor(GRAD, dtype="float64"), var)])
        out[f"relative_step={flag}"] = np.asarray(var.numpy(), dtype=np.float64)
    return out


def _adafactor(relative):
    """Adafactor for a vector (Algorithm 5): beta2_t = 1 - t^c, v = beta2_t v + (1 - beta2_t)(g^2 + eps_1),
    u = g / sqrt(v), u /= max(1, RMS(u) / d), theta -= max(eps_2, RMS(theta)) rho_t u."""
    theta, v = THETA0.copy(), np.zeros_like(THETA0)
    for t in range(1, STEPS + 1):
        rho = min(LR, 1 / math.sqrt(t)) if relative else LR
        b2 = 1 - t ** OPTS["beta_2_decay"]
        v = b2 * v + (1 - b2) * (GRAD * GRAD + OPTS["epsilon_1"])
        u = GRAD / np.sqrt(v)
        u = u / max(1.0, float(np.sqrt(np.mean(u * u))) / OPTS["clip_threshold"])
        theta = theta - max(OPTS["epsilon_2"], float(np.sqrt(np.mean(theta * theta)))) * rho * u
    return theta


def expected():
    """relative_step=False: rho_t = learning_rate; relative_step=True: rho_t = min(lr, 1/sqrt(t))."""
    return {"relative_step=False": _adafactor(False), "relative_step=True": _adafactor(True)}


def judge(got, want):
    errors = {k: float(np.max(np.abs(np.asarray(got[k], dtype=np.float64) - want[k]))) for k in want}
    same = bool(np.array_equal(got["relative_step=False"], got["relative_step=True"]))
    line = (f"keras {got.get('keras', '?')} ({got.get('backend', '?')}) Adafactor(learning_rate={LR}, "
            f"relative_step=False), {STEPS} steps from {THETA0.tolist()} with g={GRAD.tolist()}: "
            f"{np.asarray(got['relative_step=False']).tolist()}; documented (rho_t = lr) "
            f"{want['relative_step=False'].tolist()}; max|error| {errors['relative_step=False']:.3g} (allowed "
            f"{ATOL:.2g}); relative_step=True {'bitwise equal to it' if same else 'differs'} (its own error "
            f"{errors['relative_step=True']:.3g})")
    return max(errors.values()) <= ATOL, line


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
