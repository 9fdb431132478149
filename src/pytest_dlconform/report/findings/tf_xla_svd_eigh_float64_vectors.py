"""tf.linalg.svd and tf.linalg.eigvalsh under XLA: float64 gradients accurate to 1e-6 / 1e-8 only,
and tf.linalg.eigh's vectors of a nearly diagonal matrix not rotated at all.

Claim (dlconform execution.function.backward): tf.function(jit_compile=True) computes the
same gradients as eager TensorFlow, within the float64 error bound of the two (a few ulps
times the problem's condition; here the matrices are well conditioned, gap >= 1).
Documentation: https://www.tensorflow.org/api_docs/python/tf/linalg/svd and
https://www.tensorflow.org/api_docs/python/tf/linalg/eigh (no accuracy caveat, no XLA
caveat); https://www.tensorflow.org/xla says compiled functions compute the same values.
Observed on tensorflow-cpu 2.21.0: for M = diag(2, 4, 6, 8) + a symmetric perturbation of
size 0.01 (singular values and eigenvalues 2 apart), the gradient of sum_i c_i sigma_i (the
rank-one terms u_i v_i^T, from _SvdGrad's svd(compute_uv=True)) differs from the exact
U diag(c) V^T by about 6e-7 under jit_compile=True, while eager agrees to 1e-15; for
eigvalsh (the lower-triangle form of V diag(c) V^T, as eager) the XLA gradient is off by about 2e-8,
and the XLA eigenpairs' residual ||M V - V diag(w)|| is 2e-8. The values themselves agree
to 1e-13. The same tolerance shows in the forward values of eigh's vectors: for
M2 = diag(2, 4) + 1e-8 E2 (E2 symmetric, off-diagonal -0.7) the exact second eigenvector has
a component -0.7e-8 / 2 = -3.5e-9 along the first axis, eager TensorFlow and LAPACK give it,
and XLA returns the unit vector (v v^T off by 3.5e-9): its Jacobi sweep does not rotate an
off-diagonal that small against the diagonal (the compiled-backward suite's "tiny" input
regime, where the eigh sample's projector differed by 6.4e-9).
XLA's Jacobi SVD / eigensolvers stop at a fixed tolerance (xla/hlo/builder/lib
svd.h epsilon, self_adjoint_eig.h tol) that is far above float64's round-off.
Found by: suites/execution/test_compiled_backward.py::
  test_tf_function_backward_matches_eager_and_finite_differences[cpu-xla-{svd,eigh}].

Run: python tf_xla_svd_eigh_float64_vectors.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import sys

import numpy as np

E = np.array([[0.3, -0.7, 0.2, 0.5], [-0.1, 0.4, 0.9, -0.6], [0.8, 0.1, -0.3, 0.2], [-0.5, 0.6, 0.1, -0.4]])
M = np.diag([2.0, 4.0, 6.0, 8.0]) + 0.01 * (E + E.T) / 2
C = np.array([1.0, 2.0, 3.0, 4.0])
M2 = np.diag([2.0, 4.0]) + 1e-8 * np.array([[0.3, -0.7], [-0.7, 0.4]])
TOL = 1e-12  # the exact gradients have entries of size ~1 and condition ~4: 1e-12 is generous


def observed():
    import tensorflow as tf

    def grads(a):
        out = []
        for f in (lambda t: tf.linalg.svd(t, compute_uv=False), tf.linalg.eigvalsh):
            with tf.GradientTape() as tape:
                tape.watch(a)
                y = tf.reduce_sum(f(a) * tf.constant(C, tf.float64))
            out.append(tape.gradient(y, a))
        return out

    a = tf.constant(M)
    compiled = tf.function(grads, jit_compile=True)(a)
    _, v = tf.function(tf.linalg.eigh, jit_compile=True)(tf.constant(M2))
    v2 = v.numpy()[:, [1]]
    return {"svd": compiled[0].numpy(), "eigvalsh": compiled[1].numpy(), "eigh vectors": v2 @ v2.T}


def expected():
    u, _, vh = np.linalg.svd(M)  # descending singular values, as TensorFlow's
    _, v = np.linalg.eigh(M)  # ascending eigenvalues, as TensorFlow's
    s = v @ np.diag(C) @ v.T
    v2 = np.linalg.eigh(M2)[1][:, [1]]  # the projector v v^T: free of the vector's sign
    # eigvalsh reads only the lower triangle (documented): d/dA_ij is 2 S_ij below the
    # diagonal, S_ii on it and 0 above, with S = V diag(c) V^T (eager TensorFlow's gradient).
    return {"svd": u @ np.diag(C) @ vh, "eigvalsh": np.tril(2 * s) - np.diag(np.diag(s)), "eigh vectors": v2 @ v2.T}


def judge(got, want):
    errs = {name: float(np.max(np.abs(got[name] - want[name]))) for name in want}
    bad = {name: e for name, e in errs.items() if e > TOL}
    if not bad:
        return True, f"XLA float64 svd and eigvalsh gradients and eigh vectors agree with the exact ones (max errors {errs})"
    return False, ("tf.function(jit_compile=True) float64 svd/eigvalsh gradients or eigh vectors differ from the exact "
                   + ", ".join(f"{n} by {e:.3g}" for n, e in bad.items()) + f" (allowed {TOL:g})")


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
