"""keras.optimizers.Nadam: momentum schedule mu_t = beta_1 (1 - 0.5 0.96^t), not Dozat's 0.96^(t/250).

Claim (dlconform modules.keras.optimizer-update-rules): every keras.optimizers optimizer updates
its variables by the rule its docstring states, or the paper it cites where it defers.
Documentation: help(keras.optimizers.Nadam), https://keras.io/api/optimizers/Nadam/
    "Much like Adam is essentially RMSprop with momentum, Nadam is Adam with Nesterov momentum."
    "Reference: [Dozat, 2015](http://cs229.stanford.edu/proj2015/054_report.pdf)." The docstring
  states no rule and no momentum schedule, so the cited report defines it: Dozat (2015/2016,
  "Incorporating Nesterov Momentum into Adam") uses mu_t = beta_1 (1 - 1/2 0.96^(t/250)),
  i.e. 0.96^(0.004 t), as tf.keras 2.x's Nadam did (schedule_decay=0.004; its docstring, citing
  the same report: "mu_t := beta_1 * (1 - 0.5 * 0.96^{0.004 * t})") and as torch.optim.NAdam
  documents (momentum_decay=4e-3: mu_t = beta_1 (1 - 1/2 0.96^(t psi))), with
  m_hat = mu_{t+1} m_t / (1 - prod_{i<=t+1} mu_i) + (1 - mu_t) g_t / (1 - prod_{i<=t} mu_i),
  theta -= lr m_hat / (sqrt(v_t / (1 - beta_2^t)) + epsilon).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): keras/src/optimizers/nadam.py
uses `u_t = beta_1 * (1.0 - 0.5 * ops.power(decay, local_step))` with decay 0.96 and no 0.004: the
schedule reaches beta_1 within ~100 steps instead of ~10^4, and the updates differ from the
cited rule by ~1e-3 relative from the first step. The schedule is not documented anywhere in
the docstring (a documentation gap: the fix may be either). Against Keras's own 0.96^t schedule
the float64 updates carry a further ~1e-8 relative: update_step's `decay = ops.cast(0.96,
var_dtype)` goes through float32 (0.9599999785), while the running product `_u_product` uses
`ops.power(0.96, ...)` in float64.
Found by: suites/modules/test_keras_optimizers.py::test_keras_optimizer_follows_its_documented_rule
[*-Nadam[...]] (all 7 rows) and ::test_keras_optimizer_shared_options_follow_their_documentation
[*-Nadam[...]] (all 4 rows): max|actual - expected| from 1.107e-04 to 1.447e-03 at call 1 or 2.

Run: python keras_nadam_momentum_schedule.py
Exit 1 while the schedule is 0.96^t (or the float64 rule is otherwise off), 0 once a float64 Nadam
follows the cited rule to float64 rounding, 2 if keras cannot be imported.
"""

import math
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

THETA0 = np.array([1.0, -2.0, 0.5, 3.0])
GRAD = np.array([1.0, -2.0, 0.5, 4.0])  # the same gradient at every step
LR, B1, B2, EPS = 0.125, 0.875, 0.9921875, 2.0 ** -23  # dyadic: exact in float32
STEPS = 3
# 3 steps of ~30 float64 operations, rounding carried forward (at most x4 per step): 21 x 30 x 4 u
# relative to the variables' scale (<= 4): 1.1e-12; float32(0.96) alone gives ~1e-8.
ATOL = 21 * 30 * 4 * np.finfo(np.float64).eps / 2 * 4.0


def observed():
    """The float64 variable after STEPS Nadam steps with gradient GRAD."""
    import keras

    var = keras.Variable(THETA0.copy(), dtype="float64")
    opt = keras.optimizers.Nadam(learning_rate=LR, beta_1=B1, beta_2=B2, epsilon=EPS)
    for _ in range(STEPS):
        opt.apply_gradients([(keras.ops.convert_to_tensor(GRAD, dtype="float64"), var)])
    return {"theta": np.asarray(var.numpy(), dtype=np.float64), "keras": keras.__version__,
            "backend": keras.backend.backend()}


def nadam(psi, decay=0.96):
    """Dozat's Nadam in float64 with mu_t = beta_1 (1 - 0.5 decay^(psi t))."""
    mu = [B1 * (1 - 0.5 * decay ** (psi * i)) for i in range(1, STEPS + 2)]  # mu_1 .. mu_{STEPS+1}
    theta, m, v = THETA0.copy(), 0.0, 0.0
    for t in range(1, STEPS + 1):
        m = B1 * m + (1 - B1) * GRAD
        v = B2 * v + (1 - B2) * GRAD * GRAD
        m_hat = mu[t] * m / (1 - math.prod(mu[: t + 1])) + (1 - mu[t - 1]) * GRAD / (1 - math.prod(mu[:t]))
        theta = theta - LR * m_hat / (np.sqrt(v / (1 - B2 ** t)) + EPS)
    return theta


def expected():
    """The cited rule: psi = 0.004 (0.96^(t/250))."""
    return nadam(0.004)


def judge(got, want):
    theta = np.asarray(got["theta"], dtype=np.float64)
    err = float(np.max(np.abs(theta - want)))
    own = nadam(1.0)
    own_err = float(np.max(np.abs(theta - own)) / np.max(np.abs(own)))
    line = (f"keras {got.get('keras', '?')} ({got.get('backend', '?')}) Nadam(learning_rate={LR}, beta_1={B1}, "
            f"beta_2={B2}, epsilon=2^-23), {STEPS} steps from {THETA0.tolist()} with g={GRAD.tolist()}: "
            f"{theta.tolist()}; Dozat's schedule beta_1 (1 - 0.5 0.96^(0.004 t)) gives {want.tolist()}: max|error| "
            f"{err:.3g} (allowed {ATOL:.2g}); vs the same rule with 0.96^t: relative error {own_err:.3g}")
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
