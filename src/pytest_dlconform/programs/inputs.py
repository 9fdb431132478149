"""A program's input values: drawn from a seed and one regime per input.

Every value lies in ``[-INPUT_MAX, INPUT_MAX]``, and inputs read by piecewise ops keep
:data:`~.core.KINK_MARGIN` away from each kink, so finite differences stay valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from .core import INPUT_MAX, KINK_MARGIN, Array, InputRecipe, ProgramLike, Shape

#: How input values are drawn: each regime stresses a different region of the ops.
REGIMES: Final = ("unit", "wide", "large", "tiny", "mixed", "dyadic")


def _regime_values(rng: np.random.Generator, regime: str, shape: Shape) -> Array:
    sign = rng.choice([-1.0, 1.0], size=shape)
    if regime == "unit":
        return rng.standard_normal(shape)
    if regime == "wide":
        return 8.0 * rng.standard_normal(shape)
    if regime == "large":  # tanh and sigmoid saturate (float64 included)
        return sign * rng.uniform(16.0, INPUT_MAX, size=shape)
    if regime == "tiny":
        return sign * 10.0 ** rng.uniform(-20.0, -4.0, size=shape)
    if regime == "dyadic":  # exact in every float format, with exact zeros
        return rng.integers(-16, 17, size=shape) / 8.0
    if regime == "mixed":
        parts = [_regime_values(rng, r, shape) for r in ("unit", "large", "tiny")] + [np.zeros(shape)]
        return np.choose(rng.integers(0, 4, size=shape), parts)
    raise ValueError(f"unknown regime {regime!r}; choose one of {REGIMES}")


def _avoid(x: Array, kinks: Sequence[float]) -> Array:
    for k in kinks:
        d = x - k
        x = np.where(np.abs(d) < KINK_MARGIN, k + np.where(d >= 0, KINK_MARGIN, -KINK_MARGIN), x)
    return x


def make_inputs(program: ProgramLike, recipe: InputRecipe) -> list[Array]:
    """The inputs a recipe describes: float64, within INPUT_MAX, away from kinks."""
    if len(recipe.regimes) != program.n_inputs:
        raise ValueError(f"the recipe has {len(recipe.regimes)} regimes for {program.n_inputs} inputs")
    rng = np.random.default_rng(recipe.seed)
    kinks = program.kinks()
    out = []
    for i, (shape, regime) in enumerate(zip(program.input_shapes, recipe.regimes)):
        x = np.clip(np.asarray(_regime_values(rng, regime, shape), dtype=np.float64), -INPUT_MAX, INPUT_MAX)
        out.append(np.asarray(_avoid(x, kinks.get(i, ())), dtype=np.float64))  # 0-d stays an array
    return out
