"""Generated control-flow programs (:class:`FlowProgram`) and the structure oracles.

Tensor-dependent and Python-valued ``if``/``while``/``for`` over one tensor, rendered as
TensorFlow, torch and TorchScript source, with a float64 numpy interpreter (values,
forward-mode tangents, the decisions taken and how close each came to its threshold) and
the exact graph structure each documented rewrite must produce (AutoGraph ``If``/``While``
ops, unrolled ``range``, TorchScript ``prim::If``/``prim::Loop``, autograd nodes along the
executed path); :func:`check_counts` compares an observed structure with the prediction,
and :func:`flow_programs` / :func:`flow_inputs` are the hypothesis strategies.

Importing this module imports no framework.
"""

from __future__ import annotations

import collections
import linecache
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ...core import evidence
from ...programs.ops import RECORDS
from ...programs.records import GraphNames
from .common import FRESH


class ControlFlowMismatch(AssertionError):
    """A traced, scripted or recorded graph does not have the structure the rules predict."""


@dataclass(frozen=True)
class Unary:
    op: str  # a key of UNARY


@dataclass(frozen=True)
class Affine:
    scale: float
    shift: float


@dataclass(frozen=True)
class Dense:
    seed: int  # x = relu(x @ W + b), W and b dyadic from the seed


@dataclass(frozen=True)
class TensorIf:
    threshold: float
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True)
class PythonIf:
    flag: bool
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True)
class TensorWhile:
    threshold: float
    trips: tuple[int, int]  # trips[0] when mean(x) > threshold, else trips[1]
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class TensorFor:
    threshold: float
    trips: tuple[int, int]
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class PythonFor:
    count: int
    body: tuple[Stmt, ...]


Stmt = Unary | Affine | Dense | TensorIf | PythonIf | TensorWhile | TensorFor | PythonFor
TENSOR_FLOW = (TensorIf, TensorWhile, TensorFor)


def _graph(name: str) -> GraphNames:
    graph = RECORDS[name].graph
    assert graph is not None, f"{name}'s record names no graph nodes"
    return graph


Fn = Callable[[np.ndarray], np.ndarray]


def _bound(ref: Callable[..., np.ndarray], derivative: Callable[..., np.ndarray]) -> tuple[Fn, Fn]:
    """A parameter-free op's value and derivative as functions of x alone."""
    return (lambda x: ref([x], {}, [])), (lambda x: derivative(x, {}))


def _unary() -> dict[str, tuple[str, str, Fn, Fn, str, str]]:
    """The smooth unary ops a flow program may apply, from their op records (those with graph
    names): name -> (tf source, torch source, numpy value, numpy derivative, TF op type,
    autograd node)."""
    out: dict[str, tuple[str, str, Fn, Fn, str, str]] = {}
    for name, r in RECORDS.items():
        if r.graph is None or r.spec.category != "elementwise" or r.derivative is None:
            continue
        tf, torch = r.spec.tf, r.spec.torch
        assert isinstance(tf, str) and isinstance(torch, str), f"{name}: a parameter-free template"
        value, slope = _bound(r.spec.ref, r.derivative)
        out[name] = (tf.format(a="x"), torch.format(a="x"), value, slope, r.graph.tf_op, r.graph.autograd_node)
    return out


UNARY = _unary()
#: A Dense statement's nodes: relu of matmul (the ops' records name them).
DENSE = ("matmul", "relu")
MARKER_OPS = (*(v[4] for v in UNARY.values()), *(_graph(name).tf_op for name in DENSE))
AUTOGRAD_NODES = {v[5]: k for k, v in UNARY.items()} | {_graph(name).autograd_node: name for name in DENSE}
#: The ops whose autograd nodes :func:`autograd_node_counts` counts.
AUTOGRAD_OPS = tuple(AUTOGRAD_NODES.values())


@dataclass(frozen=True)
class FlowProgram:
    """``x -> x`` through a block of statements; x has shape (batch, width)."""

    body: tuple[Stmt, ...]
    width: int = 3

    def weights(self) -> dict[str, np.ndarray]:
        """Dense weights by name: dyadic values (exact in every float format), kept small so
        that chains of dense layers neither blow up nor die."""
        out: dict[str, np.ndarray] = {}
        for k, stmt in enumerate(_walk(self.body)):
            if isinstance(stmt, Dense):
                rng = np.random.default_rng(stmt.seed)
                out[f"W{k}"] = rng.integers(-8, 9, size=(self.width, self.width)) / (8.0 * self.width)
                out[f"B{k}"] = rng.integers(-4, 5, size=(self.width,)) / 8.0
        return out

    # ------------------------------------------------------------------ source

    def source(self, framework: str, name: str = "program") -> str:
        """Python source of ``name(x)``: framework "tensorflow", "torch" or "torchscript"."""
        head = f"def {name}(x: torch.Tensor) -> torch.Tensor:" if framework == "torchscript" else f"def {name}(x):"
        lines = [head, *_render(self.body, framework, "    ", _Names(self.body)), "    return x"]
        return "\n".join(lines) + "\n"

    def load(self, framework: str, module: Any, dtype: str) -> Callable[[Any], Any]:
        """The program as a function of one tensor, its source visible to AutoGraph and TorchScript."""
        n = next(FRESH)
        name = f"program_{n}"
        source = self.source(framework, name)
        filename = f"<dlconform flow program {n}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        tf_or_torch = "tf" if framework == "tensorflow" else "torch"
        scope: dict[str, Any] = {"__name__": f"dlconform_flow_{n}", tf_or_torch: module}
        for key, w in self.weights().items():
            scope[key] = module.constant(w, dtype=getattr(module, dtype)) if framework == "tensorflow" else \
                module.tensor(w, dtype=getattr(module, dtype))
        exec(compile(source, filename, "exec"), scope)
        fn = scope[name]
        fn.source = source
        return fn

    # ------------------------------------------------------------------ numpy interpreter

    def run(self, x: np.ndarray, *, tangent: np.ndarray | None = None, forced: Sequence[bool] | None = None) -> FlowRun:
        """Float64 reference: value, forward-mode tangent, decisions, margins, executed ops.

        ``forced`` replays a recorded decision sequence instead of evaluating conditions:
        what a tracer that froze one path (torch.jit.trace) computes.
        """
        state = FlowRun(np.asarray(x, dtype=np.float64), None if tangent is None else np.asarray(tangent, np.float64))
        _execute(self.body, state, self.weights(), iter(forced) if forced is not None else None, _Names(self.body))
        return state

    # ------------------------------------------------------------------ predicted structure

    def reaches_tensor_control_flow(self) -> bool:
        """A tensor-dependent construct is reached (Python ifs resolved, Python loops run >= 1)."""
        return any(isinstance(s, TENSOR_FLOW) for s in _live(self.body))

    def autograph_graph_counts(self) -> collections.Counter[str]:
        """Op counts of the tf.function graph (with its branch/body functions): If, While, and
        the marker ops of each statement, Python loops unrolled and Python ifs resolved."""
        counts: collections.Counter[str] = collections.Counter()
        _graph_counts(self.body, 1, counts)
        return counts

    def autograph_code_counts(self) -> collections.Counter[str]:
        """AutoGraph converts every if/while/for statement, whatever its condition."""
        counts: collections.Counter[str] = collections.Counter()
        for s in _walk(self.body):
            if isinstance(s, (TensorIf, PythonIf)):
                counts["if_stmt"] += 1
            elif isinstance(s, TensorWhile):
                counts["while_stmt"] += 1
            elif isinstance(s, (TensorFor, PythonFor)):
                counts["for_stmt"] += 1
        return counts

    def torchscript_counts(self) -> collections.Counter[str]:
        """prim::If and prim::Loop nodes of torch.jit.script's graph: one If per tensor if and
        per trip-count choice, one Loop per loop (TorchScript does not unroll range())."""
        counts: collections.Counter[str] = collections.Counter()
        for s in _live(self.body):
            if isinstance(s, TensorIf):
                counts["prim::If"] += 1
            elif isinstance(s, (TensorWhile, TensorFor)):
                counts["prim::If"] += 1
                counts["prim::Loop"] += 1
            elif isinstance(s, PythonFor):
                counts["prim::Loop"] += 1
        return counts

    def op_count(self) -> int:
        """Elementary ops on the longest path (for tolerances)."""
        return max(1, _longest(self.body))


@dataclass
class FlowRun:
    y: np.ndarray
    tangent: np.ndarray | None
    decisions: list[bool] = field(default_factory=list)
    margin: float = math.inf  # smallest |mean(x) - threshold| over the decisions taken
    kink: float = math.inf  # smallest |pre-activation| entering a relu
    executed: collections.Counter[str] = field(default_factory=collections.Counter)
    # Largest intermediate the run rounded: every register value and every term of an affine
    # or dense statement (|x s| + |shift|, |x| |W| + |b|), the scale of its rounding errors
    # where the output cancels (numerics.tolerance's magnitude=).
    magnitude: float = 0.0


class _Names:
    """Stable per-statement names for loop variables and weights (statement index in walk order)."""

    def __init__(self, body: tuple[Stmt, ...]) -> None:
        self.index = {id(s): k for k, s in enumerate(_walk(body))}

    def __call__(self, stmt: Stmt) -> int:
        return self.index[id(stmt)]


def _walk(body: Sequence[Stmt]) -> Iterator[Stmt]:
    """Every statement, dead branches included, in source order."""
    for s in body:
        yield s
        for child in _children(s):
            yield from _walk(child)


def _children(s: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    if isinstance(s, (TensorIf, PythonIf)):
        return (s.then, s.orelse)
    if isinstance(s, (TensorWhile, TensorFor, PythonFor)):
        return (s.body,)
    return ()


def _live(body: Sequence[Stmt]) -> Iterator[Stmt]:
    """Statements that can run: the untaken branch of a Python if is dead code."""
    for s in body:
        yield s
        if isinstance(s, PythonIf):
            yield from _live(s.then if s.flag else s.orelse)
        else:
            for child in _children(s):
                yield from _live(child)


def _graph_counts(body: Sequence[Stmt], times: int, counts: collections.Counter[str]) -> None:
    for s in body:
        if isinstance(s, Unary):
            counts[UNARY[s.op][4]] += times
        elif isinstance(s, Dense):
            counts["MatMul"] += times
            counts["Relu"] += times
        elif isinstance(s, TensorIf):
            counts["If"] += times
            _graph_counts(s.then, times, counts)
            _graph_counts(s.orelse, times, counts)
        elif isinstance(s, PythonIf):
            _graph_counts(s.then if s.flag else s.orelse, times, counts)
        elif isinstance(s, (TensorWhile, TensorFor)):
            counts["While"] += times
            _graph_counts(s.body, times, counts)
        elif isinstance(s, PythonFor):
            _graph_counts(s.body, times * s.count, counts)


def _longest(body: Sequence[Stmt]) -> int:
    total = 0
    for s in body:
        if isinstance(s, (Unary, Affine)):
            total += 2
        elif isinstance(s, Dense):
            total += 3
        elif isinstance(s, (TensorIf, PythonIf)):
            total += 1 + max(_longest(s.then), _longest(s.orelse))
        elif isinstance(s, (TensorWhile, TensorFor)):
            total += 1 + max(s.trips) * _longest(s.body)
        elif isinstance(s, PythonFor):
            total += s.count * _longest(s.body)
    return total


def _render(body: Sequence[Stmt], fw: str, ind: str, names: _Names) -> list[str]:
    tf = fw == "tensorflow"
    mean = "tf.reduce_mean(x)" if tf else "torch.mean(x)"
    lines: list[str] = []
    for s in body:
        k = names(s)
        if isinstance(s, Unary):
            lines.append(f"{ind}x = {UNARY[s.op][0 if tf else 1]}")
        elif isinstance(s, Affine):
            lines.append(f"{ind}x = x * {s.scale!r} + {s.shift!r}")
        elif isinstance(s, Dense):
            expr = f"tf.nn.relu(tf.matmul(x, W{k}) + B{k})" if tf else f"torch.relu(x @ W{k} + B{k})"
            lines.append(f"{ind}x = {expr}")
        elif isinstance(s, (TensorIf, PythonIf)):
            cond = f"{mean} > {s.threshold!r}" if isinstance(s, TensorIf) else repr(s.flag)
            lines.append(f"{ind}if {cond}:")
            lines += _render(s.then, fw, ind + "    ", names) or [f"{ind}    pass"]
            if s.orelse:
                lines += [f"{ind}else:", *_render(s.orelse, fw, ind + "    ", names)]
        elif isinstance(s, (TensorWhile, TensorFor)):
            hi, lo = s.trips
            cond = f"{mean} > {s.threshold!r}"
            choice = f"tf.where({cond}, {hi}, {lo})" if tf else f"{hi} if {cond} else {lo}"
            lines.append(f"{ind}n{k} = {choice}")
            if isinstance(s, TensorWhile):
                lines += [f"{ind}i{k} = tf.constant(0)" if tf else f"{ind}i{k} = 0", f"{ind}while i{k} < n{k}:"]
                lines += [*_render(s.body, fw, ind + "    ", names), f"{ind}    i{k} += 1"]
            else:
                lines.append(f"{ind}for t{k} in {'tf.range' if tf else 'range'}(n{k}):")
                lines += _render(s.body, fw, ind + "    ", names) or [f"{ind}    pass"]
        elif isinstance(s, PythonFor):
            lines.append(f"{ind}for t{k} in range({s.count}):")
            lines += _render(s.body, fw, ind + "    ", names) or [f"{ind}    pass"]
    return lines


def _decide(state: FlowRun, threshold: float, forced: Iterator[bool] | None) -> bool:
    value = float(np.mean(state.y)) - threshold
    state.margin = min(state.margin, abs(value))
    decision = next(forced) if forced is not None else value > 0
    state.decisions.append(bool(decision))
    return bool(decision)


def _execute(body: Sequence[Stmt], st_: FlowRun, weights: dict[str, np.ndarray], forced: Iterator[bool] | None,
             names: _Names) -> None:
    for s in body:
        st_.magnitude = max(st_.magnitude, float(np.max(np.abs(st_.y), initial=0.0)))
        if isinstance(s, Unary):
            _, _, f, df, _, _ = UNARY[s.op]
            if st_.tangent is not None:
                st_.tangent = df(st_.y) * st_.tangent
            st_.y = f(st_.y)
            st_.executed[s.op] += 1
        elif isinstance(s, Affine):
            st_.magnitude = max(st_.magnitude, float(np.max(np.abs(st_.y * s.scale), initial=0.0)) + abs(s.shift))
            st_.y = st_.y * s.scale + s.shift
            if st_.tangent is not None:
                st_.tangent = st_.tangent * s.scale
        elif isinstance(s, Dense):
            k = names(s)
            z = st_.y @ weights[f"W{k}"] + weights[f"B{k}"]
            terms = np.abs(st_.y) @ np.abs(weights[f"W{k}"]) + np.abs(weights[f"B{k}"])
            st_.magnitude = max(st_.magnitude, float(np.max(terms, initial=0.0)))
            st_.kink = min(st_.kink, float(np.min(np.abs(z))) if z.size else math.inf)
            if st_.tangent is not None:
                st_.tangent = (z > 0) * (st_.tangent @ weights[f"W{k}"])
            st_.y = np.maximum(z, 0.0)
            st_.executed["matmul"] += 1
            st_.executed["relu"] += 1
        elif isinstance(s, TensorIf):
            _execute(s.then if _decide(st_, s.threshold, forced) else s.orelse, st_, weights, forced, names)
        elif isinstance(s, PythonIf):
            _execute(s.then if s.flag else s.orelse, st_, weights, forced, names)
        elif isinstance(s, (TensorWhile, TensorFor)):
            trips = s.trips[0] if _decide(st_, s.threshold, forced) else s.trips[1]
            for _ in range(trips):
                _execute(s.body, st_, weights, forced, names)
        elif isinstance(s, PythonFor):
            for _ in range(s.count):
                _execute(s.body, st_, weights, forced, names)


# ------------------------------------------------------------------ observed structure


def tf_graph_op_counts(concrete_function: Any) -> collections.Counter[str]:
    """Op types in a ConcreteFunction's graph and every function in its library (branch and
    loop bodies); If/StatelessIf count as "If", While/StatelessWhile as "While"."""
    graph_def = concrete_function.graph.as_graph_def()
    ops = [n.op for n in graph_def.node] + [n.op for f in graph_def.library.function for n in f.node_def]
    alias = {"StatelessIf": "If", "StatelessWhile": "While"}
    return collections.Counter(alias.get(op, op) for op in ops)


def torchscript_node_counts(graph: Any) -> collections.Counter[str]:
    """prim::If / prim::Loop nodes of a TorchScript graph, nested blocks included."""
    return collections.Counter(
        {kind: len(graph.findAllNodes(kind, recurse=True)) for kind in ("prim::If", "prim::Loop")}
    )


def autograd_node_counts(output: Any) -> collections.Counter[str]:
    """Backward nodes reachable from ``output.grad_fn``, by the op they differentiate."""
    counts: collections.Counter[str] = collections.Counter()
    seen: set[int] = set()
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        op = AUTOGRAD_NODES.get(type(node).__name__)
        if op:
            counts[op] += 1
        stack.extend(n for n, _ in node.next_functions)
    return counts


def check_counts(observed: collections.Counter[str], expected: collections.Counter[str], keys: Sequence[str], *,
                 what: str) -> None:
    """Exact counts for ``keys``; the message lists every difference."""
    __tracebackhide__ = True
    diffs = [f"{k}: {observed.get(k, 0)}, but should be {expected.get(k, 0)}" for k in keys
             if observed.get(k, 0) != expected.get(k, 0)]
    evidence.note(**{f"{what} counts": {k: observed.get(k, 0) for k in keys}})
    if diffs:
        raise ControlFlowMismatch(f"{what}: " + "; ".join(diffs))


# ------------------------------------------------------------------ strategies

THRESHOLDS = (-0.4, -0.15, 0.0, 0.1, 0.3)


@st.composite
def flow_programs(draw: Any, *, max_depth: int = 2, max_statements: int = 4, dense: bool = True,
                  require_tensor_flow: bool = False, width: int = 3) -> FlowProgram:
    """Hypothesis search strategy (not a distribution strategy) for :class:`FlowProgram`."""
    body = draw(_blocks(max_depth, max_statements, dense))
    if require_tensor_flow and not any(isinstance(s, TENSOR_FLOW) for s in _live(body)):
        body = (draw(_flow_statement(max_depth, max_statements, dense, tensor_only=True)), *body)
    return FlowProgram(tuple(body), width)


def _leaf(dense: bool) -> st.SearchStrategy[Stmt]:
    options: list[st.SearchStrategy[Stmt]] = [
        st.builds(Unary, st.sampled_from(sorted(UNARY))),
        st.builds(Affine, st.sampled_from((0.5, -0.75, 1.25)), st.sampled_from((-0.25, 0.0, 0.375))),
    ]
    if dense:
        options.append(st.builds(Dense, st.integers(0, 2**16)))
    return st.one_of(options)


def _blocks(depth: int, size: int, dense: bool, min_size: int = 1) -> st.SearchStrategy[tuple[Stmt, ...]]:
    stmt = _leaf(dense) if depth == 0 else st.one_of(_leaf(dense), _flow_statement(depth, size, dense))
    return st.lists(stmt, min_size=min_size, max_size=size).map(tuple)


def _flow_statement(depth: int, size: int, dense: bool, tensor_only: bool = False) -> st.SearchStrategy[Stmt]:
    # A body starts with an op: a block that does nothing once its Python ifs are resolved
    # is dead code that compilers may delete, if and loop included (TorchScript does).
    rest = _blocks(depth - 1, max(0, size // 2 - 1), dense, min_size=0)
    inner = st.tuples(_leaf(dense), rest).map(lambda t: (t[0], *t[1]))
    maybe_empty = _blocks(depth - 1, max(1, size // 2), dense, min_size=0)
    thr = st.sampled_from(THRESHOLDS)
    # Distinct trip counts: equal ones make the choice a constant that compilers fold away.
    trips = st.tuples(st.integers(0, 3), st.integers(0, 2)).map(lambda t: (t[0], t[1] + (t[1] >= t[0])))
    kinds: list[st.SearchStrategy[Stmt]] = [
        st.builds(TensorIf, thr, inner, maybe_empty),
        st.builds(TensorWhile, thr, trips, inner),
        st.builds(TensorFor, thr, trips, inner),
    ]
    if not tensor_only:
        kinds += [st.builds(PythonIf, st.booleans(), inner, maybe_empty),
                  st.builds(PythonFor, st.integers(1, 3), inner)]
    return st.one_of(kinds)


def flow_inputs(batch: int = 2, width: int = 3) -> st.SearchStrategy[np.ndarray]:
    """Inputs in [-1.5, 1.5] from a seed, so examples shrink and print small."""
    return st.integers(0, 2**32 - 1).map(lambda s: np.random.default_rng(s).uniform(-1.5, 1.5, (batch, width)))


def ambiguity(run: FlowRun, rtol: float) -> bool:
    """Whether a decision came within round-off of its threshold, so that a run in another
    precision or with another summation order could legitimately take the other branch."""
    scale = 1.0 + float(np.max(np.abs(run.y))) if run.y.size else 1.0
    return run.margin <= 8.0 * rtol * scale
