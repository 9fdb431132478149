"""The model claims' plumbing for a user's model (``--dl-model``), one module per role; this
package re-exports them, as the suites use it (``from pytest_dlconform.checks import
usermodel as ops``).

- :mod:`.adapters`: the same verbs for a torch module and a Keras model (call, parameters,
  state, gradients, one SGD step);
- :mod:`.tolerances`: the error model of unknown code and the comparisons built on it;
- :mod:`.artifacts`: export formats written, loaded with their own loaders and run;
- :mod:`.distributed`: one training step in each rank, and the single-device oracle step;
- :mod:`.refusals`: the documented refusals that make a claim "not applicable" (one-line reasons);
- :mod:`.hints`: one-line failure hints where a symptom has a common cause in the model's code.

Importing this package imports no framework.
"""

from __future__ import annotations

from . import hints
from .adapters import (
    LR,
    KerasOps,
    TorchOps,
    _floating,
    _np,
    _torch_device,
    _torch_float,
    adapter_for,
    dtype_scope,
    keras_policy,
)
from .artifacts import (
    BITWISE_FORMATS,
    KERAS_FORMATS,
    NO_NAMED_STATE,
    TORCH_FORMATS,
    _onnx_feed,
    fresh_main,
    input_names,
    load_and_run,
    servable,
    write_artifact,
)
from .distributed import (
    REFUSED,
    WRAP_FAILED,
    WrapFailed,
    keras_single_step,
    keras_strategy_step,
    tf_mw_step,
    torch_rank_step,
    torch_single_step,
    wrap_verdict,
)
from .hints import hinting
from .propagation import propagated_tolerances
from .refusals import FORMAT_REFUSALS, WRAP_REFUSALS, Refusal, one_line_reason, refusal_reason
from .tolerances import (
    TreeMismatch,
    _keras_leaves,
    assert_close_tree,
    assert_same_step,
    error_terms,
    f_error_float32,
    float32_gradient_rtol,
    forward_tolerance,
    input_rounding_f_error,
    normwise,
    reference_diagnosis,
)

__all__ = [
    "BITWISE_FORMATS", "FORMAT_REFUSALS", "KERAS_FORMATS", "LR", "NO_NAMED_STATE", "REFUSED", "TORCH_FORMATS",
    "WRAP_FAILED", "WRAP_REFUSALS", "KerasOps", "Refusal", "TorchOps", "TreeMismatch", "WrapFailed", "_floating",
    "_keras_leaves", "_np", "_onnx_feed", "_torch_device", "_torch_float", "adapter_for", "assert_close_tree",
    "assert_same_step", "dtype_scope", "error_terms", "f_error_float32", "float32_gradient_rtol", "forward_tolerance",
    "fresh_main", "hinting", "hints", "input_names", "input_rounding_f_error", "keras_policy", "keras_single_step",
    "keras_strategy_step", "load_and_run", "normwise", "one_line_reason", "propagated_tolerances",
    "reference_diagnosis", "refusal_reason",
    "servable", "tf_mw_step", "torch_rank_step", "torch_single_step", "wrap_verdict", "write_artifact",
]
