"""The per-op suite (suites/autodiff/test_ops.py): its ci run visits every registered
combination, its wrong twins are caught by their op's test, and the ledger's aggregation and
the inconclusive-majority rule can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform.core import evidence
from pytest_dlconform.frameworks import HarnessError
from pytest_dlconform.programs import OPS
from pytest_dlconform.programs import samples as S
from pytest_dlconform.report import coverage
from pytest_dlconform.report.document import Report

ROOT = Path(__file__).resolve().parents[2]
SUITE = "suites/autodiff/test_ops.py"


def _run_suite(tmp_path: Path, *args: str, env: dict[str, str] | None = None, profile: str = "ci") -> dict[str, Any]:
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", SUITE, "-p", "no:cacheprovider", f"--dl-profile={profile}", "-q",
           f"--dl-report={report}", *args]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, env={**os.environ, **(env or {})})
    assert report.exists(), f"no report from {' '.join(cmd)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    doc: dict[str, Any] = json.loads(report.read_text())
    return doc


def _tests(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["nodeid"].split("::", 1)[1]: t for c in doc["claims"].values() for t in c["tests"]}


# --------------------------------------------------------------------------- the ci run


def test_a_run_of_the_op_suite_visits_every_registered_combination(tmp_path: Path) -> None:
    """Every registered sample of an op runs in every hypothesis example of its tests (the
    suites' construction), so the ledger of a quick run (2 examples a test, here with a fixed
    seed) is the ledger of a ci run (20), at a tenth of its cost; the full ci run's ledger is
    held to the same by `dlconform modes --check` in conformance.yml's merge job."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    html = tmp_path / "report.html"
    # with the edge-case suite, whose modes (kink, extreme, nonfinite) samples.registered() lists too
    # (with the shipped known divergences: their tests stop at the first failing example,
    # visiting what a ci run's failing examples visit)
    known = ROOT / "src" / "pytest_dlconform" / "report" / "known_divergences.toml"
    doc = _run_suite(tmp_path, "-n", "0", f"--dl-html={html}", "--hypothesis-seed=0", f"--dl-divergences={known}",
                     "suites/autodiff/test_op_edges.py", profile="quick")
    ledger = doc.get("coverage")
    assert ledger, "the report has no coverage ledger"
    assert ledger["registered"] == len(S.registered())
    # Only the compiled-backward and low-precision suites' modes (not part of this run) are left
    # out; test_low_precision_compiled_mutants.py checks them end to end, and CI's modes --check
    # checks the whole ledger of the full run.
    other = sum(1 for k in S.registered() if k["mode"].startswith("compiled/") or k["mode"] == S.LOW_PRECISION_MODE)
    assert ledger["not_in_run"] == other, (f"{ledger['not_in_run'] - other} registered combinations in op-suite "
                                           "modes the run did not check")
    unvisited = ledger["unvisited"]
    assert not unvisited, f"{len(unvisited)} registered combinations unvisited, e.g. {unvisited[:5]}"
    ops = {(r["framework"], r["mode"]): set() for r in ledger["visited"]}
    for r in ledger["visited"]:
        ops[(r["framework"], r["mode"])].add(r["op"])
    for (fw, mode), names in ops.items():
        assert names == set(S.ops_for(fw, mode)), f"{fw} {mode}: ops visited differ from the registered ones"
    assert "Coverage ledger" in html.read_text()


# --------------------------------------------------------------------------- the wrong twins


def test_each_mutant_is_caught_by_its_op_test(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from op_mutants import MUTANTS  # type: ignore[import-not-found]

    here = str(Path(__file__).parent)
    env = {"PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    selected = " or ".join(MUTANTS)  # "sin" also selects asinh: a neighbour left alone
    doc = _run_suite(tmp_path, "-p", "op_mutants", "-k", selected, env=env)
    tests = _tests(doc)
    for op, (_, _, what, test_id) in MUTANTS.items():
        assert test_id in tests, f"{test_id} did not run"
        t = tests[test_id]
        assert t["verdict"] == "violated", f"mutant {op} ({what}) not caught by {test_id}: {t['verdict']}"
        assert "should be" in t["reason"], t["reason"]
    # Each mutant is wrong in one place only: the layout mutant passes the contiguous check,
    # and the ops left alone keep holding.
    assert tests["test_torch_op_reverse_mode_vs_finite_differences[cpu-sin]"]["verdict"] == "holds"
    assert tests["test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-asinh]"]["verdict"] == "holds"


def test_the_mutants_change_only_their_gradients(tmp_path: Path) -> None:
    """The twins' forward values are right (so what the suite catches is the gradient)."""
    pytest.importorskip("torch")
    import numpy as np
    import op_mutants  # type: ignore[import-not-found]
    import torch

    x = torch.tensor(np.linspace(-20, 20, 9))
    for name, ref in (("sin", torch.sin), ("atan", torch.atan), ("cos", torch.cos)):
        assert torch.equal(getattr(op_mutants, name)(x), ref(x)), name
    assert torch.equal(op_mutants.leaky_relu(x, 0.25), torch.nn.functional.leaky_relu(x, 0.25))
    assert set(op_mutants.MUTANTS) <= set(OPS)


# --------------------------------------------------------------------------- the ledger itself


def _doc(rows: list[dict[str, Any]]) -> Report:
    test = {"nodeid": "t::x", "claim": "c", "evidence": {"checks": {}, "notes": {"coverage": rows}}}
    return Report.from_dict({"claims": {"c": {"verdict": "holds", "tests": [test]}}})


def _key(op: str, regime: str, mode: str = "forward") -> dict[str, str]:
    return {"framework": "torch", "mode": mode, "op": op, "params": "default", "regime": regime,
            "dtype": "float64", "layout": "contiguous"}


def test_the_ledger_counts_visits_and_lists_unvisited_combinations() -> None:
    registered = [_key("tanh", "unit"), _key("tanh", "large"), _key("sin", "unit"), _key("sin", "unit", "layout")]
    rows = [{**_key("tanh", "unit"), "count": 2, "inconclusive": 1}, {**_key("tanh", "unit"), "count": 1, "inconclusive": 0},
            {**_key("sin", "unit"), "count": 3, "inconclusive": 0}]
    ledger = coverage.ledger(_doc(rows), registered)
    assert ledger is not None
    assert ledger["unvisited"] == [_key("tanh", "large")]  # a registered combination no test visited
    assert ledger["not_in_run"] == 1  # the layout mode did not run at all
    counts = {(r["op"], r["regime"]): (r["count"], r["inconclusive"]) for r in ledger["visited"]}
    assert counts == {("tanh", "unit"): (3, 1), ("sin", "unit"): (3, 0)}
    assert coverage.ledger(_doc([]), registered) is None


def test_the_ledger_goes_into_the_json_report_and_the_html_page() -> None:
    ledger = coverage.ledger(_doc([{**_key("tanh", "unit"), "count": 1, "inconclusive": 0}]), [_key("tanh", "wide")])
    doc = _doc([]).replace(coverage=ledger)
    again = Report.from_dict(json.loads(doc.to_json()))
    assert again.to_dict()["coverage"] == ledger
    page = coverage.html_section(again)  # html.render puts it on the page (the ci-run test reads it there)
    assert "Coverage ledger" in page and "regime=wide" in page  # the unvisited one is named
    assert "coverage" not in _doc([]).to_dict()  # optional: absent when no op test ran


def test_the_registered_samples_cover_every_class_and_regime() -> None:
    for op in OPS:
        got = S.samples(op)
        assert {s.params for s in got} == set(S.param_classes(op)), op
        assert {s.regime for s in got} == set(S.regimes(op)), op


def test_most_inconclusive_finite_differences_are_a_harness_error() -> None:
    from suites.autodiff import test_ops

    sample = S.samples("tanh")[0]
    with evidence.recording() as rec:
        ledger = test_ops.Ledger("torch", "reverse-fd")
        for inconclusive in (True, True, False):
            ledger.fd(inconclusive)
            ledger.visit(sample, inconclusive=inconclusive)
        with pytest.raises(HarnessError, match="inconclusive in 2 of 3 checks"):
            ledger.finish()
    assert rec.notes["fd_inconclusive"] == 2 and rec.notes["fd_checks"] == 3
    assert rec.notes["coverage"][0]["inconclusive"] == 2
    with evidence.recording():
        ledger = test_ops.Ledger("torch", "reverse-fd")
        for inconclusive in (True, False):
            ledger.fd(inconclusive)
        ledger.finish()  # half is not most: a pass, with the count reported


def test_forward_vs_reverse_is_judged_where_the_derivative_squares_underflow() -> None:
    """erf at |x| ~ 23 has a derivative of 1e-229, whose square underflows (explore seed
    302827194 made the allowed difference 0): a one-ulp difference passes, 1e-6 fails."""
    import numpy as np

    from pytest_dlconform.checks.gradients import GradientMismatch, check_jvp_vjp_consistency

    c, xs = 1e-229, [np.array([1.0, -2.0, 3.0])]
    vjp = lambda xs, v: [c * v]
    check_jvp_vjp_consistency(lambda xs, us: c * us[0] * (1 + 2.0**-52), vjp, xs, (3,), seed=0)
    with pytest.raises(GradientMismatch, match=r"from forward mode .* is .*x the allowed"):
        check_jvp_vjp_consistency(lambda xs, us: c * us[0] * (1 + 1e-6), vjp, xs, (3,), seed=0)
