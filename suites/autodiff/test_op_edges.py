"""Every op of the library at its documented edges: kinks, extreme magnitudes, +-inf.

The per-op suite (test_ops.py) keeps inputs within INPUT_MAX, finite and away from kinks, so
finite differences stay valid. Here each op gets its own test ids per framework in three more
modes, from the table in ``pytest_dlconform.programs.edges`` (each case cites the sentence of
documentation that defines it):

* ``kink``: the value exactly at each kink, and torch's documented gradient there (autograd
  notes: the gradient where one exists, the minimum-norm sub- or super-gradient where the
  function is locally convex or concave, otherwise one of the one-sided derivatives).
  TensorFlow documents no convention: its gradients at kinks are recorded as evidence only.
* ``extreme``: from just above the smallest normal number to where the documented formula's
  intermediates would overflow, in float64 and float32, value and gradient against the
  analytic reference within the error model (docs/tolerances.md, "Edge cases"); hypothesis
  adds magnitudes inside each range.
* ``nonfinite``: +-inf wherever the documentation defines the output (and, in torch, the
  gradient by continuity where the output is finite).

Each test records what it visited in the coverage ledger (mode, op, parameters, case, dtype).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from pytest_dlconform.api import adapter, budget, evidence
from pytest_dlconform.api.programs import edges as E

TORCH = "torch"
TF = "tensorflow"
EXAMPLES = 1  # hypothesis examples (ci) of drawn magnitudes, after the fixed table (which runs first, once)


def _run(framework: str, device: str, edge: E.Edge) -> tuple[np.ndarray, list[np.ndarray]]:
    a = adapter(framework)
    fn = edge.program().build(framework, edge.dtype)
    xs = edge.inputs()
    value = a.call(fn, xs, edge.dtype, device)
    grads = a.vjp(fn, xs, np.asarray(edge.w).reshape(np.shape(value)), edge.dtype, device)
    return value, grads


def _check(framework: str, device: str, edges: tuple[E.Edge, ...] | list[E.Edge], visits: Counter[Any],
           seen: dict[str, Any]) -> list[E.EdgeMismatch]:
    """Judge every case (each one visited, in the ledger, whatever the others did); return
    the mismatches (each with every wrong entry of its case, its largest error recorded as
    evidence), the caller raises them all at once."""
    wrong: list[E.EdgeMismatch] = []
    for edge in edges:
        if framework not in edge.frameworks:
            continue
        value, grads = _run(framework, device, edge)
        visits[tuple(E.coverage_key(framework, edge).items())] += 1
        asserted = framework in edge.grad_frameworks
        try:
            worst = E.judge(edge, value, grads if asserted else None)
        except E.EdgeMismatch as exc:
            evidence.check(f"{edge.op} {edge.mode}", observed=exc.worst, tolerance=1.0)
            wrong.append(exc)
            continue
        evidence.check(f"{edge.op} {edge.mode}", observed=worst, tolerance=1.0)
        if not asserted and edge.mode == "kink":  # documented nowhere: recorded, never judged
            seen[f"{edge.params_label} {edge.label} {edge.dtype}"] = [g.reshape(-1).tolist() for g in grads]
    return wrong


def _raise(wrong: list[E.EdgeMismatch]) -> None:
    """One EdgeMismatch with every wrong entry of every case (a known divergence must match
    each of them, not only the first)."""
    if wrong:
        raise E.EdgeMismatch.joined(wrong)


def _drawn(data: st.DataObject, op: str) -> tuple[E.Edge, ...]:
    """One extreme case per dtype: a parameter class and one big and one tiny magnitude,
    drawn inside each range (the fixed table has already visited every class)."""
    out = []
    for dtype in E.DTYPES:
        m = E.MAGNITUDES[dtype]
        params = data.draw(st.sampled_from(E.classes(op)), label=f"params {dtype}")
        tiny = 10 ** data.draw(st.floats(math.log10(m["tiny"]), math.log10(m["tiny"]) + 10), label=f"tiny {dtype}")
        if op in E.TINY_ONLY:
            out.append(E.elementwise_extreme(op, params, dtype, (tiny,)))
            continue
        top = math.log10(E.largest_magnitude(op, params, dtype))
        big = 10 ** data.draw(st.floats(math.log10(m["exp"]), top), label=f"big {dtype}")
        out.append(E.elementwise_extreme(op, params, dtype, (big, tiny)))
    return tuple(out)


def _mode(framework: str, device: str, mode: str, op: str) -> None:
    visits: Counter[Any] = Counter()
    seen: dict[str, Any] = {}
    try:
        # The fixed table first, outside hypothesis: a violation there does not depend on the
        # drawn values, so it fails at once instead of being shrunk.
        _raise(_check(framework, device, E.edges(mode, op), visits, seen))
        if mode == "extreme" and op in E.ELEMENTWISE:

            @budget(EXAMPLES)
            @given(data=st.data())
            def prop(data: st.DataObject) -> None:
                edges = _drawn(data, op)
                note(f"{op} extreme cases: {edges!r}")
                _raise(_check(framework, device, edges, visits, seen))

            prop()
    finally:  # what ran is in the ledger, whether it held or not (the verdict says which)
        rows = [{**dict(k), "count": n, "inconclusive": 0} for k, n in sorted(visits.items())]
        evidence.note(coverage=rows, cases=len(rows))
        if seen:
            evidence.note(undocumented_kink_gradients=seen)
    if not visits:
        raise AssertionError(f"{op} {mode}: no documented case for {framework} ran (the table and ops_for disagree)")
    evidence.covers(mode)


def _ids(framework: str) -> list[Any]:
    return [pytest.param(mode, op, id=f"{mode}-{op}") for mode in E.MODES for op in E.ops_for(framework, mode)]


@pytest.mark.claim("autodiff.ops.edge-cases")
@pytest.mark.parametrize(("mode", "op"), _ids(TORCH))
def test_torch_op_edge_cases(torch, dl_device, mode, op):
    _mode(TORCH, dl_device, mode, op)


@pytest.mark.claim("autodiff.ops.edge-cases")
@pytest.mark.parametrize(("mode", "op"), _ids(TF))
def test_tensorflow_op_edge_cases(tf, dl_device, mode, op):
    _mode(TF, dl_device, mode, op)
