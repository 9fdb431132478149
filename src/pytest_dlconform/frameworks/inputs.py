"""Hypothesis search strategies shared by the suites (not distribution strategies),
and example budgets that scale with ``--dl-profile``."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from ..core.budgets import ATTR as _BUDGET_ATTR
from ..core.budgets import scaled


def budget(ci_examples: int) -> Any:
    """``@budget(n)``: n examples in the ci profile, scaled for quick and thorough.

    Expensive properties use fewer examples than the profile's default; the ratio to the
    ci profile is kept, so a thorough run still explores ten times more. The scaling
    happens per claim test at collection (:mod:`pytest_dlconform.core.budgets`), never through
    hypothesis's global default, so the host project's settings stay its own.
    """
    declared = settings(max_examples=scaled(max(1, int(ci_examples))))  # scaled now inside a claim test
    setattr(declared, _BUDGET_ATTR, max(1, int(ci_examples)))  # settings allow private attributes
    return declared


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 5) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def float_arrays(shape: tuple[int, ...], *, low: float = -3.0, high: float = 3.0) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays with values from a seed, so examples shrink well and stay small in reports."""
    return st.integers(0, 2**32 - 1).map(lambda seed: np.random.default_rng(seed).uniform(low, high, size=shape))


def float_dtypes(include_half: bool = False) -> st.SearchStrategy[str]:
    names = ["float32", "float64"] + (["bfloat16"] if include_half else [])
    return st.sampled_from(names)
