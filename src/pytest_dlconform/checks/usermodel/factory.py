"""A user's model factory, named ``module:factory``: found, called and its result checked.

Here, below the oracles, because the oracles that run a user's model in another process
(export, distributed ranks) build it there from its name; :mod:`pytest_dlconform.run.usermodels`
(registration, validation) names these too. Importing this module imports no framework.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

FIX_RETURN = ("return pytest_dlconform.api.usermodels.UserModel(model, make_inputs[, make_targets][, loss]) "
              "or the tuple (model, make_inputs)")


class ModelError(ValueError):
    """A factory that cannot be used; the message is one line naming the factory and the fix."""


@dataclass
class UserModel:
    """What a factory returns (see :mod:`pytest_dlconform.run.usermodels`)."""

    model: Any
    make_inputs: Callable[[int], Any]
    make_targets: Callable[[int], Any] | None = None
    loss: Callable[[Any, Any], Any] | None = None


def resolve(ref: str) -> Callable[..., Any]:
    """The factory named by ``module:attr``; the current directory is importable, as with ``python -m``."""
    module_name, _, attr = ref.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ModelError(f"module {module_name!r} does not import ({type(exc).__name__}: {_line(exc)}); "
                         "make it importable from the current directory or install its package") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ModelError(f"module {module_name!r} has no attribute {attr!r}; name a factory function defined in it")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ModelError(f"{attr!r} is a {type(obj).__name__}, not callable; "
                         f"name a function that builds the model and would {FIX_RETURN}")
    return obj


def call_factory(factory: Callable[..., Any], *, device: str, dtype: str) -> UserModel:
    """Call the factory with the ``device``/``dtype`` keywords it accepts; check the result's shape."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = MappingProxyType({})  # a builtin or C callable: call it without arguments
    wide = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in (("device", device), ("dtype", dtype)) if wide or k in params}
    try:
        made = factory(**kwargs)
    except Exception as exc:
        raise ModelError(f"the factory raised {type(exc).__name__}: {_line(exc)}; fix the factory "
                         f"(it was called with {kwargs or 'no arguments'})") from None
    return as_user_model(made)


def as_user_model(made: Any) -> UserModel:
    if isinstance(made, UserModel):
        um = made
    elif isinstance(made, tuple) and len(made) in (2, 3, 4):
        um = UserModel(*made)
    else:
        raise ModelError(f"the factory returned {_kind(made)}; {FIX_RETURN}")
    framework_of(um.model)
    for name in ("make_inputs", "make_targets"):
        fn = getattr(um, name)
        if fn is not None and not callable(fn):
            raise ModelError(f"{name} is {_kind(fn)}, not callable; pass a function seed -> arrays")
    if um.loss is not None and not callable(um.loss):
        raise ModelError(f"loss is {_kind(um.loss)}, not callable; pass a function (outputs, targets) -> scalar loss")
    return um


def framework_of(model: Any) -> str:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        return "torch"
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(model, keras.Model):
        return "tensorflow"
    raise ModelError(f"the model is {_kind(model)}, not a torch.nn.Module or a keras.Model; {FIX_RETURN}")


def _kind(obj: Any) -> str:
    return "None" if obj is None else f"a {type(obj).__module__}.{type(obj).__qualname__}"


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "") or "(no message)"
