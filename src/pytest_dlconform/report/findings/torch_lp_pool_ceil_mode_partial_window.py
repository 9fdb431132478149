"""torch.nn.functional.lp_pool1d/2d/3d with ceil_mode=True: a partial last window is scaled up.

Claim (dlconform modules.torch.functional): every torch.nn.functional function computes what its
docstring (or the module docstring it refers to) states; lp_pool computes f(X) = (sum_{x in X} x^p)^(1/p)
on each window X, also on the partial last windows that ceil_mode=True keeps.
Documentation: help(torch.nn.functional.lp_pool1d) ("See :class:`~torch.nn.LPPool1d` for details.";
  "When ``ceil_mode`` is ``True``, sliding windows may go off-bounds if they start within the left
  padding or the input."), help(torch.nn.LPPool1d), https://docs.pytorch.org/docs/stable/generated/torch.nn.LPPool1d.html
    "On each window, the function computed is: f(X) = \\sqrt[p]{\\sum_{x \\in X} x^{p}}";
    "At p = 1, one gets Sum Pooling (which is proportional to Average Pooling)";
    "ceil_mode: when True, will use `ceil` instead of `floor` to compute the output shape"
  (LPPool2d and LPPool3d alike): an off-bounds window holds the elements inside the input (there is
  no padding), and f sums those.
Observed on torch 2.13.0+cpu: every window that ceil_mode leaves partial is scaled by (kernel
elements) / (elements present) before the p-th root: lp_pool1d(1..6, p=1, k=3, stride=2,
ceil_mode=True) is [6, 12, 16.5], not [6, 12, 11] (5 + 6); at p = 2 the last window is
sqrt((25 + 36) * 3/2). torch/nn/functional.py computes lp_pool as avg_pool{1,2,3}d(x^p, k, stride,
0, ceil_mode) times the kernel's element count (`.mul(kernel_size)`, `.mul(kw * kh)`,
`.mul(kd * kw * kh)`); avg_pool divides a partial window (count_include_pad=True, no padding) by the
elements present, not by the kernel size, so multiplying back by the kernel size does not recover
the sum. Floor mode (every window full) is right.
Found by: suites/modules/test_torch_functional.py::test_record[*-lp_pool1d], [*-lp_pool2d],
[*-lp_pool3d] (p=2, k=2, stride=3, ceil_mode=True: max|actual - expected| = 9.616e-01, 1.372e+00,
2.252e+00 on the suite's inputs in [0.1, 3.1]).

Run: python torch_lp_pool_ceil_mode_partial_window.py
Exit 1 while a partial window is scaled, 0 once ceil_mode's last windows give the documented f(X),
2 if torch cannot be imported.
"""

import itertools
import sys

import numpy as np

# (label, d, input shape, p, kernel, stride): each input is 1, 2, ..., n in float64; the last
# window along every spatial dimension is partial under ceil_mode=True (no padding).
CASES = (
    ("lp_pool1d(x=1..6, p=1, k=3, stride=2)", 1, (1, 1, 6), 1.0, 3, 2),
    ("lp_pool1d(x=1..6, p=2, k=3, stride=2)", 1, (1, 1, 6), 2.0, 3, 2),
    ("lp_pool2d(x=1..25 as 5x5, p=1, k=2, stride=2)", 2, (1, 1, 5, 5), 1.0, 2, 2),
    ("lp_pool3d(x=1..27 as 3x3x3, p=1, k=2, stride=2)", 3, (1, 1, 3, 3, 3), 1.0, 2, 2),
)
# A sum of at most 8 small integers to the power p (exact), one p-th root: 8 units of float64
# round-off relative to the largest output allow for torch's pow/divide/multiply route.
RTOL = 8 * np.finfo(np.float64).eps / 2


def _input(shape):
    return np.arange(1.0, float(np.prod(shape)) + 1.0).reshape(shape)


def observed():
    """torch's lp_pool{d}d(..., ceil_mode=True) per case, as float64 arrays."""
    import torch
    import torch.nn.functional as F

    out = {}
    for label, d, shape, p, k, s in CASES:
        fn = getattr(F, f"lp_pool{d}d")
        out[label] = fn(torch.tensor(_input(shape), dtype=torch.float64), p, k, s, ceil_mode=True).numpy().copy()
    return out


def expected():
    """f(X) = (sum_{x in X} x^p)^(1/p) with X the part of each window inside the input; ceil_mode's
    output size: ceil((L - k) / stride) + 1 (no padding, so every window starts inside the input)."""
    want = {}
    for label, d, shape, p, k, s in CASES:
        x = _input(shape)
        spatial = shape[-d:]
        out = [-(-(n - k) // s) + 1 for n in spatial]
        res = np.empty((*shape[:-d], *out))
        for pos in itertools.product(*(range(o) for o in out)):
            window = x[(..., *(slice(i * s, i * s + k) for i in pos))].reshape(*shape[:-d], -1)
            res[(..., *pos)] = np.sum(window ** p, axis=-1) ** (1.0 / p)
        want[label] = res
    return want


def _fmt(a):
    return np.round(np.asarray(a, dtype=np.float64), 4).ravel().tolist()


def judge(got, want):
    errors = {}
    for label, w in want.items():
        g = np.asarray(got[label], dtype=np.float64)
        errors[label] = (float(np.max(np.abs(g - w)) / np.max(np.abs(w))) if g.shape == w.shape else float("inf"))
    worst = max(errors.values())
    label = next((k for k, e in errors.items() if e > RTOL), next(iter(want)))  # the first failing case
    line = (f"F.{label} with ceil_mode=True = {_fmt(got[label])}; documented f(X) = (sum_{{x in X}} x^p)^(1/p) over "
            f"each window's elements inside the input = {_fmt(want[label])}; worst relative error over "
            f"{len(want)} cases (lp_pool1d/2d/3d) {worst:.3g} (allowed {RTOL:.2g})")
    return worst <= RTOL, line


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
