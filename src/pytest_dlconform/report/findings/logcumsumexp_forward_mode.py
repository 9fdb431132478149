"""torch.logcumsumexp: the forward-mode JVP loses the tangent of a prefix far below the maximum.

Claim (dlconform autodiff.gradient.forward-mode-accuracy): a float64 JVP is correct to
float64 rounding.
Documentation: https://docs.pytorch.org/docs/stable/generated/torch.logcumsumexp.html
    "For summation index j given by dim and other indices i, the result is
     logcumsumexp(x)_ij = log sum_{k=0}^{j} exp(x_ik)"
  so along u = ones every entry of J u is sum_{k<=j} exp(x_k - y_j) = 1 exactly; and
  https://docs.pytorch.org/docs/stable/generated/torch.func.jvp.html: "jvp stands for
  Jacobian-vector product, returns a tuple containing the output of func(*primals) and
  the 'Jacobian of func evaluated at primals' times tangents."
Observed on torch 2.13.0+cpu: at x = [0, 0] (the shrunk example) J u = 1 - 1e-13 (the
1e-13 that logcumsumexp_jvp in torch/csrc/autograd/FunctionsManual.cpp adds to its
denominator; float64 allows about 1e-15); at x = [-59.8, 0] (J u)_0 = 1e-13 instead of 1:
the JVP normalises every prefix by the maximum over the whole axis, so exp(x_0 - max)
disappears below that 1e-13.
Upstream: pytorch/pytorch#196705 (open), fix proposed in pytorch/pytorch#196741.
Found by: suites/autodiff/test_known_limits.py::test_torch_forward_mode_through_logcumsumexp
(shrunk example x = [0.0, 0.0]; the soak found x = [-59.8, 0.0], seed 312022087).

Run: python logcumsumexp_forward_mode.py
Exit 1 while the bug is there, 0 once fixed, 2 if torch cannot be imported.
"""

import sys

import numpy as np

CASES = [np.array([0.0, 0.0]), np.array([-59.8, 0.0])]
# n exponentials, their sum and a division per entry (n = 2): 16 * (3 + 2) round-offs, as the suite allows.
ATOL = 16 * 5 * np.finfo(np.float64).eps / 2


def observed():
    """J u of logcumsumexp along u = ones, by torch.func.jvp, for each case."""
    import torch

    out = []
    for x in CASES:
        t = torch.tensor(x, dtype=torch.float64)
        _, ju = torch.func.jvp(lambda v: torch.logcumsumexp(v, 0), (t,), (torch.ones_like(t),))
        out.append(ju.numpy())
    return out


def expected():
    return [np.ones_like(x) for x in CASES]  # sum_k exp(x_k - y_j) = 1 for every prefix j


def judge(got, want):
    errs = [float(np.max(np.abs(np.asarray(g, dtype=np.float64) - w))) for g, w in zip(got, want)]
    parts = [f"x={x.tolist()}: J u={np.asarray(g).tolist()}" for x, g in zip(CASES, got)]
    return max(errs) <= ATOL, (f"torch.logcumsumexp JVP along ones, documented all 1: {'; '.join(parts)}; "
                               f"worst error {max(errs):.3g} (allowed {ATOL:.2g})")


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
