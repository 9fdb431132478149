"""torch.optim.Rprop: the first step moves by lr clamped into step_sizes, not by lr.

Claim (dlconform modules.torch.optimizer-update-rules): every torch.optim optimizer updates its
parameters by the algorithm its docstring states; Rprop's first step moves each element by lr.
Documentation: help(torch.optim.Rprop), https://docs.pytorch.org/docs/stable/generated/torch.optim.Rprop.html
    "initialize: g_prev^0 <- 0, eta_0 <- lr (learning rate)"; for each element
    "if g_prev g_t > 0: eta_t <- min(eta_{t-1} eta_+, Gamma_max) / else if g_prev g_t < 0:
     eta_t <- max(eta_{t-1} eta_-, Gamma_min), g_t <- 0 / else: eta_t <- eta_{t-1}";
    "theta_t <- theta_{t-1} - eta_t sign(g_t)"
  so at step 1 (g_prev = 0: the 'else' branch, no clamp) each element moves by eta_0 = lr, also
  when lr lies outside step_sizes = (Gamma_min, Gamma_max).
Observed on torch 2.13.0+cpu: with lr = 0.01 and step_sizes = (0.05, 0.2) every element moves by
0.05 = Gamma_min, in the for-loop (foreach=False), foreach=True and differentiable=True
implementations alike: torch/optim/rprop.py maps sign(g_prev g) = 0 to the factor 1 and then
clamps every step size, `step_size.mul_(sign).clamp_(step_size_min, step_size_max)` (foreach:
`_foreach_mul_` then `clamp_`), so eta_0 = lr is clamped into step_sizes at the first step. The
code is the original Rprop's (step sizes always within their bounds); the box is what differs.
Raised in review of the PR that added the box, pytorch/pytorch#63866 (2021-09-07: "The code is
not equivalent if lr is not inside step_sizes range. Is that a problem?"); no issue found.
Found by: suites/modules/test_torch_optimizers.py::test_torch_rprop_first_step_is_lr[*]
(lr=0.01, step_sizes=(0.05, 0.2): max|actual - expected| = 4.000e-02 = 0.05 - 0.01).

Run: python torch_rprop_first_step_clamped.py
Exit 1 while the first step is clamped, 0 once it moves by lr, 2 if torch cannot be imported.
"""

import sys

import numpy as np

LR, STEP_SIZES = 0.01, (0.05, 0.2)  # lr below Gamma_min: the documented step is lr, torch's Gamma_min
THETA0 = np.zeros(4)
GRAD = np.array([1.0, -2.0, 3.0, -4.0])
IMPLEMENTATIONS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "differentiable": {"differentiable": True}}
# theta_0 - lr sign(g) from theta_0 = 0 is one exact float64 operation: allow 4 units of round-off of lr.
ATOL = 4 * np.finfo(np.float64).eps / 2 * LR


def observed():
    """The parameters after one Rprop step from THETA0 with gradient GRAD, per implementation."""
    import torch

    out = {}
    for name, kwargs in IMPLEMENTATIONS.items():
        leaf = torch.tensor(THETA0, dtype=torch.float64, requires_grad=True)
        p = leaf.clone() if kwargs.get("differentiable") else leaf  # differentiable: a non-leaf is allowed
        opt = torch.optim.Rprop([p], lr=LR, step_sizes=STEP_SIZES, **kwargs)
        p.grad = torch.tensor(GRAD, dtype=torch.float64)
        opt.step()
        out[name] = p.detach().numpy().copy()
    return out


def expected():
    """The box at step 1: eta_1 = eta_0 = lr (the 'else' branch), theta_1 = theta_0 - lr sign(g_1)."""
    return {name: THETA0 - LR * np.sign(GRAD) for name in IMPLEMENTATIONS}


def judge(got, want):
    errors = {name: float(np.max(np.abs(np.asarray(got[name], dtype=np.float64) - want[name]))) for name in want}
    worst = max(errors.values())
    seen = ", ".join(f"{name} {np.asarray(got[name]).tolist()}" for name in want)
    line = (f"Rprop(lr={LR}, step_sizes={STEP_SIZES}) step 1 from 0 with g={GRAD.tolist()}: {seen}; documented "
            f"theta_0 - lr sign(g) = {next(iter(want.values())).tolist()}; worst |error| {worst:.3g} "
            f"(allowed {ATOL:.2g})")
    return worst <= ATOL, line


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
