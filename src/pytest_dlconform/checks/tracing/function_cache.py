"""``tf.function``'s trace cache: a model of the documented rules, the counting oracle, and
the hypothesis strategies for call sequences.

:class:`FunctionCacheModel` predicts, from the documented rules alone, how many traces a
sequence of calls causes and with which input types each trace is made.
:func:`check_trace_counts` runs the calls through a real ``tf.function`` (or any wrapper
with the same interface) and observes the traces two independent ways:
``experimental_get_tracing_count()`` and a Python side effect in the traced body (which also
records the types the body saw), then compares call by call.

The rules modelled (TF 2.x, tf.function reference and the guide "Better performance with
tf.function", "Rules of tracing"):

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

Importing this module imports no framework.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ...core import evidence


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


TraceType = TensorType | LiteralType
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
