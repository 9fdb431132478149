"""Small helpers the mutants patch with (no framework import here)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def wrap(owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace ``owner.name`` by ``make(original)``, keeping the original's name and doc."""
    original = getattr(owner, name)
    replacement = make(original)
    if callable(original) and not isinstance(original, type):
        replacement = functools.wraps(original)(replacement)
    setattr(owner, name, replacement)


def default(fn: Callable[..., Any], key: str, value: Any) -> Callable[..., Any]:
    """``fn`` with keyword ``key`` forced to ``value`` whatever the caller passed."""

    def call(*args: Any, **kwargs: Any) -> Any:
        kwargs[key] = value
        return fn(*args, **kwargs)

    return call
