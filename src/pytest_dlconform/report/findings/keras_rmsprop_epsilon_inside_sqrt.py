"""keras.optimizers.RMSprop: epsilon is added inside the square root, not to it ("epsilon hat").

Claim (dlconform modules.keras.optimizer-update-rules): every keras.optimizers optimizer updates
its variables by the rule its docstring states (or the paper it cites where it defers).
Documentation: help(keras.optimizers.RMSprop), https://keras.io/api/optimizers/rmsprop/
    "Divide the gradient by the root of this average"; epsilon: "A small constant for numerical
     stability. This epsilon is "epsilon hat" in the Kingma and Ba paper (in the formula just
     before Section 2.1), not the epsilon in Algorithm 1 of the paper."
  Kingma & Ba (arXiv:1412.6980), the formula just before Section 2.1:
    "theta_t <- theta_{t-1} - alpha_t m_t / (sqrt(v_t) + epsilon_hat)"
  so epsilon is added to the root of the average: theta -= lr g / (sqrt(v) + epsilon).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): keras/src/optimizers/
rmsprop.py computes `denominator = ops.add(velocity, self.epsilon)` (centered: `velocity -
square(average_grad) + epsilon`) and divides by `ops.sqrt(denominator)`: theta -= lr g /
sqrt(v + epsilon), the TensorFlow ApplyRMSProp kernel's (and tf.keras 2's) placement. The two
agree only for epsilon = 0; with rho=0.5, epsilon=0.25 the first step here is off by up to 6.6e-2.
Reported for tf.keras 2.10 with the same docstring: tensorflow/tensorflow#58412 (closed, stalled).
Found by: suites/modules/test_keras_optimizers.py::test_keras_optimizer_follows_its_documented_rule
[*-RMSprop[...epsilon=0.0009765625...]] (3 rows; max|actual - expected| from 4.809e-03 to 1.777e-01;
the rows with epsilon=0.0 hold).

Run: python keras_rmsprop_epsilon_inside_sqrt.py
Exit 1 while epsilon is inside the root, 0 once the step is lr g / (sqrt(v) + epsilon),
2 if keras cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

THETA0 = np.array([1.0, -2.0, 0.5, 3.0])
GRAD = np.array([1.0, -2.0, 0.5, 4.0])
LR, RHO, EPS = 0.5, 0.5, 0.25  # dyadic: exact in float32, so Keras's float32 hyperparameters add no rounding
# One step from THETA0 is ~8 float64 operations per element: allow 16 units of round-off of the step.
ATOL = 16 * np.finfo(np.float64).eps / 2 * float(np.max(np.abs(THETA0)) + LR)


def observed():
    """The float64 variable after one RMSprop step (momentum 0, not centered) with gradient GRAD."""
    import keras

    var = keras.Variable(THETA0.copy(), dtype="float64")
    opt = keras.optimizers.RMSprop(learning_rate=LR, rho=RHO, epsilon=EPS)
    opt.apply_gradients([(keras.ops.convert_to_tensor(GRAD, dtype="float64"), var)])
    return {"theta": np.asarray(var.numpy(), dtype=np.float64), "keras": keras.__version__,
            "backend": keras.backend.backend()}


def expected():
    """The documented step: v = (1 - rho) g^2 (from v_0 = 0), theta -= lr g / (sqrt(v) + epsilon_hat)."""
    v = (1 - RHO) * GRAD * GRAD
    return THETA0 - LR * GRAD / (np.sqrt(v) + EPS)


def inside():
    """What epsilon inside the root gives: theta -= lr g / sqrt(v + epsilon)."""
    v = (1 - RHO) * GRAD * GRAD
    return THETA0 - LR * GRAD / np.sqrt(v + EPS)


def judge(got, want):
    theta = np.asarray(got["theta"], dtype=np.float64)
    err = float(np.max(np.abs(theta - want)))
    near_inside = float(np.max(np.abs(theta - inside())))
    line = (f"keras {got.get('keras', '?')} ({got.get('backend', '?')}) RMSprop(learning_rate={LR}, rho={RHO}, "
            f"epsilon={EPS}) step 1 from {THETA0.tolist()} with g={GRAD.tolist()}: {theta.tolist()}; documented "
            f"(epsilon hat, added to the root) {want.tolist()}; max|error| {err:.3g} (allowed {ATOL:.2g}); "
            f"|actual - lr g / sqrt(v + epsilon)| = {near_inside:.3g}")
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
