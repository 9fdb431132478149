"""Tracing and compilation oracles, one module per oracle; this package re-exports them so
``from pytest_dlconform.checks.tracing import ...`` keeps working.

- :mod:`.function_cache`: ``tf.function``'s trace cache (model, counting oracle, call strategies);
- :mod:`.dynamo_cache`: ``torch.compile``'s cache (model, counting backend, counting oracle);
- :mod:`.control_flow`: generated control-flow programs, their interpreter, predicted and
  observed graph structure, strategies;
- :mod:`.graph_optimisation`: Grappler's constant folding;
- :mod:`.common`: the forward-error comparison they share.

Importing this package imports no framework.
"""

from __future__ import annotations

from .common import assert_within, program_error_bound
from .control_flow import (
    AUTOGRAD_NODES,
    AUTOGRAD_OPS,
    MARKER_OPS,
    TENSOR_FLOW,
    THRESHOLDS,
    UNARY,
    Affine,
    ControlFlowMismatch,
    Dense,
    FlowProgram,
    FlowRun,
    PythonFor,
    PythonIf,
    Stmt,
    TensorFor,
    TensorIf,
    TensorWhile,
    Unary,
    ambiguity,
    autograd_node_counts,
    check_counts,
    flow_inputs,
    flow_programs,
    tf_graph_op_counts,
    torchscript_node_counts,
)
from .dynamo_cache import (
    CompileCountMismatch,
    CompilePrediction,
    CompileStep,
    CountingBackend,
    DynamoCacheModel,
    check_compile_counts,
    fresh_function,
)
from .function_cache import (
    PYTHON_VALUES,
    Arg,
    FunctionCacheModel,
    LiteralType,
    Signature,
    TensorType,
    TraceCountMismatch,
    TracePrediction,
    TraceStep,
    TraceType,
    array_args,
    call_sequences,
    call_str,
    check_trace_counts,
    probe,
    python_args,
    seen_type,
    shapes_of,
    signature_str,
    sum_of_args,
)
from .graph_optimisation import (
    OptimisationNotObserved,
    check_constant_folding,
    constant_subexpressions,
)

__all__ = [
    "AUTOGRAD_NODES", "AUTOGRAD_OPS", "MARKER_OPS", "PYTHON_VALUES", "TENSOR_FLOW", "THRESHOLDS", "UNARY", "Affine", "Arg",
    "CompileCountMismatch", "CompilePrediction", "CompileStep", "ControlFlowMismatch", "CountingBackend", "Dense",
    "DynamoCacheModel", "FlowProgram", "FlowRun", "FunctionCacheModel", "LiteralType", "OptimisationNotObserved",
    "PythonFor", "PythonIf", "Signature", "Stmt", "TensorFor", "TensorIf", "TensorType", "TensorWhile",
    "TraceCountMismatch", "TracePrediction", "TraceStep", "TraceType", "Unary", "ambiguity", "array_args",
    "assert_within", "autograd_node_counts", "call_sequences", "call_str", "check_compile_counts",
    "check_constant_folding", "check_counts", "check_trace_counts", "constant_subexpressions", "flow_inputs",
    "flow_programs", "fresh_function", "probe", "program_error_bound", "python_args", "seen_type", "shapes_of",
    "signature_str", "sum_of_args", "tf_graph_op_counts", "torchscript_node_counts",
]
