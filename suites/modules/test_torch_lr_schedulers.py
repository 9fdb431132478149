"""modules.torch.lr-schedulers: every torch.optim.lr_scheduler scheduler follows its documented
formula at every step.

Each scheduler runs over enough steps to pass every phase of its schedule (a period, a
restart, the three phases of OneCycleLR, the plateaus of a metric sequence) on an optimizer
with two parameter groups of different base learning rates, and each group's learning rate
after construction and after every step() is compared with an independent float64 Python
reference written from the docstring's formula (the references below, closed forms where
the documentation states one). The documented options are combined pairwise by construction
(:func:`covering_array`, a deterministic greedy covering array), so every pair of option
values meets in some run.

Tolerance. Python floats are float64; a closed form of a few operations is within
``(4 * ops) * u`` of the exact value (docs/tolerances.md's model, u = 2^-53). Most torch
schedulers are documented and implemented recursively (StepLR "decays the learning rate ...
by gamma every step_size epochs", CosineAnnealingLR "is updated recursively"), so step t
carries t steps' roundings: the bound at step t is ``(4 * ops_per_step * (t + 1) + 8) * u``
relative to the value, and, where the recursion subtracts eta_min (a cancellation), also that
much times the group's largest learning rate as an absolute floor. CosineAnnealingLR's
recursion multiplies (lr - eta_min) by (1 + cos(t pi / T)) / (1 + cos((t - 1) pi / T)); the
computed cosines cancel exactly in the product (the same expression for the same t), but past
T_max an error made at the bottom is amplified by up to 2 / (1 - cos(pi / T_max)) (about
0.4 T_max^2), which the bound carries as a factor. Every bound is below 1e-9 relative, a
million times smaller than an off-by-one step or a wrong factor.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from pytest_dlconform.api import UNIT_ROUNDOFF, evidence

CLAIM = "modules.torch.lr-schedulers"
FAMILY = "torch.optim.lr_scheduler"  # the combinations ledger's family of these records
BASES = (0.1, 0.03)  # the two parameter groups' learning rates
U = UNIT_ROUNDOFF["float64"]
STEPS = 48


# ----------------------------------------------------------------- the covering array


def covering_array(factors: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows (one value per factor) in which every pair of values of two factors appears.

    Deterministic greedy construction: each row starts from the first pair not yet covered
    and fills the other factors, in order, with the value that covers most new pairs (the
    first such value on ties). Every row covers at least one new pair, so it terminates.
    """
    names = list(factors)
    if len(names) < 2:
        return [{names[0]: v} for v in factors[names[0]]] if names else [{}]
    missing = {((a, va), (b, vb)) for a, b in itertools.combinations(names, 2)
               for va in range(len(factors[a])) for vb in range(len(factors[b]))}
    rows: list[dict[str, Any]] = []
    while missing:
        (a, va), (b, vb) = min(missing, key=lambda p: (names.index(p[0][0]), p[0][1], names.index(p[1][0]), p[1][1]))
        chosen = {a: va, b: vb}
        for name in names:
            if name in chosen:
                continue
            gain = [sum(((min(k, name, key=names.index), chosen[k] if names.index(k) < names.index(name) else v),
                         (max(k, name, key=names.index), v if names.index(k) < names.index(name) else chosen[k]))
                        in missing for k in chosen) for v in range(len(factors[name]))]
            chosen[name] = gain.index(max(gain))
        ordered = [(n, chosen[n]) for n in names]
        missing -= set(itertools.combinations(ordered, 2))
        rows.append({n: factors[n][i] for n, i in ordered})
    return rows


def uncovered_pairs(factors: dict[str, Sequence[Any]], rows: list[dict[str, Any]]) -> list[str]:
    """The pairs of option values no row combines (empty for a covering array)."""
    out = []
    for a, b in itertools.combinations(factors, 2):
        for va, vb in itertools.product(range(len(factors[a])), range(len(factors[b]))):
            if not any(r[a] == factors[a][va] and r[b] == factors[b][vb] for r in rows):
                out.append(f"{a}={factors[a][va]!r} with {b}={factors[b][vb]!r}")
    return out


# ----------------------------------------------------------------- the comparison


def assert_schedule(got: Sequence[Sequence[float]], want: Sequence[Sequence[float]], *, what: str,
                    ops: float, floor: float = 0.0, amplification: float = 1.0, fixed_ops: float = 2.0) -> None:
    """``got[t][g]`` (group g's lr after t steps) against the reference ``want[t][g]``.

    Allowed at step t: ``rtol_t = (4 * (ops * (t + 1) + fixed_ops)) * u * amplification``
    relative to the value, plus ``rtol_t * floor * base`` absolute (``floor`` = 1 where the
    schedule cancels: subtracting eta_min, a cosine near -1). Records the worst ratio.
    """
    __tracebackhide__ = True
    if len(got) != len(want):
        raise AssertionError(f"{what}: {len(got)} learning rates recorded, but should be {len(want)} (steps)")
    worst, at = 0.0, (0, 0)
    scale = [max(abs(w[g]) for w in want) for g in range(len(want[0]))]
    for t, (row, ref) in enumerate(zip(got, want)):
        rtol = 4 * (ops * (t + 1) + fixed_ops) * U * amplification
        for g, (a, e) in enumerate(zip(row, ref)):
            allowed = rtol * abs(e) + rtol * floor * scale[g]
            ratio = abs(a - e) / allowed if allowed > 0 else (0.0 if a == e else math.inf)
            if ratio > worst:
                worst, at = ratio, (t, g)
            if not abs(a - e) <= allowed:
                evidence.check("lr per step", observed=ratio, tolerance=1.0)
                raise AssertionError(
                    f"{what}: group {g} (base lr {want[0][g]:g}) after {t} steps: lr {a!r}, but should be {e!r} "
                    f"(|difference| {abs(a - e):.3e} > allowed {allowed:.3e} = rtol {rtol:.2e} * |lr|"
                    + (f" + rtol * {floor:g} * {scale[g]:g}" if floor else "") + "); "
                    f"first 8 steps: got {[r[g] for r in got[:8]]}, reference {[r[g] for r in want[:8]]}"
                )
    evidence.check("lr per step", observed=worst, tolerance=1.0, worst_step=at[0], group=at[1])


# ----------------------------------------------------------------- references (float64 Python)

LAMBDAS: dict[str, Callable[[int], float]] = {
    "inverse": lambda e: 1.0 / (1.0 + e),
    "warmup": lambda e: min(1.0, (e + 1) / 6.0),
    "power": lambda e: 0.95 ** e,
}
MULTIPLIERS: dict[str, Callable[[int], float]] = {
    "constant": lambda e: 0.95,
    "switch": lambda e: 0.99 if e < 10 else 0.8,
}


def ref_lambda(base: float, t: int, fn: Callable[[int], float]) -> float:
    return base * fn(t)  # "the initial lr times a given function"


def ref_multiplicative(base: float, t: int, fn: Callable[[int], float]) -> float:
    return base * math.prod(fn(k) for k in range(1, t + 1))  # multiplied by f(epoch) at each epoch >= 1


def ref_step(base: float, t: int, step_size: int, gamma: float) -> float:
    return base * gamma ** (t // step_size)  # "decays ... by gamma every step_size epochs"


def ref_multistep(base: float, t: int, milestones: Sequence[int], gamma: float) -> float:
    return base * gamma ** sum(t >= m for m in milestones)  # "once the number of epoch reaches one of the milestones"


def ref_constant(base: float, t: int, factor: float, total_iters: int) -> float:
    return base * factor if t < total_iters else base  # "until the number of epoch reaches total_iters"


def ref_linear(base: float, t: int, start_factor: float, end_factor: float, total_iters: int) -> float:
    return base * (start_factor + (end_factor - start_factor) * min(t, total_iters) / total_iters)


def ref_exponential(base: float, t: int, gamma: float) -> float:
    return base * gamma ** t


def ref_polynomial(base: float, t: int, total_iters: int, power: float) -> float:
    return base * (1.0 - min(t, total_iters) / total_iters) ** power  # get_lr: base_lr (1 - t / total_iters)^power


def ref_cosine(base: float, t: int, T_max: int, eta_min: float) -> float:
    # The closed form the docstring says the recursion implements (T_cur = t, no restarts).
    return eta_min + 0.5 * (base - eta_min) * (1.0 + math.cos(t * math.pi / T_max))


def warm_restart_position(epoch: float, T_0: int, T_mult: int) -> tuple[float, int]:
    """(T_cur, T_i) at ``epoch``: periods of T_0, T_0 T_mult, T_0 T_mult^2, ... (exact for integers)."""
    start, length = 0, T_0
    while epoch >= start + length:
        start, length = start + length, length * T_mult
    return epoch - start, length


def ref_warm_restarts(base: float, t: float, T_0: int, T_mult: int, eta_min: float) -> float:
    T_cur, T_i = warm_restart_position(t, T_0, T_mult)
    return eta_min + 0.5 * (base - eta_min) * (1.0 + math.cos(math.pi * T_cur / T_i))


def cyclic_position(t: int, up: int, down: int) -> tuple[int, float]:
    """(cycle number from 1, height in [0, 1]): up over ``up`` steps, back down over ``down``."""
    cycle, p = t // (up + down) + 1, t % (up + down)
    return cycle, (p / up if p <= up else (up + down - p) / down)


def cyclic_scale(mode: str, gamma: float, cycle: int, t: int) -> float:
    if mode == "triangular":
        return 1.0
    if mode == "triangular2":
        return 1.0 / 2.0 ** (cycle - 1)  # "scales initial amplitude by half each cycle"
    if mode == "exp_range":
        return gamma ** t  # gamma ** iterations (see the claim's precise truth: total iterations)
    x = cycle if mode == "scale_fn:cycle" else t
    return CUSTOM_SCALE(x)


def CUSTOM_SCALE(x: float) -> float:
    return 1.0 / (1.0 + 0.1 * x)


def ref_cyclic(low: float, high: float, t: int, up: int, down: int, mode: str, gamma: float) -> float:
    cycle, h = cyclic_position(t, up, down)
    return low + (high - low) * h * cyclic_scale(mode, gamma, cycle, t)


def one_cycle_phases(total: int, pct: float, three_phase: bool, lo: float, peak: float,
                     final: float) -> list[tuple[float, float, float]]:
    """(end step, start value, end value) of each phase, the fastai 1cycle the docstring follows:
    warm up for pct_start of the steps, anneal to the minimum at the last step (step total - 1)."""
    if three_phase:
        return [(pct * total - 1, lo, peak), (2 * pct * total - 2, peak, lo), (total - 1, lo, final)]
    return [(pct * total - 1, lo, peak), (total - 1, peak, final)]


def ref_one_cycle(phases: list[tuple[float, float, float]], t: int, strategy: str) -> float:
    start = 0.0
    for i, (end, a, b) in enumerate(phases):
        if t <= end or i == len(phases) - 1:
            pct = (t - start) / (end - start)
            if strategy == "cos":
                return b + (a - b) / 2.0 * (1.0 + math.cos(math.pi * pct))
            return (b - a) * pct + a
        start = end
    raise AssertionError("unreachable")


def ref_plateau(metrics: Sequence[float], lrs: Sequence[float], *, mode: str, factor: float, patience: int,
                threshold: float, threshold_mode: str, cooldown: int, min_lrs: Sequence[float],
                eps: float) -> list[list[float]]:
    """The learning rates after each step(metric), from the docstring: a value improves on the best
    by the dynamic threshold (best * (1 -/+ threshold) or best -/+ threshold); after more than
    `patience` epochs without improvement lr = max(lr * factor, min_lr), ignored when it changes
    by eps or less; for `cooldown` epochs after a reduction bad epochs are not counted."""
    best = math.inf if mode == "min" else -math.inf
    bad, cool, lr = 0, 0, list(lrs)
    out = [list(lr)]
    for m in metrics:
        if mode == "min":
            better = m < (best * (1 - threshold) if threshold_mode == "rel" else best - threshold)
        else:
            better = m > (best * (1 + threshold) if threshold_mode == "rel" else best + threshold)
        best, bad = (m, 0) if better else (best, bad + 1)
        if cool > 0:
            cool, bad = cool - 1, 0
        if bad > patience:
            for g, old in enumerate(lr):
                new = max(old * factor, min_lrs[g])
                if old - new > eps:
                    lr[g] = new
            cool, bad = cooldown, 0
        out.append(list(lr))
    return out


# ----------------------------------------------------------------- driving torch


def _optimizer(torch, kind: str = "sgd", lrs: Sequence[float] = BASES):
    groups = [{"params": [torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))], "lr": lr} for lr in lrs]
    if kind == "adam":
        return torch.optim.Adam(groups)
    return torch.optim.SGD(groups, momentum=0.9)


def _drive(opt, sched, steps: int, metrics: Sequence[float] | None = None) -> tuple[list[list[float]], list[list[float]]]:
    """Learning rates and momenta (SGD momentum or Adam beta1) after construction and every step;
    get_last_lr() must agree with the groups' lr at each step."""
    lrs, moms = [], []

    def record(t: int) -> None:
        now = [float(g["lr"]) for g in opt.param_groups]
        last = [float(x) for x in sched.get_last_lr()]
        assert last == now, f"after {t} steps get_last_lr() = {last}, but the groups' lr are {now}"
        lrs.append(now)
        moms.append([float(g["betas"][0] if "betas" in g else g.get("momentum", 0.0)) for g in opt.param_groups])

    record(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the "lr_scheduler.step() before optimizer.step()" warning
        for t in range(steps):
            opt.step()
            sched.step() if metrics is None else sched.step(metrics[t])
            record(t + 1)
    return lrs, moms


def _table(fn: Callable[[float, int], float], steps: int, bases: Sequence[float] = BASES) -> list[list[float]]:
    return [[fn(b, t) for b in bases] for t in range(steps + 1)]


def _label(name: str, row: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in row.items())})"


# ----------------------------------------------------------------- the simple schedulers

# name: (options, build(torch, opt, row), reference(base, t, row), ops per step, floor)
SIMPLE: dict[str, tuple[dict[str, Sequence[Any]], Any, Any, float, float]] = {
    "LambdaLR": (
        {"lr_lambda": list(LAMBDAS), "per_group": [False, True]},
        lambda S, o, r: S.LambdaLR(o, [LAMBDAS[r["lr_lambda"]], LAMBDAS["power"]] if r["per_group"]
                                   else LAMBDAS[r["lr_lambda"]]),
        None, 0.0, 0.0),
    "MultiplicativeLR": (
        {"lr_lambda": list(MULTIPLIERS), "per_group": [False, True]},
        lambda S, o, r: S.MultiplicativeLR(o, [MULTIPLIERS[r["lr_lambda"]], MULTIPLIERS["constant"]] if r["per_group"]
                                           else MULTIPLIERS[r["lr_lambda"]]),
        None, 1.0, 0.0),
    "StepLR": ({"step_size": [1, 3, 7], "gamma": [0.1, 0.5, 0.9]},
               lambda S, o, r: S.StepLR(o, r["step_size"], r["gamma"]),
               lambda b, t, r: ref_step(b, t, r["step_size"], r["gamma"]), 1.0, 0.0),
    "MultiStepLR": ({"milestones": [(5,), (3, 10, 30), (1, 2, 40)], "gamma": [0.1, 0.5, 0.9]},
                    lambda S, o, r: S.MultiStepLR(o, list(r["milestones"]), r["gamma"]),
                    lambda b, t, r: ref_multistep(b, t, r["milestones"], r["gamma"]), 1.0, 0.0),
    "ConstantLR": ({"factor": [1 / 3, 0.5, 0.1], "total_iters": [1, 5, 40]},
                   lambda S, o, r: S.ConstantLR(o, r["factor"], r["total_iters"]),
                   lambda b, t, r: ref_constant(b, t, r["factor"], r["total_iters"]), 1.0, 0.0),
    "LinearLR": ({"start_factor": [1 / 3, 0.05, 1.0], "end_factor": [1.0, 0.5, 0.1], "total_iters": [1, 5, 40]},
                 lambda S, o, r: S.LinearLR(o, r["start_factor"], r["end_factor"], r["total_iters"]),
                 lambda b, t, r: ref_linear(b, t, r["start_factor"], r["end_factor"], r["total_iters"]), 3.0, 0.0),
    "ExponentialLR": ({"gamma": [0.5, 0.9, 0.99]}, lambda S, o, r: S.ExponentialLR(o, r["gamma"]),
                      lambda b, t, r: ref_exponential(b, t, r["gamma"]), 1.0, 0.0),
    "PolynomialLR": ({"total_iters": [1, 5, 40], "power": [1.0, 0.9, 2.0, 0.5]},
                     lambda S, o, r: S.PolynomialLR(o, r["total_iters"], r["power"]),
                     lambda b, t, r: ref_polynomial(b, t, r["total_iters"], r["power"]), 4.0, 0.0),
    "CosineAnnealingLR": ({"T_max": [1, 5, 20], "eta_min": [0.0, 0.001, 0.01]},
                          lambda S, o, r: S.CosineAnnealingLR(o, r["T_max"], r["eta_min"]),
                          lambda b, t, r: ref_cosine(b, t, r["T_max"], r["eta_min"]), 4.0, 1.0),
    "CosineAnnealingWarmRestarts": ({"T_0": [1, 3, 10], "T_mult": [1, 2, 3], "eta_min": [0.0, 0.001]},
                                    lambda S, o, r: S.CosineAnnealingWarmRestarts(o, r["T_0"], r["T_mult"], r["eta_min"]),
                                    lambda b, t, r: ref_warm_restarts(b, t, r["T_0"], r["T_mult"], r["eta_min"]),
                                    0.0, 1.0),
}


def _simple_reference(name: str, row: dict[str, Any]) -> Callable[[float, int], float]:
    if name == "LambdaLR":
        fns = [LAMBDAS[row["lr_lambda"]], LAMBDAS["power"] if row["per_group"] else LAMBDAS[row["lr_lambda"]]]
        return lambda b, t: ref_lambda(b, t, fns[BASES.index(b)])
    if name == "MultiplicativeLR":
        fns = [MULTIPLIERS[row["lr_lambda"]],
               MULTIPLIERS["constant"] if row["per_group"] else MULTIPLIERS[row["lr_lambda"]]]
        return lambda b, t: ref_multiplicative(b, t, fns[BASES.index(b)])
    ref = SIMPLE[name][2]
    return lambda b, t: ref(b, t, row)


def _amplification(name: str, row: dict[str, Any]) -> float:
    if name != "CosineAnnealingLR":
        return 1.0
    return 2.0 / (1.0 - math.cos(math.pi / row["T_max"])) if row["T_max"] > 1 else 2.0


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", sorted(SIMPLE))
def test_scheduler_follows_its_documented_formula_at_every_step(torch, name):
    S = torch.optim.lr_scheduler
    options, build, _, ops, floor = SIMPLE[name]
    for row in evidence.visiting(FAMILY, name, covering_array(options), lambda r: _label(name, r)):
        opt = _optimizer(torch)
        lrs, _ = _drive(opt, build(S, opt, row), STEPS)
        assert_schedule(lrs, _table(_simple_reference(name, row), STEPS), what=_label(name, row),
                        ops=ops, floor=floor, amplification=_amplification(name, row))
    evidence.covers(name, "get_last_lr", "param-groups")


@pytest.mark.claim(CLAIM)
def test_warm_restarts_step_with_a_fractional_epoch_follows_the_closed_form(torch):
    """step(epoch) with a float epoch (the docstring's `scheduler.step(epoch + i / iters)`)
    sets T_cur to the position inside its period, including the integer epochs where a period
    starts, and may be interleaved with step()."""
    S = torch.optim.lr_scheduler
    for T_0, T_mult in itertools.product((1, 3, 10), (1, 2, 3)):
        opt = _optimizer(torch)
        sched = S.CosineAnnealingWarmRestarts(opt, T_0, T_mult, 0.001)
        epochs = [e + i / 4 for e in range(40) for i in range(4)]
        got, want = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch in epochs:
                opt.step()
                sched.step(epoch)
                got.append([float(g["lr"]) for g in opt.param_groups])
                want.append([ref_warm_restarts(b, epoch, T_0, T_mult, 0.001) for b in BASES])
        assert_schedule(got, want, what=f"CosineAnnealingWarmRestarts(T_0={T_0}, T_mult={T_mult}).step(epoch)",
                        ops=0.0, floor=1.0, fixed_ops=4.0)
    evidence.covers("CosineAnnealingWarmRestarts.fractional-epoch")


# ----------------------------------------------------------------- CyclicLR and OneCycleLR

CYCLIC = {"mode": ["triangular", "triangular2", "exp_range", "scale_fn:cycle", "scale_fn:iterations"],
          "step_size_up": [1, 4, 7], "step_size_down": [None, 2, 9], "gamma": [0.99, 0.9],
          "cycle_momentum": [True, False], "optimizer": ["sgd", "adam"]}
LOWS, HIGHS = (0.01, 0.003), (0.1, 0.03)
MOMENTA = (0.8, 0.9)


def _cyclic(S, opt, row):
    kwargs: dict[str, Any] = {}
    if row["mode"].startswith("scale_fn:"):
        kwargs = {"scale_fn": CUSTOM_SCALE, "scale_mode": row["mode"].split(":")[1]}
    else:
        kwargs = {"mode": row["mode"], "gamma": row["gamma"]}
    return S.CyclicLR(opt, list(LOWS), list(HIGHS), step_size_up=row["step_size_up"],
                      step_size_down=row["step_size_down"], cycle_momentum=row["cycle_momentum"],
                      base_momentum=MOMENTA[0], max_momentum=MOMENTA[1], **kwargs)


@pytest.mark.claim(CLAIM)
def test_cyclic_lr_follows_the_triangular_policy_and_its_scalings(torch):
    S = torch.optim.lr_scheduler
    for row in evidence.visiting(FAMILY, "CyclicLR", covering_array(CYCLIC), lambda r: _label("CyclicLR", r)):
        opt = _optimizer(torch, row["optimizer"])
        start_m = [float(g["betas"][0] if "betas" in g else g["momentum"]) for g in opt.param_groups]
        lrs, moms = _drive(opt, _cyclic(S, opt, row), STEPS)
        up = row["step_size_up"]
        down = up if row["step_size_down"] is None else row["step_size_down"]
        want = [[ref_cyclic(lo, hi, t, up, down, row["mode"], row["gamma"]) for lo, hi in zip(LOWS, HIGHS)]
                for t in range(STEPS + 1)]
        label = _label("CyclicLR", row)
        assert_schedule(lrs, want, what=label, ops=0.0, floor=1.0, fixed_ops=8.0)
        if row["cycle_momentum"]:
            # "momentum is cycled inversely to learning rate": max_momentum - amplitude * height * scale
            want_m = [[MOMENTA[1] - (MOMENTA[1] - MOMENTA[0]) * (ref_cyclic(0.0, 1.0, t, up, down, row["mode"],
                                                                             row["gamma"])) for _ in BASES]
                      for t in range(STEPS + 1)]
            assert_schedule(moms, want_m, what=f"{label} momentum", ops=0.0, floor=1.0, fixed_ops=8.0)
        else:
            assert all(m == start_m for m in moms), f"{label}: momentum changed although cycle_momentum=False"
        evidence.covers(f"CyclicLR.{row['mode']}", f"CyclicLR.cycle_momentum={row['cycle_momentum']}")
    evidence.covers("CyclicLR.step_size_down", "CyclicLR.adam-beta1")


ONE_CYCLE = {"anneal_strategy": ["cos", "linear"], "three_phase": [False, True], "pct_start": [0.3, 0.25, 0.5],
             "steps": ["total_steps", "epochs*steps_per_epoch"], "cycle_momentum": [True, False],
             "optimizer": ["sgd", "adam"], "div_factor": [25.0, 10.0], "final_div_factor": [1e4, 100.0]}
PEAKS = (0.1, 0.03)


@pytest.mark.claim(CLAIM)
def test_one_cycle_lr_follows_its_phases_to_the_last_step(torch):
    """Every step of the cycle, the last one (total_steps - 1 steps after construction) at
    min_lr = initial_lr / final_div_factor. The step() that ends the loop's last batch is
    allowed (its lr is never used); one more raises ValueError."""
    S = torch.optim.lr_scheduler
    total = 40
    for row in evidence.visiting(FAMILY, "OneCycleLR", covering_array(ONE_CYCLE),
                                 lambda r: _label("OneCycleLR", r)):
        opt = _optimizer(torch, row["optimizer"])
        steps = {"total_steps": total} if row["steps"] == "total_steps" else {"epochs": 8, "steps_per_epoch": 5}
        sched = S.OneCycleLR(opt, list(PEAKS), pct_start=row["pct_start"], anneal_strategy=row["anneal_strategy"],
                             three_phase=row["three_phase"], cycle_momentum=row["cycle_momentum"],
                             div_factor=row["div_factor"], final_div_factor=row["final_div_factor"], **steps)
        lrs, moms = _drive(opt, sched, total - 1)
        want, want_m = [], []
        for peak in PEAKS:
            lo = peak / row["div_factor"]
            phases = one_cycle_phases(total, row["pct_start"], row["three_phase"], lo, peak,
                                      lo / row["final_div_factor"])
            want.append([ref_one_cycle(phases, t, row["anneal_strategy"]) for t in range(total)])
            m_phases = one_cycle_phases(total, row["pct_start"], row["three_phase"], 0.95, 0.85, 0.95)
            want_m.append([ref_one_cycle(m_phases, t, row["anneal_strategy"]) for t in range(total)])
        label = _label("OneCycleLR", row)
        assert_schedule(lrs, [list(r) for r in zip(*want)], what=label, ops=0.0, floor=1.0, fixed_ops=8.0)
        if row["cycle_momentum"]:
            assert_schedule(moms, [list(r) for r in zip(*want_m)], what=f"{label} momentum", ops=0.0, floor=1.0,
                            fixed_ops=8.0)
        opt.step()
        sched.step()  # the total_steps-th call, after the last batch
        with pytest.raises(ValueError, match="Tried to step"):
            sched.step()
        evidence.covers(f"OneCycleLR.anneal_strategy={row['anneal_strategy']}",
                        f"OneCycleLR.three_phase={row['three_phase']}", f"OneCycleLR.{row['steps']}")
    evidence.covers("OneCycleLR.cycle_momentum", "OneCycleLR.last-step")


# ----------------------------------------------------------------- ReduceLROnPlateau

PLATEAU = {"mode": ["min", "max"], "threshold_mode": ["rel", "abs"], "threshold": ["small", "large"],
           "patience": [0, 2, 5], "cooldown": [0, 3], "factor": [0.1, 0.5],
           "min_lr": [0.0, 0.004, (0.02, 0.001)], "eps": [1e-8, 0.005]}
THRESHOLDS = {("rel", "small"): 1e-4, ("rel", "large"): 0.07, ("abs", "small"): 0.0, ("abs", "large"): 0.3}


def plateau_metrics(n: int, seed: int) -> list[float]:
    """A loss-like sequence on a grid of 1/8 (exact in float64; no value sits on a threshold:
    0.07 and 1e-4 relative and 0.3 absolute are never a grid distance for values below 12.5):
    stretches that fall, plateaus and rises, from a small linear congruential generator."""
    x, out, state = 10.0, [], seed
    for _ in range(n):
        state = (1103515245 * state + 12345) % 2**31
        x = min(12.0, max(0.125, x + [-0.5, -0.125, 0.0, 0.0, 0.125, 0.25][state % 6]))
        out.append(x)
    return out


@pytest.mark.claim(CLAIM)
def test_reduce_lr_on_plateau_follows_its_documented_rule(torch):
    S = torch.optim.lr_scheduler
    for i, row in enumerate(evidence.visiting(FAMILY, "ReduceLROnPlateau", covering_array(PLATEAU),
                                              lambda r: _label("ReduceLROnPlateau", r))):
        metrics = plateau_metrics(60, seed=i)
        if row["mode"] == "max":
            metrics = [13.0 - m for m in metrics]
        threshold = THRESHOLDS[(row["threshold_mode"], row["threshold"])]
        min_lrs = list(row["min_lr"]) if isinstance(row["min_lr"], tuple) else [row["min_lr"]] * 2
        opt = _optimizer(torch)
        sched = S.ReduceLROnPlateau(opt, mode=row["mode"], factor=row["factor"], patience=row["patience"],
                                    threshold=threshold, threshold_mode=row["threshold_mode"],
                                    cooldown=row["cooldown"], min_lr=row["min_lr"] if not isinstance(row["min_lr"], tuple)
                                    else list(row["min_lr"]), eps=row["eps"])
        lrs, _ = _drive(opt, sched, len(metrics), metrics)
        want = ref_plateau(metrics, BASES, mode=row["mode"], factor=row["factor"], patience=row["patience"],
                           threshold=threshold, threshold_mode=row["threshold_mode"], cooldown=row["cooldown"],
                           min_lrs=min_lrs, eps=row["eps"])
        assert_schedule(lrs, want, what=f"{_label('ReduceLROnPlateau', row)} on metrics {metrics}", ops=1.0)
    evidence.covers("ReduceLROnPlateau.mode=min", "ReduceLROnPlateau.mode=max", "ReduceLROnPlateau.threshold_mode=rel",
                    "ReduceLROnPlateau.threshold_mode=abs", "ReduceLROnPlateau.cooldown", "ReduceLROnPlateau.min_lr",
                    "ReduceLROnPlateau.eps", "ReduceLROnPlateau.patience")


# ----------------------------------------------------------------- SequentialLR and ChainedScheduler

PARTS: dict[str, tuple[Any, Any, float]] = {
    "ConstantLR": (lambda S, o: S.ConstantLR(o, 0.1, 20), lambda b, t: ref_constant(b, t, 0.1, 20), 1.0),
    "ExponentialLR": (lambda S, o: S.ExponentialLR(o, 0.9), lambda b, t: ref_exponential(b, t, 0.9), 1.0),
    "LinearLR": (lambda S, o: S.LinearLR(o, 0.2, 1.0, 6), lambda b, t: ref_linear(b, t, 0.2, 1.0, 6), 3.0),
    "StepLR": (lambda S, o: S.StepLR(o, 4, 0.5), lambda b, t: ref_step(b, t, 4, 0.5), 1.0),
    "MultiStepLR": (lambda S, o: S.MultiStepLR(o, [7, 15], 0.3), lambda b, t: ref_multistep(b, t, [7, 15], 0.3), 1.0),
    "CosineAnnealingLR": (lambda S, o: S.CosineAnnealingLR(o, 12), lambda b, t: ref_cosine(b, t, 12, 0.0), 4.0),
    # Chained, within its first half period: at T_max + 1 the recursion's denominator 1 + cos(pi) is 0
    # and torch adds base_lr * (1 - cos(pi / T_max)) / 2 instead, which is not a factor.
    "CosineAnnealingLR(T_max=60)": (lambda S, o: S.CosineAnnealingLR(o, 60), lambda b, t: ref_cosine(b, t, 60, 0.0),
                                    4.0),
}
SEQUENCES = {"schedulers": [("ConstantLR", "ExponentialLR"), ("LinearLR", "CosineAnnealingLR"),
                            ("LinearLR", "StepLR", "ExponentialLR")], "milestone": [1, 5, 20]}


@pytest.mark.claim(CLAIM)
def test_sequential_lr_hands_over_at_each_milestone(torch):
    """SequentialLR runs scheduler k from milestone k-1 on, restarted at its own step 0 (the
    docstring's example: ConstantLR's factor until epoch 20, then ExponentialLR from the base)."""
    S = torch.optim.lr_scheduler
    for row in evidence.visiting(FAMILY, "SequentialLR", covering_array(SEQUENCES),
                                 lambda r: _label("SequentialLR", r)):
        names = row["schedulers"]
        milestones = [row["milestone"] * (k + 1) for k in range(len(names) - 1)]
        opt = _optimizer(torch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = S.SequentialLR(opt, [PARTS[n][0](S, opt) for n in names], milestones)
        lrs, _ = _drive(opt, sched, STEPS)

        def ref(b: float, t: int, milestones: list[int] = milestones, names: tuple[str, ...] = names) -> float:
            k = sum(t >= m for m in milestones)
            return PARTS[names[k]][1](b, t - ([0, *milestones][k]))
        assert_schedule(lrs, _table(ref, STEPS), what=f"SequentialLR({names}, milestones={milestones})",
                        ops=max(PARTS[n][2] for n in names), floor=1.0, amplification=8.0)
    evidence.covers("SequentialLR")


CHAINS = {"schedulers": [("ConstantLR", "ExponentialLR"), ("LinearLR", "StepLR"), ("ExponentialLR", "MultiStepLR"),
                         ("ConstantLR", "CosineAnnealingLR(T_max=60)")], "optimizer_argument": [False, True]}


@pytest.mark.claim(CLAIM)
def test_chained_scheduler_multiplies_its_schedulers_factors(torch):
    """ChainedScheduler steps every scheduler at each step: the chainable schedulers' factors
    multiply (the docstring's example: ConstantLR(0.1, 20) chained with ExponentialLR(0.9))."""
    S = torch.optim.lr_scheduler
    for row in evidence.visiting(FAMILY, "ChainedScheduler", covering_array(CHAINS),
                                 lambda r: _label("ChainedScheduler", r)):
        names = row["schedulers"]
        opt = _optimizer(torch)
        parts = [PARTS[n][0](S, opt) for n in names]
        sched = S.ChainedScheduler(parts, optimizer=opt) if row["optimizer_argument"] else S.ChainedScheduler(parts)
        lrs, _ = _drive(opt, sched, STEPS)

        def ref(b: float, t: int, names: tuple[str, ...] = names) -> float:
            return b * math.prod(PARTS[n][1](b, t) / b for n in names)
        assert_schedule(lrs, _table(ref, STEPS), what=_label("ChainedScheduler", row),
                        ops=sum(PARTS[n][2] for n in names), floor=1.0, amplification=8.0)
    evidence.covers("ChainedScheduler")


# ----------------------------------------------------------------- resuming

ROUND_TRIP: dict[str, Callable[[Any, Any], Any]] = {
    "LambdaLR": lambda S, o: S.LambdaLR(o, LAMBDAS["inverse"]),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, MULTIPLIERS["switch"]),
    "StepLR": lambda S, o: S.StepLR(o, 3, 0.5),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, [3, 10], 0.5),
    "ConstantLR": lambda S, o: S.ConstantLR(o, 0.5, 15),
    "LinearLR": lambda S, o: S.LinearLR(o, 0.2, 1.0, 15),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, 0.9),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, 20, 2.0),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, 10, 0.001),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, 3, 2, 0.001),
    "CyclicLR": lambda S, o: S.CyclicLR(o, list(LOWS), list(HIGHS), 4, 3, mode="triangular2"),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, list(PEAKS), total_steps=30, three_phase=True),
    "SequentialLR": lambda S, o: S.SequentialLR(o, [S.LinearLR(o, 0.2, 1.0, 6), S.ExponentialLR(o, 0.9)], [6]),
    "ChainedScheduler": lambda S, o: S.ChainedScheduler([S.ConstantLR(o, 0.5, 12), S.ExponentialLR(o, 0.9)]),
    "ReduceLROnPlateau": lambda S, o: S.ReduceLROnPlateau(o, patience=1, cooldown=2, factor=0.5),
}


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", sorted(ROUND_TRIP))
def test_state_dict_round_trip_mid_schedule_continues_identically(torch, name):
    """k steps, then a fresh optimizer and scheduler load both state_dicts (scheduler built
    first, as LRScheduler's warning asks): the continuation is bitwise the uninterrupted one."""
    S = torch.optim.lr_scheduler
    metrics = plateau_metrics(28, seed=3) if name == "ReduceLROnPlateau" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = _optimizer(torch)
        whole, _ = _drive(opt, ROUND_TRIP[name](S, opt), 28, metrics)
        for k in (7, 13):
            opt = _optimizer(torch)
            sched = ROUND_TRIP[name](S, opt)
            _drive(opt, sched, k, metrics)
            opt2 = _optimizer(torch, lrs=(0.5, 0.5))  # a different start: everything must come from the state
            sched2 = ROUND_TRIP[name](S, opt2)
            sched2.load_state_dict(sched.state_dict())
            opt2.load_state_dict(opt.state_dict())
            rest, _ = _drive(opt2, sched2, 28 - k, metrics[k:] if metrics else None)
            assert rest == whole[k:], (
                f"{name} resumed from its state_dict after {k} steps: lr {rest[:6]} ..., "
                f"but should continue as {whole[k:k + 6]} ..."
            )
    evidence.covers("state_dict")


RESUMABLE: dict[str, Callable[[Any, Any, int], Any]] = {
    "LambdaLR": lambda S, o, e: S.LambdaLR(o, LAMBDAS["inverse"], last_epoch=e),
    "MultiStepLR": lambda S, o, e: S.MultiStepLR(o, [3, 10], 0.5, last_epoch=e),
    "ExponentialLR": lambda S, o, e: S.ExponentialLR(o, 0.9, last_epoch=e),
    "LinearLR": lambda S, o, e: S.LinearLR(o, 0.2, 1.0, 15, last_epoch=e),
    "PolynomialLR": lambda S, o, e: S.PolynomialLR(o, 20, 2.0, last_epoch=e),
    "CosineAnnealingLR": lambda S, o, e: S.CosineAnnealingLR(o, 10, 0.001, last_epoch=e),
    "CyclicLR": lambda S, o, e: S.CyclicLR(o, list(LOWS), list(HIGHS), 4, 3, mode="triangular2", last_epoch=e),
    "OneCycleLR": lambda S, o, e: S.OneCycleLR(o, list(PEAKS), total_steps=30, three_phase=True, last_epoch=e),
}


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", sorted(RESUMABLE))
def test_last_epoch_resume_continues_identically(torch, name):
    """A scheduler built with last_epoch=k - 1 over an optimizer restored at step k (its groups
    hold initial_lr and the step-k lr): construction's own step brings it to step k, and it
    continues as the uninterrupted run."""
    S = torch.optim.lr_scheduler
    build = RESUMABLE[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = _optimizer(torch)
        whole, _ = _drive(opt, build(S, opt, -1), 28)
        for k in (5, 11):
            opt = _optimizer(torch)
            _drive(opt, build(S, opt, -1), k)
            opt2 = _optimizer(torch)
            opt2.load_state_dict(opt.state_dict())
            rest, _ = _drive(opt2, build(S, opt2, k - 1), 28 - k)
            assert_schedule(rest, whole[k:], what=f"{name}(last_epoch={k - 1}) resumed at step {k}", ops=1.0,
                            floor=1.0)
    evidence.covers("last_epoch")
