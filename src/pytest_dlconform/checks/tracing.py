"""Tracing and compilation: models of the documented cache rules, counting oracles, and
generated control-flow programs.

Three parts, none of which imports a framework at module import time:

1. ``tf.function``'s trace cache. :class:`FunctionCacheModel` predicts, from the documented
   rules alone, how many traces a sequence of calls causes and with which input types each
   trace is made. :func:`check_trace_counts` runs the calls through a real ``tf.function``
   (or any wrapper with the same interface) and observes the traces two independent ways:
   ``experimental_get_tracing_count()`` and a Python side effect in the traced body (which
   also records the types the body saw), then compares call by call.
2. ``torch.compile``'s cache (TorchDynamo). :class:`DynamoCacheModel` predicts compiles,
   recompiles, automatic dynamic shapes, 0/1 specialisation and the silent eager fallback
   after ``recompile_limit``; :func:`check_compile_counts` observes a counting backend
   (compiles and runs of compiled graphs, public API) and dynamo's own graph counter.
3. Control-flow programs (:class:`FlowProgram`): tensor-dependent and Python-valued
   ``if``/``while``/``for`` over one tensor, rendered as TensorFlow, torch and TorchScript
   source, with a float64 numpy interpreter (values, forward-mode tangents, the decisions
   taken and how close each came to its threshold) and the exact graph structure each
   documented rewrite must produce (AutoGraph ``If``/``While`` ops, unrolled ``range``,
   TorchScript ``prim::If``/``prim::Loop``, autograd nodes along the executed path).

Also :func:`assert_within` (an absolute forward-error bound, as ``Program.error_bound``
gives) and :func:`program_error_bound` (that bound, widened for TF32 on GPUs).

The cache rules modelled here (TF 2.x, tf.function reference and the guide "Better
performance with tf.function", "Rules of tracing"; TorchDynamo's "Dynamic shapes" and
"Recompilation" pages):

* A ``tf.Tensor`` or NumPy array argument is keyed by ``TensorSpec(shape, dtype)``; a Python
  scalar by its value with Python equality (``2 == 2.0 == ...``, ``True == 1``); NaNs match.
* A call reuses a trace whose input types are supertypes of the call's (a ``None`` dim or
  an unknown rank accepts any); otherwise it traces with the call's exact types, or, with
  ``reduce_retracing=True``, with the type generalised against every earlier trace in
  order (the most specific common supertype, when one exists for every argument).
* With an ``input_signature`` there is exactly one trace, made with the signature's types;
  a Tensor argument of another dtype or an incompatible shape raises ``TypeError``;
  non-Tensor arguments are first converted to the spec's dtype (``tf.constant`` rules).
* The first call of a function whose body creates ``tf.Variable``s traces twice (once to
  create and lift the variables, once without variable creation).
* Dynamo compiles the first call with static shapes; on a guard failure it recompiles and
  marks every dimension whose size changed since the last compile dynamic
  (``dynamic=None``, automatic dynamic shapes); ``dynamic=True`` starts dynamic and shapes
  equal sizes as one symbol ("duck sizing"), ``dynamic=False`` never goes dynamic; a
  dynamic dimension of size 0 or 1 is still specialised; after ``recompile_limit`` cache
  entries for one code object a non-matching call runs eagerly, without an error. (That
  duck sizing applies with ``dynamic=True`` only, not to dimensions made dynamic
  automatically, is what torch 2.13 does; the docs describe duck sizing without saying.)
"""

from __future__ import annotations

import sys

import collections
import functools
import itertools
import linecache
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterator, Sequence, Union

import numpy as np
from hypothesis import strategies as st

from .. import evidence
from .numerics import ToleranceExceeded

# =============================================================================== comparisons


def assert_within(actual: Any, expected: Any, bound: float, *, what: str) -> float:
    """``max|actual - expected| <= bound`` (an absolute forward-error bound, e.g. from
    ``Program.error_bound``); records evidence; returns the error."""
    __tracebackhide__ = True
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        raise ToleranceExceeded(f"{what}: shape {a.shape}, but should be {e.shape}")
    finite = np.isfinite(e)
    err = float(np.max(np.abs(a[finite] - e[finite]))) if finite.any() else 0.0
    # Non-finite entries must match exactly (inf for inf, nan for nan).
    if not np.array_equal(np.isfinite(a), finite) or not np.array_equal(a[~finite], e[~finite], equal_nan=True):
        err = math.inf
    evidence.check(what, observed=err, tolerance=bound)
    if not err <= bound:
        raise ToleranceExceeded(
            f"{what}: max|actual - expected| = {err:.3e}, but should be <= {bound:.3e} (forward-error bound)"
        )
    return err


def _tf32_program(program: Any, framework: str) -> bool:
    """TensorFlow: its switch covers the whole program (as before). torch: contractions
    follow the cuBLAS switch, conv2d the cuDNN one."""
    from ..programs import OPS
    from .tf32 import torch_precision, tf32_reason

    if framework != "torch":
        return tf32_reason(framework) is not None
    torch = sys.modules.get("torch")
    kinds = {"conv" if op.name == "conv2d" else "matmul" for op in program.ops
             if op.name == "conv2d" or OPS[op.name].category == "contraction"}
    return any(torch_precision(torch, kind) == "tf32" for kind in kinds)


def program_error_bound(case: Any, dtype: str, *, device: str, framework: str) -> float:
    """A generated program's forward-error bound (``programs.Program.error_bound``) for a run
    in ``dtype``. On Ampere and newer GPUs float32 may run in TF32, as the frameworks'
    switches say (checks.tf32: TensorFlow's matmuls and convolutions by default, torch's
    cuDNN convolutions by default and its matmuls when fp32_precision / allow_tf32 say so);
    TF32's unit round-off 2**-11 is float16's, so such a run gets float16's bound."""
    from .tf32 import tf32_reason

    tf32 = device != "cpu" and dtype == "float32" and _tf32_program(case.program, framework)
    return float(case.program.error_bound(case.inputs, "float16" if tf32 else dtype))


# =============================================================================== 1. tf.function


class TraceCountMismatch(AssertionError):
    """Observed traces differ from what the documented cache rules predict."""


class _NaN:
    """tf.function matches NaN Python scalars against each other, unlike Python's ``==``."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __hash__(self) -> int:
        return hash("nan")

    def __repr__(self) -> str:
        return "nan"


@dataclass(frozen=True)
class TensorType:
    """A ``tf.TensorSpec``: ``shape`` None is an unknown rank, a None dim an unknown size."""

    dtype: str
    shape: tuple[int | None, ...] | None

    def accepts(self, other: TraceType) -> bool:
        """``self`` is a supertype of ``other`` (a trace of ``self`` can run ``other``)."""
        if not isinstance(other, TensorType) or other.dtype != self.dtype:
            return False
        if self.shape is None:
            return True
        if other.shape is None or len(other.shape) != len(self.shape):
            return False
        return all(s is None or s == o for s, o in zip(self.shape, other.shape))

    def join(self, other: TraceType) -> TensorType | None:
        """The most specific common supertype, or None (different dtypes, not a tensor)."""
        if not isinstance(other, TensorType) or other.dtype != self.dtype:
            return None
        if self.shape is None or other.shape is None or len(self.shape) != len(other.shape):
            return TensorType(self.dtype, None)
        return TensorType(self.dtype, tuple(a if a == b else None for a, b in zip(self.shape, other.shape)))

    def __str__(self) -> str:
        dims = "<unknown rank>" if self.shape is None else list(self.shape)
        return f"TensorSpec({dims}, {self.dtype})"


@dataclass(frozen=True)
class LiteralType:
    """A Python value argument: keyed by value, with Python equality and hashing."""

    value: Hashable

    @staticmethod
    def of(value: Any) -> LiteralType:
        return LiteralType(_NaN() if isinstance(value, float) and math.isnan(value) else value)

    def accepts(self, other: TraceType) -> bool:
        return isinstance(other, LiteralType) and other.value == self.value

    def join(self, other: TraceType) -> LiteralType | None:
        return self if self.accepts(other) else None

    def __str__(self) -> str:
        return repr(self.value)


TraceType = Union[TensorType, LiteralType]
Signature = tuple[TraceType, ...]


def _accepts_all(target: Signature, call: Signature) -> bool:
    return len(target) == len(call) and all(t.accepts(c) for t, c in zip(target, call))


def _join_all(a: Signature, b: Signature) -> Signature | None:
    if len(a) != len(b):
        return None
    joined = tuple(x.join(y) for x, y in zip(a, b))
    return None if any(j is None for j in joined) else joined  # type: ignore[return-value]


def signature_str(sig: Sequence[TraceType]) -> str:
    return "(" + ", ".join(str(t) for t in sig) + ")"


@dataclass(frozen=True)
class Arg:
    """One argument of a generated call: a tf.Tensor, a NumPy array or a Python value."""

    kind: str  # "tensor" | "ndarray" | "python"
    dtype: str = "float32"
    shape: tuple[int, ...] = ()
    value: Any = None

    @staticmethod
    def tensor(dtype: str, *shape: int) -> Arg:
        return Arg("tensor", dtype, tuple(shape))

    @staticmethod
    def ndarray(dtype: str, *shape: int) -> Arg:
        return Arg("ndarray", dtype, tuple(shape))

    @staticmethod
    def python(value: Any) -> Arg:
        return Arg("python", "", (), value)

    @property
    def trace_type(self) -> TraceType:
        if self.kind == "python":
            return LiteralType.of(self.value)
        return TensorType(self.dtype, self.shape)

    def array(self, salt: int = 0) -> np.ndarray:
        """Deterministic values of this argument's shape and dtype (small, exact in every dtype)."""
        n = math.prod(self.shape)
        return ((np.arange(n) + salt) % 7 - 3).reshape(self.shape).astype(self.dtype)

    def __str__(self) -> str:
        if self.kind == "python":
            return repr(self.value)
        kind = "tf.Tensor" if self.kind == "tensor" else "np.ndarray"
        return f"{kind}({self.dtype}, {list(self.shape)})"


def call_str(args: Sequence[Arg]) -> str:
    return "f(" + ", ".join(str(a) for a in args) + ")"


def _bind(arg: Arg, spec: TensorType) -> TensorType | None:
    """The type an argument takes under an input_signature spec, or None if binding fails.

    Tensors are never cast between dtypes (tf.TensorSpec.cast: "cast tensor to tensor with
    different types are not supported"); NumPy arrays and Python numbers are converted to
    the spec's dtype first, as tf.constant(value, dtype) would.
    """
    if arg.kind == "tensor":
        typ = TensorType(arg.dtype, arg.shape)
    elif arg.kind == "ndarray":
        typ = TensorType(spec.dtype, arg.shape)
    elif isinstance(arg.value, (int, float)) and spec.dtype.startswith("float"):
        typ = TensorType(spec.dtype, ())
    else:
        return None
    return typ if spec.accepts(typ) else None


@dataclass(frozen=True)
class TracePrediction:
    traces: int  # cumulative trace count after the call
    traced: tuple[Signature, ...]  # the input types of each trace this call makes
    error: bool  # the call must raise TypeError (input_signature binding)


@dataclass
class FunctionCacheModel:
    """tf.function's documented cache rules, as a small state machine (see module docstring)."""

    input_signature: tuple[TensorType, ...] | None = None
    reduce_retracing: bool = False
    creates_variables: bool = False
    targets: list[Signature] = field(default_factory=list)
    traces: int = 0

    def call(self, args: Sequence[Arg]) -> TracePrediction:
        if self.input_signature is not None:
            if len(args) != len(self.input_signature) or any(
                _bind(a, s) is None for a, s in zip(args, self.input_signature)
            ):
                return TracePrediction(self.traces, (), True)
            call_type: Signature = tuple(self.input_signature)
        else:
            call_type = tuple(a.trace_type for a in args)
        if any(_accepts_all(t, call_type) for t in self.targets):
            return TracePrediction(self.traces, (), False)
        target = self._generalize(call_type) if self.reduce_retracing and self.input_signature is None else call_type
        self.targets.append(target)
        n = 2 if self.creates_variables and self.traces == 0 else 1
        self.traces += n
        return TracePrediction(self.traces, (target,) * n, False)

    def _generalize(self, call_type: Signature) -> Signature:
        # TypeDispatchTable.try_generalizing_function_type: fold over the traces in order.
        relaxed = call_type
        for other in self.targets:
            joined = _join_all(relaxed, other)
            if joined is not None:
                relaxed = joined
        return relaxed


@dataclass(frozen=True)
class TraceStep:
    call: str
    predicted: TracePrediction
    api_count: int
    side_effect_count: int
    seen: tuple[Signature, ...]
    error: str | None
    output: Any = None  # the call's result as numpy, None when it raised


def seen_type(tf: Any, value: Any) -> TraceType:
    """The type of a value as the traced Python body sees it."""
    if tf.is_tensor(value):
        shape = value.shape
        dims = None if shape.rank is None else tuple(shape.as_list())
        return TensorType(value.dtype.name, dims)
    if isinstance(value, np.ndarray):  # an eager wrapper passes arrays through unconverted
        return TensorType(str(value.dtype), tuple(value.shape))
    return LiteralType.of(value)


def sum_of_args(tf: Any) -> Callable[..., Any]:
    """The default traced body: the float64 sum of every argument (pure, cheap)."""

    def body(*args: Any) -> Any:
        total = tf.constant(0.0, tf.float64)
        for a in args:
            if a is None or isinstance(a, (bool, int, float)):
                total += float(a or 0)
            else:
                total += tf.reduce_sum(tf.cast(a, tf.float64))
        return total

    return body


def probe(tf: Any, fn: Callable[..., Any], log: list[Signature]) -> Callable[..., Any]:
    """``fn`` with a Python side effect: each execution of the body appends the types it sees.

    Under tf.function the side effect runs only while tracing, so ``len(log)`` counts traces
    independently of ``experimental_get_tracing_count``. ``__wrapped__`` is the bare ``fn``.
    """

    @functools.wraps(fn)
    def probed(*args: Any) -> Any:
        log.append(tuple(seen_type(tf, a) for a in args))
        return fn(*args)

    return probed


def check_trace_counts(
    tf: Any,
    calls: Sequence[Sequence[Arg]],
    *,
    body: Callable[..., Any] | None = None,
    input_signature: Sequence[TensorType] | None = None,
    reduce_retracing: bool = False,
    creates_variables: bool = False,
    wrapper: Callable[..., Any] | None = None,
    values: Callable[[int, Sequence[Arg]], list[Any]] | None = None,
) -> list[TraceStep]:
    """Run ``calls`` through ``wrapper(probe(body), ...)`` and compare every call with the model.

    ``wrapper`` defaults to ``tf.function``; it is called with ``input_signature`` and
    ``reduce_retracing`` and must return a callable with ``experimental_get_tracing_count()``.
    ``values(i, args)`` materialises call ``i`` (default: tensors/arrays from ``Arg.array``).
    Raises :class:`TraceCountMismatch` at the first call where the API count, the side
    effect count, the traced types or the raised error differ from the prediction.
    """
    __tracebackhide__ = True
    signature = None if input_signature is None else tuple(input_signature)
    model = FunctionCacheModel(signature, reduce_retracing, creates_variables)
    log: list[Signature] = []
    options: dict[str, Any] = {"reduce_retracing": reduce_retracing}
    if signature is not None:
        options["input_signature"] = [tf.TensorSpec(s.shape, getattr(tf, s.dtype)) for s in signature]
    fn = (wrapper or tf.function)(probe(tf, body or sum_of_args(tf), log), **options)
    make = values or (lambda i, args: [_materialize(tf, a, i) for a in args])
    steps: list[TraceStep] = []
    for i, args in enumerate(calls):
        before = len(log)
        output, error = _call(fn, make(i, args))
        predicted = model.call(args)
        step = TraceStep(call_str(args), predicted, fn.experimental_get_tracing_count(), len(log), tuple(log[before:]),
                         error, output)
        steps.append(step)
        _compare_trace_step(i, step, steps, options)
    evidence.note(trace_counts=[s.api_count for s in steps], calls=len(steps))
    return steps


def _materialize(tf: Any, arg: Arg, salt: int) -> Any:
    if arg.kind == "python":
        return arg.value
    array = arg.array(salt)
    return tf.constant(array) if arg.kind == "tensor" else array


def _call(fn: Callable[..., Any], args: list[Any]) -> tuple[Any, str | None]:
    try:
        out = fn(*args)
    except TypeError as exc:  # what input_signature binding raises; anything else propagates
        return None, f"TypeError: {str(exc).splitlines()[0][:300]}"
    return (out.numpy() if hasattr(out, "numpy") else out), None


def _compare_trace_step(i: int, step: TraceStep, steps: list[TraceStep], options: dict[str, Any]) -> None:
    __tracebackhide__ = True
    p = step.predicted
    problems = []
    if p.error and step.error is None:
        problems.append("the call succeeded, but the documented rules predict a TypeError (input_signature binding)")
    if not p.error and step.error is not None:
        problems.append(f"the call raised {step.error}, but the documented rules predict it succeeds")
    if step.api_count != p.traces or step.side_effect_count != p.traces:
        problems.append(
            f"{step.api_count} traces so far by experimental_get_tracing_count() and {step.side_effect_count} by the "
            f"Python side effect, but the documented cache rules predict {p.traces}"
        )
    elif step.seen != p.traced:
        seen = ", ".join(signature_str(s) for s in step.seen) or "no trace"
        want = ", ".join(signature_str(s) for s in p.traced) or "no trace"
        problems.append(f"the body was traced with {seen}, but the documented rules predict {want}")
    if problems:
        history = "; ".join(f"{s.call}: {s.api_count}/{s.side_effect_count}" for s in steps[:-1]) or "none"
        opts = ", ".join(f"{k}={v!r}" for k, v in options.items())
        raise TraceCountMismatch(
            f"call {i + 1} {step.call}: " + "; ".join(problems)
            + f" [options: {opts}; earlier calls (api/side effect): {history}]"
        )


# ------------------------------------------------------------------ call strategies

#: Python values with deliberate collisions under ``==`` (1 == 1.0 == True, 0 == 0.0 == False).
PYTHON_VALUES = (0, 1, 2, 0.0, 1.0, 2.0, 0.5, True, False, -1, None, float("nan"))


def shapes_of(max_rank: int = 2, max_side: int = 4, min_rank: int = 0) -> st.SearchStrategy[tuple[int, ...]]:
    return st.integers(min_rank, max_rank).flatmap(
        lambda r: st.lists(st.integers(1, max_side), min_size=r, max_size=r).map(tuple))


def array_args(dtypes: Sequence[str] = ("float32", "float64"), kinds: Sequence[str] = ("tensor",),
               max_rank: int = 2, max_side: int = 4, min_rank: int = 0) -> st.SearchStrategy[Arg]:
    """Hypothesis search strategy for tensor / NumPy array arguments."""
    return st.builds(Arg, st.sampled_from(tuple(kinds)), st.sampled_from(tuple(dtypes)),
                     shapes_of(max_rank, max_side, min_rank))


def python_args(values: Sequence[Any] = PYTHON_VALUES) -> st.SearchStrategy[Arg]:
    return st.sampled_from(tuple(values)).map(Arg.python)


def call_sequences(args: st.SearchStrategy[tuple[Arg, ...]], *, min_calls: int = 2, max_calls: int = 8,
                   max_pool: int = 4) -> st.SearchStrategy[list[tuple[Arg, ...]]]:
    """Sequences of calls drawn from a small pool of argument tuples, so signatures repeat."""
    pools = st.lists(args, min_size=1, max_size=max_pool)
    return pools.flatmap(lambda pool: st.lists(st.sampled_from(pool), min_size=min_calls, max_size=max_calls))


# =============================================================================== 2. torch.compile


class CompileCountMismatch(AssertionError):
    """Observed compiles or compiled runs differ from what the documented rules predict."""


@dataclass(frozen=True)
class _Entry:
    dtype: str
    dims: tuple[int | str, ...]  # a static size, or a symbol (dynamic, size >= 2)

    def matches(self, dtype: str, shape: tuple[int, ...]) -> bool:
        if dtype != self.dtype or len(shape) != len(self.dims):
            return False
        bound: dict[str, int] = {}
        for d, size in zip(self.dims, shape):
            if isinstance(d, int):
                if d != size:
                    return False
            elif size < 2 or bound.setdefault(d, size) != size:
                return False
        return True


@dataclass(frozen=True)
class CompilePrediction:
    compiles: int  # cumulative
    compiled_run: bool  # the call ran a compiled graph (False: eager fallback)
    dims: tuple[int | str, ...] | None  # the new entry's dims, when this call compiled


@dataclass
class DynamoCacheModel:
    """TorchDynamo's documented cache behaviour for one function of one tensor argument."""

    dynamic: bool | None
    recompile_limit: int
    entries: list[_Entry] = field(default_factory=list)
    recorded: list[int | None] | None = None  # automatic-dynamic frame state: size, or None once it changed

    def call(self, dtype: str, shape: tuple[int, ...]) -> CompilePrediction:
        if any(e.matches(dtype, shape) for e in self.entries):
            return CompilePrediction(len(self.entries), True, None)
        if len(self.entries) >= self.recompile_limit:
            return CompilePrediction(len(self.entries), False, None)
        entry = _Entry(dtype, self._dims(shape))
        self.entries.append(entry)
        return CompilePrediction(len(self.entries), True, entry.dims)

    def _dims(self, shape: tuple[int, ...]) -> tuple[int | str, ...]:
        dynamic = self._dynamic_dims(shape)
        dims: list[int | str] = []
        for d, size in enumerate(shape):
            if d not in dynamic or size < 2:  # 0/1 specialisation
                dims.append(size)
            elif self.dynamic is True:  # duck sizing: equal sizes share one symbol
                dims.append(f"s{size}")
            else:
                dims.append(f"d{d}")
        return tuple(dims)

    def _dynamic_dims(self, shape: tuple[int, ...]) -> set[int]:
        if self.dynamic is True:
            return set(range(len(shape)))
        if self.dynamic is False:
            return set()
        if self.recorded is None or len(self.recorded) != len(shape):
            self.recorded = list(shape)
            return set()
        for d, size in enumerate(shape):
            if self.recorded[d] != size:
                self.recorded[d] = None
        return {d for d, s in enumerate(self.recorded) if s is None}


class CountingBackend:
    """A torch.compile backend that counts compiles and runs of what it compiled.

    ``inner`` is a registered backend name ("eager", "aot_eager", "inductor", ...) or a
    backend callable; its compiled function is wrapped, so ``runs`` counts calls that really
    executed a compiled graph (an eager fallback does not).
    """

    def __init__(self, torch: Any, inner: str | Callable[..., Any] = "eager") -> None:
        self.name = inner if isinstance(inner, str) else getattr(inner, "__name__", "backend")
        self._inner = torch._dynamo.lookup_backend(inner) if isinstance(inner, str) else inner
        self.compiles = 0
        self.runs = 0
        self.__name__ = f"counting_{self.name}"

    def __call__(self, gm: Any, example_inputs: Any) -> Callable[..., Any]:
        self.compiles += 1
        compiled = self._inner(gm, example_inputs)

        def run(*args: Any) -> Any:  # dynamo calls a backend's result with the flat inputs
            self.runs += 1
            return compiled(*args)

        return run


_FRESH = itertools.count()


def fresh_function(namespace: dict[str, Any], body: str, prefix: str = "dlconform_fn") -> Callable[..., Any]:
    """A new function (new code object, new name, new file name) from one-argument ``body`` source.

    Dynamo keys its caches and its automatic-dynamic state by code object and by
    (file, line, name); a fresh function starts from an empty cache, whatever ran before.
    """
    n = next(_FRESH)
    name = f"{prefix}_{n}"
    source = f"def {name}(x):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    filename = f"<{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = dict(namespace, __name__=f"dlconform_generated_{n}")
    exec(compile(source, filename, "exec"), scope)
    return scope[name]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class CompileStep:
    call: str
    predicted: CompilePrediction
    compiles: int
    runs: int
    graphs: int


def check_compile_counts(
    torch: Any,
    fn: Callable[[Any], Any],
    calls: Sequence[tuple[str, tuple[int, ...]]],
    *,
    dynamic: bool | None,
    wrapper: Callable[..., Any] | None = None,
    tolerance: Callable[[str], float] | None = None,
) -> list[CompileStep]:
    """Compile ``fn`` (one tensor argument; pass a :func:`fresh_function`) and call it with
    tensors of the given (dtype, shape); compare compiles and compiled runs with the model.

    Observed two ways: the counting backend (compiles, runs of compiled graphs) and dynamo's
    ``counters["stats"]["unique_graphs"]``. Every output is also compared with eager ``fn``
    (relative ``tolerance(dtype)``, default 0: the eager backend runs the same kernels).
    """
    __tracebackhide__ = True
    from torch._dynamo.utils import counters

    backend = CountingBackend(torch, "eager")
    model = DynamoCacheModel(dynamic, int(torch._dynamo.config.recompile_limit))
    compiled = (wrapper or torch.compile)(fn, backend=backend, dynamic=dynamic)
    graphs0 = counters["stats"]["unique_graphs"]
    steps: list[CompileStep] = []
    for i, (dtype, shape) in enumerate(calls):
        x = torch.arange(math.prod(shape), dtype=getattr(torch, dtype)).reshape(shape) * 0.25 - 1.0
        runs = backend.runs
        out = compiled(x)
        predicted = model.call(dtype, shape)
        step = CompileStep(f"f(tensor({dtype}, {list(shape)}))", predicted, backend.compiles,
                           backend.runs - runs, counters["stats"]["unique_graphs"] - graphs0)
        steps.append(step)
        _compare_compile_step(i, step, steps, dynamic, model.recompile_limit)
        _compare_output(torch, out, fn(x), (tolerance or (lambda d: 0.0))(dtype), step.call)
    evidence.note(compile_counts=[s.compiles for s in steps], compiled_runs=[s.runs for s in steps])
    return steps


def _compare_compile_step(i: int, step: CompileStep, steps: list[CompileStep], dynamic: bool | None, limit: int) -> None:
    __tracebackhide__ = True
    p = step.predicted
    problems = []
    if step.compiles != p.compiles or step.graphs != p.compiles:
        problems.append(
            f"{step.compiles} compiles so far by the counting backend and {step.graphs} graphs by dynamo's counter, "
            f"but the documented rules predict {p.compiles}"
        )
    ran = step.runs >= 1
    if ran != p.compiled_run:
        problems.append(
            "the call ran a compiled graph, but the rules predict an eager fallback (recompile limit reached)"
            if ran else "the call ran eagerly (no compiled graph executed), but the rules predict a compiled run"
        )
    if problems:
        history = "; ".join(f"{s.call}: {s.compiles}" for s in steps[:-1]) or "none"
        raise CompileCountMismatch(
            f"call {i + 1} {step.call}: " + "; ".join(problems)
            + f" [dynamic={dynamic!r}, recompile_limit={limit}; earlier calls (compiles): {history}]"
        )


def _compare_output(torch: Any, out: Any, ref: Any, rtol: float, what: str) -> None:
    __tracebackhide__ = True
    a, b = out.detach().double().cpu().numpy(), ref.detach().double().cpu().numpy()
    if a.shape != b.shape:
        raise CompileCountMismatch(f"{what}: the compiled output has shape {a.shape}, eager {b.shape}")
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    err = float(np.max(np.abs(a - b))) if b.size else 0.0
    if err > rtol * scale:
        raise CompileCountMismatch(f"{what}: the compiled output differs from eager by {err:.3e} at scale {scale:.3e}")


# =============================================================================== 3. control-flow programs


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


Stmt = Union[Unary, Affine, Dense, TensorIf, PythonIf, TensorWhile, TensorFor, PythonFor]
TENSOR_FLOW = (TensorIf, TensorWhile, TensorFor)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


# name -> (tf source, torch source, numpy value, numpy derivative, TF op type, autograd node)
UNARY: dict[str, tuple[str, str, Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray], str, str]] = {
    "sin": ("tf.sin(x)", "torch.sin(x)", np.sin, np.cos, "Sin", "SinBackward0"),
    "cos": ("tf.cos(x)", "torch.cos(x)", np.cos, lambda x: -np.sin(x), "Cos", "CosBackward0"),
    "tanh": ("tf.tanh(x)", "torch.tanh(x)", np.tanh, lambda x: 1.0 - np.tanh(x) ** 2, "Tanh", "TanhBackward0"),
    "sigmoid": ("tf.sigmoid(x)", "torch.sigmoid(x)", _sigmoid, lambda x: _sigmoid(x) * (1.0 - _sigmoid(x)),
                "Sigmoid", "SigmoidBackward0"),
}
MARKER_OPS = tuple(v[4] for v in UNARY.values()) + ("Relu", "MatMul")
AUTOGRAD_NODES = {v[5]: k for k, v in UNARY.items()} | {"ReluBackward0": "relu", "MmBackward0": "matmul"}


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
        n = next(_FRESH)
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
        return fn  # type: ignore[no-any-return]

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
                lines += _render(s.body, fw, ind + "    ", names) + [f"{ind}    i{k} += 1"]
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
        if isinstance(s, Unary):
            _, _, f, df, _, _ = UNARY[s.op]
            if st_.tangent is not None:
                st_.tangent = df(st_.y) * st_.tangent
            st_.y = f(st_.y)
            st_.executed[s.op] += 1
        elif isinstance(s, Affine):
            st_.y = st_.y * s.scale + s.shift
            if st_.tangent is not None:
                st_.tangent = st_.tangent * s.scale
        elif isinstance(s, Dense):
            k = names(s)
            z = st_.y @ weights[f"W{k}"] + weights[f"B{k}"]
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
    kinds = [
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


# =============================================================================== graph optimisation


class OptimisationNotObserved(AssertionError):
    """The optimised graph shows no trace of the optimisation the rules promise."""


_SOURCE_OPS = {"Const", "Placeholder", "_Arg", "NoOp"}


def constant_subexpressions(nodes: Sequence[Any]) -> list[str]:
    """Names of nodes that compute something from constants only (data inputs all Const)."""
    op_of = {n.name: n.op for n in nodes}
    out = []
    for n in nodes:
        data = [i.split(":")[0] for i in n.input if not i.startswith("^")]
        if n.op not in _SOURCE_OPS and data and all(op_of.get(i) == "Const" for i in data):
            out.append(n.name)
    return out


def check_constant_folding(optimised: Sequence[Any], unoptimised: Sequence[Any], planted: str) -> dict[str, Any]:
    """Grappler's constant folding: the planted constant-only node ``planted`` is computed
    in the unoptimised graph and is a Const (or gone) in the optimised one, and the
    optimised graph has fewer nodes. Nodes are NodeDefs from RunMetadata.partition_graphs."""
    __tracebackhide__ = True
    before = {n.name: n.op for n in unoptimised}
    after = {n.name: n.op for n in optimised}
    facts = {"nodes_unoptimised": len(unoptimised), "nodes_optimised": len(optimised),
             "constant_subexpressions_unoptimised": len(constant_subexpressions(unoptimised)),
             "constant_subexpressions_optimised": len(constant_subexpressions(optimised)),
             "planted_op_unoptimised": before.get(planted), "planted_op_optimised": after.get(planted)}
    evidence.note(**facts)
    if before.get(planted) in (None, "Const"):
        raise OptimisationNotObserved(
            f"the planted constant expression {planted!r} is {before.get(planted)!r} in the graph run without "
            "optimisation: that run was optimised too, so nothing can be compared"
        )
    if after.get(planted) not in (None, "Const") or len(optimised) >= len(unoptimised):
        raise OptimisationNotObserved(
            f"constant folding not observed: {planted!r} is still a {after.get(planted)!r} node after optimisation, "
            f"and the optimised graph has {len(optimised)} nodes against {len(unoptimised)} without optimisation"
        )
    return facts
