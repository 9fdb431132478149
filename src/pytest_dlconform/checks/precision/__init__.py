"""Mixed-precision oracles: torch autocast's documented op lists (:mod:`.autocast`) and the
dynamic loss-scale state machine (:mod:`.loss_scale`); this package re-exports both, with
Keras's global dtype policy for a block (:func:`keras_policy`).

Importing this package imports no framework.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from ...frameworks.keras import dtype_policy
from .autocast import (
    ATEN,
    AUTOCAST_LISTS,
    COMPOSITE,
    DISPATCH_KEYS,
    ERROR,
    FLOAT32,
    LOWER,
    NO_LOW_KERNEL,
    OPS,
    PROMOTE,
    UNLISTED,
    WIDTH,
    Arrays,
    AutocastMismatch,
    AutocastOp,
    aten_name,
    autocast_mismatches,
    device_of,
    expected_dtype,
    input_plans,
    low_dtypes,
    op_class,
    registered_autocast_kernel,
    registration_mismatches,
)
from .loss_scale import DynamicScale, ScaleMismatch, check_scale, scaled_gradient


def keras_policy(keras: Any, name: str) -> AbstractContextManager[Any]:
    """Set Keras's global dtype policy for a block and restore the previous one after it
    (:func:`frameworks.keras.dtype_policy`)."""
    return dtype_policy(name, keras)


__all__ = [
    "ATEN", "AUTOCAST_LISTS", "COMPOSITE", "DISPATCH_KEYS", "ERROR", "FLOAT32", "LOWER", "NO_LOW_KERNEL", "OPS",
    "PROMOTE", "UNLISTED", "WIDTH", "Arrays", "AutocastMismatch", "AutocastOp", "DynamicScale", "ScaleMismatch",
    "aten_name", "autocast_mismatches", "check_scale", "device_of", "expected_dtype", "input_plans",
    "keras_policy", "low_dtypes", "op_class", "registered_autocast_kernel", "registration_mismatches",
    "scaled_gradient",
]
