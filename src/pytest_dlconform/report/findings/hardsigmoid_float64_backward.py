"""torch.nn.functional.hardsigmoid: the float64 backward uses float32(1/6).

Claim (dlconform autodiff.gradient.float64-backward): a float64 gradient is correct to
float64 rounding.
Documentation: https://docs.pytorch.org/docs/stable/generated/torch.nn.Hardsigmoid.html
    "Hardsigmoid(x) = 0 if x <= -3, 1 if x >= +3, x/6 + 1/2 otherwise"
  so on (-3, 3) the derivative is exactly 1/6, which float64 holds to 1.1e-16 (relative).
Observed on torch 2.13.0+cpu: 0.1666666716337204 = float32(1/6), a relative error of
2.98e-08: aten/src/ATen/native/cpu/Activation.cpp, hardsigmoid_backward_kernel, builds
`const scalar_t one_sixth(1.0f / 6.0f)` (a float literal) for every floating dtype.
The forward pass is exact in float64 (0.6666666666666666 at x = 1).
Found by: suites/autodiff/test_known_limits.py::test_torch_hardsigmoid_float64_gradient,
shrunk example x = [1.0], sign = 1.0.

Run: python hardsigmoid_float64_backward.py
Exit 1 while the bug is there, 0 once fixed, 2 if torch cannot be imported.
"""

import sys

import numpy as np

X = np.array([1.0, -2.5, 0.3])  # the shrunk example (1.0), and two more points inside (-3, 3)
# A product grad_output * c is one float64 rounding: allow 4 units of round-off (4.4e-16).
RTOL = 4 * np.finfo(np.float64).eps / 2


def observed():
    """d hardsigmoid(x)/dx in float64 by reverse mode, grad_output = 1."""
    import torch

    t = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(torch.nn.functional.hardsigmoid(t), t, grad_outputs=torch.ones_like(t))
    return g.detach().numpy()


def expected():
    return np.full_like(X, 1.0 / 6.0)  # the documented slope on (-3, 3), in float64


def judge(got, want):
    err = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want) / np.abs(want)))
    line = (f"hardsigmoid float64 gradient at x={X.tolist()}: {np.asarray(got).tolist()}, "
            f"documented 1/6 = {float(want[0])!r}; relative error {err:.3g} (allowed {RTOL:.2g})")
    return err <= RTOL, line


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
