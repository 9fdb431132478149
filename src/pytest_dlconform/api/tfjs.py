"""TensorFlow.js: the converter, a Node.js runner and the oracles for its weights and outputs.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..checks.tfjs import (
    ConverterRefused,
    NodeModel,
    TfjsMismatch,
    assert_manifest_quantised,
    assert_program_output,
    assert_weights,
    convert,
    keras2_names,
    pack_inputs,
    parameter_bounds,
    propagated_bound,
    read_manifest,
    run_node,
    save_function,
    save_program,
    unavailable,
)

__all__ = [
    "ConverterRefused",
    "NodeModel",
    "TfjsMismatch",
    "assert_manifest_quantised",
    "assert_program_output",
    "assert_weights",
    "convert",
    "keras2_names",
    "pack_inputs",
    "parameter_bounds",
    "propagated_bound",
    "read_manifest",
    "run_node",
    "save_function",
    "save_program",
    "unavailable",
]
