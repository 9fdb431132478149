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

Muon: its own covering array (learning_rate with a schedule, momentum, nesterov, ns_steps,
the Newton-Schulz coefficients (muon_a, muon_b, muon_c) at their defaults and at the classic
cubic (1.5, -0.5, 0), rms_rate, adam_lr_ratio, the adam betas, epsilon, weight_decay,
adam_weight_decay, exclude_embeddings, exclude_layers, clipping, gradient accumulation) on four
variables that exercise the documented routing: a 3x4 kernel and a 4x3 "tall" matrix (Muon
step, the tall one transposed), a 4-vector (AdamW step: not 2-D) and a 5x3 "tok_embedding"
(AdamW while exclude_embeddings). Rows with rms_rate set run in float32 (float32 error model):
on float64 variables Muon's rms scaling raises (a finding, pinned on its own test). Pair left
out: adam_lr_ratio != 1 with adam_weight_decay (the docstring does not say which learning rate
the AdamW variables' decay uses). ScheduleFreeAdamW: Algorithm 1 of Defazio et al. over beta_1,
beta_2, epsilon, warmup_steps, two constant learning rates and weight_decay (schedules left out:
the paper's gamma_t and the repository's running lr_max weigh the average differently under a
decreasing schedule). MultiOptimizer / OptimizerMap: each variable follows the rule of the
optimizer its OptimizerMap (exact key, else the one regex fullmatch, else default) or callable
assigns; loss_scale_factor overrides the sub-optimizers'. Optimizer: the base class docstring's
minimal subclass (build + update_step) gets the shared options (clipping, weight_decay,
gradient_accumulation_steps, schedules) from the base class. keras.optimizers.get: by name, by
config dict and by instance. One step of Muon's rule counts the Newton-Schulz products (ops 80):
measured errors stay below 1e-14, so the K = 4 model is not the binding constraint there.
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
FAMILY = "keras.optimizers"  # the combinations ledger's family of these records
STEPS = 6
K = 4.0
SHAPES = ((3, 4), (4,))
SCHEDULE = ("exp", 0.125, 2.0, 0.5)  # ExponentialDecay(0.125, decay_steps=2, decay_rate=0.5)
# Public Optimizer subclasses without a rule of their own, checked by their own tests below.
LEFT_OUT = {"MultiOptimizer": "routing optimizer, no rule of its own: test_keras_multi_optimizer_routes_each_variable"}


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
# Optimizers with their own tests (own variables and covering arrays), not in OWN_CASES/SHARED.
NEW_INFOS = [
    Info("Muon", {}, {"adam_beta_1": 0.875, "adam_beta_2": 0.9921875, "epsilon": E23, "momentum": 0.875,
                      "rms_rate": None, "adam_weight_decay": 2.0 ** -8}, (0.125, 0.03125), 80, reduction=12),
    Info("ScheduleFreeAdamW", {}, ADAM, (0.125, 0.03125), 20),
]
BY_NAME = {i.name: i for i in [*INFOS, *NEW_INFOS]}


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


def build(keras, name: str, own: Mapping[str, Any], base: Mapping[str, Any], dtype: str = "float64") -> Any:
    kwargs: dict[str, Any] = dict(own) | {k: v for k, v in base.items() if k != "learning_rate"}
    lr = base["learning_rate"]
    if isinstance(lr, tuple):
        _, lr0, steps, rate = lr
        lr0 = np.float64(lr0) if dtype == "float64" else float(lr0)  # the schedule in the variables' dtype
        lr = keras.optimizers.schedules.ExponentialDecay(lr0, decay_steps=steps, decay_rate=rate)
    return getattr(keras.optimizers, name)(learning_rate=lr, **kwargs)


def run_keras(keras, opt: Any, data: Sequence[Mapping[str, np.ndarray]], steps: int,
              scale: float = 1.0, names: Sequence[str] | None = None,
              dtype: str = "float64") -> tuple[list[list[np.ndarray]], list[Any]]:
    """``steps`` calls of ``opt.apply_gradients`` on float64 (or ``dtype``) variables, named
    ``names`` where given; the values after each."""
    if names is None:
        variables = [keras.Variable(np.array(d["theta0"]), dtype=dtype) for d in data]
    else:
        variables = [keras.Variable(np.array(d["theta0"]), dtype=dtype, name=n) for d, n in zip(data, names)]
    history = []
    for i in range(1, steps + 1):
        grads = [keras.ops.convert_to_tensor(ref.gradient(v.numpy().astype(np.float64), d, i) * scale, dtype=dtype)
                 for v, d in zip(variables, data)]
        opt.apply_gradients(zip(grads, variables))
        history.append([v.numpy().copy() for v in variables])
    return history, variables


def step_tolerance(info: Info, t: int, dtype: str = "float64") -> Tolerance:
    """The error model of the module docstring after ``t`` calls (float64 unless said)."""
    one = tolerance(dtype, ops=info.ops + 4, reduction=info.reduction)  # + schedule, decay, clip, EMA
    growth = (K ** t - 1) / (K - 1)
    return Tolerance(one.rtol * growth, f"sum over {t} steps of K={K:g}^(t-s) x one step [{one.why}]",
                     dtype=dtype)


def compare_history(name: str, got: Sequence[Sequence[np.ndarray]], want: Sequence[Sequence[np.ndarray]],
                    label: str, dtype: str = "float64") -> float:
    """The oracle: the variables after every call equal the reference's within the error model.
    Returns the worst error in tolerances."""
    __tracebackhide__ = True
    worst = 0.0
    for t in range(len(want)):
        tol = step_tolerance(BY_NAME[name], t + 1, dtype)
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
    evidence.registers(FAMILY, name, [_case_id(n, r) for n, r in OWN_CASES if n == name], own=_case_id(name, row))
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
    evidence.visits(FAMILY, name, _case_id(name, row))


SHARED_MODES = {"clipnorm", "global_clipnorm", "clipvalue", "use_ema", "ema_overwrite_frequency",
                "gradient_accumulation_steps", "loss_scale_factor", "weight_decay"}


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("row", SHARED_ROWS, ids=[_case_id(r["optimizer"], r) for r in SHARED_ROWS])
def test_keras_optimizer_shared_options_follow_their_documentation(keras, row):
    evidence.registers(FAMILY, "shared options", [_case_id(r["optimizer"], r) for r in SHARED_ROWS],
                       own=_case_id(row["optimizer"], row))
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
    evidence.visits(FAMILY, "shared options", _case_id(row["optimizer"], row))


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
CONFIG_NAMES = [*BY_NAME, "LossScaleOptimizer"]  # Muon and ScheduleFreeAdamW included


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


# ----------------------------------------------------------------- Muon

MUON_SHAPES = ((3, 4), (4, 3), (4,), (5, 3))
MUON_NAMES = ("kernel", "tall", "bias", "tok_embedding")
MUON_FACTORS: dict[str, list[Any]] = {
    "learning_rate": [0.125, 0.03125, "schedule"], "momentum": [0.875, 0.5], "nesterov": [True, False],
    "ns_steps": [5, 2], "abc": ["default", "cubic"], "rms_rate": [None, 0.25], "adam_lr_ratio": [1.0, 0.5],
    "adam_betas": BETAS, "epsilon": [E23, 0.125], "weight_decay": [0.0, 0.0625], "adam_weight_decay": [None, E7],
    "exclude_embeddings": [True, False], "exclude_layers": [None, ("tall",)],
    "clip": [None, ("clipnorm", 0.5), ("global_clipnorm", 0.5), ("clipvalue", 0.375)],
    "gradient_accumulation_steps": [None, 2]}
ABC = {"default": ref.MUON_ABC, "cubic": (1.5, -0.5, 0.0)}


def _muon_valid(row: Mapping[str, Any]) -> bool:
    # which learning rate decays the AdamW variables when adam_lr_ratio != 1 is not documented
    return not (row["adam_lr_ratio"] != 1.0 and row["adam_weight_decay"])


MUON_ROWS = ref.pairwise(MUON_FACTORS, _muon_valid)


def _muon_split(row: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(Muon's own keyword arguments, the shared ones, the reference's per-variable routing)."""
    own: dict[str, Any] = {}
    base: dict[str, Any] = {}
    for k, v in row.items():
        if k == "adam_betas":
            own["adam_beta_1"], own["adam_beta_2"] = v
        elif k == "abc":
            own["muon_a"], own["muon_b"], own["muon_c"] = ABC[v]
        elif k == "exclude_layers":
            own[k] = list(v) if v else None
        elif k == "learning_rate":
            base[k] = SCHEDULE if v == "schedule" else v
        elif k == "clip":
            if v is not None:
                base[v[0]] = v[1]
        elif k in ("weight_decay", "gradient_accumulation_steps"):
            if v is not None:
                base[k] = v
        else:
            own[k] = v
    routing = [{"_adamw": True, "_weight_decay": own["adam_weight_decay"]}
               if ref.muon_takes_adamw(shape, path, own) else {"_adamw": False}
               for shape, path in zip(MUON_SHAPES, MUON_NAMES)]
    return own, base, routing


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("row", MUON_ROWS, ids=[_case_id("Muon", r) for r in MUON_ROWS])
def test_keras_muon_follows_its_documented_rule(keras, row):
    """Muon: the documented routing (AdamW step for non-2-D variables, embeddings while
    exclude_embeddings, exclude_layers matches), the Newton-Schulz orthogonalised SGD momentum of
    the original implementation with (muon_a, muon_b, muon_c), ns_steps, momentum, nesterov, the
    rms_rate scaling of Liu et al., adam_lr_ratio, weight_decay / adam_weight_decay, against
    ``_keras_optim_reference.muon``; float64, or float32 where rms_rate is set (see
    test_keras_muon_rms_rate_on_float64_variables)."""
    evidence.registers(FAMILY, "Muon", [_case_id("Muon", r) for r in MUON_ROWS], own=_case_id("Muon", row))
    own, base, routing = _muon_split(row)
    dtype = "float64" if row["rms_rate"] is None else "float32"
    label = _case_id("Muon", row)
    data = ref.problem(MUON_SHAPES)
    opt = build(keras, "Muon", own, base, dtype)
    got, _ = run_keras(keras, opt, data, STEPS, names=MUON_NAMES, dtype=dtype)
    want, _ = ref.reference_run("Muon", data, own, base, STEPS, per_variable=routing)
    worst = compare_history("Muon", got, want, label, dtype)
    evidence.note(worst_error_in_tolerances=worst, steps=STEPS, dtype=dtype,
                  adamw_variables=[n for n, r in zip(MUON_NAMES, routing) if r["_adamw"]])
    evidence.covers("Muon")
    for k in ("momentum", "nesterov", "ns_steps", "rms_rate", "adam_lr_ratio", "epsilon", "exclude_embeddings",
              "exclude_layers"):
        evidence.covers(f"Muon.{k}")
    evidence.covers("Muon.muon_abc")
    evidence.covers("Muon.adam_betas")
    evidence.covers("Muon.adamw-fallback")
    if own["adam_weight_decay"]:
        evidence.covers("Muon.adam_weight_decay")
    if base["weight_decay"]:
        evidence.covers("weight_decay")
    if isinstance(base["learning_rate"], tuple):
        evidence.covers("learning_rate.schedule")
    for k in ("clipnorm", "global_clipnorm", "clipvalue", "gradient_accumulation_steps"):
        if k in base:
            evidence.covers(k)
    evidence.visits(FAMILY, "Muon", _case_id("Muon", row))


@pytest.mark.claim(UPDATE)
def test_keras_muon_rms_rate_on_float64_variables(keras):
    """Muon with its default rms_rate (0.2; here 0.25) on float64 variables: nothing in the
    docstring restricts the variables' dtype, so the update must run and follow the rule."""
    own = dict(BY_NAME["Muon"].fixed) | {"rms_rate": 0.25}
    base = {"learning_rate": 0.125}
    data = ref.problem(MUON_SHAPES[:1])
    got, _ = run_keras(keras, build(keras, "Muon", own, base), data, STEPS, names=MUON_NAMES[:1])
    want, _ = ref.reference_run("Muon", data, own, base, STEPS, per_variable=[{"_adamw": False}])
    compare_history("Muon", got, want, "Muon[rms_rate=0.25,float64]")
    evidence.covers("Muon.rms_rate")


# ----------------------------------------------------------------- ScheduleFreeAdamW

SF_FACTORS: dict[str, list[Any]] = {"betas": BETAS, "epsilon": [E23, 0.125], "warmup_steps": [0, 3],
                                    "learning_rate": [0.125, 0.03125], "weight_decay": [None, 0.0625]}
SF_ROWS = ref.pairwise(SF_FACTORS)


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("row", SF_ROWS, ids=[_case_id("ScheduleFreeAdamW", r) for r in SF_ROWS])
def test_keras_schedule_free_adamw_follows_the_paper(keras, row):
    """ScheduleFreeAdamW: the variables (the training point y, "an interpolation between
    momentum and x") after every call equal Defazio et al.'s Algorithm 1
    (``_keras_optim_reference.schedule_free_run``) with beta_1, beta_2, epsilon, warmup_steps
    ("the learning rate linearly increases from 0"), the learning rate and weight_decay."""
    evidence.registers(FAMILY, "ScheduleFreeAdamW", [_case_id("ScheduleFreeAdamW", r) for r in SF_ROWS],
                       own=_case_id("ScheduleFreeAdamW", row))
    own, base = _split("ScheduleFreeAdamW", row)
    label = _case_id("ScheduleFreeAdamW", row)
    data = ref.problem(SHAPES)
    got, _ = run_keras(keras, build(keras, "ScheduleFreeAdamW", own, base), data, STEPS)
    evidence.covers("ScheduleFreeAdamW")
    want = ref.schedule_free_run(data, own, base, STEPS)
    worst = compare_history("ScheduleFreeAdamW", got, want, label)
    evidence.note(worst_error_in_tolerances=worst, steps=STEPS)
    for k in ("betas", "epsilon", "warmup_steps"):
        evidence.covers(f"ScheduleFreeAdamW.{k}")
    if base.get("weight_decay"):
        evidence.covers("ScheduleFreeAdamW.weight_decay")
    evidence.visits(FAMILY, "ScheduleFreeAdamW", _case_id("ScheduleFreeAdamW", row))


# ----------------------------------------------------------------- MultiOptimizer / OptimizerMap

MULTI_SHAPES = ((3, 4), (4,), (2, 3))
MULTI_PATHS = (("enc", "kernel"), ("enc", "bias"), (None, "dec_kernel"))


def _scoped_variables(keras, data: Sequence[Mapping[str, np.ndarray]]) -> list[Any]:
    out = []
    for d, (scope, name) in zip(data, MULTI_PATHS):
        if scope is None:
            out.append(keras.Variable(np.array(d["theta0"]), dtype="float64", name=name))
        else:
            with keras.name_scope(scope):
                out.append(keras.Variable(np.array(d["theta0"]), dtype="float64", name=name))
    return out


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("route", ["OptimizerMap", "callable", "exact-key", "loss_scale_factor"])
def test_keras_multi_optimizer_routes_each_variable(keras, route):
    """MultiOptimizer "delegates variables to different optimizers": with an OptimizerMap
    (regex keys matched by re.fullmatch against the variable path, an exact key first, unmapped
    variables to default_optimizer) or a callable of the variable, each variable moves as its
    optimizer's documented rule moves it alone (SGD with momentum, Adam); loss_scale_factor
    "overrides the loss_scale_factor passed to the sub-optimizers" (gradients scaled by 8 give the
    unscaled trajectory); .optimizers lists the sub-optimizers; learning_rate raises."""
    opts_ns = keras.optimizers
    sgd_o, adam_o = {"momentum": 0.875}, dict(ADAM)
    sgd = opts_ns.SGD(learning_rate=0.125, **sgd_o)
    adam = opts_ns.Adam(learning_rate=0.015625, **adam_o)
    scale = 1.0
    if route == "callable":
        multi = opts_ns.MultiOptimizer(lambda v: adam if v.path.startswith("enc/") else sgd)
    elif route == "exact-key":  # the exact key wins over the pattern that also matches it
        multi = opts_ns.MultiOptimizer(opts_ns.OptimizerMap(adam, {"enc/kernel": sgd, "enc/.*": adam}))
    else:
        multi = opts_ns.MultiOptimizer(opts_ns.OptimizerMap(default_optimizer=sgd, optimizer_map={"enc/.*": adam}),
                                 loss_scale_factor=8.0 if route == "loss_scale_factor" else None)
        scale = 8.0 if route == "loss_scale_factor" else 1.0
    data = ref.problem(MULTI_SHAPES)
    variables = _scoped_variables(keras, data)
    paths = [v.path for v in variables]
    assert paths == ["enc/kernel", "enc/bias", "dec_kernel"], f"variable paths {paths}"
    assigned = (["SGD", "Adam", "Adam"] if route == "exact-key" else ["Adam", "Adam", "SGD"])
    history = []
    for i in range(1, STEPS + 1):
        grads = [keras.ops.convert_to_tensor(ref.gradient(v.numpy(), d, i) * scale, dtype="float64")
                 for v, d in zip(variables, data)]
        multi.apply_gradients(zip(grads, variables))
        history.append([v.numpy().copy() for v in variables])
    for j, (name, d) in enumerate(zip(assigned, data)):
        opts = sgd_o if name == "SGD" else adam_o
        lr = 0.125 if name == "SGD" else 0.015625
        want, _ = ref.reference_run(name, [d], opts, {"learning_rate": lr}, STEPS)
        compare_history(name, [[h[j]] for h in history], want,
                        f"MultiOptimizer[{route}]: {paths[j]} (routed to {name})")
    assert {type(o).__name__ for o in multi.optimizers} == {"SGD", "Adam"}, (
        f"MultiOptimizer.optimizers lists {[type(o).__name__ for o in multi.optimizers]}, not the SGD and Adam given")
    with pytest.raises(AttributeError):
        _ = multi.learning_rate
    evidence.covers("MultiOptimizer")
    evidence.covers(f"MultiOptimizer.{route}")


@pytest.mark.claim(UPDATE)
def test_keras_optimizer_map_lookup_follows_its_docstring(keras):
    """OptimizerMap.__getitem__'s docstring example: an exact key first, else the one pattern
    that re.fullmatch-es the key, else default_optimizer; a key matching two patterns raises
    ValueError."""
    opts_ns = keras.optimizers
    adam, sgd, rms = opts_ns.Adam(), opts_ns.SGD(), opts_ns.RMSprop()
    m = opts_ns.OptimizerMap(default_optimizer=rms)
    m["encoder/layer_0/dense"] = adam
    m["encoder/.*"] = sgd
    m["decoder"] = adam
    got = {k: m[k] for k in ("decoder", "encoder/layer_0/dense", "encoder/layer_0/attention/query",
                             "decoder/layer_0/dense", "encoder")}
    want = {"decoder": adam, "encoder/layer_0/dense": adam, "encoder/layer_0/attention/query": sgd,
            "decoder/layer_0/dense": rms, "encoder": rms}
    wrong = {k: type(v).__name__ for k, v in got.items() if v is not want[k]}
    assert not wrong, f"OptimizerMap lookups {wrong}, should be {({k: type(want[k]).__name__ for k in wrong})}"
    m["enc.*"] = rms
    with pytest.raises(ValueError):
        m["encoder/x"]  # fullmatch-ed by both "encoder/.*" and "enc.*"
    evidence.covers("OptimizerMap")


# ----------------------------------------------------------------- a user Optimizer subclass


def _user_sgd_class(keras):
    """The keras.optimizers.Optimizer docstring's example subclass (build + update_step +
    get_config), its momentum dyadic (0.875 for the example's 0.9), a keyword of __init__, and its
    get_config without the example's self.nesterov, which the example never sets."""
    ops = keras.ops

    class UserSGD(keras.optimizers.Optimizer):
        def __init__(self, momentum=0.875, **kwargs):  # the example's __init__ takes no momentum, which
            super().__init__(**kwargs)                  # its get_config writes: from_config would fail
            self.momentum = momentum

        def build(self, variables):
            super().build(variables)
            self.momentums = []
            for variable in variables:
                self.momentums.append(self.add_variable_from_reference(reference_variable=variable, name="momentum"))

        def update_step(self, gradient, variable, learning_rate):
            learning_rate = ops.cast(learning_rate, variable.dtype)
            gradient = ops.cast(gradient, variable.dtype)
            m = self.momentums[self._get_variable_index(variable)]
            self.assign(m, ops.subtract(ops.multiply(m, ops.cast(self.momentum, variable.dtype)),
                                        ops.multiply(gradient, learning_rate)))
            self.assign_add(variable, m)

        def get_config(self):
            return super().get_config() | {"momentum": self.momentum}

    return UserSGD


USER_FACTORS: dict[str, list[Any]] = {"learning_rate": [0.125, "schedule"],
                                      "clip": [None, ("clipnorm", 0.5), ("global_clipnorm", 0.5), ("clipvalue", 0.375)],
                                      "weight_decay": [None, 0.0625], "gradient_accumulation_steps": [None, 2],
                                      "call": ["apply_gradients", "apply"]}
USER_ROWS = ref.pairwise(USER_FACTORS)


@pytest.mark.claim(UPDATE)
@pytest.mark.parametrize("row", USER_ROWS, ids=[_case_id("UserSGD", r) for r in USER_ROWS])
def test_keras_optimizer_subclass_per_its_docstring(keras, row):
    """keras.optimizers.Optimizer: "inherit from this class and override build, update_step,
    get_config": the docstring's SGD-with-momentum subclass updates as keras.optimizers.SGD's
    documented momentum rule, through apply_gradients(zip(grads, vars)) or apply(grads, vars),
    with the base class's shared options (clipping, weight_decay, gradient_accumulation_steps, a
    learning-rate schedule) applied around its update_step; from_config(get_config()) gives back
    its class and momentum."""
    evidence.registers(FAMILY, "Optimizer subclass", [_case_id("UserSGD", r) for r in USER_ROWS], own=_case_id("UserSGD", row))
    _, base = _split("SGD", row)
    base.pop("call", None)
    kwargs = {k: v for k, v in base.items() if k != "learning_rate"}
    lr: Any = base["learning_rate"]
    if isinstance(lr, tuple):
        lr = keras.optimizers.schedules.ExponentialDecay(np.float64(lr[1]), decay_steps=lr[2], decay_rate=lr[3])
    opt = _user_sgd_class(keras)(learning_rate=lr, **kwargs)
    data = ref.problem(SHAPES)
    variables = [keras.Variable(np.array(d["theta0"]), dtype="float64") for d in data]
    got = []
    for i in range(1, STEPS + 1):
        grads = [keras.ops.convert_to_tensor(ref.gradient(v.numpy(), d, i), dtype="float64")
                 for v, d in zip(variables, data)]
        if row["call"] == "apply":
            opt.apply(grads, variables)
        else:
            opt.apply_gradients(zip(grads, variables))
        got.append([v.numpy().copy() for v in variables])
    want, _ = ref.reference_run("SGD", data, {"momentum": 0.875}, base, STEPS)
    compare_history("SGD", got, want, _case_id("UserSGD", row))
    twin = type(opt).from_config(opt.get_config())
    assert type(twin) is type(opt) and twin.get_config() == opt.get_config(), (
        f"from_config(get_config()) of the subclass gave {type(twin).__name__} with {twin.get_config()}")
    evidence.covers("Optimizer.subclass")
    evidence.covers(f"Optimizer.{row['call']}")
    for k in SHARED_MODES & set(base):
        evidence.covers(k)
    if isinstance(base["learning_rate"], tuple):
        evidence.covers("learning_rate.schedule")
    evidence.visits(FAMILY, "Optimizer subclass", _case_id("UserSGD", row))


# ----------------------------------------------------------------- keras.optimizers.get

GET_NAMES = [*(i.name for i in INFOS), *(i.name for i in NEW_INFOS)]


@pytest.mark.claim(CONFIG)
@pytest.mark.parametrize("name", GET_NAMES)
def test_keras_optimizers_get_by_name_config_and_instance(keras, name):
    """keras.optimizers.get(identifier): "String: name of an optimizer", "Dictionary:
    configuration dictionary", "Keras Optimizer instance (it will be returned unchanged)", returns
    "A Keras Optimizer instance": the class name and its lower-case form give an instance of the
    class (with the class's default config); serialize(opt) and {"class_name", "config"} give one
    with opt's config; an instance comes back as itself."""
    cls = getattr(keras.optimizers, name)
    problems = []
    default = cls().get_config()
    original = build(keras, name, BY_NAME[name].fixed, {"learning_rate": 0.125})
    config = original.get_config()
    for how, ident, want_config in ((repr(name), name, default), (repr(name.lower()), name.lower(), default),
                                    ("serialize(opt)", keras.optimizers.serialize(original), config),
                                    ("{class_name, config}", {"class_name": name, "config": config}, config)):
        try:
            got = keras.optimizers.get(ident)
        except Exception as exc:  # a documented identifier that raises is a violation, listed with the rest
            problems.append(f"get({how}) raised {type(exc).__name__}: {str(exc).splitlines()[0]:.80}")
            continue
        if type(got) is not cls:
            problems.append(f"get({how}) returned {type(got).__name__}")
        elif {k: v for k, v in got.get_config().items() if k != "name"} != {
                k: v for k, v in want_config.items() if k != "name"}:
            problems.append(f"get({how}) has config {got.get_config()}, expected {want_config}")
    if keras.optimizers.get(original) is not original:
        problems.append("get(instance) did not return the instance unchanged")
    assert not problems, f"{name}: " + "; ".join(problems)
    evidence.covers("get")


@pytest.mark.claim(UPDATE)
def test_keras_optimizer_base_class_is_abstract(keras):
    """keras.optimizers.Optimizer is the "Abstract optimizer base class" whose update_step a
    subclass implements: the base class itself constructs (its shared arguments) but refuses to
    update a variable (NotImplementedError), and leaves the variable as it was."""
    opt = keras.optimizers.Optimizer(learning_rate=0.125)
    v = keras.Variable(np.array([1.0, -2.0]), dtype="float64")
    with pytest.raises(NotImplementedError):
        opt.apply_gradients([(keras.ops.convert_to_tensor(np.array([0.5, 0.5]), dtype="float64"), v)])
    assert np.array_equal(v.numpy(), [1.0, -2.0]), f"the abstract base class moved the variable to {v.numpy()}"
    evidence.covers("Optimizer.subclass")
