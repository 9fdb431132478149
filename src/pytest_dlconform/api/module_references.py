"""float64 numpy references of modules: batch norm statistics, the seed's GAN generator,
EarlyStopping's documented rule.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..checks.module_references import (
    BatchNormState,
    bn_moments,
    bn_normalise,
    early_stopping,
    generator_forward,
    keras_moving_update,
    torch_running_update,
)

__all__ = [
    "BatchNormState",
    "bn_moments",
    "bn_normalise",
    "early_stopping",
    "generator_forward",
    "keras_moving_update",
    "torch_running_update",
]
