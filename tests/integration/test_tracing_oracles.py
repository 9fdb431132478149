"""The trace- and compile-count oracles against real TensorFlow and torch, and against wrong
function wrappers: one that retraces (recompiles) on every call and one that never does.

Every count check of the execution suites must pass the real tf.function / torch.compile
and fail both wrong wrappers with a message naming the call, the observed counts and the
prediction. The structure checks (AutoGraph graph ops, TorchScript nodes, autograd nodes)
are fed the output of a wrong implementation too: a tracer that freezes data-dependent
decisions, as torch.jit.trace does.
"""

from __future__ import annotations

import itertools
import types
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks.tracing import (
    MARKER_OPS,
    Arg,
    CompileCountMismatch,
    ControlFlowMismatch,
    CountingBackend,
    FlowProgram,
    OptimisationNotObserved,
    PythonIf,
    TensorFor,
    TensorIf,
    TensorType,
    TensorWhile,
    TraceCountMismatch,
    Unary,
    autograd_node_counts,
    check_compile_counts,
    check_constant_folding,
    check_counts,
    check_trace_counts,
    fresh_function,
    tf_graph_op_counts,
    torchscript_node_counts,
)

T = Arg.tensor

# --------------------------------------------------------------------------- TensorFlow


@pytest.fixture(scope="module")
def tf() -> Any:
    return pytest.importorskip("tensorflow")


class RetraceEveryCall:
    """Wrong: a new tf.function per call, so every call traces."""

    def __init__(self, tf: Any, fn: Callable[..., Any], **options: Any) -> None:
        self.tf, self.fn, self.options, self.count = tf, fn, options, 0

    def __call__(self, *args: Any) -> Any:
        f = self.tf.function(self.fn, **self.options)
        out = f(*args)
        self.count += f.experimental_get_tracing_count()
        return out

    def experimental_get_tracing_count(self) -> int:
        return self.count


class NeverRetrace:
    """Wrong: traces on the first call, then runs the bare Python function eagerly."""

    def __init__(self, tf: Any, fn: Callable[..., Any], **options: Any) -> None:
        self.traced = tf.function(fn, **options)
        self.bare = fn.__wrapped__  # the body without the oracle's side effect
        self.called = False

    def __call__(self, *args: Any) -> Any:
        if not self.called:
            self.called = True
            return self.traced(*args)
        return self.bare(*args)

    def experimental_get_tracing_count(self) -> int:
        return self.traced.experimental_get_tracing_count()


# (options, calls): one case per kind of trace-count check in the suites
TRACE_CASES = {
    "plain": ({}, [(T("float32", 2),), (T("float32", 2),), (T("float32", 3),), (T("float64", 3),)]),
    "python-args": ({}, [(Arg.python(2),), (Arg.python(2.0),), (Arg.ndarray("float32", 2),), (T("float32", 2),),
                         (Arg.python(3),)]),
    "input_signature": ({"input_signature": [TensorType("float32", (None,))]},
                        [(T("float32", 2),), (T("float32", 5),), (T("float64", 5),), (T("float32", 7),)]),
    "reduce_retracing": ({"reduce_retracing": True},
                         [(T("float32", 2),), (T("float32", 3),), (T("float32", 4),), (T("float32", 2, 2),)]),
}


@pytest.mark.parametrize("case", sorted(TRACE_CASES))
def test_trace_count_check_passes_real_tf_function(tf, case):
    options, calls = TRACE_CASES[case]
    steps = check_trace_counts(tf, calls, **options)
    assert [s.api_count for s in steps] == [s.predicted.traces for s in steps]


@pytest.mark.parametrize("case", sorted(TRACE_CASES))
@pytest.mark.parametrize("wrong", [RetraceEveryCall, NeverRetrace])
def test_trace_count_check_fails_wrong_wrappers(tf, case, wrong):
    options, calls = TRACE_CASES[case]
    with pytest.raises(TraceCountMismatch, match=r"call \d+ f\(.*\): .*(predict|succeeded)"):
        check_trace_counts(tf, calls, wrapper=lambda fn, **kw: wrong(tf, fn, **kw), **options)


def test_trace_count_check_fails_wrong_wrappers_on_variable_creation(tf):
    """The train-step case: a first call that creates variables must trace twice."""

    def make_body() -> Callable[..., Any]:
        holder: list[Any] = []

        def body(x: Any) -> Any:
            if not holder:
                holder.append(tf.Variable(tf.zeros([], x.dtype)))
            return tf.reduce_sum(x) + holder[0]

        return body

    calls = [(T("float32", 2),), (T("float32", 2),), (T("float32", 3),)]
    steps = check_trace_counts(tf, calls, body=make_body(), creates_variables=True)
    assert [s.api_count for s in steps] == [2, 2, 3]
    with pytest.raises(TraceCountMismatch, match="documented cache rules predict 1"):
        check_trace_counts(tf, calls, body=make_body(), creates_variables=False)
    for wrong in (RetraceEveryCall, NeverRetrace):
        with pytest.raises(TraceCountMismatch):
            check_trace_counts(tf, calls, body=make_body(), creates_variables=True,
                               wrapper=lambda fn, **kw: wrong(tf, fn, **kw))  # noqa: B023


def _freeze(program: FlowProgram, decisions: list[bool]) -> FlowProgram:
    """A wrong AutoGraph: data-dependent decisions evaluated once, at trace time (Python ifs)."""
    it = iter(decisions)

    def block(body: tuple[Any, ...]) -> tuple[Any, ...]:
        out: list[Any] = []
        for s in body:
            if isinstance(s, TensorIf):
                d = next(it)
                out.append(PythonIf(d, block(s.then) if d else s.then, s.orelse if d else block(s.orelse)))
            elif isinstance(s, (TensorWhile, TensorFor)):
                trips = s.trips[0] if next(it) else s.trips[1]
                out.extend(itertools.chain.from_iterable(block(s.body) for _ in range(trips)))
            else:
                out.append(s)
        return tuple(out)

    return FlowProgram(block(program.body), program.width)


PROGRAM = FlowProgram((Unary("sin"), TensorIf(0.0, (Unary("tanh"),), (Unary("cos"),)),
                       TensorWhile(-2.0, (2, 1), (Unary("sin"),))))
X = np.linspace(-1.0, 1.0, 6).reshape(2, 3)


def test_autograph_structure_check_fails_a_tracer_that_freezes_decisions(tf):
    xt = tf.constant(X)
    right = tf.function(PROGRAM.load("tensorflow", tf, "float64")).get_concrete_function(xt)
    keys = ("If", "While", *MARKER_OPS)
    check_counts(tf_graph_op_counts(right), PROGRAM.autograph_graph_counts(), keys, what="AutoGraph graph")
    frozen = _freeze(PROGRAM, PROGRAM.run(X).decisions)
    wrong = tf.function(frozen.load("tensorflow", tf, "float64")).get_concrete_function(xt)
    np.testing.assert_allclose(wrong(xt).numpy(), PROGRAM.run(X).y)  # same value on this input...
    with pytest.raises(ControlFlowMismatch, match="If: 0, but should be 1; While: 0, but should be 1"):
        check_counts(tf_graph_op_counts(wrong), PROGRAM.autograph_graph_counts(), keys, what="AutoGraph graph")


def _session_nodes(tf: Any, optimise: bool) -> list[Any]:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape=(3,))
        out = tf.sin(x) * tf.multiply(tf.constant(1.5), tf.constant(2.0), name="planted")
    config = tf.compat.v1.ConfigProto()
    if not optimise:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        config.graph_options.optimizer_options.opt_level = config.graph_options.optimizer_options.L0
        config.graph_options.optimizer_options.do_constant_folding = False
    metadata = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(out, {x: np.ones(3, np.float32)}, options=tf.compat.v1.RunOptions(output_partition_graphs=True),
                    run_metadata=metadata)
    return [n for g in metadata.partition_graphs for n in g.node]


def test_constant_folding_check_on_real_session_graphs(tf):
    facts = check_constant_folding(_session_nodes(tf, True), _session_nodes(tf, False), "planted")
    assert facts["planted_op_unoptimised"] == "Mul" and facts["planted_op_optimised"] == "Const"
    with pytest.raises(OptimisationNotObserved, match="constant folding not observed"):
        check_constant_folding(_session_nodes(tf, False), _session_nodes(tf, False), "planted")


# --------------------------------------------------------------------------- torch


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


def recompile_every_call(torch: Any) -> Callable[..., Any]:
    """Wrong: a new code object per call, so dynamo compiles every call."""
    counter = itertools.count()

    def wrapper(fn: Callable[..., Any], **kw: Any) -> Callable[..., Any]:
        def call(x: Any) -> Any:
            code = fn.__code__.replace(co_name=f"{fn.__name__}_copy{next(counter)}")
            return torch.compile(types.FunctionType(code, fn.__globals__), **kw)(x)

        return call

    return wrapper


def never_recompile(torch: Any) -> Callable[..., Any]:
    """Wrong: compiles once; every later unseen input runs eagerly (recompile_limit=1)."""

    def wrapper(fn: Callable[..., Any], **kw: Any) -> Callable[..., Any]:
        compiled = torch.compile(fn, **kw)

        def call(x: Any) -> Any:
            with torch._dynamo.config.patch(recompile_limit=1):
                return compiled(x)

        return call

    return wrapper


COMPILE_CASES = {
    "automatic-dynamic": (None, [("float32", (3,)), ("float32", (3,)), ("float32", (4,)), ("float32", (5,))]),
    "dynamic": (True, [("float32", (3, 3)), ("float32", (3, 3)), ("float32", (3, 4))]),
    "static": (False, [("float32", (2,)), ("float32", (2,)), ("float64", (2,))]),
}


def _fn(torch: Any) -> Callable[..., Any]:
    return fresh_function({"torch": torch}, "return torch.sin(x) * 2.0 + 1.0")


@pytest.mark.parametrize("case", sorted(COMPILE_CASES))
def test_compile_count_check_passes_real_torch_compile(torch, case):
    dynamic, calls = COMPILE_CASES[case]
    steps = check_compile_counts(torch, _fn(torch), calls, dynamic=dynamic)
    assert [s.compiles for s in steps] == [s.predicted.compiles for s in steps]


@pytest.mark.parametrize("case", sorted(COMPILE_CASES))
@pytest.mark.parametrize("wrong", [recompile_every_call, never_recompile])
def test_compile_count_check_fails_wrong_wrappers(torch, case, wrong):
    dynamic, calls = COMPILE_CASES[case]
    with pytest.raises(CompileCountMismatch, match=r"call \d+ f\(tensor\(.*\)\): .*(predict|eager)"):
        check_compile_counts(torch, _fn(torch), calls, dynamic=dynamic, wrapper=wrong(torch))


def test_counting_backend_sees_the_silent_eager_fallback(torch):
    backend = CountingBackend(torch, "eager")
    compiled = torch.compile(_fn(torch), backend=backend, dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=1):
        compiled(torch.zeros(2))
        out = compiled(torch.ones(3))  # over the limit: runs eagerly, no error
    assert (backend.compiles, backend.runs) == (1, 1)
    torch.testing.assert_close(out, torch.sin(torch.ones(3)) * 2.0 + 1.0)


def test_autograd_and_torchscript_checks_fail_frozen_paths(torch):
    x = torch.tensor(X)
    y = PROGRAM.load("torch", torch, "float64")(x.clone().requires_grad_())
    run = PROGRAM.run(X)
    check_counts(autograd_node_counts(y), run.executed, ("sin", "cos", "tanh"), what="autograd nodes")
    other = PROGRAM.run(X, forced=[not d for d in run.decisions])
    with pytest.raises(ControlFlowMismatch, match="autograd nodes: "):
        check_counts(autograd_node_counts(y), other.executed, ("sin", "cos", "tanh"), what="autograd nodes")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarning and the deprecation: expected here
        traced = torch.jit.trace(PROGRAM.load("torch", torch, "float64"), (x,), check_trace=False)
    with pytest.raises(ControlFlowMismatch, match=r"prim::If: 0, but should be 2; prim::Loop: 0, but should be 1"):
        check_counts(torchscript_node_counts(traced.graph), PROGRAM.torchscript_counts(), ("prim::If", "prim::Loop"),
                     what="script nodes")
    assert torchscript_node_counts(traced.graph) == Counter({"prim::If": 0, "prim::Loop": 0})
