"""tf.linalg.matmul in bfloat16 on CPU: a broadcast batch matmul returns garbage.

Claim (dlconform autodiff.gradient.low-precision): an op's bfloat16 value agrees with the
float64 value within bfloat16's round-off bound.
Documentation: https://www.tensorflow.org/api_docs/python/tf/linalg/matmul (batch
  dimensions broadcast; the argument table's dtype list should be checked against the 2.21
  page: whether bfloat16 is listed or not, the call neither raises nor returns the product,
  it returns uninitialised memory, which no page documents).
Observed on tensorflow-cpu 2.21.0: a of shape (2, 1, 4, 4), b of shape (1, 4),
transpose_b=True, bfloat16: the first two of 8 results are close to the float32 ones, the
others are 0, -5.9e-13, 1e29..1e34 or nan, and change from call to call (uninitialised
memory); float32 and float16 are right.
Depends on the CPU: reproduced on the project's machines up to 2026-12-01 (their CPU flags were
not recorded); on an AMD EPYC with AVX-512 BF16 (2026-12-02) every call is right. The line
printed says whether this CPU has avx512_bf16.
Found by: suites/autodiff/test_low_precision.py::
  test_low_precision_forward_and_gradient_match_float64[tf-cpu-linear-bfloat16]
  (explore seed 29719; linear(k=1, bias=False) on a (2, 1, 4, 4) input).

Run: python tf_bfloat16_batch_matmul_garbage.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import sys

import numpy as np

A = np.random.default_rng(0).standard_normal((2, 1, 4, 4))
B = np.array([[0.5, -1.25, 1.0, 0.375]])  # exact in bfloat16
TRIALS = 5
TOL = 8 * 2.0**-8  # a few bfloat16 roundings of 4-term sums of O(1) values, relative to sum|a||b|


def observed():
    import tensorflow as tf

    with tf.device("/CPU:0"):
        a, b = tf.constant(A, tf.bfloat16), tf.constant(B, tf.bfloat16)
        return [np.asarray(tf.cast(tf.linalg.matmul(a, b, transpose_b=True), tf.float64)) for _ in range(TRIALS)]


def expected():
    a = A.astype(np.float32).astype(np.float64)  # bf16 rounding of A is within TOL below
    return a @ B.T


def cpu_bf16():
    """'with' or 'without' avx512_bf16 (the flags of Linux's /proc/cpuinfo), or 'unknown'."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return "with" if "avx512_bf16" in line.split() else "without"
    except OSError:
        pass
    return "unknown"


def judge(got, want):
    scale = np.abs(A) @ np.abs(B.T)
    worst = max(float(np.nanmax(np.abs(g - want) / scale)) if np.all(np.isfinite(g)) else np.inf for g in got)
    line = (f"bfloat16 matmul (2,1,4,4) x (1,4)^T: worst relative error {worst:.3g} over {TRIALS} calls "
            f"(allowed {TOL:.3g}); first call {got[0].ravel()[:8].tolist()}; CPU {cpu_bf16()} avx512_bf16")
    return worst <= TOL, line


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
