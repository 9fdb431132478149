"""tf.math.cumprod: the gradient of an exact zero entry is 0 instead of the product rule's value.

Claim (dlconform autodiff.gradient.documented-conventions, mode cumprod-zeros): cumprod is
the polynomial y_i = x_0 x_1 ... x_i (exclusive and reverse likewise), smooth everywhere,
so its gradient at inputs with exact zeros is the product rule's,
d/dx_j sum_i w_i y_i = sum_{i>=j} w_i prod_{k<=i, k!=j} x_k. torch.cumprod gives it.
Documentation: https://www.tensorflow.org/api_docs/python/tf/math/cumprod (the definition
of the cumulative product; no exception for zeros, nor for its gradient).
Observed on tensorflow-cpu 2.21.0: tensorflow/python/ops/math_grad.py _CumprodGrad returns
div_no_nan(cumsum(prod * grad, reverse), x): at x_j = 0 the gradient of x_j is 0. For
x = [0, 1.5, -2, 0.5] (w = 1) TensorFlow gives [0, 0, 0, 0]; the product rule gives
[1 + 1.5 - 3 - 1.5, 0, 0, 0] = [-2, 0, 0, 0]. The gradient of the nonzero entries is right.
Upstream: tensorflow/tensorflow#119430 (closed; fix PR #120282 merged, not in 2.21), and
#3862 (2016, the NaN form).
Found by: suites/autodiff/test_ops.py (reverse mode vs finite differences of the cumprod op,
dyadic and mixed regimes, before its inputs were kept off zeros) and pinned in
suites/autodiff/test_documented_gradients.py::test_cumprod_gradient_at_exact_zeros.

Run: python tf_cumprod_gradient_at_zeros.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import sys

import numpy as np

X = np.array([[0.0, 1.5, -2.0, 0.5], [1.5, 0.0, 2.0, -0.5], [1.5, 0.0, -2.0, 0.0]])


def observed():
    import tensorflow as tf

    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.math.cumprod(x, axis=-1)
    return np.asarray(tape.gradient(y, x).numpy(), dtype=np.float64)


def expected():
    """The product rule, no division: g_j = sum_{i>=j} prod_{k<=i, k!=j} x_k (w = 1)."""
    n = X.shape[-1]
    g = np.zeros_like(X)
    for i in range(n):
        for j in range(i + 1):
            g[:, j] += np.prod(X[:, [k for k in range(i + 1) if k != j]], axis=-1)
    return g


def judge(got, want):
    bad = np.argwhere(np.abs(got - want) > 1e-12)
    if not bad.size:
        return True, "tf.math.cumprod's gradient at inputs with exact zeros is the product rule's"
    r, c = (int(i) for i in bad[0])
    return False, (f"tf.math.cumprod gradient of x[{r}, {c}] = {X[r, c]} is {got[r, c]}, but the product rule gives "
                   f"{want[r, c]} (x = {X[r].tolist()}, w = 1); {len(bad)} entries differ, all at exact zeros: "
                   f"{all(X[tuple(b)] == 0 for b in bad)}")


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
