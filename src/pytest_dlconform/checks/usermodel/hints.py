"""Failure hints: where a model claim's symptom has a common cause in the model's code, one
line naming it and the fix, appended to the failure message (``hint: ...``).

Each finder looks for one cause and returns the hint lines it found (none when the cause is
absent, so a hint never guesses):

- :func:`untracked_state`: tensors kept as plain attributes outside the model's state (a
  torch tensor attribute that should be a buffer, a raw ``tf.Variable`` Keras does not
  track): no state_dict, checkpoint or float64 rebuild carries them;
- :func:`batch_dependence`: inference-mode outputs that depend on the batch's composition
  (batch statistics in eval);
- :func:`config_roundtrip`: a Keras layer that ``from_config(get_config())`` does not rebuild
  (raises, or an ``__init__`` argument comes back other);
- :data:`UNSEEDED_BUILD` / :data:`UNSEEDED_FORWARD`: two builds or runs under one seed differ.

:func:`hinting` wraps a claim's checks: on an AssertionError it runs the finders and appends
what they found to the exception's message; a finder that raises adds nothing.

Importing this module imports no framework.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

PREFIX = "hint: "
UNSEEDED_BUILD = (PREFIX + "two builds under the same seed differ: the factory draws from a random generator the "
                  "plugin does not seed (numpy.random, random, a generator of its own); draw the weights from the "
                  "framework's generator (torch.manual_seed / keras.utils.set_random_seed reach it) or load them")
UNSEEDED_FORWARD = (PREFIX + "the forward pass differs under the same framework seed: it draws from a random "
                    "generator the framework seed does not reach (numpy.random, random, a generator of its own); "
                    "draw from the framework's generator (torch.rand*, keras.random with a SeedGenerator)")


def untracked_state(model: Any, framework: str) -> list[str]:
    """One hint per tensor the model keeps as an attribute outside its state (none: [])."""
    found = _torch_untracked(model) if framework == "torch" else _keras_untracked(model)
    if framework == "torch":
        return [f"{PREFIX}the model keeps tensor {name!r} outside its state_dict; register it with register_buffer "
                "(or make it an nn.Parameter if it is trained)" for name in found]
    return [f"{PREFIX}the model keeps tf.Variable {name!r} outside its weights (Keras tracks only variables made "
            "with add_weight or keras.Variable); create it with self.add_weight" for name in found]


def untracked_names(model: Any, framework: str) -> list[str]:
    """The names of the tensors :func:`untracked_state` finds."""
    return _torch_untracked(model) if framework == "torch" else _keras_untracked(model)


def _torch_untracked(model: Any) -> list[str]:
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    known = {id(t) for t in model.parameters()} | {id(t) for t in model.buffers()}
    out = []
    for prefix, module in model.named_modules():
        for attr, value in _direct_first(vars(module)):
            for name, t in _tensors(attr, value, lambda v: isinstance(v, torch.Tensor)):
                if id(t) not in known:
                    known.add(id(t))
                    out.append(f"{prefix}.{name}" if prefix else name)
    return out


def _keras_untracked(model: Any) -> list[str]:
    tf, keras = sys.modules.get("tensorflow"), sys.modules.get("keras")
    if tf is None or keras is None:
        return []
    tracked: set[int] = set()
    for v in model.variables:
        tracked |= {id(v), id(getattr(v, "value", v))}
    layers = [model, *model._flatten_layers(include_self=False)] if hasattr(model, "_flatten_layers") else [model]
    out = []
    for layer in layers:
        for attr, value in _direct_first(vars(layer)):
            for name, v in _tensors(attr, value, lambda x: isinstance(x, (tf.Variable, keras.Variable))):
                if id(v) not in tracked:
                    tracked.add(id(v))
                    out.append(f"{layer.name}.{name}")
    return out


def _direct_first(attrs: dict[str, Any]) -> list[tuple[str, Any]]:
    """An object's attributes (no dunders), containers after the rest: a tensor held both
    directly and in a container is named by its attribute."""
    items = [(k, v) for k, v in attrs.items() if not k.startswith("__")]
    return sorted(items, key=lambda kv: isinstance(kv[1], (list, tuple, dict)))


def _tensors(attr: str, value: Any, is_tensor: Callable[[Any], bool]) -> Iterator[tuple[str, Any]]:
    """The attribute itself, or the items of a list/tuple/dict held in a public attribute (one
    level; private containers are the framework's own bookkeeping, e.g. TensorFlow's
    ``_self_unconditional_dependency_names``)."""
    if is_tensor(value):
        yield attr, value
    elif attr.startswith("_"):
        return
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if is_tensor(v):
                yield f"{attr}[{i}]", v
    elif isinstance(value, dict):
        for k, v in value.items():
            if is_tensor(v):
                yield f"{attr}[{k!r}]", v


def batch_dependence(fw: Any, model: Any, inputs: Sequence[np.ndarray]) -> list[str]:
    """A hint when a row's inference-mode outputs change with the other rows of its batch:
    the first half of the batch run alone against the same rows of the whole batch."""
    rows = len(inputs[0])
    if rows < 2:
        return []
    half = rows // 2
    whole = fw.forward(model, inputs, training=False)
    part = fw.forward(model, [a[:half] for a in inputs], training=False)
    for key, value in whole.items():
        a = np.asarray(value, np.float64)
        if key not in part or a.ndim == 0 or a.shape[0] != rows:
            continue
        b = np.asarray(part[key], np.float64)
        scale = float(np.max(np.abs(a[:half]))) if a[:half].size else 0.0
        if b.shape == a[:half].shape and float(np.max(np.abs(b - a[:half]), initial=0.0)) > 1e-3 * max(scale, 1e-30):
            return [f"{PREFIX}in inference mode the outputs of a row depend on the other rows of its batch (output "
                    f"{key!r} of the first {half} rows changes when they run alone): a layer uses batch statistics "
                    "with training=False (batch normalisation called in training mode, x.mean(dim=0)); use running "
                    "statistics in inference mode"]
    return []


def config_roundtrip(model: Any) -> list[str]:
    """A hint per custom Keras layer that ``from_config(get_config())`` does not rebuild: it
    raises, or an ``__init__`` argument kept as an attribute of the same name comes back other."""
    out = []
    layers = model._flatten_layers(include_self=False) if hasattr(model, "_flatten_layers") else []
    for layer in layers:
        cls = type(layer)
        if cls.__module__.startswith("keras"):
            continue
        where = f"layer {layer.name!r} ({cls.__qualname__})"
        try:
            new = cls.from_config(layer.get_config())
        except Exception as exc:
            text = " ".join(str(exc).split())[:160]
            out.append(f"{PREFIX}{where} does not rebuild from its get_config() ({type(exc).__name__}: {text}); "
                       "return every __init__ argument from get_config")
            continue
        try:
            params = [p for p in inspect.signature(cls.__init__).parameters.values()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"]
        except (TypeError, ValueError):
            params = []
        for p in params:
            mine, theirs = getattr(layer, p.name, None), getattr(new, p.name, None)
            if isinstance(mine, (bool, int, float, str, tuple)) and mine != theirs:
                out.append(f"{PREFIX}{where} rebuilt by from_config(get_config()) has {p.name}={theirs!r}, the "
                           f"original {mine!r}; add {p.name!r} to its get_config()")
    return out


def append(exc: BaseException, lines: Sequence[str]) -> None:
    """``lines`` appended to the exception's message, one per line (the same exception object)."""
    if not lines:
        return
    message = str(exc.args[0]) if exc.args else str(exc)
    new = [line for line in dict.fromkeys(lines) if line not in message]
    if new:
        exc.args = ("\n".join([message, *new]), *exc.args[1:])


@contextlib.contextmanager
def hinting(*finders: Callable[[], Sequence[str]]) -> Iterator[None]:
    """On an AssertionError in the block: every finder's hints appended to its message, then re-raised."""
    try:
        yield
    except AssertionError as exc:
        lines: list[str] = []
        for find in finders:
            try:
                lines += list(find())
            except Exception:  # a finder that cannot look adds nothing; the failure stands as it is
                continue
        append(exc, lines)
        raise
