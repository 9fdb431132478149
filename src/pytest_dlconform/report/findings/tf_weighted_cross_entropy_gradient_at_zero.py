"""tf.nn.weighted_cross_entropy_with_logits: the gradient at logits exactly 0 is wrong.

Claim (dlconform autodiff.gradient.documented-conventions): reverse mode gives the
derivative of the documented loss, which is smooth in the logits.
Documentation (https://www.tensorflow.org/api_docs/python/tf/nn/weighted_cross_entropy_with_logits,
TF 2.21): "loss = labels * -log(sigmoid(logits)) * pos_weight + (1 - labels) *
-log(1 - sigmoid(logits))", implemented as "(1 - z) * x + l * (log(1 + exp(-abs(x))) +
max(-x, 0))" with l = 1 + (q - 1) z. Its derivative at x = 0 is -q z / 2 + (1 - z) / 2.
Observed on tensorflow-cpu 2.21.0, float64: at x = 0 exactly, autodiff differentiates abs and
max piece by piece (one-sided), so at z = 0.5, q = 2 the gradient is 0.5 instead of -0.25;
an error of up to max(1, q) z. torch.nn.functional.binary_cross_entropy_with_logits gives the
derivative. Upstream: nothing found for this function's gradient at 0.
Found by: explore seed 48213, suites/autodiff/test_ops.py::
test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-bce_with_logits] (dyadic inputs have
exact zeros); pinned in suites/autodiff/test_documented_gradients.py::
test_bce_with_logits_gradient_at_zero_logits.

Run: python tf_weighted_cross_entropy_gradient_at_zero.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import sys

import numpy as np

Z = np.array([0.0, 0.25, 0.5, 1.0])
Q = 2.0


def observed():
    import tensorflow as tf

    x = tf.zeros([Z.size], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.nn.weighted_cross_entropy_with_logits(labels=tf.constant(Z), logits=x, pos_weight=Q)
    return np.asarray(tape.gradient(loss, x).numpy(), dtype=np.float64)


def expected():
    """d/dx of the documented loss at x = 0: -q z sigmoid(-0) + (1 - z) sigmoid(0)."""
    return -Q * Z / 2 + (1 - Z) / 2


def judge(got, want):
    bad = np.flatnonzero(np.abs(got - want) > 1e-12)
    if not bad.size:
        return True, "the gradient at logits 0 is the derivative of the documented loss"
    i = int(bad[0])
    return False, (f"gradient at logits 0 with label {Z[i]}, pos_weight {Q} is {got[i]}, but the documented loss's "
                   f"derivative is {want[i]}; {bad.size} of {Z.size} labels differ")


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
