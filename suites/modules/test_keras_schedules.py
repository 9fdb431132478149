"""modules.keras.lr-schedules: keras.optimizers.schedules follow their docstring formulas at
every step, and get_config / from_config rebuild the same schedule.

Each schedule is evaluated at steps 0..60 (past its decay steps, a staircase boundary, two
or three restarts) and compared with an independent float64 Python reference written from
its docstring. The options are combined pairwise (the torch suite's covering-array
construction, kept local to each suite). The schedules are built with float64 numbers, so
they compute in float64 ("a scalar tensor of the same type as initial_learning_rate"), and
with Python floats, the common use, where they compute in float32.

Tolerance: a closed form of at most ~8 operations, ``(4 * 8 + 2) * u`` relative plus that much
times the schedule's largest value absolute (the cosines and 1 - step / decay_steps cancel);
x ** p adds ``|p ln x| * u`` (the rounding of the exponent, amplified), and the restart
index of CosineDecayRestarts is computed through a logarithm, so its fraction of the period
carries ``(4 * 4 + 2) * u`` times the number of the period as well.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import UNIT_ROUNDOFF, evidence

CLAIM = "modules.keras.lr-schedules"
FAMILY = "keras.optimizers.schedules"  # the combinations ledger's family of these records


def _row_label(row: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in row.items())
STEPS = 61


def covering_array(factors: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows in which every pair of values of two factors appears (greedy, deterministic: each row
    starts from the first uncovered pair and takes, factor by factor, the value covering most
    new pairs)."""
    names = list(factors)
    if len(names) < 2:
        return [{names[0]: v} for v in factors[names[0]]] if names else [{}]
    missing = {((a, i), (b, j)) for a, b in itertools.combinations(names, 2)
               for i in range(len(factors[a])) for j in range(len(factors[b]))}
    rows = []
    while missing:
        (a, i), (b, j) = min(missing, key=lambda p: (names.index(p[0][0]), p[0][1], names.index(p[1][0]), p[1][1]))
        chosen = {a: i, b: j}
        for name in names:
            if name not in chosen:
                gains = [_new_pairs(names, chosen, missing, name, v) for v in range(len(factors[name]))]
                chosen[name] = gains.index(max(gains))
        ordered = [(n, chosen[n]) for n in names]
        missing -= set(itertools.combinations(ordered, 2))
        rows.append({n: factors[n][k] for n, k in ordered})
    return rows


def _new_pairs(names: list[str], chosen: dict[str, int], missing: set[Any], name: str, v: int) -> int:
    return sum((((k, chosen[k]), (name, v)) if names.index(k) < names.index(name)
                else ((name, v), (k, chosen[k]))) in missing for k in chosen)


# ----------------------------------------------------------------- references (docstring formulas)


def ref_exponential(step: int, lr: float, decay_steps: int, decay_rate: float, staircase: bool) -> float:
    p = step // decay_steps if staircase else step / decay_steps
    return lr * decay_rate ** p


def ref_piecewise(step: int, boundaries: Sequence[int], values: Sequence[float]) -> float:
    # values[0] when step <= boundaries[0], values[i] when boundaries[i-1] < step <= boundaries[i], ...
    return values[sum(step > b for b in boundaries)]


def ref_polynomial(step: int, lr: float, decay_steps: int, end: float, power: float, cycle: bool) -> float:
    if cycle:
        # "a multiple of decay_steps is used, the first one that is bigger than step" (ceil, 1 at step 0)
        decay_steps = decay_steps * max(1, math.ceil(step / decay_steps))
    else:
        step = min(step, decay_steps)
    return (lr - end) * (1 - step / decay_steps) ** power + end


def ref_inverse_time(step: int, lr: float, decay_steps: int, decay_rate: float, staircase: bool) -> float:
    p = step // decay_steps if staircase else step / decay_steps
    return lr / (1 + decay_rate * p)


def ref_cosine(step: int, lr: float, decay_steps: int, alpha: float, warmup_target: float | None,
               warmup_steps: int) -> float:
    if warmup_target is not None and step < warmup_steps:
        # "a linear increase ... from initial_learning_rate to warmup_target for warmup_steps"
        return lr + step / warmup_steps * (warmup_target - lr)
    start = lr if warmup_target is None else warmup_target
    s = min(step - (0 if warmup_target is None else warmup_steps), decay_steps)
    return start * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * s / decay_steps)) + alpha)


def restart_position(step: int, first: int, t_mul: float) -> tuple[int, float]:
    """(period index i, fraction of period i done): periods first, first * t_mul, ... (exact)."""
    i, start, length = 0, 0.0, float(first)
    while step >= start + length:
        i, start, length = i + 1, start + length, length * t_mul
    return i, (step - start) / length


def ref_restarts(step: int, lr: float, first: int, t_mul: float, m_mul: float, alpha: float) -> float:
    i, frac = restart_position(step, first, t_mul)
    # decays from 1 to alpha over each period; each restart at m_mul^i times the initial rate
    return lr * ((1 - alpha) * m_mul ** i * 0.5 * (1 + math.cos(math.pi * frac)) + alpha)


# name: (options, build(S, row, num), reference(step, row), extra relative error(row, step) in u)
SCHEDULES: dict[str, tuple[dict[str, Sequence[Any]], Callable[..., Any], Callable[[int, dict[str, Any]], float],
                           Callable[[dict[str, Any], int], float]]] = {
    "ExponentialDecay": (
        {"decay_steps": [1, 7, 20], "decay_rate": [0.5, 0.96, 1.5], "staircase": [False, True]},
        lambda S, r, n: S.ExponentialDecay(n(0.1), r["decay_steps"], n(r["decay_rate"]), r["staircase"]),
        lambda t, r: ref_exponential(t, 0.1, r["decay_steps"], r["decay_rate"], r["staircase"]),
        lambda r, t: abs(t / r["decay_steps"] * math.log(r["decay_rate"]))),
    "PiecewiseConstantDecay": (
        {"boundaries": [(3,), (5, 20, 40), (0, 59)]},
        lambda S, r, n: S.PiecewiseConstantDecay(list(r["boundaries"]),
                                                 [n(0.1 / 2 ** k) for k in range(len(r["boundaries"]) + 1)]),
        lambda t, r: ref_piecewise(t, r["boundaries"], [0.1 / 2 ** k for k in range(len(r["boundaries"]) + 1)]),
        lambda r, t: 0.0),
    "PolynomialDecay": (
        {"decay_steps": [1, 7, 25], "end_learning_rate": [0.0001, 0.0], "power": [1.0, 0.5, 2.0],
         "cycle": [False, True]},
        lambda S, r, n: S.PolynomialDecay(n(0.1), r["decay_steps"], n(r["end_learning_rate"]), n(r["power"]),
                                          r["cycle"]),
        lambda t, r: ref_polynomial(t, 0.1, r["decay_steps"], r["end_learning_rate"], r["power"], r["cycle"]),
        lambda r, t: 8.0 * r["power"]),
    "InverseTimeDecay": (
        {"decay_steps": [1, 7, 20], "decay_rate": [0.5, 2.0], "staircase": [False, True]},
        lambda S, r, n: S.InverseTimeDecay(n(0.1), r["decay_steps"], n(r["decay_rate"]), r["staircase"]),
        lambda t, r: ref_inverse_time(t, 0.1, r["decay_steps"], r["decay_rate"], r["staircase"]),
        lambda r, t: 0.0),
    "CosineDecay": (
        {"decay_steps": [1, 10, 40], "alpha": [0.0, 0.1], "warmup_target": [None, 0.2],
         "warmup_steps": [0, 5, 15], "initial": [0.1, 0.0]},
        lambda S, r, n: S.CosineDecay(n(r["initial"]), r["decay_steps"], n(r["alpha"]),
                                      warmup_target=None if r["warmup_target"] is None else n(r["warmup_target"]),
                                      warmup_steps=r["warmup_steps"]),
        lambda t, r: ref_cosine(t, r["initial"], r["decay_steps"], r["alpha"],
                                r["warmup_target"], r["warmup_steps"]),
        lambda r, t: 0.0),
    "CosineDecayRestarts": (
        {"first_decay_steps": [1, 3, 10], "t_mul": [1.0, 2.0, 1.5], "m_mul": [1.0, 0.9], "alpha": [0.0, 0.1]},
        lambda S, r, n: S.CosineDecayRestarts(n(0.1), r["first_decay_steps"], n(r["t_mul"]), n(r["m_mul"]),
                                              n(r["alpha"])),
        lambda t, r: ref_restarts(t, 0.1, r["first_decay_steps"], r["t_mul"], r["m_mul"], r["alpha"]),
        lambda r, t: 18.0 * (1 + restart_position(t, r["first_decay_steps"], r["t_mul"])[0]) * (
            1 + t / r["first_decay_steps"])),
}


def assert_schedule(got: Sequence[float], want: Sequence[float], *, what: str, dtype: str,
                    extra: Sequence[float] = ()) -> None:
    """got[t] against want[t]: ``(34 + extra[t]) * u`` relative plus that much times max|want|."""
    __tracebackhide__ = True
    u = UNIT_ROUNDOFF[dtype]
    scale = max(abs(w) for w in want)
    worst = 0.0
    for t, (a, e) in enumerate(zip(got, want)):
        rtol = (34 + (extra[t] if extra else 0.0)) * u
        allowed = rtol * (abs(e) + scale)
        ratio = abs(a - e) / allowed if allowed > 0 else (0.0 if a == e else math.inf)
        worst = max(worst, ratio)
        if not ratio <= 1:
            evidence.check(f"lr per step ({dtype})", observed=ratio, tolerance=1.0)
            raise AssertionError(
                f"{what} in {dtype} at step {t}: {a!r}, but should be {e!r} (|difference| {abs(a - e):.3e} > "
                f"allowed {allowed:.3e} = rtol {rtol:.2e} * (|lr| + max lr {scale:g})); "
                f"steps 0-7: got {[float(x) for x in got[:8]]}, reference {[float(x) for x in want[:8]]}"
            )
    evidence.check(f"lr per step ({dtype})", observed=worst, tolerance=1.0)


def _evaluate(schedule: Any, steps: Sequence[int] = range(STEPS)) -> list[float]:
    return [float(schedule(step)) for step in steps]


# The rebuilt schedules are compared bitwise at every fifth step and the last (each eager call costs
# ~0.1 ms of TensorFlow dispatch; the formula itself is checked at every step above).
REBUILT_STEPS = [*range(0, STEPS, 5), STEPS - 1]


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_schedule_follows_its_documented_formula_at_every_step(tf, name, dtype):
    import keras

    S = keras.optimizers.schedules
    options, build, ref, extra = SCHEDULES[name]
    number = np.float64 if dtype == "float64" else float
    for row in evidence.visiting(FAMILY, f"{name}[{dtype}]", covering_array(options), _row_label):
        label = f"{name}({_row_label(row)})"
        schedule = build(S, row, number)
        got = _evaluate(schedule)
        assert str(schedule(0).dtype.name) == dtype, f"{label}: computes in {schedule(0).dtype.name}, not {dtype}"
        assert_schedule(got, [ref(t, row) for t in range(STEPS)], what=label, dtype=dtype,
                        extra=[extra(row, t) for t in range(STEPS)])
        sampled = [got[t] for t in REBUILT_STEPS]
        twin = type(schedule).from_config(schedule.get_config())
        assert _evaluate(twin, REBUILT_STEPS) == sampled, (
            f"{label}: from_config(get_config()) gives {_evaluate(twin, REBUILT_STEPS)} at steps {REBUILT_STEPS}, "
            f"but should give {sampled}")
        again = S.deserialize(S.serialize(schedule))
        assert type(again) is type(schedule) and _evaluate(again, REBUILT_STEPS) == sampled, (
            f"{label}: deserialize(serialize()) gives {_evaluate(again, REBUILT_STEPS)}, but should give {sampled}")
        evidence.covers(name, *(f"{name}.{k}" for k in MODE_OPTIONS.get(name, ()) if _option_on(row, k)))
    evidence.covers("get_config/from_config", "serialize", f"dtype={dtype}")


MODE_OPTIONS = {"ExponentialDecay": ("staircase",), "InverseTimeDecay": ("staircase",),
                "PolynomialDecay": ("cycle", "power"), "CosineDecay": ("warmup", "alpha"),
                "CosineDecayRestarts": ("t_mul", "m_mul", "alpha")}


def _option_on(row: dict[str, Any], key: str) -> bool:
    if key == "warmup":
        return row["warmup_target"] is not None and row["warmup_steps"] > 0
    value = row[key]
    return value if isinstance(value, bool) else value != 1.0 and bool(value)


@pytest.mark.claim(CLAIM)
def test_optimizer_reads_the_schedule_at_its_iteration_count(tf):
    """An optimizer given a schedule as learning_rate uses schedule(iterations) at each apply."""
    import keras

    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 3, 0.5, staircase=True)
    opt = keras.optimizers.SGD(learning_rate=schedule)
    var = keras.Variable(np.zeros(1, np.float32))
    seen = []
    for step in range(10):
        seen.append(float(opt.learning_rate))
        before = float(var.numpy()[0])
        opt.apply([np.ones(1, np.float32)], [var])
        moved = before - float(var.numpy()[0])
        want = 0.1 * 0.5 ** (step // 3)
        assert abs(moved - want) <= 1e-6 * want, f"SGD step {step} moved the variable by {moved}, but should be {want}"
    assert seen == [float(np.float32(0.1 * 0.5 ** (s // 3))) for s in range(10)], f"optimizer.learning_rate {seen}"
    evidence.covers("optimizer.learning_rate")
