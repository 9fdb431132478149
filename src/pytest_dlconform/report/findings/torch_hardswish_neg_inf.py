"""torch.nn.functional.hardswish(-inf) is NaN; its documentation defines it as 0.

Claim (dlconform autodiff.ops.edge-cases, mode nonfinite): at +-inf an op returns the value
its documented formula defines.
Documentation: https://pytorch.org/docs/stable/generated/torch.nn.Hardswish.html
    "Hardswish(x) = 0 if x <= -3, x if x >= +3, x * (x + 3) / 6 otherwise"
Observed on torch 2.13.0 (CPU, float32 and float64): hardswish(-inf) = nan (the kernel computes
x * min(max(x + 3, 0), 6) / 6 = -inf * 0), hardswish(-1e30) = -0.0 and hardswish(+inf) = inf.
hardsigmoid(-inf) = 0 and relu6(-inf) = 0 are right.
Found by: suites/autodiff/test_op_edges.py::test_torch_op_edge_cases[cpu-nonfinite-hardswish].

Run: python torch_hardswish_neg_inf.py
Exit 1 while the bug is there, 0 once fixed, 2 if torch cannot be imported.
"""

import sys

import numpy as np

X = np.array([-np.inf, -1e30, -3.0, 3.0, np.inf])


def observed():
    import torch

    return [torch.nn.functional.hardswish(torch.tensor(X, dtype=d)).double().numpy() for d in (torch.float64,
                                                                                               torch.float32)]


def expected():
    return np.where(X <= -3, 0.0, np.where(X >= 3, X, X * (X + 3) / 6))


def judge(got, want):
    bad = [(float(x), float(g)) for out in got for x, g, w in zip(X, out, want) if g != w]
    return not bad, f"torch hardswish at {X.tolist()} (float64, float32): {len(bad)} differ from the formula: {bad!r}"


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
