"""tf.linalg svd, eigh/eigvalsh and the QR gradient: float16 on CPU has no kernel.

Claim (dlconform autodiff.gradient.low-precision): an op runs in every dtype its
documentation accepts; a refusal is "not applicable" only where the documentation
excludes the dtype.
Documentation (TF 2.21 API docs, generated from the op definitions): Svd, Qr,
SelfAdjointEigV2 "input: A Tensor. Must be one of the following types: float64, float32,
half, complex64, complex128" (the error TensorFlow raises for bfloat16 lists the same:
double, float, half, complex64, complex128); tf.linalg.triangular_solve (MatrixTriangularSolve,
which QR's gradient calls) lists bfloat16, half, float32, float64, complex64, complex128.
Observed on tensorflow-cpu 2.21.0: with a float16 tensor on CPU, tf.linalg.svd raises
NotFoundError "Could not find device for node: {{node Svd}} = Svd[T=DT_HALF, ...]",
tf.linalg.eigvalsh and tf.linalg.eigh likewise for SelfAdjointEigV2; tf.linalg.qr runs
forward, but its gradient raises the same for MatrixTriangularSolve[T=DT_HALF]. The same
family as tf_linalg_float16_cpu_kernels.py (tensorflow/tensorflow#22086, open).
Found by: suites/autodiff/test_low_precision.py::
  test_low_precision_forward_and_gradient_match_float64[tf-cpu-{svd,qr,eigh}-float16].

Run: python tf_linalg_float16_decompositions.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import sys

import numpy as np

A = np.array([[2.0, 0.5], [0.5, 1.0]])  # symmetric positive definite, eigenvalues 0.79 and 2.21
CALLS = ("svd", "eigvalsh", "qr gradient")
RTOL = 8 * 2.0**-11  # a few float16 roundings of a 2x2 computation


def observed():
    """name -> float64 result of the float16 call, or the error it raised."""
    import tensorflow as tf

    a = tf.constant(A, tf.float16)

    def qr_gradient():
        with tf.GradientTape() as tape:
            tape.watch(a)
            r = tf.linalg.qr(a)[1]
            y = tf.reduce_sum(tf.abs(tf.linalg.diag_part(r)))  # |R_11| + |R_22|, sign invariant
        return tape.gradient(y, a)

    calls = {"svd": lambda: tf.linalg.svd(a, compute_uv=False), "eigvalsh": lambda: tf.linalg.eigvalsh(a),
             "qr gradient": qr_gradient}
    out = {}
    for name in CALLS:
        try:
            with tf.device("/CPU:0"):
                out[name] = np.asarray(calls[name]().numpy(), dtype=np.float64)
        except tf.errors.OpError as exc:
            out[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return out


def expected():
    # d(|R_11| + |R_22|)/dA by central differences of numpy's float64 QR (smooth here: R_ii != 0).
    def f(m):
        return float(np.sum(np.abs(np.diag(np.linalg.qr(m)[1]))))

    h, g = 1e-6, np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        e = np.zeros_like(A)
        e[idx] = h
        g[idx] = (f(A + e) - f(A - e)) / (2 * h)
    return {"svd": np.linalg.svd(A, compute_uv=False), "eigvalsh": np.linalg.eigvalsh(A), "qr gradient": g}


def judge(got, want):
    bad = []
    for name in CALLS:
        g = got[name]
        if isinstance(g, str):
            bad.append(f"{name}: {g}")
        elif not np.allclose(g, want[name], rtol=RTOL, atol=RTOL):
            bad.append(f"{name}: {g.tolist()} instead of {want[name].tolist()}")
    line = ("float16 tf.linalg decompositions on CPU (documented types include half): "
            + ("; ".join(bad) if bad else "svd, eigvalsh and the QR gradient run and agree with numpy"))
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
