"""torch's dynamic graph and TorchScript on generated control-flow programs.

The float64 numpy interpreter of :class:`checks.tracing.FlowProgram` is the oracle: values,
the decisions a run takes, the ops it executes (loops unrolled as they ran) and forward-mode
tangents, from which the reference gradient is assembled column by column.
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, budget, evidence, tolerance
from pytest_dlconform.api.tracing import (
    AUTOGRAD_OPS,
    ambiguity,
    autograd_node_counts,
    check_counts,
    flow_inputs,
    flow_programs,
    torchscript_node_counts,
)


def _numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy()


def _reference_gradient(program: Any, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """d<w, f(x)>/dx by forward mode: one tangent run per input element."""
    grad = np.zeros(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = 1.0
        grad[i] = float(np.sum(w * program.run(x, tangent=e.reshape(x.shape)).tangent))
    return grad.reshape(x.shape)


@pytest.mark.claim("execution.torch.dynamic-graph")
@budget(15)
@given(program=flow_programs(require_tensor_flow=True), x=flow_inputs(), w=flow_inputs())
def test_autograd_records_the_path_that_ran(torch, program, x, w):
    run = program.run(x)
    tol = tolerance("float64", ops=2 * program.op_count(), reduction=x.size)
    assume(not ambiguity(run, tol.rtol) and run.kink > 1e-6)  # relu's kink: the derivative jumps there
    fn = program.load("torch", torch, "float64")
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = fn(xt)  # plain Python if/while/for on tensor values
    # The output may cancel (an affine shift of sigmoids near 1/2): its rounding is that of the
    # largest intermediate (FlowRun.magnitude), numerics.tolerance's magnitude floor.
    out_tol = tolerance("float64", ops=2 * program.op_count(), reduction=x.size, magnitude=run.magnitude)
    assert_close(_numpy(y), run.y, out_tol, what="output vs float64 reference")
    check_counts(autograd_node_counts(y), run.executed, AUTOGRAD_OPS,
                 what="backward nodes recorded along the executed path")
    loss = (y * torch.tensor(w, dtype=torch.float64)).sum()
    loss.backward()
    assert xt.grad is not None, ".grad is still None right after .backward()"
    grad = _numpy(xt.grad).copy()
    assert_close(grad, _reference_gradient(program, x, w), tol, what=".grad after .backward() vs forward-mode reference")
    saved = sum(run.executed.values()) > 0  # every marker op saves a tensor for backward
    if saved:
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
    x2 = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss2 = (fn(x2) * torch.tensor(w, dtype=torch.float64)).sum()
    loss2.backward(retain_graph=True)
    loss2.backward()  # allowed with the graph retained: gradients accumulate
    assert_close(_numpy(x2.grad), 2.0 * grad, tol, what="gradient after two backward passes with retain_graph=True")
    evidence.note(decisions=len(run.decisions), second_backward_raised=saved)
    evidence.covers("backward", "retain_graph=True")
    if saved:
        evidence.covers("retain_graph=False")


def _trace(torch: Any, fn: Any, x0: Any) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(fn, (x0,))
    return traced, caught


@pytest.mark.claim("execution.torchscript.equivalence")
@budget(12)
@given(program=flow_programs(dense=False, require_tensor_flow=True), x0=flow_inputs(),
       others=st.lists(flow_inputs(), min_size=1, max_size=3))
def test_script_keeps_control_flow_trace_freezes_one_path(torch, program, x0, others):
    tol = tolerance("float64", ops=program.op_count(), reduction=x0.size)
    runs = [program.run(x) for x in (x0, *others)]
    assume(not any(ambiguity(r, tol.rtol) for r in runs))
    eager = program.load("torch", torch, "float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript is deprecated in torch 2.x
        scripted = torch.jit.script(program.load("torchscript", torch, "float64"))
    check_counts(torchscript_node_counts(scripted.graph), program.torchscript_counts(), ("prim::If", "prim::Loop"),
                 what="control-flow nodes of torch.jit.script's graph")
    traced, caught = _trace(torch, eager, torch.tensor(x0, dtype=torch.float64))
    check_counts(torchscript_node_counts(traced.graph), Counter(),
                 ("prim::If", "prim::Loop"), what="control-flow nodes of torch.jit.trace's graph")
    tracer_warnings = [w for w in caught if type(w.message).__name__ == "TracerWarning"]
    assert tracer_warnings, (
        f"torch.jit.trace took {len(runs[0].decisions)} data-dependent decisions without a TracerWarning")
    differs = 0
    for x, run in zip((x0, *others), runs):
        xt = torch.tensor(x, dtype=torch.float64)
        # Outputs may cancel: the bound is taken against the largest intermediate (FlowRun.magnitude).
        at = tolerance("float64", ops=program.op_count(), reduction=x0.size, magnitude=run.magnitude)
        assert_close(_numpy(scripted(xt)), run.y, at, what="torch.jit.script vs float64 reference")
        frozen = program.run(x, forced=runs[0].decisions)
        at = tolerance("float64", ops=program.op_count(), reduction=x0.size, magnitude=frozen.magnitude)
        assert_close(_numpy(traced(xt)), frozen.y, at, what="torch.jit.trace vs the path recorded at tracing")
        differs += run.decisions != runs[0].decisions
    evidence.note(inputs_on_another_path=differs, tracer_warnings=len(tracer_warnings))
    evidence.covers("torch.jit.script", "torch.jit.trace")
