"""A user's own model (--dl-model) through the model.* claims: one verb set per framework,
the error model, export formats and distributed steps.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..checks.usermodel import (
    BITWISE_FORMATS,
    FORMAT_REFUSALS,
    KERAS_FORMATS,
    LR,
    NO_NAMED_STATE,
    REFUSED,
    TORCH_FORMATS,
    KerasOps,
    TorchOps,
    WrapFailed,
    adapter_for,
    assert_close_tree,
    assert_same_step,
    dtype_scope,
    error_terms,
    f_error_float32,
    float32_gradient_rtol,
    forward_tolerance,
    input_names,
    input_rounding_f_error,
    keras_single_step,
    keras_strategy_step,
    load_and_run,
    reference_diagnosis,
    refusal_reason,
    tf_mw_step,
    torch_rank_step,
    torch_single_step,
    wrap_verdict,
    write_artifact,
)
from ..checks.usermodel import (
    _keras_leaves as keras_leaves,
)
from ..checks.usermodel import (
    _np as to_numpy,
)

__all__ = [
    "BITWISE_FORMATS",
    "FORMAT_REFUSALS",
    "KERAS_FORMATS",
    "LR",
    "NO_NAMED_STATE",
    "REFUSED",
    "TORCH_FORMATS",
    "KerasOps",
    "TorchOps",
    "WrapFailed",
    "adapter_for",
    "assert_close_tree",
    "assert_same_step",
    "dtype_scope",
    "error_terms",
    "f_error_float32",
    "float32_gradient_rtol",
    "forward_tolerance",
    "input_names",
    "input_rounding_f_error",
    "keras_leaves",
    "keras_single_step",
    "keras_strategy_step",
    "load_and_run",
    "reference_diagnosis",
    "refusal_reason",
    "tf_mw_step",
    "to_numpy",
    "torch_rank_step",
    "torch_single_step",
    "wrap_verdict",
    "write_artifact",
]
