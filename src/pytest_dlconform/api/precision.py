"""Mixed precision: torch autocast's documented op lists and their oracles, the dynamic
loss-scale state machine, Keras dtype policies.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..checks.precision import (
    DISPATCH_KEYS,
    OPS,
    AutocastMismatch,
    DynamicScale,
    autocast_autograd,
    autocast_mismatches,
    check_scale,
    device_of,
    keras_policy,
    low_dtypes,
    op_class,
    registration_mismatches,
    scaled_gradient,
)

__all__ = [
    "DISPATCH_KEYS",
    "OPS",
    "AutocastMismatch",
    "DynamicScale",
    "autocast_autograd",
    "autocast_mismatches",
    "check_scale",
    "device_of",
    "keras_policy",
    "low_dtypes",
    "op_class",
    "registration_mismatches",
    "scaled_gradient",
]
