"""keras.optimizers.ScheduleFreeAdamW recovers x_t from the already updated momentum z_{t+1}.

Claim (dlconform modules.keras.optimizer-update-rules): ScheduleFreeAdamW updates the variable
(the training point y_t) by Algorithm 1 of the paper its docstring cites.
Documentation: help(keras.optimizers.ScheduleFreeAdamW): "The optimizer maintains two sets of
    variables internally: momentum: The sequence where gradient updates are applied; x: The
    averaged sequence used for evaluation. During training, the model parameters are set to an
    interpolation between momentum and x."; References: Defazio et al., 2024
    (https://arxiv.org/abs/2405.15682), Algorithm 1: y_t = (1 - b1) z_t + b1 x_t,
    z_{t+1} = z_t - gamma_t g_t / (sqrt(v_t) + eps), x_{t+1} = (1 - c_{t+1}) x_t + c_{t+1} z_{t+1}.
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): update_step stores
`momentum_old = momentum.value` "before any updates", but on TensorFlow that is the variable
itself, so after `assign_sub(momentum, ...)` it reads z_{t+1}: x_t is recovered as
(y_t - (1 - b1) z_{t+1}) / b1, which is not x_t, and y_{t+2} onwards leave the algorithm (here
by 1.5e-2 relative after the second call, with epsilon 0 and no warmup, where the paper's and
Keras's bias-correction placements agree). The first call holds (c = 1 there). Introduced with
the optimizer (keras-team/keras PR #22113, whose review renamed z to momentum); no report found.
The test also sees the averaging weight c = 1/t (the paper: gamma_t^2 / sum gamma_i^2, which
differs under warmup and through sqrt(1 - b2^t)) and the decay of y instead of z.
Found by: suites/modules/test_keras_optimizers.py::test_keras_schedule_free_adamw_follows_the_paper[*]

Run: python keras_schedule_free_adamw_x_from_updated_z.py
Exit 1 while the second update differs from Keras's own recursion with z_t (before the update),
0 once it agrees, 2 if keras cannot be imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

LR, B1, B2 = 0.125, 0.875, 0.9921875
Y0 = np.array([0.5, -1.25, 2.0])
GRADS = [np.array([1.0, -0.5, 0.25]), np.array([-0.75, 1.5, 0.5])]


def observed():
    """The variable after each of two apply_gradients calls (epsilon 0, no warmup)."""
    import keras

    opt = keras.optimizers.ScheduleFreeAdamW(learning_rate=LR, beta_1=B1, beta_2=B2, epsilon=0.0)
    v = keras.Variable(Y0.copy(), dtype="float64")
    out = []
    for g in GRADS:
        opt.apply_gradients([(keras.ops.convert_to_tensor(g, dtype="float64"), v)])
        out.append(v.numpy().copy())
    return out


def expected():
    """Keras's own recursion (uniform weights 1/t, bias correction in the denominator), with x_t
    recovered from z_t as its comment says: with epsilon 0 this is also the paper's y."""
    y, z, vel, out = Y0.copy(), Y0.copy(), np.zeros_like(Y0), []
    for t, g in enumerate(GRADS, start=1):
        vel = B2 * vel + (1 - B2) * g * g
        z_old = z
        z = z - LR * g / np.sqrt(vel / (1 - B2 ** t))
        x_old = (y - (1 - B1) * z_old) / B1
        x = (1 - 1 / t) * x_old + z / t
        y = (1 - B1) * z + B1 * x
        out.append(y.copy())
    return out


def judge(got, want):
    err = max(float(np.max(np.abs(a - b) / np.abs(b))) for a, b in zip(got, want))
    holds = err <= 1e-12
    line = (f"ScheduleFreeAdamW(learning_rate={LR}, beta_1={B1}, beta_2={B2}, epsilon=0): variable after call 2 "
            f"{np.array2string(got[-1], precision=6)}, expected {np.array2string(want[-1], precision=6)} "
            f"(x recovered from z before its update); max relative error {err:.2e}")
    return holds, line


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
