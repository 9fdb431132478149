"""Verdicts, the report document, the terminal matrix, known divergences and atomic writes.

No framework and no pytest run: reports are real ``pytest.TestReport`` objects, the
hypothesis failure text comes from a real failing ``@given`` test run in-process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlconform.report import results

# ------------------------------------------------------------------ helpers


def report(nodeid: str, when: str, verdict: str, *, claim: str = "autodiff.tape.watch", longrepr: Any = None,
           evidence: dict[str, Any] | None = None, repro: str | None = None,
           params: dict[str, str] | None = None) -> pytest.TestReport:
    outcome = {results.HOLDS: "passed", results.NOT_APPLICABLE: "skipped"}.get(verdict, "failed")
    props: list[tuple[str, Any]] = [
        (results.PROP_CLAIM, claim), (results.PROP_PARAMS, params or {"framework": "tf", "device": "cpu"}),
        (results.PROP_VERDICT, verdict),
    ]
    if evidence is not None:
        props.append((results.PROP_EVIDENCE, json.dumps(evidence)))
    if repro is not None:
        props.append((results.PROP_REPRO, repro))
    return pytest.TestReport(nodeid, ("f.py", 1, nodeid), {}, outcome, longrepr, when, user_properties=props,
                             duration=0.25)


def doc_of(rows: list[tuple[str, str, str, dict[str, str]]], **extra: Any) -> dict[str, Any]:
    """A report document from (nodeid, claim, verdict, params) rows."""
    collector = results.Collector()
    for nodeid, claim, verdict, params in rows:
        collector.tests[nodeid] = results.TestResult(nodeid, claim, params, verdict=verdict, **extra)
    env = {"frameworks": {"tensorflow": "2.21.0", "torch": "2.13.0"}, "profile": "ci", "seed": 0,
           "settings": {"frameworks": ["tensorflow", "torch"], "selected_devices": ["cpu"]}}
    return results.report_document(collector, env, {})


TF, TORCH = {"framework": "tf", "device": "cpu"}, {"framework": "torch", "device": "cpu"}

# ------------------------------------------------------------------ verdicts


def test_worst_verdict_orders_error_over_violated_over_not_applicable() -> None:
    assert results.worst([results.HOLDS, results.NOT_APPLICABLE]) == results.NOT_APPLICABLE
    assert results.worst([results.VIOLATED, results.NOT_APPLICABLE, results.HOLDS]) == results.VIOLATED
    assert results.worst([results.VIOLATED, results.ERROR]) == results.ERROR


def test_collector_keeps_the_worst_phase_and_its_reason() -> None:
    collector = results.Collector()
    nodeid = "suites/a/test_x.py::test_y[cpu-tf]"
    collector.add(report(nodeid, "setup", results.HOLDS))
    collector.add(report(nodeid, "call", results.VIOLATED, longrepr="AssertionError: off by 1%\nmore",
                         evidence={"checks": {}, "notes": {"traces": 2}}, repro="pytest x"))
    collector.add(report(nodeid, "teardown", results.HOLDS))
    (result,) = collector.tests.values()
    assert (result.verdict, result.reason, result.repro) == (results.VIOLATED, "AssertionError: off by 1%", "pytest x")
    assert result.evidence["notes"] == {"traces": 2}
    assert result.duration == pytest.approx(0.75)
    collector.add(report(nodeid, "teardown", results.ERROR, longrepr="HarnessError: worker died"))
    assert (result.verdict, result.reason) == (results.ERROR, "HarnessError: worker died")


def test_not_applicable_reason_is_the_exact_reason() -> None:
    collector = results.Collector()
    collector.add(report("t::a", "setup", results.NOT_APPLICABLE,
                         longrepr=("f.py", 3, "Skipped: not applicable: no GPU (nvidia-smi not found)")))
    assert collector.tests["t::a"].reason == "no GPU (nvidia-smi not found)"


def test_reports_without_a_claim_are_ignored() -> None:
    collector = results.Collector()
    plain = pytest.TestReport("t::plain", ("f.py", 1, "x"), {}, "passed", None, "call", user_properties=[])
    collector.add(plain)
    assert collector.tests == {}


def _hypothesis_failure_text() -> str:
    @settings(derandomize=True, database=None, print_blob=True, max_examples=200)
    @given(st.integers(), st.floats(allow_nan=False))
    def test_small(n: int, x: float) -> None:
        assert n < 10, f"n={n}"

    try:
        test_small()
    except AssertionError as exc:
        return "".join(traceback.format_exception(exc))
    raise AssertionError("the planted failing property passed")


def test_reproduction_keeps_the_shrunk_example_and_the_replay_blob() -> None:
    text = _hypothesis_failure_text()
    repro = results.reproduction("pytest 'suites/a/test_x.py::test_y[cpu-tf]' --dl-seed=0", text)
    lines = repro.splitlines()
    assert lines[0] == "pytest 'suites/a/test_x.py::test_y[cpu-tf]' --dl-seed=0"
    assert lines[1] == "Falsifying example: test_small("
    assert "    n=10," in lines and ")" in lines
    assert lines[-1].startswith("# replay exactly: add @reproduce_failure(") and lines[-1].endswith(") above the test")


def test_reproduction_of_a_plain_failure_is_the_command() -> None:
    assert results.reproduction("pytest t", "AssertionError: x") == "pytest t"


# ------------------------------------------------------------------ the document


def test_document_has_schema_versions_counts_columns_and_worst_margin() -> None:
    collector = results.Collector()
    ev = lambda m: {"checks": {"err": {"observed": m, "tolerance": 1.0, "margin": m, "count": 1}}, "notes": {}}
    collector.add(report("a::1", "call", results.HOLDS, evidence=ev(0.1)))
    collector.add(report("a::2", "call", results.HOLDS, evidence=ev(0.4), params=TORCH))
    collector.add(report("b::1", "call", results.VIOLATED, claim="autodiff.tape.nested", longrepr="AssertionError: no"))
    doc = results.report_document(collector, {"python": "3.11"}, {"autodiff.tape.watch": {"id": "autodiff.tape.watch"}}).to_dict()
    assert (doc["schema"], doc["schema_version"]) == (results.SCHEMA, results.SCHEMA_VERSION)
    assert doc["columns"] == ["tf/cpu", "torch/cpu"]
    watch = doc["claims"]["autodiff.tape.watch"]
    assert (watch["verdict"], watch["worst_margin"], watch["claim"]) == ("holds", 0.4, {"id": "autodiff.tape.watch"})
    assert watch["columns"] == {"tf/cpu": "holds", "torch/cpu": "holds"}
    assert doc["claims"]["autodiff.tape.nested"]["verdict"] == "violated"
    assert doc["counts"]["tests"] == {"holds": 2, "violated": 1, "not applicable": 0, "error": 0}
    assert doc["counts"]["claims"] == {"holds": 1, "violated": 1, "not applicable": 0, "error": 0}
    json.dumps(doc, allow_nan=False)  # strictly valid JSON


def test_infinite_margin_is_json_safe() -> None:
    tests = [{"evidence": {"checks": {"exact": {"margin": "inf"}, "other": {"margin": 0.5}}}}]
    assert results.worst_margin(tests) == "inf"
    assert results.worst_margin([{"evidence": {}}]) is None


def test_matrix_fits_the_width_and_shows_each_cell() -> None:
    doc = doc_of([
        ("a::1", "autodiff.tape.watch", results.HOLDS, TF),
        ("a::2", "autodiff.tape.watch", results.NOT_APPLICABLE, TORCH),
        ("b::1", "autodiff.gradient.a-very-long-claim-name-that-goes-on-and-on-and-on", results.ERROR, TF),
        ("c::1", "autodiff.tape.nested", results.VIOLATED, TORCH),
    ])
    lines = results.matrix_lines(doc, width=60)
    assert all(len(line) <= 60 for line in lines[:-3])
    assert lines[0].split() == ["tf/cpu", "torch/cpu", "margin"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:-3]}
    assert rows["autodiff.tape.watch"] == ["ok", "n/a"]
    assert rows["autodiff.tape.nested"] == [".", "FAIL", "-"]  # failed without a numeric check: "-", never 0
    assert any(k.endswith("~") and v == ["ERR", ".", "-"] for k, v in rows.items())
    assert lines[-2] == "tests: 1 holds, 1 violated, 1 not applicable, 1 error"
    assert lines[-1] == "claims: 1 holds, 1 violated, 0 not applicable, 1 error"


def test_a_long_matrix_folds_claims_that_hold_everywhere_into_one_line_per_area() -> None:
    rows = [(f"a::{i}", f"autodiff.topic.c{i:02d}", results.HOLDS, TF) for i in range(30)]
    rows += [(f"d::{i}", f"data.topic.c{i:02d}", results.HOLDS, TF) for i in range(15)]
    rows[7] = ("a::7", "autodiff.topic.c07", results.VIOLATED, TF)
    rows.append(("d::x", "data.topic.c00", results.NOT_APPLICABLE, TORCH))
    lines = results.matrix_lines(doc_of(rows), width=100)
    body = [line.split() for line in lines[1:5]]
    assert body == [
        ["autodiff.*", "(30", "claims)", "29/30", "."],
        ["autodiff.topic.c07", "FAIL", ".", "-"],
        ["data.*", "(15", "claims)", "15/15", "0/1"],
        ["data.topic.c00", "ok", "n/a"],
    ]
    assert lines[5].startswith("margin:") and "folded per area" in " ".join(lines[5:-2])
    assert len(lines) <= 11


def test_strategies_are_sub_rows_and_the_matrix_of_every_claim_fits_120_columns() -> None:
    """Every registered claim, on both frameworks and every strategy it takes, one failing
    each: columns are framework/device only, strategies sub-rows, full claim ids."""
    from pytest_dlconform.core import claims as registry
    from pytest_dlconform.run import settings as opts

    rows = []
    for i, (cid, claim) in enumerate(sorted(registry.registry().items())):
        for fw in claim.frameworks:
            short = {"tensorflow": "tf", "torch": "torch"}[fw]
            strategies = opts.STRATEGY_CHOICES[fw] if cid.startswith("distributed.") else ("",)
            for strategy in strategies:
                params = {"framework": short, "device": "cpu", **({"strategy": strategy} if strategy else {})}
                verdict = results.VIOLATED if strategy in ("", "mirrored", "ddp") and i % 3 == 0 else results.HOLDS
                rows.append((f"{cid}::{short}-{strategy}", cid, verdict, params))
        rows.append((f"{cid}::both", cid, results.HOLDS, {"framework": "tf+torch", "device": "cpu"}))
    lines = results.matrix_lines(doc_of(rows))
    assert max(len(line) for line in lines) <= 120, max(lines, key=len)
    assert lines[0].split() == ["tf+torch/cpu", "tf/cpu", "torch/cpu", "margin"]
    labels = [line.split()[0] for line in lines[1:] if line.startswith("  ")]
    assert all("~" not in label for label in labels)  # full claim ids, never cut
    assert any(line.split()[1].startswith("[mirrored]") for line in lines[1:] if line.startswith("  distributed."))


# ------------------------------------------------------------------ known divergences


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------ atomic writes


def test_write_atomic_replaces_or_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    results.write_atomic(str(target), '{"v": 1}')
    with pytest.raises(TypeError):
        results.write_atomic(str(target), None)  # type: ignore[arg-type]  # fails in the middle of the write
    assert target.read_text() == '{"v": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0600
    target.chmod(0o640)
    results.write_atomic(str(target), '{"v": 2}')
    assert target.stat().st_mode & 0o777 == 0o640 and target.read_text() == '{"v": 2}'


WRITER = """
import json, sys
from pytest_dlconform.report.results import write_atomic
n = 0
while True:
    n += 1
    write_atomic(sys.argv[1], json.dumps({"n": n, "pad": "x" * 20_000_000}))
    print(n, flush=True)
"""


def test_a_killed_writer_never_leaves_a_truncated_report(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    for delay in (0.0, 0.05, 0.2):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip()  # one complete write done
            time.sleep(delay)  # then kill it at some point of a later write
            os.kill(proc.pid, signal.SIGKILL)  # the process we started, by its id
        finally:
            proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]
        doc = json.loads(target.read_text())  # complete, never truncated
        assert doc["n"] >= 1 and len(doc["pad"]) == 20_000_000


def test_the_reproduction_keeps_what_the_test_drew() -> None:
    """data.draw() values follow the falsifying example as 'Draw N (label): ...' lines."""
    text = ("E   AssertionError: off\nE   Falsifying example: test_f(\nE       data=data(...),\nE   )\n"
            "E   Draw 1 (case): ProgramCase(ops=['tanh'])\nE   Draw 2: 5\nnot part of it\n")
    out = results.reproduction("pytest x", text).splitlines()
    assert out[0] == "pytest x" and out[1] == "Falsifying example: test_f("
    assert out[-2:] == ["Draw 1 (case): ProgramCase(ops=['tanh'])", "Draw 2: 5"]
