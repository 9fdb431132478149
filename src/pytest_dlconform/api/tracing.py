"""Graph and tracing oracles: the tf.function cache model, the torch.compile (dynamo) cache
model, generated control-flow programs and their observed structure, constant folding.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..checks.tracing import (
    AUTOGRAD_OPS,
    MARKER_OPS,
    Arg,
    CountingBackend,
    TensorType,
    ambiguity,
    array_args,
    assert_within,
    autograd_node_counts,
    call_sequences,
    check_compile_counts,
    check_constant_folding,
    check_counts,
    check_trace_counts,
    flow_inputs,
    flow_programs,
    fresh_function,
    program_error_bound,
    python_args,
    shapes_of,
    tf_graph_op_counts,
    torchscript_node_counts,
)

__all__ = [
    "AUTOGRAD_OPS",
    "MARKER_OPS",
    "Arg",
    "CountingBackend",
    "TensorType",
    "ambiguity",
    "array_args",
    "assert_within",
    "autograd_node_counts",
    "call_sequences",
    "check_compile_counts",
    "check_constant_folding",
    "check_counts",
    "check_trace_counts",
    "flow_inputs",
    "flow_programs",
    "fresh_function",
    "program_error_bound",
    "python_args",
    "shapes_of",
    "tf_graph_op_counts",
    "torchscript_node_counts",
]
