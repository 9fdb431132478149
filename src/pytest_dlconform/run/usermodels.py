"""Your own model through the same oracles: registering, loading and validating model factories.

A *factory* is a callable named ``module:factory`` by ``--dl-model`` (repeatable), the
``DLCONFORM_MODEL`` environment variable (a comma list), the ``dl_model`` ini key (one per
line) or an entry point in the :data:`ENTRY_POINT_GROUP` group of an installed package.
It returns a :class:`UserModel` (or the tuple ``(model, make_inputs[, make_targets])``):

- ``model``: a ``torch.nn.Module`` or a Keras 3 model;
- ``make_inputs(seed)``: the example inputs, an array or a tuple of arrays (numpy or the
  framework's tensors), batch first; torch calls ``model(*inputs)``, Keras ``model(inputs)`` (a list when there are several);
- ``make_targets(seed)``: optional, the targets of the training claims (seeded training,
  compile, autocast, distributed step, loss scaling); without it they are drawn from a
  standard normal of the first output's shape;
- ``loss(outputs, targets)``: optional, the training loss, framework-native: ``outputs`` what
  the model returned (a tensor, tuple or mapping), ``targets`` ``make_targets(seed)`` as a
  tensor (floating targets in the first output's dtype, integer ones, class labels, kept
  integer); it returns a scalar, the mean over the batch's rows. Without it the loss is
  ``mean over rows of sum((first output - target)**2)`` and the targets must have the first
  output's shape.

A factory may take ``device`` (the framework's device name, e.g. ``"cpu"``, ``"cuda:0"``,
``"/GPU:0"``) and ``dtype`` (``"float32"`` or ``"float64"``) keyword arguments; the
signature is inspected and only what it accepts is passed.

Validation (:func:`validate`) runs once per run, in the controller, before any test: one
fresh interpreter imports every factory, calls it, checks what came back and calls the
model on its own example inputs. The fresh interpreter keeps this process free of
framework state (TensorFlow's logical devices are configured after collection); what it
learns (each model's framework) travels to xdist workers in :data:`INFO_ENV`.

Importing this module imports no framework.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..checks.usermodel.factory import (  # noqa: F401 - a factory returns usermodels.UserModel
    FIX_RETURN,
    ModelError,
    UserModel,
    _kind,
    _line,
    as_user_model,
    call_factory,
    framework_of,
    resolve,
)

ENTRY_POINT_GROUP = "pytest_dlconform.models"
INFO_ENV = "DLCONFORM_MODEL_INFO"  # controller -> workers: {ref: framework}
NO_MODEL = "no model registered: pass --dl-model module:factory"
NO_MODEL_ID = "no-model"


@dataclass(frozen=True)
class Registered:
    ref: str  # 'module:factory'
    source: str  # where it was registered ("--dl-model", "entry point NAME of DIST")


# ---------------------------------------------------------------- registration


def registered(settings: Any) -> list[Registered]:
    """The models of this run: the option's, then the entry points', without duplicates."""
    source = settings.describe("model") if hasattr(settings, "describe") else "--dl-model"
    out = [Registered(ref, source) for ref in getattr(settings, "models", ())]
    from importlib import metadata

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", "?")
        if all(r.ref != ep.value for r in out):
            out.append(Registered(ep.value, f"entry point {ep.name!r} of {dist} (group {ENTRY_POINT_GROUP})"))
    return out


def _where(reg: Registered) -> str:
    return f"--dl-model {reg.ref!r} (from {reg.source})"


# ---------------------------------------------------------------- loading


# ---------------------------------------------------------------- example data


def example_inputs(um: UserModel, seed: int) -> list[Any]:
    """``make_inputs(seed)`` as a list of numpy arrays, batch first."""
    try:
        raw = um.make_inputs(seed)
    except Exception as exc:
        raise ModelError(f"make_inputs({seed}) raised {type(exc).__name__}: {_line(exc)}; fix make_inputs") from None
    items = list(raw) if isinstance(raw, (tuple, list)) else [raw]
    out = []
    for i, item in enumerate(items):
        arr = to_numpy(item)
        if arr is None or arr.dtype.kind not in "biuf" or arr.ndim == 0:
            raise ModelError(f"make_inputs({seed}) item {i} is {_kind(item)}; return arrays (numpy or tensors) with "
                             "a batch dimension first, one per positional argument of the model")
        out.append(arr)
    if not out:
        raise ModelError(f"make_inputs({seed}) returned no arrays; return one array per positional argument of the model")
    if len({a.shape[0] for a in out}) != 1:
        raise ModelError(f"make_inputs({seed}) returned batch sizes {[a.shape[0] for a in out]}; all inputs need the "
                         "same batch (first) dimension")
    return out


def to_numpy(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach"):  # torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.numpy()
    if hasattr(value, "numpy"):  # tf / keras
        return np.asarray(value.numpy())
    try:
        return np.asarray(value)
    except Exception:
        return None


def example_targets(um: UserModel, seed: int, first_output: Any) -> Any:
    """``make_targets(seed)``, or standard normal targets of the first output's shape. With the
    default loss the targets must have that shape (float64 here); with the model's own ``loss``
    any batch-first array goes (its dtype kind kept: integer class labels stay integer)."""
    import numpy as np

    shape = tuple(np.shape(first_output))
    if um.make_targets is None:
        return np.random.default_rng(seed + 7919).standard_normal(shape)
    try:
        y = to_numpy(um.make_targets(seed))
    except Exception as exc:
        raise ModelError(f"make_targets({seed}) raised {type(exc).__name__}: {_line(exc)}; fix make_targets") from None
    if um.loss is not None:
        if y is None or y.dtype.kind not in "biuf" or y.ndim == 0 or y.shape[0] != shape[0]:
            raise ModelError(f"make_targets({seed}) gave {_kind(y)} of shape {getattr(y, 'shape', None)}; with a loss "
                             f"of your own return an array with the batch ({shape[0]} rows) first")
        return y.astype(np.float64) if y.dtype.kind == "f" else y
    if y is None or tuple(y.shape) != shape:
        raise ModelError(f"make_targets({seed}) gave shape {getattr(y, 'shape', None)}, but the model's first output "
                         f"has shape {shape}; return regression targets of that shape (or give the factory a loss)")
    return y.astype(np.float64)


# ---------------------------------------------------------------- validation (up front)


def check_one(ref: str, seed: int = 0) -> dict[str, Any]:
    """Import, call and exercise one factory in this process; returns what it learned."""
    import numpy as np

    from ..checks import usermodel as ops

    um = call_factory(resolve(ref), device="cpu", dtype="float32")
    framework = framework_of(um.model)
    inputs = example_inputs(um, seed)
    try:
        outs = ops.adapter_for(framework).forward(um.model, inputs, training=False)
    except Exception as exc:
        shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in inputs)
        raise ModelError(f"the model rejects its example inputs ({shapes}) with {type(exc).__name__}: {_line(exc)}; "
                         "make make_inputs(seed) return what model(*inputs) accepts") from None
    if not outs:
        raise ModelError("the model's output holds no floating-point tensor; return a tensor, a tuple or a dict of them")
    targets = example_targets(um, seed, next(iter(outs.values())))
    if um.loss is not None:
        try:
            value = ops.adapter_for(framework).loss_value(um.model, inputs, targets, um.loss)
        except Exception as exc:
            raise ModelError(f"loss(outputs, targets) raised {type(exc).__name__}: {_line(exc)}; fix the loss "
                             "(outputs: what the model returns; targets: make_targets(seed) as a tensor)") from None
        if np.ndim(value) != 0 or not np.isfinite(value):
            raise ModelError(f"loss(outputs, targets) gave {np.shape(value)} {value if np.size(value) < 5 else ''}; "
                             "return one finite scalar, the mean over the batch's rows")
    return {"framework": framework}


def child_main(refs: Sequence[str]) -> dict[str, Any]:
    """Runs in the validation interpreter: every factory, each error as one line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    report: dict[str, Any] = {}
    for ref in refs:
        try:
            report[ref] = check_one(ref)
        except ModelError as exc:
            report[ref] = {"error": str(exc)}
    return report


def validate(settings: Any) -> None:
    """The controller's check of every registered model: pytest.UsageError on the first bad one."""
    import pytest

    regs = registered(settings)
    if not regs:
        os.environ.pop(INFO_ENV, None)
        return
    try:
        report = _check_in_child([r.ref for r in regs], float(getattr(settings, "timeout", 120.0)))
    except Exception as exc:
        raise pytest.UsageError(f"{_where(regs[0])}: checking the factories failed: {_line(exc)}") from None
    for reg in regs:
        found = report.get(reg.ref, {})
        if "error" in found:
            raise pytest.UsageError(f"{_where(reg)}: {found['error']}")
    os.environ[INFO_ENV] = json.dumps({r.ref: report[r.ref]["framework"] for r in regs})


def _check_in_child(refs: Sequence[str], timeout: float) -> dict[str, Any]:
    """:func:`child_main` in a fresh interpreter: building a model initialises its framework,
    which must not happen in a process whose frameworks are configured after collection."""
    from ..frameworks.fresh import run_python

    code = f"from pytest_dlconform.run.usermodels import child_main\nemit(child_main({list(refs)!r}))\n"
    return run_python(code, timeout=2 * timeout, cwd=os.getcwd(), env={"TF_CPP_MIN_LOG_LEVEL": "2"},
                      what="the interpreter checking the --dl-model factories")


def known_frameworks(settings: Any) -> dict[str, str]:
    """ref -> framework as the controller's validation found it (set in this process or inherited)."""
    try:
        info = json.loads(os.environ.get(INFO_ENV, "{}"))
    except ValueError:
        info = {}
    refs = [r.ref for r in registered(settings)]
    missing = [r for r in refs if r not in info]
    if missing:  # e.g. a worker started without the controller's environment: ask a fresh interpreter
        report = _check_in_child(missing, float(getattr(settings, "timeout", 120.0)))
        for ref in missing:
            if "error" in report[ref]:
                raise ModelError(f"--dl-model {ref!r}: {report[ref]['error']}")
            info[ref] = report[ref]["framework"]
    return {r: info[r] for r in refs}


# ---------------------------------------------------------------- what a model test gets (run/session/)

# The distribution strategies the model claims cover (step equivalence on 2 replicas/ranks).
MODEL_STRATEGIES = {"torch": ("ddp", "fsdp"), "tensorflow": ("mirrored", "multi-worker")}


@dataclass
class ModelHandle:
    """The ``dl_model`` fixture: a registered factory, its framework and the device to build on."""

    ref: str
    framework: str
    device_kind: str
    device: str  # the framework's device name
    timeout: float

    def build(self, dtype: str = "float32", *, seed: int | None = None) -> UserModel:
        """A fresh model from the factory (the framework seeded with ``seed`` first, if given),
        built with every global dtype knob of the framework set for ``dtype``
        (``checks.usermodel.dtype_scope``: Keras's dtype policy and floatx, so that
        ``keras.Input`` is float64 too in a float64 build; torch's default dtype). A caller
        that runs the model in that precision runs it in the same scope."""
        from ..checks import usermodel as ops

        ad = ops.adapter_for(self.framework)
        if seed is not None:
            ad.seed(seed)
        with ops.dtype_scope(self.framework, dtype):
            um = call_factory(resolve(self.ref), device=self.device, dtype=dtype)
        if framework_of(um.model) != self.framework:
            raise ModelError(f"--dl-model {self.ref!r} built a {framework_of(um.model)} model now, "
                             f"a {self.framework} one before; a factory must always build the same kind")
        return um

    def describe(self) -> str:
        return f"{self.ref} ({self.framework}, {self.device})"


def replace(um: UserModel, **changes: Any) -> UserModel:
    return dataclasses.replace(um, **changes)
