"""The edge-case suite (suites/autodiff/test_op_edges.py) and its table
(pytest_dlconform.programs.edges): the wrong twins are caught by their op's test with the
documented value in the message, the judge fails on wrong values, gradients and NaNs, and the
table's analytic derivatives and parameter classes agree with the op table."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.programs import OPS
from pytest_dlconform.programs import edges as E
from pytest_dlconform.programs import samples as S

ROOT = Path(__file__).resolve().parents[2]
SUITE = "suites/autodiff/test_op_edges.py"


def _run_suite(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", SUITE, "-p", "no:cacheprovider", "--dl-profile=ci", "-q",
           f"--dl-report={report}", *args]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, env={**os.environ, **(env or {})})
    assert report.exists(), f"no report from {' '.join(cmd)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    doc: dict[str, Any] = json.loads(report.read_text())
    return doc


def test_each_edge_mutant_is_caught_by_its_op_test(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from edge_mutants import MUTANTS  # type: ignore[import-not-found]

    here = str(Path(__file__).parent)
    env = {"PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    ids = [m[3] for m in MUTANTS.values()]
    selected = " or ".join(i.split("[")[1].rstrip("]").replace("cpu-", "") for i in ids)
    doc = _run_suite(tmp_path, "-p", "edge_mutants", "-k", selected, env=env)
    tests = {t["nodeid"].split("::", 1)[1]: t for c in doc["claims"].values() for t in c["tests"]}
    for op, (_, _, what, test_id, pattern) in MUTANTS.items():
        assert test_id in tests, f"{test_id} did not run"
        t = tests[test_id]
        assert t["verdict"] == "violated", f"mutant {op} ({what}) not caught by {test_id}: {t['verdict']}"
        assert re.search(pattern, t["reason"]), f"{test_id}: {t['reason'][:500]}"


# --------------------------------------------------------------------------- the judge itself


def _edge(mode: str, op: str, **want: Any) -> E.Edge:
    return next(e for e in E.edges(mode, op) if all(dict(e.params).get(k) == v for k, v in want.items()))


def test_the_judge_fails_a_gradient_off_the_documented_convention() -> None:
    relu = _edge("kink", "relu")
    assert E.judge(relu, np.zeros(1), [np.zeros(1)]) == 0.0
    with pytest.raises(E.EdgeMismatch, match=r"relu kink \[default, float64\]: gradient of input 0 at x=0\.0 .* is 1\.0, "
                                             r"documented 0\.0 \(rule 2"):
        E.judge(relu, np.zeros(1), [np.ones(1)])
    leaky = _edge("kink", "leaky_relu", negative_slope=0.25)
    with pytest.raises(E.EdgeMismatch, match=r"is 1\.0, documented 0\.25 \(rule 2"):
        E.judge(leaky, np.zeros(1), [np.ones(1)])
    # rule 4: either one-sided derivative passes, a value between them does not
    swish = _edge("kink", "hardswish")
    E.judge(swish, np.array([0.0, 3.0]), [np.array([-0.5, 1.0])])
    E.judge(swish, np.array([0.0, 3.0]), [np.array([0.0, 1.5])])
    with pytest.raises(E.EdgeMismatch, match=r"at x=-3\.0 .* is -0\.25, documented 0\.0 or -0\.5 \(rule 4"):
        E.judge(swish, np.array([0.0, 3.0]), [np.array([-0.25, 1.0])])


def test_the_judge_fails_values_nans_and_infinities() -> None:
    relu6 = _edge("kink", "relu6")
    with pytest.raises(E.EdgeMismatch, match=r"value at x=6\.0 is 6\.000000000000001, documented 6\.0 \(allowed error 0\)"):
        E.judge(relu6, np.array([0.0, np.nextafter(6.0, 7.0)]), None)
    tanh = next(e for e in E.edges("nonfinite", "tanh") if e.dtype == "float64")
    E.judge(tanh, np.array([-1.0, 1.0]) if tanh.xs[0][0] < 0 else np.array([1.0, -1.0]), None)
    with pytest.raises(E.EdgeMismatch, match=r"tanh nonfinite .* is nan, documented"):
        E.judge(tanh, np.array([math.nan, math.nan]), None)
    sin = next(e for e in E.edges("nonfinite", "sin") if e.dtype == "float64")
    E.judge(sin, np.array([math.nan, math.nan]), None)  # documented NaN: NaN matches
    with pytest.raises(E.EdgeMismatch, match=r"sin nonfinite .* is 0\.0, documented nan"):
        E.judge(sin, np.zeros(2), None)
    soft = next(e for e in E.edges("extreme", "softplus") if e.dtype == "float64")
    got = np.array(soft.value)
    with pytest.raises(E.EdgeMismatch, match=r"value at x=1e\+300 is inf, documented 1e\+300"):
        E.judge(soft, np.where(np.array(soft.xs[0]) > 1e299, np.inf, got), None)


def test_the_extreme_bounds_are_a_few_ulps_where_the_op_is_well_conditioned() -> None:
    """At 1e300 relu's value is allowed a few ulps of 1e300, tanh's gradient (0) only the
    flush-to-zero floor, softmax's value with entries 1e300 apart a few float64 ulps."""
    relu = next(e for e in E.edges("extreme", "relu") if e.dtype == "float64")
    j = relu.xs[0].index(1e300)
    assert relu.value_tol[j] <= 16 * 2.0**-53 * 1e300
    tanh = next(e for e in E.edges("extreme", "tanh") if e.dtype == "float64")
    assert tanh.grad_tol[0][tanh.xs[0].index(1e300)] < 1e-306
    sm = next(e for e in E.edges("extreme", "softmax") if e.dtype == "float64" and e.label == "apart")
    assert max(sm.value_tol) < 1e-15 and sm.value == (1.0, 0.0, 0.0)
    # exp(1e4) overflows: the stable gradient is judged to 1e-10 (the softmax-weight term)
    up = next(e for e in E.edges("extreme", "softmax") if e.dtype == "float64" and e.label == "shifted-up")
    assert max(up.grad_tol[0]) < 1e-10


# --------------------------------------------------------------------------- the table


def test_the_analytic_derivatives_match_the_references() -> None:
    """Each derivative of the table against a central difference of the op's float64 reference,
    at moderate points away from kinks (where the difference is accurate to ~1e-7)."""
    x = np.array([-2.7, -1.3, -0.45, 0.55, 1.7, 2.4])
    for op, d in E.DERIVATIVES.items():
        for p in E.classes(op):
            h = 1e-6
            fd = (OPS[op].ref([x + h], p, []) - OPS[op].ref([x - h], p, [])) / (2 * h)
            np.testing.assert_allclose(d(x, p), fd, rtol=1e-6, atol=1e-7, err_msg=f"{op} {p}")


def test_the_edge_cases_take_the_records_parameter_classes() -> None:
    for op in E.ELEMENTWISE:
        assert E.classes(op) == [dict(c.fixed) for c in S.param_classes(op)], op
    for op in (*E.KINK_OPS, *E.ELEMENTWISE, *E.LSE_OPS):
        assert op in OPS, op


def test_every_mode_has_cases_for_both_frameworks_and_registered_rows() -> None:
    rows = E.registered()
    assert len(rows) == len({tuple(r.items()) for r in rows}), "duplicate ledger rows"
    for fw in ("tensorflow", "torch"):
        for mode in E.MODES:
            assert E.ops_for(fw, mode), (fw, mode)
    assert set(E.ops_for("torch", "kink")) == set(E.KINK_OPS)
    # torch's gradients at kinks are asserted, TensorFlow's recorded only
    assert all(e.grad_frameworks == ("torch",) for op in E.KINK_OPS for e in E.edges("kink", op))
    assert {r["mode"] for r in S.registered()} >= set(E.MODES)  # the coverage ledger expects them
