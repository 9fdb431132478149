"""modules.torch.optimizer-update-rules and modules.torch.optimizer-state-dict: every torch.optim
optimizer against a numpy reference of the update rule its docstring's algorithm box states
(suites/modules/_optim_reference.py), and its state_dict round trip mid-run.

Inputs (OptimizerInfo style, after the idea of torch/testing/_internal/common_optimizers.py: one
table row per optimizer with inputs for every documented option). Each optimizer's options that
change the update, two or three values each, and its implementations (for-loop, foreach, fused
where CPU has it, differentiable) are the factors of a pairwise covering array built by
construction (``_optim_reference.pairwise``): every pair of values of two factors, implementation
included, is in some row; constrained pairs (nesterov needs momentum and no dampening) are left
out only where no valid row can hold them. Parameters are a 3x4 matrix and a 4-vector in float64
(Muon: 3x5 and 5x3, it takes matrices only; SparseAdam: a 6x3 table with sparse row gradients),
the objective a fixed quadratic with a drifting linear term (``_optim_reference.gradient``), so
both sides compute the same gradients; STEPS = 6 steps, the first at which RAdam's rho_t exceeds
5 for beta2 = 0.999 (rho_5 = 4.996, rho_6 = 5.994), so both of its branches run.

Error model. One step of a rule is at most ``ops`` elementwise operations (counted per optimizer
below from its box, with OP_ROUNDING units of u each, checks/numerics.py), plus reductions where
the rule has them (Adafactor's row and column sums and RMS, Muon's matrix products). Rounding
made at step s reaches step t through the t - s later steps; each step map (theta, state) ->
(theta', state') has a normwise relative condition of at most K = 4 for these inputs (the
quadratic's own step 1 - lr a with lr a <= 1, the moment averages <= 1, the normalised updates
m / sqrt(v) <= 2, the decay factor <= 1). So after t steps the error is at most
sum_{s<=t} K^(t-s) (4 ops + reduction) u = (K^t - 1) / (K - 1) (4 ops + reduction) u: 1365 x the
one-step bound at t = 6, about 1e-11 relative in float64. Muon's Newton-Schulz polynomial
a X + b (X X^T) X + c (X X^T)^2 X has derivative at most |a| + 3|b| + 5|c| on the unit ball, a
factor that each of its k iterations adds. Every wrong rule the mutants model moves the
parameters by 1e-4 relative or more.

Skipped from the reference, one line each: ASGD's docstring states no update rule (lambd, alpha,
t0 are only named), so its foreach and differentiable implementations are checked against its
for-loop one instead; LBFGS has no algorithm box either: it is checked on what its Args promise
(terminating at first-order optimality, tolerance_grad) on a quadratic whose minimiser numpy
solves; capturable=True needs CUDA tensors (an AssertionError on CPU), so it is not a mode here.
"""

from __future__ import annotations

import copy
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import UNIT_ROUNDOFF, Tolerance, assert_close, assert_equal, evidence, tolerance

from . import _optim_reference as ref

UPDATE = "modules.torch.optimizer-update-rules"
STATE = "modules.torch.optimizer-state-dict"
STEPS = 6
K = 4.0  # the per-step condition of the error model (module docstring)
IMPL = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True},
        "differentiable": {"differentiable": True}, "single": {}, "sparse": {}}
ADAM_BETAS = [(0.9, 0.999), (0.5, 0.99)]


@dataclass(frozen=True)
class OptimizerInfo:
    """One row of the table: the option values to cover and what the error model needs."""

    name: str
    factors: dict[str, list[Any]]
    ops: int  # elementwise operations of one step, from the docstring's box
    reduction: int = 1
    valid: Callable[[Mapping[str, Any]], bool] = field(default=lambda row: True)
    shapes: tuple[tuple[int, ...], ...] = ((3, 4), (4,))


def _impls(*extra: str) -> list[str]:
    return ["for-loop", "foreach", *extra, "differentiable"]


INFOS = [
    OptimizerInfo("SGD", {"lr": [0.1, 0.02], "momentum": [0.0, 0.9], "dampening": [0.0, 0.3],
                          "weight_decay": [0.0, 0.1], "nesterov": [False, True], "maximize": [False, True],
                          "impl": _impls("fused")}, ops=8,
                  valid=lambda r: not r["nesterov"] or (r["momentum"] > 0 and r["dampening"] == 0)),
    OptimizerInfo("Adam", {"lr": [0.1, 0.01], "betas": ADAM_BETAS, "eps": [1e-8, 1e-2], "weight_decay": [0.0, 0.1],
                           "amsgrad": [False, True], "maximize": [False, True], "decoupled_weight_decay": [False, True],
                           "impl": _impls("fused")}, ops=16),
    OptimizerInfo("AdamW", {"lr": [0.1, 0.01], "betas": ADAM_BETAS, "eps": [1e-8, 1e-2], "weight_decay": [0.01, 0.2],
                            "amsgrad": [False, True], "maximize": [False, True], "impl": _impls("fused")}, ops=16),
    OptimizerInfo("Adagrad", {"lr": [0.1, 0.5], "lr_decay": [0.0, 0.2], "weight_decay": [0.0, 0.1],
                              "initial_accumulator_value": [0.0, 0.5], "eps": [1e-10, 1e-2], "maximize": [False, True],
                              "impl": _impls("fused")}, ops=10),
    OptimizerInfo("Adadelta", {"lr": [1.0, 0.5], "rho": [0.9, 0.5], "eps": [1e-6, 1e-2], "weight_decay": [0.0, 0.1],
                               "maximize": [False, True], "impl": _impls()}, ops=16),
    OptimizerInfo("Adamax", {"lr": [0.1, 0.01], "betas": ADAM_BETAS, "eps": [1e-8, 1e-1], "weight_decay": [0.0, 0.1],
                             "maximize": [False, True], "impl": _impls()}, ops=12),
    OptimizerInfo("NAdam", {"lr": [0.1, 0.01], "betas": ADAM_BETAS, "eps": [1e-8, 1e-2], "weight_decay": [0.0, 0.1],
                            "momentum_decay": [4e-3, 0.5], "decoupled_weight_decay": [False, True],
                            "maximize": [False, True], "impl": _impls()}, ops=24),
    OptimizerInfo("RAdam", {"lr": [0.1, 0.01], "betas": ADAM_BETAS, "eps": [1e-8, 1e-2], "weight_decay": [0.0, 0.1],
                            "decoupled_weight_decay": [False, True], "maximize": [False, True], "impl": _impls()},
                  ops=24),
    OptimizerInfo("RMSprop", {"lr": [0.01, 0.1], "alpha": [0.99, 0.5], "eps": [1e-8, 1e-2], "weight_decay": [0.0, 0.1],
                              "momentum": [0.0, 0.9], "centered": [False, True], "maximize": [False, True],
                              "impl": _impls()}, ops=16),
    OptimizerInfo("Rprop", {"lr": [0.01, 0.3], "etas": [(0.5, 1.2), (0.3, 1.5)], "step_sizes": [(1e-6, 50), (1e-3, 0.5)],
                            "maximize": [False, True], "impl": _impls()}, ops=8),
    OptimizerInfo("Adafactor", {"lr": [0.01, 0.3], "beta2_decay": [-0.8, -0.5], "eps": [(1e-30, 1e-3), (1e-30, 2.0)],
                                "d": [1.0, 4.0], "weight_decay": [0.0, 0.1], "maximize": [False, True],
                                "impl": ["for-loop", "foreach"]}, ops=24, reduction=12),
    OptimizerInfo("Muon", {"lr": [0.02, 0.1], "weight_decay": [0.0, 0.1], "momentum": [0.95, 0.5],
                           "nesterov": [True, False], "ns_steps": [5, 2], "eps": [1e-7, 1e-3],
                           "adjust_lr_fn": [None, "original", "match_rms_adamw"],
                           "ns_coefficients": [(3.4445, -4.775, 2.0315), (2.0, -1.5, 0.5)], "impl": ["single"]},
                  ops=12, reduction=15, shapes=((3, 5), (5, 3))),
    OptimizerInfo("SparseAdam", {"lr": [0.1, 0.01], "betas": ADAM_BETAS, "eps": [1e-8, 1e-2],
                                 "maximize": [False, True], "impl": ["sparse"]}, ops=14, shapes=((6, 3),)),
]
BY_NAME = {info.name: info for info in INFOS}
COVERING = {info.name: ref.pairwise(info.factors, info.valid) for info in INFOS}
FAMILY = "torch.optim"  # the combinations ledger's family of these records
CASES = [(info.name, row) for info in INFOS for row in COVERING[info.name]]


def _case_id(name: str, row: Mapping[str, Any]) -> str:
    opts = ",".join(f"{k}={v}" for k, v in row.items() if k != "impl")
    return f"{name}[{row['impl']}]{opts}".replace(" ", "")


def _sparse_rows(t: int, n: int = 6) -> list[int]:
    return sorted({t % n, (t + 3) % n, (2 * t + 1) % n})


def sparse_masks(shape: tuple[int, ...], steps: int) -> list[list[np.ndarray]]:
    out = []
    for t in range(1, steps + 1):
        m = np.zeros(shape, dtype=bool)
        m[_sparse_rows(t, shape[0])] = True
        out.append([m])
    return out


def run_torch(torch, cls: Any, row: Mapping[str, Any], data: Sequence[Mapping[str, np.ndarray]], steps: int,
              *, sparse: bool = False) -> tuple[list[list[np.ndarray]], Any, list[Any]]:
    """``steps`` steps of optimizer class ``cls`` with ``row``'s options on the objective; the
    parameters after each step (as numpy), the optimizer and its parameters."""
    impl = row.get("impl", "for-loop")
    kwargs = {k: v for k, v in row.items() if k != "impl"} | IMPL[impl]
    consts = [{k: torch.tensor(v, dtype=torch.float64) for k, v in d.items()} for d in data]
    leaves = [c["theta0"].clone().requires_grad_(True) for c in consts]
    # differentiable=True: autograd runs through the step, so the parameters may be non-leaves.
    params = [leaf.clone() for leaf in leaves] if impl == "differentiable" else leaves
    opt = cls(params, **kwargs)
    history = []
    for t in range(1, steps + 1):
        set_gradients(torch, params, consts, t, sparse=sparse)
        opt.step()
        history.append([p.detach().cpu().numpy().copy() for p in params])
    return history, opt, params


def set_gradients(torch, params: Sequence[Any], consts: Sequence[Mapping[str, Any]], t: int, *, sparse: bool) -> None:
    for p, c in zip(params, consts):
        g = c["a"] * (p.detach() - c["c"]) + 0.5 * torch.cos(1.3 * t + c["phase"])
        if sparse:
            rows = torch.tensor(_sparse_rows(t, p.shape[0]))
            g = torch.sparse_coo_tensor(rows.unsqueeze(0), g[rows], p.shape)
        p.grad = g


def step_tolerance(info: OptimizerInfo, row: Mapping[str, Any], t: int) -> Tolerance:
    """The float64 part of the error model of the module docstring after ``t`` steps."""
    one = tolerance("float64", ops=info.ops, reduction=info.reduction)
    growth = (K ** t - 1) / (K - 1)
    why = f"sum over {t} steps of K={K:g}^(t-s) x one step [{one.why}]"
    if info.name == "Muon":
        a, b, c = row["ns_coefficients"]
        ns = (abs(a) + 3 * abs(b) + 5 * abs(c)) ** row["ns_steps"]
        growth *= ns
        why += f" x Newton-Schulz amplification (|a|+3|b|+5|c|)^{row['ns_steps']} = {ns:.3g}"
    return Tolerance(one.rtol * growth, why, dtype="float64")


def low_precision(name: str, row: Mapping[str, Any]) -> tuple[float, str] | None:
    """Where a rule computes part of a float64 step at lower precision (found by this suite,
    reported as findings, see the claim's evidence): the relative error E that part gives the
    update, and why. None where the whole step is float64."""
    u32, u16 = UNIT_ROUNDOFF["float32"], UNIT_ROUNDOFF["bfloat16"]
    beta1 = row.get("betas", (0.9, 0.999))[0]
    if name == "NAdam" or (name in ("Adam", "AdamW") and row["impl"] == "differentiable"):
        # float32 step counter / mu_product: 1 - beta^t loses u32 / (1 - beta1) relative.
        return 4 * 4 * u32 / (1 - beta1), "schedule scalars in float32: 16 u(float32) / (1 - beta1)"
    if name == "Muon":
        return 8 * u16, "Newton-Schulz iterations in bfloat16: 8 u(bfloat16) of the update"
    return None


def low_precision_floor(deltas: Sequence[float], e: float) -> float:
    """sum_s KL^(t-s) E |update_s|: the low-precision part's error after len(deltas) steps, with
    KL = 1.5 (the quadratic's step contracts perturbations of theta for lr a <= 1; the 0.5 covers
    the normalised updates' response to them)."""
    t = len(deltas)
    return sum(1.5 ** (t - 1 - s) * e * d for s, d in enumerate(deltas))


def check_update_rule(torch, cls: Any, name: str, row: Mapping[str, Any]) -> float:
    """``cls`` (torch.optim.<name> or a stand-in) follows ``name``'s documented rule over STEPS
    steps with ``row``'s options: the parameters after every step equal the numpy reference's.
    Returns the worst error relative to its tolerance."""
    __tracebackhide__ = True
    info = BY_NAME[name]
    data = ref.problem(info.shapes)
    sparse = name == "SparseAdam"
    actual, _, params = run_torch(torch, cls, row, data, STEPS, sparse=sparse)
    opts = {k: v for k, v in row.items() if k != "impl"}
    expected = ref.reference_run(name, data, opts, STEPS, sparse_masks(info.shapes[0], STEPS) if sparse else None)
    worst, low = 0.0, low_precision(name, row)
    starts = [np.asarray(d["theta0"]) for d in data]
    for t in range(STEPS):
        tol = step_tolerance(info, row, t + 1)
        if low is not None:
            prev = [starts, *expected[:-1]]
            deltas = [max(float(np.max(np.abs(e - p))) for e, p in zip(expected[s], prev[s])) for s in range(t + 1)]
            tol = tol.with_floor(low_precision_floor(deltas, low[0]), low[1])
        for i, (a, e) in enumerate(zip(actual[t], expected[t])):
            rel = assert_close(a, e, tol, what=f"{_case_id(name, row)}: parameter {i} {a.shape} after step {t + 1} "
                                              f"vs the documented rule", name=f"{name} parameters vs reference")
            worst = max(worst, rel / tol.rtol)
    if row.get("impl") == "differentiable":
        assert all(p.grad_fn is not None for p in params), (
            f"{_case_id(name, row)}: differentiable=True, but the stepped parameters carry no autograd graph "
            "(grad_fn is None): autograd did not run through the step")
    return worst


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize(("name", "row"), CASES, ids=[_case_id(n, r) for n, r in CASES])
def test_torch_optimizer_follows_its_documented_update_rule(torch, name, row):
    # the combinations ledger: this optimizer's pairwise rows, each test one of them
    evidence.registers(FAMILY, name, [_case_id(name, r) for r in COVERING[name]])
    with torch.device("cpu"):
        worst = check_update_rule(torch, getattr(torch.optim, name), name, row)
    evidence.note(worst_error_in_tolerances=worst, steps=STEPS)
    evidence.covers(f"{name}.{row['impl']}")
    evidence.visits(FAMILY, name, _case_id(name, row))


ASGD_FACTORS: dict[str, list[Any]] = {"lr": [0.1, 0.02], "lambd": [1e-4, 0.1], "alpha": [0.75, 0.5], "t0": [1e6, 2.0],
                                      "weight_decay": [0.0, 0.1], "maximize": [False, True],
                                      "impl": ["foreach", "differentiable"]}
ASGD_ROWS = ref.pairwise(ASGD_FACTORS)


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("row", ASGD_ROWS, ids=[_case_id("ASGD", r) for r in ASGD_ROWS])
def test_torch_asgd_implementations_agree_with_its_for_loop(torch, row):
    """ASGD documents no update rule, only that foreach and differentiable are implementation
    choices: each must compute what the for-loop implementation does, parameters and averages."""
    evidence.registers(FAMILY, "ASGD (implementations)", [_case_id("ASGD", r) for r in ASGD_ROWS])
    data = ref.problem(((3, 4), (4,)))
    with torch.device("cpu"):
        got, opt, params = run_torch(torch, torch.optim.ASGD, row, data, STEPS)
        want, base, base_params = run_torch(torch, torch.optim.ASGD, {**row, "impl": "for-loop"}, data, STEPS)
        # Two independently rounded runs of the same rule (errors add), ASGD's ~10 ops a step.
        one = tolerance("float64", ops=10)
        tol = Tolerance(2 * one.rtol * (K ** STEPS - 1) / (K - 1), f"2 runs x error model of {STEPS} steps [{one.why}]",
                        dtype="float64")
        # ASGD keeps eta and mu as float32 tensors (found here): each run's update carries their
        # float32 rounding, 16 u(float32) relative, differently in each implementation.
        starts = [np.asarray(d["theta0"]) for d in data]
        e32 = 2 * 16 * UNIT_ROUNDOFF["float32"]
        for t in range(STEPS):
            prev = [starts, *want[:-1]]
            deltas = [max(float(np.max(np.abs(w - p))) for w, p in zip(want[s], prev[s])) for s in range(t + 1)]
            tol_t = tol.with_floor(low_precision_floor(deltas, e32), "eta, mu in float32, both runs: 32 u(float32)")
            for i, (a, e) in enumerate(zip(got[t], want[t])):
                assert_close(a, e, tol_t, what=f"ASGD[{row['impl']}] parameter {i} after step {t + 1} vs for-loop")
        for i, (p, q) in enumerate(zip(params, base_params)):
            assert_close(opt.state[p]["ax"].detach().cpu().numpy(), base.state[q]["ax"].detach().cpu().numpy(), tol_t,
                         what=f"ASGD[{row['impl']}] average ax of parameter {i} vs for-loop")
    evidence.covers(f"ASGD.{row['impl']}")
    evidence.visits(FAMILY, "ASGD (implementations)", _case_id("ASGD", row))


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_torch_lbfgs_stops_at_first_order_optimality(torch, line_search_fn):
    """LBFGS(tolerance_grad) terminates a step at first-order optimality: on a quadratic
    0.5 x^T A x - b^T x (A SPD, condition 4) a step ends within what tolerance_grad implies of
    the minimiser A^-1 b (|grad|_inf <= tol gives |x - x*|_2 <= sqrt(n) tol / lambda_min)."""
    rng = np.random.default_rng(3)
    n = 6
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    lam = np.linspace(1.0, 4.0, n)
    a, b = (q * lam) @ q.T, rng.normal(size=n)
    x_star = np.linalg.solve(a, b)
    tol_grad = 1e-9
    with torch.device("cpu"):
        at, bt = torch.tensor(a), torch.tensor(b)
        x = torch.zeros(n, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([x], lr=1, max_iter=200, tolerance_grad=tol_grad, tolerance_change=0.0,
                                history_size=10, line_search_fn=line_search_fn)

        def closure():
            opt.zero_grad()
            loss = 0.5 * x @ at @ x - bt @ x
            loss.backward()
            return loss

        opt.step(closure)
        got = x.detach().cpu().numpy()
    # + the rounding of the gradient itself: n-term products in float64 at |A||x|.
    bound = math.sqrt(n) * (tol_grad + n * UNIT_ROUNDOFF["float64"] * 4 * 4 * np.abs(x_star).max()) / lam[0]
    err = float(np.linalg.norm(got - x_star))
    evidence.check(f"LBFGS(line_search_fn={line_search_fn}) |x - x*|_2", observed=err, tolerance=bound)
    assert err <= bound, (f"LBFGS(line_search_fn={line_search_fn}): |x - A^-1 b|_2 = {err:.3e}, but should be <= "
                          f"{bound:.3e} once |grad|_inf <= tolerance_grad={tol_grad:g}")
    evidence.covers(f"LBFGS.line_search_fn={line_search_fn}")


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("impl", ["for-loop", "foreach", "differentiable"])
def test_torch_rprop_first_step_is_lr(torch, impl):
    """Rprop's box: eta_0 = lr, and at step 1 (g_prev = 0, so g_prev g_1 = 0) eta_1 = eta_0, the
    branch without the step_sizes clamp: each element moves by lr, also for lr outside
    step_sizes (here lr = 0.01 < Gamma_min = 0.05)."""
    data = ref.problem(((3, 4), (4,)))
    row = {"lr": 0.01, "step_sizes": (0.05, 0.2), "impl": impl}
    with torch.device("cpu"):
        got, _, _ = run_torch(torch, torch.optim.Rprop, row, data, 1)
    want = ref.reference_run("Rprop", data, {k: v for k, v in row.items() if k != "impl"}, 1)
    for i, (a, e) in enumerate(zip(got[0], want[0])):
        assert_close(a, e, step_tolerance(BY_NAME["Rprop"], row, 1),
                     what=f"Rprop[{impl}](lr=0.01, step_sizes=(0.05, 0.2)) parameter {i} after step 1 "
                          f"(documented: each element moves by lr)")
    evidence.covers(f"Rprop.{impl}")


# ----------------------------------------------------------------- state_dict round trip

STATE_OPTIONS: dict[str, dict[str, Any]] = {
    "SGD": {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1, "nesterov": True},
    "Adam": {"lr": 0.1, "amsgrad": True, "weight_decay": 0.1}, "AdamW": {"lr": 0.1, "amsgrad": True},
    "Adagrad": {"lr": 0.1, "lr_decay": 0.2}, "Adadelta": {}, "Adamax": {"lr": 0.1}, "ASGD": {"lr": 0.1, "t0": 2.0},
    "NAdam": {"lr": 0.1}, "RAdam": {"lr": 0.1}, "RMSprop": {"momentum": 0.9, "centered": True},
    "Rprop": {"lr": 0.1}, "Adafactor": {"lr": 0.1}, "Muon": {"lr": 0.1}, "SparseAdam": {"lr": 0.1},
    "LBFGS": {"lr": 1, "max_iter": 3, "history_size": 4},
}
SAVE_AFTER = 2


def _optimizer_names(torch) -> list[str]:
    return sorted(n for n in dir(torch.optim) if isinstance(getattr(torch.optim, n), type)
                  and issubclass(getattr(torch.optim, n), torch.optim.Optimizer) and getattr(torch.optim, n)
                  is not torch.optim.Optimizer)


def _continue(torch, opt: Any, params: Sequence[Any], consts: Sequence[Mapping[str, Any]], start: int, stop: int,
              sparse: bool) -> None:
    for t in range(start, stop + 1):
        if isinstance(opt, torch.optim.LBFGS):
            def closure(t=t):
                loss = sum(((c["a"] / 2) * (p - c["c"]) ** 2 + 0.5 * torch.cos(1.3 * t + c["phase"]) * p).sum()
                           for p, c in zip(params, consts))
                opt.zero_grad()
                loss.backward()
                return loss
            opt.step(closure)
        else:
            set_gradients(torch, params, consts, t, sparse=sparse)
            opt.step()


def check_state_dict_round_trip(torch, cls: Any, name: str, options: Mapping[str, Any]) -> None:
    """Save the optimizer's state_dict (through torch.save/torch.load) after SAVE_AFTER steps,
    load it into a fresh optimizer over copies of the parameters, continue to STEPS: the
    parameters and state equal, bitwise, those of the run that was never interrupted."""
    __tracebackhide__ = True
    shapes = ((3, 5), (5, 3)) if name == "Muon" else ((6, 3),) if name == "SparseAdam" else ((3, 4), (4,))
    sparse = name == "SparseAdam"
    data = ref.problem(shapes)
    consts = [{k: torch.tensor(v, dtype=torch.float64) for k, v in d.items()} for d in data]
    params = [c["theta0"].clone().requires_grad_(True) for c in consts]
    opt = cls(params, **options)
    _continue(torch, opt, params, consts, 1, SAVE_AFTER, sparse)
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    resumed = [p.detach().clone().requires_grad_(True) for p in params]
    _continue(torch, opt, params, consts, SAVE_AFTER + 1, STEPS, sparse)
    buf.seek(0)
    fresh = cls(resumed, **options)
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    _continue(torch, fresh, resumed, consts, SAVE_AFTER + 1, STEPS, sparse)
    a, b = copy.deepcopy(opt.state_dict()["state"]), copy.deepcopy(fresh.state_dict()["state"])
    assert sorted(a) == sorted(b), f"{name}: resumed optimizer's state keys {sorted(b)}, but should be {sorted(a)}"
    # The round trip's structure held (the same state entries): the mode has been reached, so
    # a pinned failure below shows in the modes ledger as an expected violation, not unchecked.
    evidence.covers(name)
    for i, (p, q) in enumerate(zip(params, resumed)):
        assert_equal(q.detach().cpu().numpy(), p.detach().cpu().numpy(),
                     what=f"{name}: parameter {i} after load_state_dict at step {SAVE_AFTER} and {STEPS} steps, "
                          "vs the uninterrupted run")
    recast = []
    for k in a:
        for key, value in a[k].items():
            other = b[k].get(key)
            if isinstance(value, torch.Tensor):
                if other.dtype != value.dtype:  # load_state_dict casts floating state to the parameter's dtype
                    recast.append(f"state[{k}][{key!r}] {value.dtype} -> {other.dtype}")
                assert_equal(other.detach().cpu().double().numpy(), value.detach().cpu().double().numpy(),
                             what=f"{name}: state[{k}][{key!r}] of the resumed optimizer vs the uninterrupted one")
    if recast:
        evidence.note(state_recast_by_load_state_dict=recast)


@pytest.mark.claim(STATE)
@pytest.mark.parametrize("name", sorted(STATE_OPTIONS))
def test_torch_optimizer_resumes_from_its_state_dict_mid_run(torch, name):
    with torch.device("cpu"):
        check_state_dict_round_trip(torch, getattr(torch.optim, name), name, STATE_OPTIONS[name])


@pytest.mark.claim(STATE)
def test_torch_optimizer_table_lists_every_public_optimizer(torch):
    """The suite's tables name every public Optimizer subclass torch.optim exports, so a new
    optimizer in a future release is noticed rather than silently left out."""
    names = _optimizer_names(torch)
    missing = [n for n in names if n not in STATE_OPTIONS]
    no_rule = sorted(set(names) - set(BY_NAME) - {"ASGD", "LBFGS"})
    assert not missing and not no_rule, (f"torch.optim exports {missing or no_rule} that this suite's tables leave out: "
                                         "add a row (options, reference) to suites/modules/test_torch_optimizers.py")
    evidence.note(optimizers=names)
    evidence.covers("table-complete")
