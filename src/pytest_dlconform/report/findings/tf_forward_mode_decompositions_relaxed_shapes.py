"""tf.autodiff.ForwardAccumulator through tf.linalg.svd / tf.linalg.qr stops working after 32 shapes.

Claim (dlconform autodiff.gradient.forward-mode-coverage): forward mode works through
the differentiable ops that reverse mode works through, for every input shape.
Documentation: https://www.tensorflow.org/api_docs/python/tf/autodiff/ForwardAccumulator
    "Computes Jacobian-vector products ("JVP"s) using forward-mode autodiff."
  tf.linalg.svd and tf.linalg.qr are differentiable (linalg_grad.py registers _SvdGrad and
  _QrGrad), and tf.GradientTape differentiates them for every shape used here.
Observed on tensorflow 2.21.0: in one process, the 33rd distinct input shape raises
  svd: NotImplementedError: SVD gradient has not been implemented for input with unknown inner matrix shape.
  qr:  NotImplementedError: QrGrad not implemented with dynamic shapes. Received r.shape: (None, None)
forwardprop._jvp_dispatch traces an op's JVP helper with exact shapes up to
_TRACE_COUNT_LIMIT = 32 times per op and process, then with shape relaxation
(reduce_retracing=True); _SvdGrad and _QrGrad need static shapes. The source says so in a
TODO ("reduce_retracing for gradients which rely on static shape information are
underspecialized"). The same call with the same shape works in a fresh process.
Upstream: no issue found in tensorflow/tensorflow for ForwardAccumulator with svd/qr and the
trace limit (searched 2026-12-01: "ForwardAccumulator svd", "QrGrad not implemented with
dynamic shapes", "_TRACE_COUNT_LIMIT").
Found by: suites/autodiff/test_ops.py::test_tensorflow_op_forward_vs_reverse_mode[cpu-svd]
and [cpu-qr] under --dl-profile=explore --hypothesis-seed=48213 (many shapes in one worker).

Run: python tf_forward_mode_decompositions_relaxed_shapes.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
SHAPES = [(m, n) for m in range(2, 8) for n in range(2, 8)]  # 36 distinct shapes


def observed():
    """op -> None if forward mode worked for every shape, else (call number, shape, error)."""
    import tensorflow as tf

    fns = {"svd": lambda x: tf.linalg.svd(x, compute_uv=True)[0], "qr": lambda x: tf.linalg.qr(x)[1]}
    out = {}
    for name, fn in fns.items():
        out[name] = None
        for k, shape in enumerate(SHAPES):
            x = tf.constant(np.random.default_rng(k).standard_normal(shape) + 3 * np.eye(*shape))
            try:
                with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as acc:
                    y = fn(x)
                acc.jvp(y).numpy()
            except NotImplementedError as exc:  # the symptom
                out[name] = (k + 1, shape, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
                break
    return out


def expected():
    """Documented: forward mode works for every shape, however many a process has seen."""
    return {"svd": None, "qr": None}


def judge(got, want):
    broken = {k: v for k, v in got.items() if v is not None}
    if got == want:
        return True, f"forward mode through tf.linalg.svd and tf.linalg.qr worked for all {len(SHAPES)} shapes"
    parts = [f"{op}: call {k} (shape {tuple(s)}) raised {e}" for op, (k, s, e) in broken.items()]
    return False, "forward mode after 32 distinct shapes in one process: " + "; ".join(parts)


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
