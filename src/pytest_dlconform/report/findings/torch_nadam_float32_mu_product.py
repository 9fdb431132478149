"""torch.optim.NAdam: float64 parameters, float32 mu_product; load_state_dict makes it float64.

Claims (dlconform modules.torch.optimizer-state-dict, modules.torch.optimizer-update-rules): an
optimizer resumed from its state_dict continues exactly as the uninterrupted run; a float64
optimizer step follows its documented algorithm to float64 rounding.
Documentation: help(torch.optim.NAdam), https://docs.pytorch.org/docs/stable/generated/torch.optim.NAdam.html
    "mu_t <- beta_1 (1 - 1/2 0.96^(t psi))", "m_hat_t <- mu_{t+1} m_t / (1 - prod_{i=1}^{t+1} mu_i)
     + (1 - mu_t) g_t / (1 - prod_{i=1}^{t} mu_i)", "theta_t <- theta_{t-1} - gamma m_hat_t / (sqrt(v_hat_t) + eps)";
  torch.optim.Optimizer.load_state_dict and the 'Saving and loading a general checkpoint for
  inference and/or resuming training' recipe: resume training from the saved state.
Observed on torch 2.13.0+cpu: NAdam keeps the running product prod mu_i in state["mu_product"],
a float32 tensor whatever the parameters' dtype (torch/optim/nadam.py: `torch.tensor(1.0,
dtype=_get_scalar_dtype())`, float32 unless the default dtype is float64), so a float64 NAdam's
updates carry float32 rounding in that factor: 3.46e-09 relative to the documented rule after
the 6 steps here, where float64 rounding gives ~1e-15 (1.05e-15 with torch.set_default_dtype(
torch.float64), which makes mu_product float64). load_state_dict casts floating state to the
parameter's dtype, so the resumed optimizer carries on with a float64 mu_product and its
parameters part from the uninterrupted run's: by 1.27e-09 after 4 more steps here.
Found by: suites/modules/test_torch_optimizers.py::test_torch_optimizer_resumes_from_its_state_dict_mid_run[*-NAdam]
(saved after 2 steps, 6 steps in all: max abs difference 4.792e-10 against the uninterrupted run).

Run: python torch_nadam_float32_mu_product.py
Exit 1 while the divergence is there, 0 once a float64 NAdam resumes bitwise and follows its
documented rule to float64 rounding, 2 if torch cannot be imported.
"""

import io
import math
import sys

import numpy as np

THETA0 = np.linspace(-1.0, 1.0, 5)
LR, BETAS, EPS, PSI = 0.1, (0.9, 0.999), 1e-8, 4e-3  # lr=0.1, the other options at their defaults
STEPS, SAVE_AFTER = 6, 2
# 6 steps of ~24 float64 operations, each step's rounding amplified by at most 4 in the later steps
# ((4^6 - 1) / 3 = 1365): 1365 x 24 x 4 u = 1.5e-11 relative; float32 rounding of mu_product is 1e-8.
RTOL = 1365 * 24 * 4 * np.finfo(np.float64).eps / 2


def _grad(theta, t):
    return np.cos(theta * t)  # the gradient fed at step t (a drifting objective), from theta_{t-1}


def observed():
    """The parameters after STEPS steps, uninterrupted and resumed from a state_dict saved after
    SAVE_AFTER steps (torch.save / torch.load(weights_only=True)), and mu_product's dtypes."""
    import torch

    def run(resume):
        p = torch.tensor(THETA0, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.NAdam([p], lr=LR)
        dtype = None
        for t in range(1, STEPS + 1):
            p.grad = torch.cos(p.detach() * t)
            opt.step()
            if t == 1:
                dtype = str(opt.state[p]["mu_product"].dtype)
            if resume and t == SAVE_AFTER:
                buf = io.BytesIO()
                torch.save(opt.state_dict(), buf)
                buf.seek(0)
                p = p.detach().clone().requires_grad_(True)
                opt = torch.optim.NAdam([p], lr=LR)
                opt.load_state_dict(torch.load(buf, weights_only=True))
        return p.detach().numpy().copy(), dtype, str(opt.state[p]["mu_product"].dtype)

    uninterrupted, dtype, _ = run(False)
    resumed, _, loaded = run(True)
    return {"uninterrupted": uninterrupted, "resumed": resumed, "mu_product": f"{dtype}, after load_state_dict {loaded}"}


def expected():
    """The documented NAdam in float64 (numpy) over STEPS steps."""
    b1, b2 = BETAS
    mu = [b1 * (1 - 0.5 * 0.96 ** (i * PSI)) for i in range(1, STEPS + 2)]  # mu_1 .. mu_{STEPS+1}
    theta, m, v = THETA0.copy(), 0.0, 0.0
    for t in range(1, STEPS + 1):
        g = _grad(theta, t)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = mu[t] * m / (1 - math.prod(mu[: t + 1])) + (1 - mu[t - 1]) * g / (1 - math.prod(mu[:t]))
        theta = theta - LR * m_hat / (np.sqrt(v / (1 - b2 ** t)) + EPS)
    return theta


def judge(got, want):
    a = np.asarray(got["uninterrupted"], dtype=np.float64)
    b = np.asarray(got["resumed"], dtype=np.float64)
    resume = float(np.max(np.abs(b - a)))
    rule = float(np.max(np.abs(a - want)) / np.max(np.abs(want)))
    dtypes = f" (mu_product {got['mu_product']})" if got.get("mu_product") else ""
    line = (f"float64 NAdam(lr={LR}), {STEPS} steps from {THETA0.tolist()}{dtypes}: resumed from a state_dict "
            f"saved after step {SAVE_AFTER} differs from the uninterrupted run by {resume:.3g} (documented: "
            f"bitwise equal); uninterrupted vs the documented rule in float64: relative error {rule:.3g} "
            f"(allowed {RTOL:.2g})")
    return resume == 0.0 and rule <= RTOL, line


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
