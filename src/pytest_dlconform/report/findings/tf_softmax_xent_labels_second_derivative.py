"""tf.nn.softmax_cross_entropy_with_logits: the mixed second derivative (labels, logits) is dropped.

Claim (dlconform modules.surface-derivatives.tensorflow): nested tf.GradientTapes give the
Hessian-vector product of a twice-differentiable function.
Documentation: https://www.tensorflow.org/api_docs/python/tf/nn/softmax_cross_entropy_with_logits
    "Backpropagation will happen into both logits and labels"; tf.GradientTape: "GradientTapes can
    be nested to compute higher-order derivatives". The loss -sum(labels * log_softmax(logits)) has
    d/dlabels (dL/dlogits) = -I (the logits gradient is softmax * sum(labels) - labels).
Observed on tensorflow 2.21.0: nn_grad._SoftmaxCrossEntropyWithLogitsGrad returns the labels
gradient -log_softmax(logits) * grad_loss and routes the backprop of the logits gradient
(grad_grad) to the logits only, so the labels part of H v misses -v_logits: nested tapes give 0 where
the composed -sum(labels * tf.nn.log_softmax(logits)) gives -v (here max |difference| ~0.4).
Upstream: no report found (search: softmax_cross_entropy_with_logits second derivative labels).
Found by: suites/modules/test_surface_derivatives.py::test_tensorflow_record_derivative
[tf.nn.softmax_cross_entropy_with_logits-hvp-rr].

Run: python tf_softmax_xent_labels_second_derivative.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
LABELS = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.4, 0.1]])
LOGITS = np.array([[0.5, -1.0, 2.0, 0.0], [1.5, 0.3, -0.7, 2.2]])
V = np.array([[1.0, -0.5, 0.25, 0.75], [-1.0, 0.5, 0.3, -0.2]])  # tangent along the logits only
TOL = 64 * np.finfo(np.float64).eps


def _labels_hvp(fn):
    import tensorflow as tf

    p, z = tf.constant(LABELS), tf.constant(LOGITS)
    with tf.GradientTape() as outer:
        outer.watch([p, z])
        with tf.GradientTape() as inner:
            inner.watch([p, z])
            y = fn(p, z)
        gz = inner.gradient(y, z)
    return outer.gradient(gz, p, output_gradients=tf.constant(V)).numpy()


def observed():
    import tensorflow as tf

    return _labels_hvp(lambda p, z: tf.nn.softmax_cross_entropy_with_logits(p, z))


def expected():
    """d/dlabels <dL/dlogits, v> = -v (the composed formula's own derivative is the same)."""
    return -V


def judge(got, want):
    err = float(np.max(np.abs(np.asarray(got) - want)))
    return err <= TOL, (f"labels part of H v of softmax_cross_entropy_with_logits (tangent along the logits): got "
                        f"{np.asarray(got).ravel()[:4]}, expected {want.ravel()[:4]}; the mixed (labels, logits) second "
                        f"derivative differs by {err:.3g}")


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
