"""The models and oracles of checks/tracing/ without any framework.

The cache models are checked against the documented examples and the sequences observed
in the trial run; the control-flow programs' rendered source is executed against a tiny
numpy stand-in for the ``tf``/``torch`` namespace and compared with the interpreter; every
check is fed a wrong input and must fail with a message that says what differs.
"""

from __future__ import annotations

import math
import pathlib
import re
import types
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlconform.checks.numerics import ToleranceExceeded
from pytest_dlconform.checks.tracing import (
    Affine,
    Arg,
    ControlFlowMismatch,
    Dense,
    DynamoCacheModel,
    FlowProgram,
    FunctionCacheModel,
    LiteralType,
    OptimisationNotObserved,
    PythonFor,
    PythonIf,
    TensorFor,
    TensorIf,
    TensorType,
    TensorWhile,
    Unary,
    ambiguity,
    assert_within,
    check_constant_folding,
    check_counts,
    constant_subexpressions,
    flow_inputs,
    flow_programs,
)
from pytest_dlconform.core import claims

T = Arg.tensor


def counts(model: FunctionCacheModel, calls: list[tuple[Arg, ...]]) -> list[int]:
    return [model.call(c).traces for c in calls]


# ------------------------------------------------------------------ trace types


def test_tensor_types_accept_and_join_like_tensorspec():
    vec = TensorType("float32", (None,))
    assert vec.accepts(TensorType("float32", (7,))) and not vec.accepts(TensorType("float32", (7, 1)))
    assert not vec.accepts(TensorType("float64", (7,)))
    assert TensorType("float32", None).accepts(TensorType("float32", (1, 2, 3)))
    assert TensorType("float32", (2, 3)).join(TensorType("float32", (2, 4))) == TensorType("float32", (2, None))
    assert TensorType("float32", (2,)).join(TensorType("float32", (2, 2))) == TensorType("float32", None)
    assert TensorType("float32", (2,)).join(TensorType("float64", (2,))) is None
    assert TensorType("float32", (2,)).join(LiteralType.of(2)) is None


def test_literals_use_python_equality_and_match_nan():
    assert LiteralType.of(2) == LiteralType.of(2.0) and LiteralType.of(True) == LiteralType.of(1)
    assert LiteralType.of(float("nan")).accepts(LiteralType.of(float("nan")))
    assert LiteralType.of(1).join(LiteralType.of(2)) is None
    assert not LiteralType.of(0).accepts(TensorType("int32", ()))


# ------------------------------------------------------------------ tf.function cache model


def test_model_gives_the_trial_runs_shape_sequence():
    calls = [(T("float32", 2),), (T("float32", 2),), (T("float32", 3),), (T("float32", 2),), (T("float64", 2),),
             (T("float32", 4),)]
    assert counts(FunctionCacheModel(), calls) == [1, 1, 2, 2, 3, 4]


def test_model_reduce_retracing_relaxes_in_order():
    model = FunctionCacheModel(reduce_retracing=True)
    calls = [(T("float32", 2),), (T("float32", 3),), (T("float32", 4),), (T("float32", 2, 2),), (T("float32", 5),)]
    first, second, third, rank2, fifth = (model.call(c) for c in calls)
    assert [p.traces for p in (first, second, third, rank2, fifth)] == [1, 2, 2, 3, 3]
    assert second.traced == ((TensorType("float32", (None,)),),)
    assert rank2.traced == ((TensorType("float32", None),),)


def test_model_does_not_generalise_across_python_values():
    model = FunctionCacheModel(reduce_retracing=True)
    calls = [(T("float32", 2), Arg.python(1)), (T("float32", 3), Arg.python(1)), (T("float32", 3), Arg.python(2)),
             (T("float32", 5), Arg.python(2)), (T("float32", 5), Arg.python(1.0))]
    assert counts(model, calls) == [1, 2, 3, 4, 4]


def test_model_keys_python_values_by_value_and_arrays_by_spec():
    calls = [(Arg.python(2),), (Arg.python(2.0),), (Arg.python(True),), (Arg.python(1),), (Arg.ndarray("float32", 2),),
             (T("float32", 2),), (Arg.ndarray("float64"),), (Arg.python(float("nan")),), (Arg.python(float("nan")),)]
    assert counts(FunctionCacheModel(), calls) == [1, 1, 2, 2, 3, 3, 4, 5, 5]


def test_model_input_signature_converts_non_tensors_and_rejects_tensor_dtypes():
    model = FunctionCacheModel(input_signature=(TensorType("float32", (None,)),))
    calls = [(T("float32", 3),), (Arg.ndarray("float64", 4),), (T("float64", 3),), (T("float32", 2, 2),),
             (Arg.python(2.0),), (T("float32", 9),)]
    predictions = [model.call(c) for c in calls]
    assert [p.error for p in predictions] == [False, False, True, True, True, False]
    assert [p.traces for p in predictions] == [1, 1, 1, 1, 1, 1]
    assert predictions[0].traced == ((TensorType("float32", (None,)),),)


def test_model_traces_twice_when_the_first_call_creates_variables():
    model = FunctionCacheModel(creates_variables=True)
    assert counts(model, [(T("float32", 2),), (T("float32", 2),), (T("float32", 3),)]) == [2, 2, 3]


# ------------------------------------------------------------------ dynamo model


@pytest.mark.parametrize(("dynamic", "calls", "expected"), [
    # observed with torch 2.13 (backend counting compiles), see the module docstring of checks/tracing/dynamo_cache.py
    (None, [(3,), (3,), (4,), (5,), (1,), (2,), (0,)], [1, 1, 2, 2, 3, 3, 4]),
    (None, [(3, 3), (4, 4), (5, 6), (5, 5), (1, 1), (2, 3)], [1, 2, 2, 2, 3, 3]),
    (None, [(3, 3), (3, 4), (3, 5), (4, 5), (4, 4)], [1, 2, 2, 3, 3]),
    (True, [(3, 3), (3, 4), (4, 4), (5, 6)], [1, 2, 2, 2]),
    (True, [(1,), (0,), (1,), (2,), (3,), (0,)], [1, 2, 2, 3, 3, 3]),
    (False, [(2,), (3,), (4,), (3,)], [1, 2, 3, 3]),
])
def test_dynamo_model_reproduces_observed_sequences(dynamic, calls, expected):
    model = DynamoCacheModel(dynamic, 8)
    assert [model.call("float32", s).compiles for s in calls] == expected


def test_dynamo_model_dtype_change_keeps_dynamic_dims():
    model = DynamoCacheModel(None, 8)
    seq = [("float32", (3,)), ("float64", (3,)), ("float64", (4,)), ("float32", (4,)), ("float32", (5,))]
    assert [model.call(d, s).compiles for d, s in seq] == [1, 2, 3, 4, 4]


def test_dynamo_model_falls_back_to_eager_after_the_limit():
    model = DynamoCacheModel(None, 2)
    preds = [model.call("float32", s) for s in [(2,), (3,), (1,), (0,), (2,), (5,), (1,)]]
    assert [p.compiles for p in preds] == [1, 2, 2, 2, 2, 2, 2]
    assert [p.compiled_run for p in preds] == [True, True, False, False, True, True, False]


# ------------------------------------------------------------------ control-flow programs


def _numpy_namespace() -> Any:
    """Just enough of tf's API, in numpy, to execute the rendered TensorFlow source."""
    unary = {"sin": np.sin, "cos": np.cos, "tanh": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x))}
    return types.SimpleNamespace(
        **unary, math=types.SimpleNamespace(**unary),  # the records' templates say tf.math.<op>
        reduce_mean=np.mean, where=lambda c, a, b: a if c else b, constant=lambda v, dtype=None: np.asarray(v),
        range=range, matmul=np.matmul, nn=types.SimpleNamespace(relu=lambda z: np.maximum(z, 0.0)), float64="float64",
    )


@settings(max_examples=60, deadline=None)
@given(program=flow_programs(), x=flow_inputs())
def test_rendered_source_computes_what_the_interpreter_computes(program, x):
    fn = program.load("tensorflow", _numpy_namespace(), "float64")
    np.testing.assert_allclose(fn(x), program.run(x).y, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(program=flow_programs(), x=flow_inputs(), seed=st.integers(0, 2**16))
def test_interpreter_tangent_matches_finite_differences(program, x, seed):
    u = np.random.default_rng(seed).standard_normal(x.shape)
    run = program.run(x, tangent=u)
    h = 1e-6
    plus, minus = program.run(x + h * u), program.run(x - h * u)
    if plus.decisions != run.decisions or minus.decisions != run.decisions or run.kink < 1e-4:
        return  # a step crossed a branch or a relu kink: no derivative to compare there
    fd = (plus.y - minus.y) / (2 * h)
    np.testing.assert_allclose(run.tangent, fd, atol=1e-6 * (1 + np.max(np.abs(fd))))


def test_forced_decisions_replay_a_recorded_path():
    program = FlowProgram((TensorIf(0.0, (Unary("sin"),), (Affine(0.5, 0.0),)),))
    x_pos, x_neg = np.full((2, 3), 1.0), np.full((2, 3), -1.0)
    assert program.run(x_pos).decisions == [True]
    frozen = program.run(x_neg, forced=[True])
    np.testing.assert_array_equal(frozen.y, np.sin(x_neg))
    assert frozen.decisions == [True] and program.run(x_neg).decisions == [False]


def test_predicted_structure_of_a_hand_written_program():
    program = FlowProgram((
        Unary("sin"),
        TensorIf(0.25, (Unary("tanh"), TensorIf(0.3, (Unary("sin"),))), (Affine(0.5, 0.1),)),
        TensorWhile(0.1, (3, 1), (Unary("sin"),)),
        TensorFor(0.1, (3, 1), (Unary("tanh"),)),
        PythonFor(2, (Unary("sin"), Dense(7))),
        PythonIf(False, (Unary("tanh"), TensorIf(0.0, (Unary("cos"),))), (Unary("sigmoid"),)),
    ))
    assert program.autograph_graph_counts() == Counter(
        {"Sin": 5, "Tanh": 2, "If": 2, "While": 2, "MatMul": 2, "Relu": 2, "Sigmoid": 1})
    assert program.autograph_code_counts() == Counter({"if_stmt": 4, "while_stmt": 1, "for_stmt": 2})
    assert program.torchscript_counts() == Counter({"prim::If": 4, "prim::Loop": 3})
    assert program.reaches_tensor_control_flow()
    assert not FlowProgram((PythonIf(False, (TensorIf(0.0, (Unary("sin"),)),)),)).reaches_tensor_control_flow()


def test_ambiguity_flags_decisions_within_round_off():
    program = FlowProgram((TensorIf(0.0, (Unary("sin"),)),))
    assert ambiguity(program.run(np.array([[1e-12, -1e-12]])), 2.0**-24)
    assert not ambiguity(program.run(np.array([[0.5, 0.5]])), 2.0**-24)


# ------------------------------------------------------------------ checks fed wrong inputs


def test_check_counts_fails_with_every_difference_named():
    with pytest.raises(ControlFlowMismatch, match=r"graph: If: 0, but should be 2; While: 3, but should be 1"):
        check_counts(Counter({"While": 3, "Sin": 1}), Counter({"If": 2, "While": 1, "Sin": 1}), ("If", "While", "Sin"),
                     what="graph")
    check_counts(Counter({"If": 2}), Counter({"If": 2}), ("If",), what="graph")


def test_assert_within_fails_beyond_the_bound_and_on_nan_mismatch():
    assert assert_within([1.0, 2.0], [1.0, 2.0 + 1e-9], 1e-8, what="ok") <= 1e-8
    message = r"wrong: max\|actual - expected\| = 1\.000e-06, but should be <= 1\.000e-08"
    with pytest.raises(ToleranceExceeded, match=message):
        assert_within([1.0, 2.0], [1.0, 2.0 + 1e-6], 1e-8, what="wrong")
    with pytest.raises(ToleranceExceeded, match=r"nan: element \[0\] is nan, but should be 1\.0"):
        assert_within([math.nan], [1.0], 1.0, what="nan")
    with pytest.raises(ToleranceExceeded, match="shape"):
        assert_within([1.0], [[1.0]], 1.0, what="shape")


def _node(name: str, op: str, *inputs: str) -> Any:
    return types.SimpleNamespace(name=name, op=op, input=list(inputs))


def _graph(planted_op: str, extra: int = 0) -> list[Any]:
    inputs = ("a", "b") if planted_op != "Const" else ()
    nodes = [_node("a", "Const"), _node("b", "Const"), _node("x", "_Arg"), _node("planted", planted_op, *inputs),
             _node("y", "Mul", "x", "planted")]
    return nodes + [_node(f"n{i}", "Identity", "y") for i in range(extra)]


def test_constant_folding_check_passes_a_folded_graph_and_fails_others():
    assert constant_subexpressions(_graph("Mul")) == ["planted"]
    assert check_constant_folding(_graph("Const")[2:], _graph("Mul"), "planted")["planted_op_optimised"] == "Const"
    with pytest.raises(OptimisationNotObserved, match="still a 'Mul' node after optimisation"):
        check_constant_folding(_graph("Mul"), _graph("Mul"), "planted")
    with pytest.raises(OptimisationNotObserved, match="that run was optimised too"):
        check_constant_folding(_graph("Const"), _graph("Const"), "planted")


# ------------------------------------------------------------------ the suite names every claim


def test_every_execution_claim_has_a_suite_test():
    suite = pathlib.Path(__file__).resolve().parents[2] / "suites" / "execution"
    named = set(re.findall(r'mark\.claim\("([^"]+)"\)', "".join(p.read_text() for p in suite.glob("test_*.py"))))
    registered = {c for c in claims.registry() if c.startswith("execution.")}
    assert registered - named == set(), f"execution claims without a test: {sorted(registered - named)}"
    assert named - registered == set(), f"tests naming unregistered claims: {sorted(named - registered)}"
