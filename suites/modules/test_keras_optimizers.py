"""modules.keras.optimizer-update-rules: every keras.optimizers optimizer (Keras 3, TensorFlow
backend) against a numpy reference of the rule its docstring states, or the paper it cites where
the docstring defers (suites/modules/_keras_optim_reference.py says which, rule by rule); and
modules.keras.optimizer-config: get_config/from_config and serialize/deserialize round trips
give bitwise the same subsequent updates.

Inputs. float64 variables (keras.Variable(dtype="float64")): a 3x4 matrix and a 4-vector, the
objective a fixed quadratic with a drifting linear term whose gradients numpy computes from each
side's own current values (``_optim_reference.gradient``), fed with
``optimizer.apply_gradients(zip(grads, variables))`` for STEPS = 6 calls. Two covering arrays,
both pairwise by construction (``_optim_reference.pairwise``): per optimizer, its own options
(two or three values each) with learning_rate (two floats and an ExponentialDecay schedule) and
weight_decay; and over all optimizers together, the options every optimizer shares (clipnorm /
global_clipnorm / clipvalue, use_ema with and without ema_overwrite_frequency,
gradient_accumulation_steps, loss_scale_factor, weight_decay, a schedule), each optimizer at its
own fixed options. Left out as pairs: use_ema with gradient_accumulation_steps (the docstring
does not say whether the average moves on calls that do not update), Lamb with weight_decay
(the paper puts the decay inside the trust ratio, Keras's shared option is a decoupled pre-step
decay; the docstring does not say which).

Error model. One step of a rule is at most ``ops`` elementwise operations (counted per optimizer
from its reference) plus its reductions (norms, Adafactor's sums), OP_ROUNDING units of u each
(checks/numerics.py). Rounding made at call s reaches call t through the t - s later steps; each
step map has a normwise relative condition of at most K = 4 for these inputs (the quadratic's
own step 1 - lr a with lr a <= 1, moment averages <= 1, normalised updates m / sqrt(v) <= 2, the
decay factor <= 1, clipping a contraction), so after t calls the error is at most
(K^t - 1) / (K - 1) times one step's bound: 1365 x at t = 6, about 1e-11 relative in float64.
The learning-rate schedule adds its own pow (counted in ops). Every wrong rule the unit tests and
mutants model moves the variables by 1e-4 relative or more. Lion's sign and Ftrl's |z| <= l1 are
decisions: the inputs keep their arguments far (> 1e-3) from the threshold.

LossScaleOptimizer: its documented dynamic loss scale against a reference over a fixed pattern of
finite and non-finite calls (halve and skip; double after dynamic_growth_steps finite steps).

Left out, one line each: Muon (its update needs the Newton-Schulz iteration and the Adam
fallback for non-matrix variables, not written in time), ScheduleFreeAdamW (the schedule-free
averaging of Defazio et al., not written in time), MultiOptimizer (routes variables to other
optimizers; not written in time). The table test names them, so none is silently missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import Tolerance, assert_close, assert_equal, evidence, tolerance

from . import _keras_optim_reference as ref

UPDATE = "modules.keras.optimizer-update-rules"
STEPS = 6
K = 4.0
SHAPES = ((3, 4), (4,))
SCHEDULE = ("exp", 0.125, 2.0, 0.5)  # ExponentialDecay(0.125, decay_steps=2, decay_rate=0.5)
LEFT_OUT = {"Muon": "Newton-Schulz reference not written", "ScheduleFreeAdamW": "schedule-free reference not written",
            "MultiOptimizer": "routing optimizer, no rule of its own; not written"}


@dataclass(frozen=True)
class Info:
    name: str
    own: dict[str, list[Any]]  # the optimizer's own options, two or three values each
    fixed: dict[str, Any]  # its options where a row leaves them (dyadic, unlike some defaults)
    lrs: tuple[float, float]
    ops: int
    reduction: int = 1


# Every hyperparameter is dyadic (exact in float32): Keras holds a float learning_rate in a floatx
# (float32) variable and casts some Python-float hyperparameters and defaults through float32 (found
# here: lr=0.1 moves a float64 variable by 3.7e-9 more than 0.1 g), which would add float32 rounding
# to float64 updates.
E23, E10, E7 = 2.0 ** -23, 2.0 ** -10, 2.0 ** -7
BETAS = [(0.875, 0.9921875), (0.5, 0.9375)]
ADAM = {"beta_1": 0.875, "beta_2": 0.9921875, "epsilon": E23}
INFOS = [
    Info("SGD", {"momentum": [0.0, 0.875], "nesterov": [False, True]}, {"momentum": 0.875}, (0.125, 0.03125), 8),
    Info("Adam", {"betas": BETAS, "epsilon": [E23, 0.125], "amsgrad": [False, True]}, ADAM, (0.125, 0.015625), 16),
    Info("AdamW", {"betas": BETAS, "epsilon": [E23, 0.125], "amsgrad": [False, True], "weight_decay": [2.0 ** -8, 0.25]},
         ADAM, (0.125, 0.015625), 18),
    Info("Adamax", {"betas": BETAS, "epsilon": [E23, 0.125]}, ADAM, (0.125, 0.015625), 12),
    Info("Nadam", {"betas": BETAS, "epsilon": [E23, 0.125]}, ADAM, (0.125, 0.015625), 24),
    Info("Adagrad", {"initial_accumulator_value": [0.125, 0.0, 1.0], "epsilon": [E23, 0.125]},
         {"initial_accumulator_value": 0.125, "epsilon": E23}, (0.125, 0.5), 10),
    Info("Adadelta", {"rho": [0.9375, 0.5], "epsilon": [E23, E7]}, {"rho": 0.9375, "epsilon": E23}, (1.0, 0.5), 16),
    Info("RMSprop", {"rho": [0.875, 0.5], "momentum": [0.0, 0.875], "epsilon": [0.0, E10], "centered": [False, True]},
         {"rho": 0.875, "epsilon": 0.0}, (0.015625, 0.125), 16),
    Info("Lion", {"betas": [(0.875, 0.9921875), (0.5, 0.875)]}, {"beta_1": 0.875, "beta_2": 0.9921875},
         (0.015625, 0.125), 8),
    Info("Lamb", {"betas": BETAS, "epsilon": [E23, 0.125]}, ADAM, (0.125, 0.015625), 20, reduction=24),
    Info("Ftrl", {"learning_rate_power": [-0.5, -0.25, 0.0], "initial_accumulator_value": [0.125, 1.0],
                  "l1_regularization_strength": [0.0, 0.0625], "l2_regularization_strength": [0.0, 0.125],
                  "l2_shrinkage_regularization_strength": [0.0, 0.125], "beta": [0.0, 0.5]},
         {"initial_accumulator_value": 0.125, "l1_regularization_strength": 0.0625}, (0.5, 0.125), 24),
    Info("Adafactor", {"beta_2_decay": [-0.75, -0.5], "epsilon_1": [2.0 ** -100, E10], "epsilon_2": [E10, 2.0],
                       "clip_threshold": [1.0, 0.125], "relative_step": [True, False]},
         {"beta_2_decay": -0.75, "epsilon_1": 2.0 ** -100, "epsilon_2": E10}, (0.015625, 0.5), 24, reduction=24),
]
BY_NAME = {i.name: i for i in INFOS}


def _own_factors(info: Info) -> dict[str, list[Any]]:
    lrs: list[Any] = [*info.lrs, "schedule"]
    out = dict(info.own) | {"learning_rate": lrs}
    if info.name not in ("AdamW", "Lamb"):
        out["weight_decay"] = [None, 0.0625]
    return out


OWN_CASES = [(info.name, row) for info in INFOS for row in ref.pairwise(_own_factors(info))]

SHARED = {"optimizer": [i.name for i in INFOS],
          "clip": [None, ("clipnorm", 0.5), ("global_clipnorm", 0.5), ("clipvalue", 0.375)],
          "ema": [None, (0.875, None), (0.5, 3)], "gradient_accumulation_steps": [None, 2],
          "loss_scale_factor": [None, 8.0], "weight_decay": [None, 0.0625], "learning_rate": ["first", "schedule"]}


def _shared_valid(row: Mapping[str, Any]) -> bool:
    if row["ema"] is not None and row["gradient_accumulation_steps"]:
        return False
    return not (row["optimizer"] == "Lamb" and row["weight_decay"])


SHARED_ROWS = ref.pairwise(SHARED, _shared_valid)


def _split(name: str, row: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(own options by their keyword names, shared options) of a row."""
    info = BY_NAME[name]
    own: dict[str, Any] = {}
    base: dict[str, Any] = {}
    for k, v in row.items():
        if k == "betas":
            own["beta_1"], own["beta_2"] = v
        elif k == "learning_rate":
            base[k] = SCHEDULE if v == "schedule" else info.lrs[0] if v == "first" else v
        elif k == "clip":
            if v is not None:
                base[v[0]] = v[1]
        elif k == "ema":
            if v is not None:
                base["use_ema"], base["ema_momentum"] = True, v[0]
                if v[1]:
                    base["ema_overwrite_frequency"] = v[1]
        elif k in ("weight_decay", "gradient_accumulation_steps", "loss_scale_factor"):
            if v is not None:
                base[k] = v
        elif k != "optimizer":
            own[k] = v
    return own, base


def _case_id(name: str, row: Mapping[str, Any]) -> str:
    return (name + "[" + ",".join(f"{k}={v}" for k, v in row.items() if k != "optimizer") + "]").replace(" ", "")


def build(keras, name: str, own: Mapping[str, Any], base: Mapping[str, Any]) -> Any:
    kwargs: dict[str, Any] = dict(own) | {k: v for k, v in base.items() if k != "learning_rate"}
    lr = base["learning_rate"]
    if isinstance(lr, tuple):
        _, lr0, steps, rate = lr
        lr = keras.optimizers.schedules.ExponentialDecay(np.float64(lr0), decay_steps=steps, decay_rate=rate)
    return getattr(keras.optimizers, name)(learning_rate=lr, **kwargs)


def run_keras(keras, opt: Any, data: Sequence[Mapping[str, np.ndarray]], steps: int,
              scale: float = 1.0) -> tuple[list[list[np.ndarray]], list[Any]]:
    """``steps`` calls of ``opt.apply_gradients`` on float64 variables; the values after each."""
    variables = [keras.Variable(np.array(d["theta0"]), dtype="float64") for d in data]
    history = []
    for i in range(1, steps + 1):
        grads = [keras.ops.convert_to_tensor(ref.gradient(v.numpy(), d, i) * scale, dtype="float64")
                 for v, d in zip(variables, data)]
        opt.apply_gradients(zip(grads, variables))
        history.append([v.numpy().copy() for v in variables])
    return history, variables


def step_tolerance(info: Info, t: int) -> Tolerance:
    """The float64 error model of the module docstring after ``t`` calls."""
    one = tolerance("float64", ops=info.ops + 4, reduction=info.reduction)  # + schedule, decay, clip, EMA
    growth = (K ** t - 1) / (K - 1)
    return Tolerance(one.rtol * growth, f"sum over {t} steps of K={K:g}^(t-s) x one step [{one.why}]",
                     dtype="float64")


def compare_history(name: str, got: Sequence[Sequence[np.ndarray]], want: Sequence[Sequence[np.ndarray]],
                    label: str) -> float:
    """The oracle: the variables after every call equal the reference's within the error model.
    Returns the worst error in tolerances."""
    __tracebackhide__ = True
    worst = 0.0
    for t in range(len(want)):
        tol = step_tolerance(BY_NAME[name], t + 1)
        for i, (a, e) in enumerate(zip(got[t], want[t])):
            rel = assert_close(a, e, tol, what=f"{label}: variable {i} {a.shape} after call {t + 1} vs the documented rule",
                               name=f"keras {name} variables vs reference")
            worst = max(worst, rel / tol.rtol)
    return worst


def check_rule(keras, name: str, own: Mapping[str, Any], base: Mapping[str, Any], label: str) -> float:
    """Optimizer ``name`` with ``own`` and ``base`` options follows the documented rule: the
    variables after every call (and the EMA averages, through finalize_variable_values) equal the
    reference's. Returns the worst error in tolerances."""
    __tracebackhide__ = True
    info = BY_NAME[name]
    own = dict(info.fixed) | dict(own)
    data = ref.problem(SHAPES)
    opt = build(keras, name, own, base)
    scale = base.get("loss_scale_factor") or 1.0
    got, variables = run_keras(keras, opt, data, STEPS, scale)
    want, avg = ref.reference_run(name, data, own, base, STEPS)
    worst = compare_history(name, got, want, label)
    if avg is not None:
        opt.finalize_variable_values(variables)
        for i, (v, e) in enumerate(zip(variables, avg)):
            assert_close(v.numpy(), e, step_tolerance(info, STEPS),
                         what=f"{label}: variable {i} after finalize_variable_values (the EMA average) vs reference")
    return worst


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize(("name", "row"), OWN_CASES, ids=[_case_id(n, r) for n, r in OWN_CASES])
def test_keras_optimizer_follows_its_documented_rule(keras, name, row):
    own, base = _split(name, row)
    worst = check_rule(keras, name, own, base, _case_id(name, row))
    evidence.note(worst_error_in_tolerances=worst, steps=STEPS)
    evidence.covers(name)
    for k in BY_NAME[name].own:
        evidence.covers(f"{name}.{k}")
    if isinstance(base["learning_rate"], tuple):
        evidence.covers("learning_rate.schedule")
    if base.get("weight_decay"):
        evidence.covers("weight_decay")


SHARED_MODES = {"clipnorm", "global_clipnorm", "clipvalue", "use_ema", "ema_overwrite_frequency",
                "gradient_accumulation_steps", "loss_scale_factor", "weight_decay"}


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("row", SHARED_ROWS, ids=[_case_id(r["optimizer"], r) for r in SHARED_ROWS])
def test_keras_optimizer_shared_options_follow_their_documentation(keras, row):
    name = row["optimizer"]
    own, base = _split(name, row)
    if name == "AdamW" and "weight_decay" not in base:
        base["weight_decay"] = 2.0 ** -8  # AdamW's own default 0.004 is not dyadic
    worst = check_rule(keras, name, own, base, _case_id(name, row))
    evidence.note(worst_error_in_tolerances=worst, steps=STEPS)
    for k in SHARED_MODES & set(base):
        evidence.covers(k)
    if isinstance(base["learning_rate"], tuple):
        evidence.covers("learning_rate.schedule")


@pytest.mark.claim(UPDATE)
def test_keras_loss_scale_factor_scales_the_loss(keras):
    """scale_loss multiplies the loss by loss_scale_factor (the gradients' unscaling is checked
    by the shared-options rows)."""
    opt = keras.optimizers.SGD(learning_rate=0.125, loss_scale_factor=8.0)
    got = float(keras.ops.convert_to_numpy(opt.scale_loss(keras.ops.convert_to_tensor(1.5, dtype="float64"))))
    assert got == 12.0, f"SGD(loss_scale_factor=8).scale_loss(1.5) = {got}, but should be 12.0 (loss * factor)"
    evidence.covers("loss_scale_factor")


PATTERN = [False, False, True, False, False, False, True, True, False, False]


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize(("growth", "initial"), [(2, 16.0), (3, 1.0)])
def test_keras_loss_scale_optimizer_dynamic_scale(keras, growth, initial):
    """LossScaleOptimizer: 'if a nonfinite gradient is encountered, the loss scale is halved, and
    the train step is skipped'; 'after every dynamic_growth_steps steps with finite gradients,
    the loss scale is doubled' (no lower bound is documented: from 1.0 the scale halves to 0.25). The
    gradients are the objective's times the current scale (as
    from a scaled loss), one entry NaN or inf on the calls PATTERN marks."""
    lr = 0.125
    data = ref.problem(SHAPES)
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(learning_rate=lr), initial_scale=initial,
                                             dynamic_growth_steps=growth)
    variables = [keras.Variable(np.array(d["theta0"]), dtype="float64") for d in data]
    want, want_scales = ref.loss_scale_run(data, lr, initial, growth, PATTERN)
    one = keras.ops.convert_to_tensor(1.0, dtype="float64")
    for i, bad in enumerate(PATTERN, start=1):
        scale = float(keras.ops.convert_to_numpy(opt.scale_loss(one)))
        grads = [ref.gradient(v.numpy(), d, i) * scale for v, d in zip(variables, data)]
        if bad:
            grads[i % 2] = grads[i % 2].copy()
            grads[i % 2].flat[1] = np.nan if i % 2 else np.inf
        opt.apply_gradients(zip([keras.ops.convert_to_tensor(g, dtype="float64") for g in grads], variables))
        after = float(keras.ops.convert_to_numpy(opt.scale_loss(one)))
        assert after == want_scales[i - 1], (
            f"LossScaleOptimizer(initial_scale={initial}, dynamic_growth_steps={growth}): loss scale after call {i} "
            f"({'non-finite' if bad else 'finite'}) is {after}, but should be {want_scales[i - 1]}")
        for j, (v, e) in enumerate(zip(variables, want[i - 1])):
            assert_close(v.numpy(), e, step_tolerance(BY_NAME["SGD"], i),
                         what=f"LossScaleOptimizer: variable {j} after call {i} "
                              f"({'skipped, non-finite' if bad else 'finite'})")
    evidence.covers("LossScaleOptimizer")
    evidence.covers("LossScaleOptimizer.dynamic_growth_steps")
    evidence.covers("LossScaleOptimizer.non-finite")


def _optimizer_names(keras) -> list[str]:
    base = keras.optimizers.Optimizer
    return sorted(n for n in dir(keras.optimizers) if isinstance(getattr(keras.optimizers, n), type)
                  and issubclass(getattr(keras.optimizers, n), base) and getattr(keras.optimizers, n) is not base)


@pytest.mark.claim(UPDATE)
def test_keras_optimizer_table_lists_every_public_optimizer(keras):
    """The suite's tables name every public Optimizer subclass keras.optimizers exports (or leave
    it out by name, with the reason), so a new optimizer in a future release fails here."""
    names = _optimizer_names(keras)
    known = set(BY_NAME) | set(LEFT_OUT) | {"LossScaleOptimizer"}
    missing = [n for n in names if n not in known]
    assert not missing, (f"keras.optimizers exports {missing} that this suite's tables leave out: add a row "
                         "(options, reference) to suites/modules/test_keras_optimizers.py")
    evidence.note(optimizers=names, left_out=LEFT_OUT)
    evidence.covers("table-complete")


# ----------------------------------------------------------------- get_config / serialize round trips

CONFIG = "modules.keras.optimizer-config"
CONFIG_SHARED: dict[str, Any] = {"learning_rate": SCHEDULE, "weight_decay": 0.0625, "clipnorm": 0.5, "use_ema": True,
                                 "ema_momentum": 0.5, "ema_overwrite_frequency": 3, "gradient_accumulation_steps": 2,
                                 "loss_scale_factor": 8.0}
CONFIG_NAMES = [*BY_NAME, "LossScaleOptimizer"]


def _config_optimizer(keras, name: str) -> Any:
    if name == "LossScaleOptimizer":
        inner = build(keras, "Adam", ADAM | {"amsgrad": True}, {"learning_rate": 0.125, "clipvalue": 0.375})
        return keras.optimizers.LossScaleOptimizer(inner, initial_scale=4.0, dynamic_growth_steps=2)
    base = dict(CONFIG_SHARED)
    if name == "Lamb":
        base.pop("weight_decay")
    return build(keras, name, BY_NAME[name].fixed, base)


@pytest.mark.claim(CONFIG)
@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_keras_optimizer_config_round_trips_give_the_same_updates(keras, name):
    """'The same optimizer can be reinstantiated later (without any saved state) from this
    configuration': cls.from_config(opt.get_config()) and keras.optimizers.deserialize(
    keras.optimizers.serialize(opt)), each on fresh variables, update them bitwise as a fresh
    optimizer built from the same arguments does, call after call."""
    data = ref.problem(SHAPES)
    original = _config_optimizer(keras, name)
    routes = {"get_config": type(original).from_config(original.get_config()),
              "serialize": keras.optimizers.deserialize(keras.optimizers.serialize(original))}
    want, _ = run_keras(keras, original, data, STEPS)
    for route, twin in routes.items():
        assert type(twin) is type(original), f"{name}: {route} round trip gave a {type(twin).__name__}"
        got, _ = run_keras(keras, twin, data, STEPS)
        for t in range(STEPS):
            for i, (a, e) in enumerate(zip(got[t], want[t])):
                assert_equal(a, e, what=f"{name} from its {route} round trip: variable {i} after call {t + 1} vs "
                                        "the optimizer it was copied from")
        evidence.covers(route)
    evidence.covers(name)
