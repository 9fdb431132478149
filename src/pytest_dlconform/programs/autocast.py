"""How the autocast check calls an op's torch function: the call and its input makers.

An op record's :class:`~.records.Autocast` line carries one :class:`AutocastCall`; the
torch functions the op library has no op for keep theirs in ``checks.precision.autocast``.
The makers draw float64 arrays (floating inputs, cast to each dtype the check tries) and
integer arrays (class labels, never cast) of side ``n`` from a numpy generator.

Importing this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Arrays = list[np.ndarray]
Maker = Callable[[np.random.Generator, int], np.ndarray]
Inputs = Callable[[np.random.Generator, int], Arrays]


@dataclass(frozen=True)
class AutocastCall:
    """``fn(torch, tensors) -> tensor`` on the arrays ``inputs(rng, n)`` draws."""

    fn: Callable[[Any, list[Any]], Any]
    inputs: Inputs
    differentiable: bool = True


def normal(*shape: int) -> Maker:
    """Standard normal entries; a 0 in ``shape`` stands for ``n``."""
    return lambda rng, n: rng.normal(size=tuple(n if s == 0 else s for s in shape))


def gen(*parts: Maker) -> Inputs:
    return lambda rng, n: [p(rng, n) for p in parts]


def functional(name: str) -> Callable[[Any], Any]:
    """torch.nn.functional.<name>, looked up on the torch module the check passes."""
    return lambda torch: getattr(torch.nn.functional, name)


def prob(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(0.05, 0.95, size=(n, n))


def positive(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, size=(n, n))


def spd(rng: np.random.Generator, n: int) -> np.ndarray:
    a = rng.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def log_probs(rng: np.random.Generator, n: int) -> np.ndarray:
    z = rng.normal(size=(n, n))
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def labels(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, n, size=n)


def signs(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.choice([-1.0, 1.0], size=n)


M, V, B3 = normal(0, 0), normal(0), normal(2, 0, 0)
IMG1, IMG2, IMG3 = normal(1, 2, 0), normal(1, 2, 0, 0), normal(1, 2, 4, 4, 0)


def call(fn: Callable[[Any, list[Any]], Any], *parts: Maker) -> AutocastCall:
    """The call ``fn`` on one input per maker."""
    return AutocastCall(fn, gen(*parts))


def method(name: str, *parts: Maker) -> AutocastCall:
    """``torch.<name>(*inputs)``."""
    return AutocastCall(lambda t, x: getattr(t, name)(*x), gen(*parts))


def function(name: str, *parts: Maker) -> AutocastCall:
    """``torch.nn.functional.<name>(*inputs)``."""
    return AutocastCall(lambda t, x: functional(name)(t)(*x), gen(*parts))
