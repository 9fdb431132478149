"""Issue 31, items 7 and 8: an upgrade into a known bug, a known bug on another version,
and ready-to-file upstream reports.

- compare: a test that held and is now violated with a known divergence's symptom is a
  *known regression*: in the headline, its own section, exit 1 (0 with warn);
- divergences: a violated test that would match an entry but for the version still fails,
  and its record and the entry's status line name the finding;
- repro: ``--issue`` for a violated test with a shipped script and without one (an edge
  case, from which a standalone script is generated and run here in a subprocess).

Reports are built with results.report_document, entries parsed from real TOML.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform import cli
from pytest_dlconform.report import compare, divergences, repro, results

TF = {"framework": "tf", "device": "cpu"}
TORCH = {"framework": "torch", "device": "cpu"}
ERF = "suites/autodiff/test_op_edges.py::test_tensorflow_op_edge_cases[cpu-extreme-erf]"
ERF_CLAIM = "autodiff.ops.edge-cases"
ERF_MESSAGE = ("erf extreme [default, float64]: value at x=1e+300 is nan, documented 1.0 (allowed error 4.44e-16); "
               "the documented formula of erf\nerf extreme [default, float64]: value at x=-1e+300 is nan, documented "
               "-1.0 (allowed error 4.44e-16); the documented formula of erf")
ERF_EVIDENCE = {"checks": {"erf extreme": {"observed": 0.2, "tolerance": 1.0, "margin": 0.2, "count": 1}},
                "exception": {"types": ["EdgeMismatch", "AssertionError", "Exception"], "message": ERF_MESSAGE,
                              "parts": [[["EdgeMismatch", "AssertionError", "Exception"], m]
                                        for m in ERF_MESSAGE.splitlines()]}}
ENTRY = """
    [[divergence]]
    claim = "autodiff.ops.edge-cases"
    script = "tf_erf_float64_nan.py"
    tests = ["autodiff/test_op_edges.py::test_tensorflow_op_edge_cases[*-extreme-erf]"]
    exception = "EdgeMismatch"
    message = '^erf extreme \\[default, float64\\]: value at x=-?1e\\+300 is nan, documented -?1\\.0 '
    reason = "tf.math.erf in float64 returns NaN for |x| above about 1.5e154"
    expires = 2999-06-30
    framework = "tensorflow"
    version = "2.21.*"
"""
OTHER = ("suites/autodiff/test_a.py::test_watch[tf-cpu]", "autodiff.tape.watch")


def env(tf_version: str) -> dict[str, Any]:
    return {"python": "3.11.7", "implementation": "CPython", "platform": "Linux-6.1-x86_64",
            "devices": "2 CPU cores (Intel(R) Xeon(R); flags avx2 fma avx512f)",
            "frameworks": {"tensorflow": tf_version, "numpy": "2.4.6", "hypothesis": "6.155.2", "keras": "3.15.1"},
            "profile": "ci", "seed": 0, "settings": {"frameworks": ["tensorflow"], "selected_devices": ["cpu"]}}


def report(tf_version: str, erf_verdict: str, evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    collector = results.Collector()
    collector.tests[ERF] = results.TestResult(
        ERF, ERF_CLAIM, dict(TF), verdict=erf_verdict, evidence=evidence or {},
        reason=f"EdgeMismatch: {ERF_MESSAGE.splitlines()[0]}" if erf_verdict == results.VIOLATED else "",
        repro=f"pytest '{ERF}' --dl-profile=ci --dl-seed=0  # test seed 254116944")
    collector.tests[OTHER[0]] = results.TestResult(OTHER[0], OTHER[1], dict(TF), verdict=results.HOLDS)
    return json.loads(results.report_document(collector, env(tf_version), {}).to_json())


def entries(tmp_path: Path) -> list[divergences.Divergence]:
    path = tmp_path / "known.toml"
    path.write_text(textwrap.dedent(ENTRY), encoding="utf-8")
    return divergences.load(str(path))


def save(tmp_path: Path, name: str, doc: Any) -> str:
    path = tmp_path / name
    path.write_text(doc.to_json() if hasattr(doc, "to_json") else json.dumps(doc), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------ item 8: compare


def test_an_upgrade_into_a_known_bug_is_a_known_regression_and_exits_one(tmp_path: Path) -> None:
    """tensorflow 2.18.1 held, 2.21 shows the erf entry's symptom: not "no regression"."""
    found = entries(tmp_path)
    old = report("2.18.1", results.HOLDS)
    new = divergences.apply(report("2.21.0", results.VIOLATED, ERF_EVIDENCE), found)
    result = compare.compare(old, new)
    assert result.regressed == [] and [c.claim for c in result.known_regressed] == [ERF_CLAIM]
    assert result.exit_code == compare.EXIT_REGRESSED
    text = compare.to_text(result)
    assert text.splitlines()[0] == f"dlconform compare: 1 known regression: {ERF_CLAIM}"
    assert "known divergence entry 1 (autodiff.ops.edge-cases): tf.math.erf in float64 returns NaN" in text
    assert compare.to_dict(result)["known_regressed"][0]["tests"] == [ERF]

    warned = compare.compare(old, new, known_regressions=compare.WARN)
    assert warned.exit_code == compare.EXIT_OK and len(warned.known_regressed) == 1
    assert "(--known-regressions=warn: not failing)" in compare.to_text(warned).splitlines()[0]


def test_the_cli_fails_an_upgrade_into_a_known_bug(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = save(tmp_path, "old.json", report("2.18.1", results.HOLDS))
    new = save(tmp_path, "new.json", report("2.21.0", results.VIOLATED, ERF_EVIDENCE))
    known = tmp_path / "known.toml"
    known.write_text(textwrap.dedent(ENTRY), encoding="utf-8")
    assert cli.main(["compare", "--known-divergences", str(known), old, new]) == 1
    assert capsys.readouterr().out.startswith(f"dlconform compare: 1 known regression: {ERF_CLAIM}\n")


# ------------------------------------------------------------------ item 8: a known bug on another version


def test_a_failure_outside_the_entrys_versions_is_named_and_still_fails(tmp_path: Path) -> None:
    """On 2.18.1 the 2.21 entry does not apply: the test fails (no xfail), and says which finding it shows."""
    found = entries(tmp_path)
    doc = report("2.18.1", results.VIOLATED, ERF_EVIDENCE)
    test = next(t for c in doc["claims"].values() for t in c["tests"] if t["nodeid"] == ERF)
    failure = divergences.failure_of(test)
    env_18 = env("2.18.1")
    assert divergences.match_failure(found, test, failure, env_18) is None
    near = divergences.match_elsewhere(found, test, failure, env_18)
    assert near is found[0] and near.seen_on() == "tensorflow 2.21"
    assert divergences.match_elsewhere(found, test, failure, env("2.21.0")) is None  # matched there: not "elsewhere"
    other_symptom = divergences.Failure(("EdgeMismatch", "AssertionError"), "erf extreme [default, float64]: value "
                                        "at x=3.0 is nan, documented 1.0 (allowed error 4.44e-16)")
    assert divergences.match_elsewhere(found, test, other_symptom, env_18) is None
    no_tf = dict(env_18, settings={"frameworks": ["torch"], "selected_devices": ["cpu"]})
    assert divergences.match_elsewhere(found, test, failure, no_tf) is None  # another stack, not another version

    after = divergences.apply(doc, found, today=dt.date(2026, 12, 1))
    record = next(t for t in after.tests() if t.nodeid == ERF)
    assert record.verdict == results.VIOLATED and record.expected is None and record.divergence is None
    note = ("matches known divergence 1 (tf.math.erf in float64 returns NaN for |x| above about 1.5e154), seen on "
            "tensorflow 2.21; not yet confirmed on this version")
    assert record["known_elsewhere"]["note"] == note and record["known_elsewhere"]["script"] == "tf_erf_float64_nan.py"
    assert after["claims"][ERF_CLAIM]["expected"] is None and after["counts"]["expected"]["tests"] == 0
    [status] = after.divergences
    assert status["status"] == divergences.OTHER_STACK and list(status["tests"]) == [ERF]
    [line] = divergences.status_lines(list(after.divergences))
    assert "tensorflow is 2.18.1, the entry is for 2.21.*" in line and note in line and "still failing" in line
    assert "known_elsewhere" in json.loads(after.to_json())["claims"][ERF_CLAIM]["tests"][0]
    again = divergences.apply(after, found, today=dt.date(2026, 12, 1), rematch=True)  # judged again, not doubled
    assert next(t for t in again.tests() if t.nodeid == ERF)["known_elsewhere"]["note"] == note


def test_a_plain_regression_on_a_version_the_entry_does_not_name_says_which_finding_it_shows(tmp_path: Path) -> None:
    found = entries(tmp_path)
    old = report("2.20.0", results.HOLDS)
    new = divergences.apply(report("2.22.0", results.VIOLATED, ERF_EVIDENCE), found)
    result = compare.compare(old, new)
    [change] = result.regressed
    assert result.exit_code == 1 and "matches known divergence 1 (tf.math.erf" in change.detail


# ------------------------------------------------------------------ item 7: ready-to-file reports


def _issue_doc(tmp_path: Path, nodeid: str, claim: str, params: dict[str, str], evidence: dict[str, Any],
               reason: str) -> tuple[dict[str, Any], dict[str, Any]]:
    collector = results.Collector()
    collector.tests[nodeid] = results.TestResult(nodeid, claim, dict(params), verdict=results.VIOLATED,
                                                 evidence=evidence, reason=reason,
                                                 repro=f"pytest '{nodeid}' --dl-seed=0  # test seed 1")
    environment = env("2.21.0")
    environment["frameworks"]["torch"] = "2.13.0+cpu"
    claims = {claim: {"id": claim, "statement": "The documented value.\nAt every edge.", "source": "the op's page"}}
    doc = json.loads(results.report_document(collector, environment, claims).to_json())
    return doc, doc["claims"][claim]["tests"][0]


def _sections(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_an_issue_for_a_test_with_a_shipped_script_has_every_section(tmp_path: Path) -> None:
    doc, test = _issue_doc(tmp_path, ERF, ERF_CLAIM, TF, ERF_EVIDENCE, "EdgeMismatch: erf ...")
    text = repro.issue(test, doc, entries(tmp_path))
    assert text.startswith("# tensorflow 2.21.0: erf in float64 at x=1e+300 is nan, documented 1.0\n")
    assert _sections(text) == list(repro.ISSUE_SECTIONS)
    assert "- tensorflow 2.21.0, keras 3.15.1, numpy 2.4.6" in text
    assert "- CPU: 2 CPU cores (Intel(R) Xeon(R); flags avx2 fma avx512f)" in text
    assert "the reviewed script `pytest_dlconform/report/findings/tf_erf_float64_nan.py`" in text
    assert repro.shipped_text("tf_erf_float64_nan.py").rstrip("\n") in text
    assert "Documentation: the op's page\n\n> The documented value.\n> At every edge." in text
    assert "value at x=-1e+300 is nan" in text  # observed
    assert "Cause as far as known: tf.math.erf in float64 returns NaN" in text
    assert "known divergence entry 1 (autodiff.ops.edge-cases) (autodiff.ops.edge-cases [tensorflow, version 2.21.*]" in text


TANH = "suites/autodiff/test_op_edges.py::test_torch_op_edge_cases[cpu-extreme-tanh]"


def _tanh_evidence(documented: str) -> dict[str, Any]:
    message = (f"tanh extreme [default, float64]: value at x=1e+300 is 1.0, documented {documented} (allowed error "
               "4.44e-16); the documented formula of tanh (and 1 more cases of this test differ)")
    return {"checks": {}, "exception": {"types": ["EdgeMismatch", "AssertionError", "Exception"], "message": message}}


@pytest.mark.parametrize(("documented", "code", "verdict"), [("0.5", 1, "BUG PRESENT: "), ("1.0", 0, "FIXED: ")])
def test_an_edge_case_without_a_shipped_script_gets_one_that_runs_standalone(
        tmp_path: Path, documented: str, code: int, verdict: str) -> None:
    """A torch edge case (a synthetic expectation of 0.5 for tanh(1e300) = 1, which torch
    computes right): the generated script rebuilds the input, calls the op, prints observed
    vs expected, and exits 1 exactly when they differ."""
    pytest.importorskip("torch")
    doc, test = _issue_doc(tmp_path, TANH, ERF_CLAIM, TORCH, _tanh_evidence(documented), "EdgeMismatch: tanh ...")
    kind, _, script = repro.script_for(test, doc, repro.packaged_entries())
    assert kind == repro.GENERATED and "torch.tanh" in script and "dlconform" not in script.split('"""', 2)[2]
    path = tmp_path / "tanh.py"
    path.write_text(script, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == code, proc.stdout + proc.stderr
    expected = float(documented)
    assert proc.stdout.startswith(verdict) and "at x=1e+300: observed 1.0" in proc.stdout
    assert f"expected {expected!r} (documented; allowed error 4.44e-16)" in proc.stdout
    text = repro.issue(test, doc, [])
    assert _sections(text) == list(repro.ISSUE_SECTIONS) and "a script generated from the failing example" in text


def test_an_issue_for_a_test_no_script_can_reproduce_says_so_in_one_line_with_the_pytest_line(tmp_path: Path) -> None:
    nodeid = "suites/autodiff/test_documented_gradients.py::test_cumprod_gradient_at_exact_zeros[torch-cpu-True-True]"
    evidence = {"checks": {"cumprod at zeros": {"observed": 1.875, "tolerance": 4.7e-15, "margin": 4e14}},
                "exception": {"types": ["ToleranceExceeded", "AssertionError"], "message": "cumprod at zeros: 1.875"}}
    doc, test = _issue_doc(tmp_path, nodeid, "autodiff.gradient.documented-conventions", TORCH, evidence,
                           "ToleranceExceeded: cumprod at zeros: 1.875")
    with pytest.raises(repro.Missing) as missing:
        repro.script_for(test, doc, [])
    assert "\n" not in str(missing.value) and f"reproduce it with: pytest '{nodeid}' --dl-seed=0" in str(missing.value)
    text = repro.issue(test, doc, [])
    assert _sections(text) == list(repro.ISSUE_SECTIONS)
    assert "No standalone script: no shipped one, and the report holds no input it failed on.\n" in text
    assert f"```\npytest '{nodeid}' --dl-seed=0  # test seed 1\n```" in text
    assert "- cumprod at zeros: observed 1.875, allowed 4.7e-15" in text


def test_cli_issue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc, _ = _issue_doc(tmp_path, ERF, ERF_CLAIM, TF, ERF_EVIDENCE, "EdgeMismatch: erf ...")
    path = save(tmp_path, "r.json", doc)
    assert cli.main(["repro", ERF, "--report", path, "--issue"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# tensorflow 2.21.0: ") and _sections(out) == list(repro.ISSUE_SECTIONS)
    assert cli.main(["repro", ERF, "--issue"]) == 2
    assert capsys.readouterr().err == ("dlconform repro: --issue needs --report R.json: the versions, CPU and observed "
                                       "result come from the report\n")
