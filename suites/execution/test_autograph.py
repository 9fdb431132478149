"""AutoGraph on generated control-flow programs: what the traced graph must contain, what
to_code shows, and what happens without it.

The programs (:class:`checks.tracing.FlowProgram`) mix tensor-dependent if/while/for with
Python-valued ifs and range() loops, nested; the float64 numpy interpreter gives the
values and the decisions, and the program predicts the graph's If/While ops and how many
times each marker op (Sin, Cos, Tanh, Sigmoid, MatMul, Relu) appears once Python control
flow is resolved and range() unrolled.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, budget, evidence, tolerance
from pytest_dlconform.api.tracing import (
    MARKER_OPS,
    ambiguity,
    check_counts,
    flow_inputs,
    flow_programs,
    tf_graph_op_counts,
)

FLOATS = ("float32", "float64")
CODE_KEYS = ("if_stmt", "while_stmt", "for_stmt")


def _reference(program, x, dtype, device):
    # Dense statements are matmuls: TF32 on recent GPUs (numerics.tolerance knows).
    run = program.run(x)
    # Outputs may cancel (an affine shift of sigmoids near 1/2): the rounding is that of the
    # largest intermediate (FlowRun.magnitude), numerics.tolerance's magnitude floor.
    tol = tolerance(dtype, ops=program.op_count(), reduction=x.size, device=device, framework="tensorflow",
                    matmul=True, magnitude=run.magnitude)
    # A decision within round-off of its threshold may legitimately go either way in dtype.
    assume(not ambiguity(run, tol.rtol))
    return run, tol


@pytest.mark.claim("execution.autograph.control-flow")
@budget(12)
@given(program=flow_programs(require_tensor_flow=True), x=flow_inputs(), dtype=st.sampled_from(FLOATS))
def test_tensor_control_flow_becomes_graph_ops(tf, dl_device, program, x, dtype):
    run, tol = _reference(program, x, dtype, dl_device)
    fn = program.load("tensorflow", tf, dtype)
    xt = tf.constant(x, dtype=getattr(tf, dtype))
    traced = tf.function(fn)
    concrete = traced.get_concrete_function(xt)
    check_counts(tf_graph_op_counts(concrete), program.autograph_graph_counts(), ("If", "While", *MARKER_OPS),
                 what="ops of the traced graph")
    code = tf.autograph.to_code(fn)
    check_counts(Counter({k: code.count(f"ag__.{k}(") for k in CODE_KEYS}),
                 program.autograph_code_counts(), CODE_KEYS, what="statements rewritten by tf.autograph.to_code")
    assert_close(traced(xt).numpy(), run.y, tol, what=f"tf.function vs float64 reference ({dtype})")
    assert_close(fn(xt).numpy(), run.y, tol, what=f"eager vs float64 reference ({dtype})")
    assert traced.experimental_get_tracing_count() == 1, "a control-flow program retraced on its only signature"
    evidence.note(decisions=len(run.decisions))
    evidence.covers("autograph=True+traced-graph", "autograph=True+to_code")


@pytest.mark.claim("execution.autograph.off")
@budget(12)
@given(program=flow_programs(), x=flow_inputs(), dtype=st.sampled_from(FLOATS))
def test_without_autograph_tensor_conditions_raise(tf, dl_device, program, x, dtype):
    run, tol = _reference(program, x, dtype, dl_device)
    fn = program.load("tensorflow", tf, dtype)
    xt = tf.constant(x, dtype=getattr(tf, dtype))
    assert_close(fn(xt).numpy(), run.y, tol, what=f"eager Python control flow vs float64 reference ({dtype})")
    plain = tf.function(fn, autograph=False)
    if program.reaches_tensor_control_flow():
        # tensorflow/python/framework/tensor.py: the two refusals a symbolic tensor makes.
        refused = r"(Using a symbolic `tf\.Tensor` as a Python `bool`|Iterating over a symbolic `tf\.Tensor`) is not allowed"
        with pytest.raises(tf.errors.OperatorNotAllowedInGraphError, match=refused) as info:
            plain(xt)
        evidence.note(error=str(info.value).split(".")[0])
        evidence.covers("autograph=False+tensor-control-flow")
    else:  # Python-valued control flow needs no AutoGraph
        assert_close(plain(xt).numpy(), run.y, tol, what=f"tf.function(autograph=False) vs float64 reference ({dtype})")
        evidence.covers("autograph=False+python-control-flow")
