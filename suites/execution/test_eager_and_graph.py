"""Eager execution's concrete values, tf.compat.v1 graphs run in a Session, and graph
optimisation observed through the Session's run metadata."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_dlconform.api import UNIT_ROUNDOFF, assert_close, budget, evidence, tolerance
from pytest_dlconform.api.programs import ProgramCase, input_recipes, programs
from pytest_dlconform.api.tracing import (
    ambiguity,
    assert_within,
    check_constant_folding,
    flow_inputs,
    flow_programs,
    program_error_bound,
)


def error_bound(case: Any, dtype: str, device: str) -> float:
    return program_error_bound(case, dtype, device=device, framework="tensorflow")

FLOATS = ("float32", "float64")
PROGRAMS = programs(max_ops=4, n_inputs=(1, 2), max_side=4)


def _no_weights(program: Any) -> bool:
    return not any(program.weights(k) for k in range(len(program.ops)))


# Program.build creates a TensorFlow program's constant weights once per distinct source, as
# eager tensors, which a tf.compat.v1 Graph cannot capture: graphs get weight-free programs.
GRAPH_PROGRAMS = PROGRAMS.filter(_no_weights)
PLANTED = "dlconform_planted_constant_product"


@pytest.mark.claim("execution.eager.concrete-values")
@pytest.mark.parametrize("dtype", FLOATS)
@budget(6)
@given(data=st.data(), program=PROGRAMS)
def test_eager_ops_return_concrete_values(tf, dl_device, data, program, dtype):
    case = ProgramCase.from_recipe(program, data.draw(input_recipes(program.n_inputs), label="recipe"))
    assert tf.executing_eagerly(), "TensorFlow 2 is not executing eagerly by default"
    out = program.build("tensorflow", dtype)([tf.constant(x, dtype=getattr(tf, dtype)) for x in case.inputs])
    assert tf.is_tensor(out) and not tf.is_symbolic_tensor(out), f"an eager op returned {type(out).__name__}"
    value = out.numpy()  # documented: "a NumPy array or scalar" (a 0-d tensor gives a NumPy scalar)
    assert isinstance(value, (np.ndarray, np.generic)) and value.dtype == np.dtype(dtype), f".numpy() gave {type(value)}"
    assert np.shape(value) == tuple(out.shape), f".numpy() has shape {np.shape(value)}, the tensor {tuple(out.shape)}"
    assert_within(value, program.numpy(case.inputs), error_bound(case, dtype, dl_device),
                  what=f"eager {dtype} vs float64 reference")
    evidence.covers(f"dtype={dtype}")


def _session_config(tf: Any, optimise: bool) -> Any:
    """A ConfigProto with grappler and the classic graph optimizer on (the default) or off."""
    config = tf.compat.v1.ConfigProto()
    if not optimise:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        opts = config.graph_options.optimizer_options
        opts.opt_level = opts.L0
        opts.do_constant_folding = False
    return config


def _graph(tf: Any, program: Any, dtype: str, plant: bool = False) -> tuple[Any, list[Any], Any]:
    """Build ``program`` once in a new tf.Graph: placeholders in, one output tensor out."""
    graph = tf.Graph()
    with graph.as_default():
        dt = getattr(tf, dtype)
        placeholders = [tf.compat.v1.placeholder(dt, shape=s) for s in program.input_shapes]
        out = program.build("tensorflow", dtype)(placeholders)
        if plant:  # a constant-only subexpression the optimiser must fold
            out = out * tf.multiply(tf.constant(1.5, dt), tf.constant(2.0, dt), name=PLANTED)
    return graph, placeholders, out


def _fused_mish(program: Any, dtype: str) -> bool:
    """A known divergence with its own pinned test (test_function.py): grappler's oneDNN fusion
    of mish in float32, which a Session's graph gets too."""
    return dtype == "float32" and any(op.name == "mish" for op in program.ops)


@pytest.mark.claim("execution.graph.session-run")
@budget(8)
@given(data=st.data(), program=GRAPH_PROGRAMS, dtype=st.sampled_from(FLOATS))
def test_graph_built_once_runs_like_eager_in_a_session(tf, dl_device, data, program, dtype):
    assume(not _fused_mish(program, dtype))
    recipes = data.draw(st.lists(input_recipes(program.n_inputs), min_size=1, max_size=3), label="feeds")
    graph, placeholders, out = _graph(tf, program, dtype)
    assert tf.is_symbolic_tensor(out), "building in a tf.Graph gave a concrete tensor"
    cases = [ProgramCase.from_recipe(program, recipe) for recipe in recipes]
    eager_fn = program.build("tensorflow", dtype)
    # Eager first: inside `with Session(graph=...)` the session's graph is the default one.
    eager = [eager_fn([tf.constant(x, dtype=getattr(tf, dtype)) for x in case.inputs]).numpy() for case in cases]
    with tf.compat.v1.Session(graph=graph) as session:
        fetched = [session.run(out, feed_dict=dict(zip(placeholders, case.inputs))) for case in cases]
    for case, got, want in zip(cases, fetched, eager):
        bound = error_bound(case, dtype, dl_device)
        # The independent reference: the same program evaluated by numpy in float64.
        assert_within(got, program.numpy(case.inputs), bound, what=f"Session.run vs float64 reference ({dtype})")
        assert_within(got, want, 2 * bound, what=f"Session.run vs eager ({dtype})")
        evidence.note(**{f"bitwise_equal_{dtype}": bool(np.array_equal(got, want, equal_nan=True))})
    evidence.covers("graph=placeholders")


@pytest.mark.claim("execution.graph.session-run")
@budget(8)
@given(program=flow_programs(require_tensor_flow=True), x=flow_inputs(), dtype=st.sampled_from(FLOATS))
def test_autograph_control_flow_runs_in_a_session(tf, dl_device, program, x, dtype):
    reference = program.run(x)
    # Outputs may cancel: the bound is taken against the largest intermediate (FlowRun.magnitude).
    tol = tolerance(dtype, ops=program.op_count(), reduction=x.size, device=dl_device, framework="tensorflow",
                    matmul=True, magnitude=reference.magnitude)
    assume(not ambiguity(reference, tol.rtol))
    eager = program.load("tensorflow", tf, dtype)(tf.constant(x, dtype=getattr(tf, dtype))).numpy()
    graph = tf.Graph()
    with graph.as_default():  # loaded here, its weights are constants of this graph
        placeholder = tf.compat.v1.placeholder(getattr(tf, dtype), shape=x.shape)
        out = tf.autograph.to_graph(program.load("tensorflow", tf, dtype))(placeholder)
    with tf.compat.v1.Session(graph=graph) as session:
        fetched = session.run(out, feed_dict={placeholder: x})
    assert_close(fetched, eager, tol, what=f"Session.run vs eager ({dtype})")
    assert_close(fetched, reference.y, tol, what=f"Session.run vs float64 reference ({dtype})")
    evidence.covers("graph=autograph.to_graph")


@pytest.mark.claim("execution.graph.optimisation")
@budget(6)
@given(data=st.data(), program=GRAPH_PROGRAMS, dtype=st.sampled_from(FLOATS))
def test_graph_optimisation_is_observable_and_keeps_results(tf, dl_device, data, program, dtype):
    assume(not _fused_mish(program, dtype))
    case = ProgramCase.from_recipe(program, data.draw(input_recipes(program.n_inputs), label="recipe"))
    graph, placeholders, out = _graph(tf, program, dtype, plant=True)
    runs = {}
    for optimise in (True, False):
        metadata = tf.compat.v1.RunMetadata()
        options = tf.compat.v1.RunOptions(output_partition_graphs=True)
        with tf.compat.v1.Session(graph=graph, config=_session_config(tf, optimise)) as session:
            feed = dict(zip(placeholders, case.inputs))
            value = session.run(out, feed_dict=feed, options=options, run_metadata=metadata)
        runs[optimise] = (value, [node for g in metadata.partition_graphs for node in g.node])
    check_constant_folding(runs[True][1], runs[False][1], PLANTED)
    expected = 3.0 * program.numpy(case.inputs)  # the planted factor 1.5 * 2.0 = 3 is exact
    # Scaling by 3 triples the program's error and adds one rounding of the product.
    scale = float(np.max(np.abs(expected), initial=0.0))
    bound = 3.0 * error_bound(case, dtype, dl_device) + UNIT_ROUNDOFF[dtype] * scale
    for optimise, (value, _) in runs.items():
        state = "on" if optimise else "off"
        assert_within(value, expected, bound, what=f"Session.run with optimisation {state} ({dtype})")
    internal = sorted({n.op for n in runs[True][1] if n.op.startswith("_") and n.op not in ("_Arg", "_Retval")})
    evidence.note(internal_ops_after_optimisation=internal)
    evidence.covers("optimisation=on", "optimisation=off")
