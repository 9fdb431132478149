"""torch.nn.CrossMapLRN2d: the backward is not the derivative of the forward (two off-by-one windows).

Claim (dlconform modules.torch.module-contract, property gradcheck-input): a module's
reverse-mode gradient is the derivative of its forward, checked against central finite
differences of that forward in float64.
Documentation: torch.nn.CrossMapLRN2d has no docstring; its forward is the custom
torch.autograd.Function torch.nn.modules._functions.CrossMapLRN2d, bound by
help(torch.autograd.Function.backward), https://docs.pytorch.org/docs/stable/generated/torch.autograd.Function.backward.html
    "It must accept a context :attr:`ctx` as the first argument, followed by as many outputs as the
     :func:`forward` returned (...), and it should return as many tensors, as there were inputs to
     :func:`forward`. Each argument is the gradient w.r.t the given output, and each returned value
     should be the gradient w.r.t. the corresponding input."
  so CrossMapLRN2d(x) backpropagates the cotangent w to J(x)^T w, J the Jacobian of its forward.
Observed on torch 2.13.0+cpu: with size=3, alpha=1e-2, beta=0.75, k=1 (the suite's record) the
gradient differs from the forward's derivative by 7.08e-3 of its largest entry at the x below,
where fourth-order differences in float64 agree with a correct gradient to 1e-12.
torch/nn/modules/_functions.py is a port of Lua torch's nn.SpatialCrossMapLRN (torch/nn
SpatialCrossMapLRN.lua) that kept two 1-based indices: the forward drops channel c - pre_pad from
the running window only `if c > pre_pad` (Lua's 1-based `c > prePad` is c >= pre_pad 0-based), so
from channel pre_pad on every window keeps channel 0 (size 3, 5 channels: windows {0,1}, {0,1,2},
{0,1,2,3}, {0,2,3,4}, {0,3,4}); the backward places the ratios at
`paddded_ratio.narrow(0, inversePrePad, channels)` (Lua's 1-based narrow(1, inversePrePad, ...) is
inversePrePad - 1 0-based), so (size 3) input channel i collects the output channels i-2 .. i instead of
those whose window holds i. Neither matches the other: with size 3, gradcheck fails from 2
channels on, and from 3 channels on the forward also differs from F.local_response_norm's
documented formula (2.6e-3 relative at the x below).
The C++ frontend's torch::nn::functions::CrossMapLRN2d (torch/csrc/api/src/nn/modules/_functions.cpp)
has the same two loops.
Found by: suites/modules/test_torch_module_records.py::test_torch_module_contract[cpu-CrossMapLRN2d-size3]
(property gradcheck: relative error 0.00287 along the gradient's own direction).

Run: python torch_crossmaplrn2d_backward.py
Exit 1 while the gradient is not the forward's derivative, 0 once it is, 2 if torch cannot be
imported.
"""

import sys

import numpy as np

SIZE, ALPHA, BETA, K = 3, 1e-2, 0.75, 1.0  # the suite's record CrossMapLRN2d-size3
# (N, C, H, W) = (1, 5, 1, 2): five channels at two pixels, ordinary values
X = np.array([0.3, -1.2, 0.8, 2.0, -0.5, 1.5, 1.1, -0.7, -1.6, 0.4]).reshape(1, 5, 1, 2)
W = np.array([1.0, -0.5, 0.25, 0.75, -1.0, 0.5, 2.0, -0.25, 1.5, -1.5]).reshape(X.shape)  # the cotangent
H = 1e-3  # step of the fourth-order central differences
# Fourth-order central differences in float64: truncation h^4 |f^(5)| / 30 ~ 3e-14 and rounding
# 18 u |f| / (12 h) ~ 2e-13 for these O(1) inputs and outputs: allow 1e-10 relative to max|grad|.
RTOL = 1e-10


def observed():
    """Reverse mode <w, J e_i> for every input element i, and the same by fourth-order central
    differences of torch's own forward (both in float64)."""
    import torch

    m = torch.nn.CrossMapLRN2d(SIZE, alpha=ALPHA, beta=BETA, k=K)
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(m(x), x, grad_outputs=torch.tensor(W, dtype=torch.float64))

    def f(a):
        with torch.no_grad():
            return float((m(torch.tensor(a, dtype=torch.float64)) * torch.tensor(W, dtype=torch.float64)).sum())

    fd = np.zeros(X.size)
    for i in range(X.size):
        e = np.zeros(X.size)
        e[i] = H
        e = e.reshape(X.shape)
        fd[i] = (8 * (f(X + e) - f(X - e)) - (f(X + 2 * e) - f(X - 2 * e))) / (12 * H)
    return {"reverse": g.detach().numpy().reshape(-1).copy(), "forward_fd": fd}


def expected():
    return None  # the oracle is the forward's own derivative: observed()["forward_fd"]


def judge(got, want=None):
    g = np.asarray(got["reverse"], dtype=np.float64)
    d = np.asarray(got["forward_fd"], dtype=np.float64)
    err = float(np.max(np.abs(g - d)) / np.max(np.abs(d)))
    line = (f"CrossMapLRN2d({SIZE}, alpha={ALPHA}, beta={BETA}, k={K}), float64 x of shape {X.shape}: "
            f"reverse-mode gradient {np.round(g, 6).tolist()}, central differences of its own forward "
            f"{np.round(d, 6).tolist()}; relative error {err:.3g} (allowed {RTOL:.2g})")
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
