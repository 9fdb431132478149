"""tf.autodiff.ForwardAccumulator cannot differentiate through tf.nn.softsign.

Claim (dlconform autodiff.gradient.forward-mode-coverage): forward mode works through
the differentiable ops that reverse mode works through.
Documentation: https://www.tensorflow.org/api_docs/python/tf/autodiff/ForwardAccumulator
    "Computes Jacobian-vector products ("JVP"s) using forward-mode autodiff."
  tf.nn.softsign (https://www.tensorflow.org/api_docs/python/tf/nn/softsign) computes
  features / (abs(features) + 1), whose derivative is 1 / (1 + |x|)**2, and reverse mode
  (tf.GradientTape) differentiates it.
Observed on tensorflow 2.21.0: LookupError: gradient registry has no entry for: SoftsignGrad.
ForwardAccumulator computes a JVP by differentiating the op's gradient function, and
tensorflow/python/ops/nn_grad.py registers no gradient for SoftsignGrad (the backward op).
Upstream: tensorflow/tensorflow PR #126092 "Register missing SoftsignGrad gradient"
(merged 2026-08-25, after 2.21).
Found by: suites/autodiff/test_known_limits.py::test_tensorflow_forward_mode_through_softsign,
shrunk example x = [0.0].

Run: python tf_forward_mode_softsign.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
X = np.array([0.0, -1.5, 3.0])  # the shrunk example (0.0), and two more points
# 1/(1+|x|)**2 in float64 takes an abs, an add, a square and a division: 16 round-offs is generous.
RTOL = 16 * np.finfo(np.float64).eps / 2


def observed():
    """J u of softsign at X along u = ones, by forward mode (raises on this bug)."""
    import tensorflow as tf

    v, u = tf.constant(X), tf.constant(np.ones_like(X))
    with tf.autodiff.ForwardAccumulator(v, u) as acc:
        y = tf.nn.softsign(v)
    return acc.jvp(y).numpy()


def expected():
    return 1.0 / (1.0 + np.abs(X)) ** 2


def judge(got, want):
    if isinstance(got, BaseException):
        return False, f"forward mode through tf.nn.softsign at x={X.tolist()} raised {type(got).__name__}: {got}"
    err = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want) / np.abs(want)))
    return err <= RTOL, (f"forward mode through tf.nn.softsign at x={X.tolist()}: J u = {np.asarray(got).tolist()}, "
                         f"documented {want.tolist()}; relative error {err:.3g} (allowed {RTOL:.2g})")


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    except LookupError as exc:  # the symptom: no gradient registered for SoftsignGrad
        got = exc
    holds, line = judge(got, expected())
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
