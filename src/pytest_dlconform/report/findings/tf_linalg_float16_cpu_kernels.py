"""tf.linalg det, slogdet, solve and cholesky: float16 on CPU has no kernel.

Claim (dlconform autodiff.gradient.low-precision): an op runs in every dtype its
documentation accepts; a refusal is "not applicable" only where the documentation
excludes the dtype.
Documentation (TF 2.21 API docs, generated from the op definitions):
  https://www.tensorflow.org/api_docs/python/tf/linalg/det
    "input: A Tensor. Must be one of the following types: half, float32, float64,
     complex64, complex128."
  and the same list ("half" first or among them) for tf.linalg.slogdet, tf.linalg.solve
  (MatrixSolve) and tf.linalg.cholesky. No page says the CPU lacks half.
Observed on tensorflow-cpu 2.21.0: each call with a float16 tensor on CPU raises
NotFoundError "Could not find device for node: {{node MatrixDeterminant}} =
MatrixDeterminant[T=DT_HALF]" (LogMatrixDeterminant, MatrixSolve, Cholesky likewise);
tf.linalg.inv (MatrixInverse) accepts float16 on the same machine. bfloat16 is refused
by the op definition itself (InvalidArgumentError listing the allowed types), as
documented: not a finding.
Found by: suites/autodiff/test_low_precision.py::
  test_low_precision_forward_and_gradient_match_float64[tf-cpu-{det_dd,logdet_dd,solve_dd,
  cholesky_spd,trisolve}-float16].

Run: python tf_linalg_float16_cpu_kernels.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import sys

import numpy as np

A = np.array([[2.0, 0.5], [0.5, 1.0]])  # symmetric positive definite, det 1.75
B = np.array([[1.0], [2.0]])
OPS = ("det", "slogdet", "solve", "cholesky")
RTOL = 8 * 2.0**-11  # a few float16 roundings of a 2x2 computation


def observed():
    """op -> float64 result of the float16 call, or the error it raised."""
    import tensorflow as tf

    a, b = tf.constant(A, tf.float16), tf.constant(B, tf.float16)
    calls = {"det": lambda: tf.linalg.det(a), "slogdet": lambda: tf.linalg.slogdet(a)[1],
             "solve": lambda: tf.linalg.solve(a, b), "cholesky": lambda: tf.linalg.cholesky(a)}
    out = {}
    for name in OPS:
        try:
            with tf.device("/CPU:0"):
                out[name] = np.asarray(calls[name]().numpy(), dtype=np.float64)
        except tf.errors.OpError as exc:
            out[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return out


def expected():
    return {"det": np.array(np.linalg.det(A)), "slogdet": np.array(np.linalg.slogdet(A)[1]),
            "solve": np.linalg.solve(A, B), "cholesky": np.linalg.cholesky(A)}


def judge(got, want):
    bad = []
    for name in OPS:
        g = got[name]
        if isinstance(g, str):
            bad.append(f"{name}: {g}")
        elif not np.allclose(g, want[name], rtol=RTOL, atol=RTOL):
            bad.append(f"{name}: {g.tolist()} instead of {want[name].tolist()}")
    line = ("float16 tf.linalg on CPU (documented types include half): "
            + ("; ".join(bad) if bad else "all of " + ", ".join(OPS) + " run and agree with numpy"))
    return not bad, line


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
