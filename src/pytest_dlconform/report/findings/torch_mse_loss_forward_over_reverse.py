"""torch: forward mode over the backward of F.mse_loss(reduction='mean') raises "ZeroTensors are immutable".

Claim (dlconform autodiff.gradient.second-order): a Hessian-vector product by forward over
reverse (torch.func.jvp of torch.func.vjp, or torch.autograd.forward_ad over
torch.autograd.grad) is the derivative of the gradient.
Documentation: https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.mse_loss.html
  (mean of (x - y)**2 by default, so H v = 2 w v / N for a cotangent w of the scalar loss);
  https://docs.pytorch.org/docs/stable/generated/torch.func.jvp.html and the torch.func
  "Hessian-vector products" recipe (jvp of a vjp / of grad: "forward-over-reverse").
Observed on torch 2.13.0+cpu: RuntimeError: ZeroTensors are immutable. Please use the
materialized zero tensor obtained using .clone() if you want a mutable tensor. Both routes
raise for reduction='mean'; 'sum' and 'none' give the right H v, and reverse over reverse
gives 2 w v / N. The forward derivative of aten::mse_loss_backward sees the target's tangent
as an immutable ZeroTensor (the target has none) and mse_loss_double_backward
(torch/csrc/autograd/FunctionsManual.cpp) divides in place for 'mean'
(`grad_input /= input.sym_numel()`); a materialised zero tangent for the target gives 0.35.
Found by: suites/autodiff/test_second_order.py::test_torch_op_hvp_forward_over_reverse[*-mse_loss].

Run: python torch_mse_loss_forward_over_reverse.py
Exit 1 while the bug is there, 0 once fixed, 2 if torch cannot be imported.
"""

import sys

import numpy as np

X = np.array([[0.64, 0.10], [-0.54, 0.36]])
T = np.array([[1.375, -1.0], [-1.625, -0.875]])
V = np.ones((2, 2))
W = 0.7
# 2 w v / N: a product and a division per element.
RTOL = 4 * np.finfo(np.float64).eps / 2


def observed():
    """H v of mse_loss(x, t) (mean) by the two forward-over-reverse routes: values, or the RuntimeError."""
    import torch
    import torch.autograd.forward_ad as fwad
    import torch.nn.functional as F

    x, t, v, w = (torch.tensor(a, dtype=torch.float64) for a in (X, T, V, W))

    def loss(z):
        return F.mse_loss(z, t, reduction="mean")

    def func_route():
        grad = lambda z: torch.func.vjp(loss, z)[1](w)[0]
        return torch.func.jvp(grad, (x,), (v,))[1].numpy()

    def dual_route():
        with fwad.dual_level():
            xd = fwad.make_dual(x.clone().requires_grad_(True), v)
            g, = torch.autograd.grad(loss(xd), xd, w, create_graph=True)
            return fwad.unpack_dual(g).tangent.detach().numpy()

    out = {}
    for name, route in (("torch.func.jvp of torch.func.vjp", func_route),
                        ("forward_ad dual over autograd.grad", dual_route)):
        try:
            out[name] = route()
        except RuntimeError as exc:  # the symptom: ZeroTensors are immutable
            out[name] = exc
    return out


def expected():
    return 2.0 * W * V / V.size


def judge(got, want):
    parts, holds = [], True
    for name, h in got.items():
        if isinstance(h, BaseException):
            holds = False
            parts.append(f"{name} raised {type(h).__name__}: {str(h).strip().splitlines()[0]}")
            continue
        err = float(np.max(np.abs(np.asarray(h, dtype=np.float64) - want)) / np.max(np.abs(want)))
        holds = holds and err <= RTOL
        parts.append(f"{name}: {np.asarray(h).tolist()} (relative error {err:.3g}, allowed {RTOL:.2g})")
    return holds, (f"H v of F.mse_loss(x, t, reduction='mean') with w={W}, v=ones, documented 2 w v / N = "
                   f"{want.reshape(-1).tolist()}: " + "; ".join(parts))


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
