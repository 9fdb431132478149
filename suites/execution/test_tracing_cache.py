"""tf.function's trace cache: generated call sequences against a model of the documented rules.

Each test draws call sequences (shapes, dtypes, argument kinds, orders, options), predicts
the trace count and the traced input types after every call from
:class:`checks.tracing.FunctionCacheModel`, and compares with a fresh tf.function observed
two ways (``experimental_get_tracing_count()`` and a Python side effect in the body).
Where a claim also has a simpler invariant (one trace per distinct signature, at most one
trace with an input_signature), the test checks that too, independently of the model.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence
from pytest_dlconform.api.tracing import (
    Arg,
    TensorType,
    array_args,
    call_sequences,
    check_trace_counts,
    python_args,
    shapes_of,
)

FLOATS = ("float32", "float64")
T = Arg.tensor


def _sequences(arg: st.SearchStrategy[Arg], max_args: int = 2) -> st.SearchStrategy[list[tuple[Arg, ...]]]:
    """Calls of a function with a fixed number of arguments (1..max_args)."""
    return st.integers(1, max_args).flatmap(lambda n: call_sequences(st.tuples(*[arg] * n)))


def _distinct_signatures(calls: list[tuple[Arg, ...]]) -> int:
    return len({tuple(a.trace_type for a in args) for args in calls})


def _kinds(calls: list[tuple[Arg, ...]]) -> set[str]:
    return {a.kind for args in calls for a in args}


def _transitions(calls: list[tuple[Arg, ...]]) -> set[str]:
    """What made each unseen tensor argument new: its shape (same dtype and rank seen), its
    dtype (same shape seen) or its rank (no earlier argument in that position had it)."""
    found: set[str] = set()
    for i, args in enumerate(calls):
        for j, a in enumerate(args):
            earlier = [c[j] for c in calls[:i] if c[j].kind != "python"]
            if a.kind == "python" or not earlier or any(e.trace_type == a.trace_type for e in earlier):
                continue
            if all(len(e.shape) != len(a.shape) for e in earlier):
                found.add("new-rank")
            elif any(e.shape == a.shape for e in earlier):
                found.add("new-dtype")
            elif any(e.dtype == a.dtype and len(e.shape) == len(a.shape) for e in earlier):
                found.add("new-shape")
    return found


def _generalisations(calls: list[tuple[Arg, ...]]) -> set[str]:
    """The reduce_retracing cases a sequence reaches, per argument position."""
    found: set[str] = set()
    for j in range(len(calls[0]) if calls else 0):
        seen = [c[j] for c in calls]
        tensors = [a for a in seen if a.kind != "python"]
        values = {repr(a.value) for a in seen if a.kind == "python"}
        pairs = [(a, b) for a in tensors for b in tensors if a.dtype == b.dtype]
        if any(len(a.shape) == len(b.shape) and a.shape != b.shape for a, b in pairs):
            found.add("dims->None")
        if any(len(a.shape) != len(b.shape) for a, b in pairs):
            found.add("rank->unknown")
        if len({a.dtype for a in tensors}) > 1:
            found.add("dtype-kept")
        if len(values) > 1:
            found.add("python-value-kept")
    return found


def _python_kinds(calls: list[tuple[Arg, ...]]) -> set[str]:
    found = set()
    for args in calls:
        for a in args:
            if a.kind == "python":
                v = a.value
                found.add("python-nan" if isinstance(v, float) and v != v else
                          "python-None" if v is None else f"python-{type(v).__name__}")
            elif a.kind == "ndarray":
                found.add("numpy-0d" if a.shape == () else "ndarray-spec")
            else:
                found.add("tf.Tensor")
    return found


@pytest.mark.claim("execution.function.trace-once-per-signature")
@budget(20)
@given(calls=_sequences(array_args((*FLOATS, "int32"), ("tensor", "ndarray"), max_rank=2, max_side=3)))
@example(calls=[(T("float32", 2),), (Arg.ndarray("float32", 2),), (Arg.ndarray("float64", 2, 1),), (T("float32", 2),)])
def test_one_trace_per_input_signature(tf, calls):
    steps = check_trace_counts(tf, calls)
    # Without options the model reduces to: one trace per distinct signature, ever.
    assert steps[-1].api_count == _distinct_signatures(calls), (
        f"{steps[-1].api_count} traces for {_distinct_signatures(calls)} distinct input signatures"
    )
    evidence.covers(*({"tensor": "arg=tf.Tensor", "ndarray": "arg=np.ndarray"}[k] for k in _kinds(calls)))


@pytest.mark.claim("execution.function.retrace-on-new-shape")
@budget(20)
@given(calls=_sequences(array_args((*FLOATS, "int32"), ("tensor",), max_rank=3, max_side=4)))
@example(calls=[(T("float32", 2),), (T("float32", 2),), (T("float32", 3),), (T("float32", 2),),
                (T("float64", 2),), (T("float32", 4),)])  # the trial run's sequence: 1,1,2,2,3,4
@example(calls=[(T("float32", 2),), (T("float32", 2, 2),), (T("float32"),)])
def test_new_shape_or_dtype_retraces_with_exact_spec(tf, calls):
    steps = check_trace_counts(tf, calls)
    for step in steps:  # never relaxed by itself: every trace has a fully known shape
        for sig in step.seen:
            assert all(isinstance(t, TensorType) and t.shape is not None and None not in t.shape for t in sig), (
                f"{step.call} was traced with {sig}: tf.function relaxed a shape without reduce_retracing"
            )
    evidence.covers(*_transitions(calls))


@st.composite
def _signature_and_calls(draw):
    specs = st.builds(
        TensorType, st.sampled_from(FLOATS),
        st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(1, 3)), max_size=3).map(tuple)),
    )
    signature = draw(st.lists(specs, min_size=1, max_size=2))
    args = [st.one_of(_compatible(spec), array_args((*FLOATS, "int32"), ("tensor", "ndarray"), max_side=3),
                      python_args((0, 1, 2.0, 0.5, -1))) for spec in signature]
    return signature, draw(call_sequences(st.tuples(*args), max_calls=6))


def _compatible(spec: TensorType) -> st.SearchStrategy[Arg]:
    """Arguments the spec accepts: unknown dims and unknown ranks filled at random."""
    shape = shapes_of(3, 3) if spec.shape is None else st.tuples(
        *[st.integers(1, 4) if d is None else st.just(d) for d in spec.shape])
    return st.builds(Arg, st.sampled_from(("tensor", "ndarray")), st.just(spec.dtype), shape)


@pytest.mark.claim("execution.function.signature-prevents-retrace")
@budget(20)
@given(case=_signature_and_calls())
@example(case=([TensorType("float32", (None,))],
               [(T("float32", 2),), (T("float32", 5),), (T("float64", 5),), (T("float32", 2, 2),),
                (Arg.ndarray("float64", 3),)]))
@example(case=([TensorType("float32", None)], [(T("float32", 2),), (T("float32", 2, 3),), (T("float32"),)]))
def test_input_signature_traces_once_and_rejects_other_dtypes(tf, case):
    signature, calls = case
    steps = check_trace_counts(tf, calls, input_signature=signature)
    assert steps[-1].api_count <= 1, f"{steps[-1].api_count} traces with an input_signature"
    evidence.note(rejected_calls=sum(s.error is not None for s in steps))
    modes = {"None-dims" for spec in signature if spec.shape is not None and None in spec.shape}
    modes |= {"unknown-rank" for spec in signature if spec.shape is None}
    modes |= {"TypeError-on-incompatible" for s in steps if s.error is not None}
    modes |= {"ndarray-converted" for s, args in zip(steps, calls) if s.error is None
              and any(a.kind == "ndarray" for a in args)}
    evidence.covers(*modes)


@pytest.mark.claim("execution.function.reduce-retracing")
@budget(20)
@given(calls=_sequences(st.one_of(array_args(FLOATS, ("tensor", "ndarray"), max_rank=3, max_side=4),
                                  python_args((0, 1, 2.5)))))
@example(calls=[(T("float32", 2),), (T("float32", 3),), (T("float32", 4),), (T("float32", 2, 2),), (T("float32", 7),)])
@example(calls=[(T("float32", 2),), (T("float64", 2),), (Arg.python(0),), (Arg.python(1),), (T("float64", 3),)])
def test_reduce_retracing_generalises_shapes(tf, calls):
    steps = check_trace_counts(tf, calls, reduce_retracing=True)
    plain = check_trace_counts(tf, calls)
    # Generalising can only save traces, never add them.
    assert steps[-1].api_count <= plain[-1].api_count, (
        f"reduce_retracing=True traced {steps[-1].api_count} times, without it {plain[-1].api_count}"
    )
    evidence.note(traces_saved=plain[-1].api_count - steps[-1].api_count)
    evidence.covers(*_generalisations(calls))


@pytest.mark.claim("execution.function.python-args")
@budget(20)
@given(calls=_sequences(st.one_of(python_args(), array_args(FLOATS, ("tensor", "ndarray"), max_rank=1, max_side=2))))
@example(calls=[(Arg.python(2),), (Arg.python(2.0),), (Arg.python(True),), (Arg.python(1),), (Arg.python(1.0),),
                (Arg.ndarray("float32", 2),), (T("float32", 2),), (Arg.ndarray("float64"),), (Arg.python(float("nan")),),
                (Arg.python(float("nan")),), (Arg.python(None),)])
def test_python_values_key_by_value_arrays_by_spec(tf, calls):
    steps = check_trace_counts(tf, calls)
    # Python equality decides for Python values, TensorSpec for arrays and tensors alike.
    assert steps[-1].api_count == _distinct_signatures(calls), (
        f"{steps[-1].api_count} traces for {_distinct_signatures(calls)} distinct keys"
    )
    evidence.covers(*_python_kinds(calls))
