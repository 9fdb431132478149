"""TFX: the pipeline's examples, Evaluator metrics, the pushed model and their oracles.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..checks.tfx import (
    LABEL,
    ROW_ID,
    blessed,
    check_evaluator_metrics,
    check_serving_matches_training,
    check_z_scores,
    evaluator_metrics,
    examples,
    parse,
    pushed_model,
    write_csv,
)

__all__ = [
    "LABEL",
    "ROW_ID",
    "blessed",
    "check_evaluator_metrics",
    "check_serving_matches_training",
    "check_z_scores",
    "evaluator_metrics",
    "examples",
    "parse",
    "pushed_model",
    "write_csv",
]
