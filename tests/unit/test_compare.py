"""``dlconform compare``: regressions, fixes, scope, drift, divergences and unusable input.

The reports are documents built with the same code a run uses (results.report_document);
the command is run in-process through cli.main and, for "no traceback", as a process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform import cli
from pytest_dlconform.report import compare, results

TF, TORCH = {"framework": "tf", "device": "cpu"}, {"framework": "torch", "device": "cpu"}
GPU = {"framework": "tf", "device": "gpu"}
ENV = {"python": "3.11.7", "frameworks": {"tensorflow": "2.20.0", "numpy": "2.4.6", "hypothesis": "6.155.2"},
       "profile": "ci", "seed": 0, "settings": {"frameworks": ["tensorflow"], "selected_devices": ["cpu"]}}

Row = tuple[str, str, str, dict[str, str]]  # nodeid, claim, verdict, params


def evidence(margin: float, tolerance: float = 1e-6, **notes: Any) -> dict[str, Any]:
    return {"checks": {"max error": {"observed": margin * tolerance, "tolerance": tolerance, "margin": margin, "count": 20}},
            "notes": notes}


def doc(rows: list[Row], env: dict[str, Any] | None = None, evidences: dict[str, dict[str, Any]] | None = None,
        reasons: dict[str, str] | None = None) -> dict[str, Any]:
    collector = results.Collector()
    for nodeid, claim, verdict, params in rows:
        collector.tests[nodeid] = results.TestResult(
            nodeid, claim, dict(params), verdict=verdict, evidence=(evidences or {}).get(nodeid, {}),
            reason=(reasons or {}).get(nodeid, ""),
        )
    return json.loads(results.report_document(collector, env or ENV, {}).to_json())


def save(tmp_path: Path, name: str, document: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


BASE: list[Row] = [
    ("suites/autodiff/test_a.py::test_watch[cpu-tf]", "autodiff.tape.watch", results.HOLDS, TF),
    ("suites/autodiff/test_a.py::test_nested[cpu-tf]", "autodiff.tape.nested", results.HOLDS, TF),
    ("suites/autodiff/test_a.py::test_persistent[cpu-tf]", "autodiff.tape.persistent", results.VIOLATED, TF),
    ("suites/execution/test_b.py::test_gpu_only[cpu-tf]", "execution.eager.concrete-values", results.NOT_APPLICABLE, TF),
]


def changed(rows: list[Row], **verdicts: str) -> list[Row]:
    """BASE with some claims' verdicts replaced (claim id with dots as underscores -> verdict)."""
    out = []
    for nodeid, claim, verdict, params in rows:
        out.append((nodeid, claim, verdicts.get(claim.replace(".", "_").replace("-", "_"), verdict), params))
    return out


# ------------------------------------------------------------------ what changed


def test_a_regression_is_named_and_exits_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = save(tmp_path, "old.json", doc(BASE))
    new_doc = doc(changed(BASE, autodiff_tape_nested=results.VIOLATED),
                  reasons={BASE[1][0]: "GradientMismatch: d2/dx2 off by 3%"})
    new = save(tmp_path, "new.json", new_doc)
    assert cli.main(["compare", old, new]) == compare.EXIT_REGRESSED
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("dlconform compare: REGRESSED: 1 cell(s) of 1 claim(s): autodiff.tape.nested; "
                                   "also 1 still violated")
    assert "  autodiff.tape.nested [tf/cpu] holds -> violated: GradientMismatch: d2/dx2 off by 3%" in out
    assert "      suites/autodiff/test_a.py::test_nested[cpu-tf]" in out


def test_no_regression_exits_zero_and_lists_fixes_and_not_applicable_moves(tmp_path: Path) -> None:
    new_rows = changed(BASE, autodiff_tape_persistent=results.HOLDS, autodiff_tape_watch=results.NOT_APPLICABLE,
                       execution_eager_concrete_values=results.HOLDS)
    result = compare.compare(doc(BASE, reasons={BASE[2][0]: "RuntimeError not raised"}),
                             doc(new_rows, reasons={BASE[0][0]: "no GPU"}))
    assert result.exit_code == compare.EXIT_OK
    assert [(c.claim, c.old, c.new, c.detail) for c in result.fixed] == [
        ("autodiff.tape.persistent", "violated", "holds", "RuntimeError not raised")]
    assert [(c.claim, c.detail) for c in result.to_not_applicable] == [("autodiff.tape.watch", "no GPU")]
    assert [c.claim for c in result.from_not_applicable] == ["execution.eager.concrete-values"]
    assert not result.regressed and not result.still_violated


def test_held_then_harness_error_fails_the_upgrade_check(tmp_path: Path) -> None:
    """An upgrade that breaks the harness where the claim held cannot pass: it has its own
    section and exit status 1 (it is not a regression: nothing was shown to be violated)."""
    result = compare.compare(doc(BASE), doc(changed(BASE, autodiff_tape_watch=results.ERROR),
                                            reasons={BASE[0][0]: "HarnessError: worker crashed"}))
    assert result.exit_code == compare.EXIT_REGRESSED
    assert not result.regressed and not result.errors
    assert [(c.claim, c.old, c.new, c.detail) for c in result.held_to_error] == [
        ("autodiff.tape.watch", "holds", "error",
         "held before, the new run could not check it (harness error): HarnessError: worker crashed")]
    text = compare.to_text(result)
    assert text.startswith("dlconform compare: HELD, NOW ERROR: 1 cell(s): autodiff.tape.watch")
    assert "Held, now a harness error (the new run could not check these: exit status 1): 1" in text


def test_other_harness_errors_are_reported_apart_and_do_not_fail(tmp_path: Path) -> None:
    """error -> holds (the old run's harness failed), n/a -> error: reported, exit 0."""
    old = doc(changed(BASE, autodiff_tape_watch=results.ERROR), reasons={BASE[0][0]: "HarnessError: worker crashed"})
    result = compare.compare(old, doc(BASE))
    assert result.exit_code == compare.EXIT_OK
    assert [(c.claim, c.detail) for c in result.errors] == [
        ("autodiff.tape.watch", "harness error in the old run, not a conformance result: HarnessError: worker crashed")]
    assert "Harness errors (not conformance results): 1" in compare.to_text(result)


def test_appeared_and_disappeared_claims(tmp_path: Path) -> None:
    extra = ("suites/autodiff/test_c.py::test_multiple[cpu-tf]", "autodiff.tape.multiple", results.HOLDS, TF)
    result = compare.compare(doc(BASE[1:]), doc([*BASE[:-1], extra]))
    assert sorted(c.claim for c in result.appeared) == ["autodiff.tape.multiple", "autodiff.tape.watch"]
    assert [c.claim for c in result.disappeared] == ["execution.eager.concrete-values"]
    assert result.shared_claims == 2


def test_a_renamed_test_in_a_shared_cell_appears_and_disappears() -> None:
    renamed = [("suites/autodiff/test_a.py::test_watch_v2[cpu-tf]", *BASE[0][1:]), *BASE[1:]]
    result = compare.compare(doc(BASE), doc(renamed))
    assert [(c.claim, c.tests) for c in result.appeared] == [
        ("autodiff.tape.watch", ["suites/autodiff/test_a.py::test_watch_v2[cpu-tf]"])]
    assert [c.claim for c in result.disappeared] == ["autodiff.tape.watch"]


# ------------------------------------------------------------------ scope


def test_cpu_against_gpu_compares_the_claims_both_ran_and_says_so() -> None:
    gpu_rows = [(n.replace("[cpu-", "[gpu-"), c, v, GPU) for n, c, v, _ in BASE[:2]]
    gpu_rows[1] = (gpu_rows[1][0], gpu_rows[1][1], results.VIOLATED, GPU)
    result = compare.compare(doc(BASE), doc(gpu_rows))
    assert result.scope.across_devices
    assert any("share no device kind (old: cpu; new: gpu)" in n for n in result.scope.notes)
    assert result.shared_claims == 2
    assert [(c.claim, c.column) for c in result.regressed] == [("autodiff.tape.nested", "tf")]
    assert [c.claim for c in result.disappeared] == ["autodiff.tape.persistent", "execution.eager.concrete-values"]
    assert "; across device kinds (none in common);" in compare.to_text(result)


def test_devices_only_one_side_ran_are_left_out() -> None:
    both = [*BASE, ("suites/autodiff/test_a.py::test_watch[gpu-tf]", "autodiff.tape.watch", results.HOLDS, GPU)]
    result = compare.compare(doc(both), doc(BASE))
    assert not result.scope.across_devices and result.scope.devices == ("cpu",)
    assert "device kind(s) gpu ran only in the old report: not compared" in result.scope.notes
    assert not result.disappeared


def test_frameworks_only_one_side_ran_are_left_out() -> None:
    torch_row = ("suites/autodiff/test_a.py::test_watch[cpu-torch]", "autodiff.tape.watch", results.VIOLATED, TORCH)
    result = compare.compare(doc(BASE), doc([*BASE, torch_row]))
    assert "framework(s) torch ran only in the new report: not compared" in result.scope.notes
    assert not result.regressed and not result.appeared


def test_installed_and_checkout_node_ids_match() -> None:
    installed = [(n.replace("suites/", "venv/lib/python3.11/site-packages/pytest_dlconform/suites/"), c, v, p)
                 for n, c, v, p in BASE]
    result = compare.compare(doc(BASE), doc(installed))
    assert not (result.appeared or result.disappeared or result.regressed)


def test_normalized_nodeid() -> None:
    norm = compare.normalized_nodeid
    assert norm("a/b/suites/autodiff/t.py::test_x[cpu-tf]", None) == "autodiff/t.py::test_x[cpu-tf]"
    assert norm("suites/autodiff/t.py::test_x[multi-gpu-tf-mirrored]", "multi-gpu") == "autodiff/t.py::test_x[tf-mirrored]"
    assert norm("suites/autodiff/t.py::test_x[tf-cpu]", "cpu") == "autodiff/t.py::test_x[tf]"
    assert norm("suites/autodiff/t.py::test_x[cpu]", "cpu") == "autodiff/t.py::test_x"
    assert norm("suites/autodiff/t.py::test_x[cpuish-tf]", "cpu") == "autodiff/t.py::test_x[cpuish-tf]"


def test_environment_differences_are_noted() -> None:
    other = json.loads(json.dumps(ENV))
    other["frameworks"]["numpy"], other["profile"] = "2.3.0", "thorough"
    result = compare.compare(doc(BASE), doc(BASE, env=other))
    assert any(n.startswith("profile differs (ci vs thorough)") for n in result.scope.notes)
    assert any(n.startswith("numpy differs (2.4.6 vs 2.3.0)") for n in result.scope.notes)


# ------------------------------------------------------------------ drift


def test_margin_growing_towards_the_tolerance_is_drift_and_small_moves_are_not() -> None:
    n0, n1 = BASE[0][0], BASE[1][0]
    old = doc(BASE, evidences={n0: evidence(0.1, trace_count=1, seconds=0.5), n1: evidence(0.1)})
    new = doc(BASE, evidences={n0: evidence(0.6, trace_count=2, seconds=2.5), n1: evidence(0.3)})
    result = compare.compare(old, new)
    assert [(c.claim, c.detail) for c in result.drift] == [
        ("autodiff.tape.watch", "max error: margin 0.1 -> 0.6 of the tolerance; trace_count: 1 -> 2")]
    assert result.exit_code == compare.EXIT_OK
    strict = compare.compare(old, new, threshold=0.15)
    assert [c.claim for c in strict.drift] == ["autodiff.tape.nested", "autodiff.tape.watch"]


def test_a_changed_tolerance_is_drift() -> None:
    n0 = BASE[0][0]
    lines = compare.evidence_drift(evidence(0.1, 1e-6), evidence(0.1, 2e-6), 0.25)
    assert lines == ["max error: tolerance 1e-06 -> 2e-06"]
    result = compare.compare(doc(BASE, evidences={n0: evidence(0.1, 1e-6)}), doc(BASE, evidences={n0: evidence(0.1, 2e-6)}))
    assert len(result.drift) == 1


def test_fail_on_drift(tmp_path: Path) -> None:
    n0 = BASE[0][0]
    old = save(tmp_path, "o.json", doc(BASE, evidences={n0: evidence(0.1)}))
    new = save(tmp_path, "n.json", doc(BASE, evidences={n0: evidence(0.9)}))
    assert cli.main(["compare", old, new]) == 0
    assert cli.main(["compare", "--fail-on-drift", old, new]) == 1


# ------------------------------------------------------------------ known divergences


NESTED = BASE[1][0]
XLA = {"checks": {"max error": {"observed": 3e-7, "tolerance": 1e-7, "margin": 3.0}},
       "exception": {"types": ["ToleranceExceeded", "AssertionError", "Exception"], "message": "nested: XLA rounding"}}


def _known_file(tmp_path: Path) -> Path:
    known = tmp_path / "known.toml"
    known.write_text('[[divergence]]\nclaim = "autodiff.tape.nest*"\ntests = ["autodiff/test_a.py::test_nested[*]"]\n'
                     'exception = "ToleranceExceeded"\nmessage = "XLA"\nmax_error = 1e-6\n'
                     'framework = "tensorflow"\nversion = "2.20.*"\nreason = "XLA rounding"\nexpires = 2999-12-31\n\n'
                     '[[divergence]]\nclaim = "autodiff.tape.watch"\ntests = ["autodiff/test_a.py::test_watch*"]\n'
                     'exception = "ValueError"\nmessage = "gone"\n'
                     'versions = { numpy = "2.*" }\nreason = "gone"\nexpires = 2999-12-31\n')
    return known


def test_an_upgrade_into_a_known_divergence_is_a_known_regression_and_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Held before, now violated with a known divergence's symptom: the framework regressed
    into a known bug. Named in the headline with its own section, exit 1 by default."""
    old = save(tmp_path, "old.json", doc(BASE))
    new = save(tmp_path, "new.json", doc(changed(BASE, autodiff_tape_nested=results.VIOLATED), evidences={NESTED: XLA}))
    known = _known_file(tmp_path)
    assert cli.main(["compare", "--known-divergences", str(known), old, new]) == compare.EXIT_REGRESSED
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "dlconform compare: 1 known regression: autodiff.tape.nested; also 1 still violated"
    assert "Known regressions (held, now violated with a known divergence's symptom" in out
    assert ("  autodiff.tape.nested [tf/cpu] holds -> violated: held before, now violated with the symptom of known "
            "divergence entry 1 (autodiff.tape.nest*): XLA rounding") in out
    assert "known divergence UNMATCHED: autodiff.tape.watch" in out
    failing = compare.run(old, new, divergences_path=str(known))
    assert failing.exit_code == 1 and compare.names(failing.failing) == ["autodiff.tape.nested"]
    data = compare.to_dict(failing)
    assert data["exit_code"] == 1 and data["known_regressions_policy"] == "fail"
    assert [c["claim"] for c in data["known_regressed"]] == ["autodiff.tape.nested"] and data["regressed"] == []
    md = compare.to_markdown(failing)
    assert md.startswith("### dlconform compare: :x: 1 known regression: autodiff.tape.nested")
    assert "#### Known regressions (held, now violated with a known divergence's symptom" in md


def test_a_known_regression_with_warn_is_reported_and_exits_zero(tmp_path: Path) -> None:
    old = save(tmp_path, "old.json", doc(BASE))
    new = save(tmp_path, "new.json", doc(changed(BASE, autodiff_tape_nested=results.VIOLATED), evidences={NESTED: XLA}))
    warned = compare.run(old, new, divergences_path=str(_known_file(tmp_path)), known_regressions=compare.WARN)
    assert warned.exit_code == 0 and warned.failing == [] and len(warned.known_regressed) == 1
    text = compare.to_text(warned)
    assert text.splitlines()[0] == ("dlconform compare: 1 known regression: autodiff.tape.nested "
                                    "(--known-regressions=warn: not failing); also 1 still violated")
    assert compare.to_dict(warned)["exit_code"] == 0
    assert compare.to_markdown(warned).startswith("### dlconform compare: :warning: 1 known regression")
    with pytest.raises(compare.UnusableReport, match="not one of fail, warn"):
        compare.run(old, new, known_regressions="ignore")


def _compare_has(flag: str) -> bool:
    import argparse

    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["compare"]
    return any(flag in a.option_strings for a in sub._actions)


@pytest.mark.skipif(not _compare_has("--known-regressions"), reason="cli.py's compare has no --known-regressions yet")
def test_the_cli_known_regressions_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = save(tmp_path, "old.json", doc(BASE))
    new = save(tmp_path, "new.json", doc(changed(BASE, autodiff_tape_nested=results.VIOLATED), evidences={NESTED: XLA}))
    known = str(_known_file(tmp_path))
    assert cli.main(["compare", "--known-divergences", known, "--known-regressions=warn", old, new]) == 0
    assert cli.main(["compare", "--known-divergences", known, "--known-regressions=fail", old, new]) == 1
    assert "1 known regression: autodiff.tape.nested" in capsys.readouterr().out


def test_a_violation_outside_the_pin_is_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same test and exception, but an error above the entry's ceiling: not this bug."""
    old = save(tmp_path, "old.json", doc(BASE))
    larger = json.loads(json.dumps(XLA))
    larger["checks"]["max error"].update(observed=3e-5, margin=300.0)
    new = save(tmp_path, "new.json", doc(changed(BASE, autodiff_tape_nested=results.VIOLATED), evidences={NESTED: larger}))
    known = tmp_path / "known.toml"
    known.write_text('[[divergence]]\nclaim = "autodiff.tape.nested"\ntests = ["autodiff/test_a.py::test_nested[*]"]\n'
                     'exception = "ToleranceExceeded"\nmax_error = 1e-6\nframework = "tensorflow"\n'
                     'version = "2.20.*"\nreason = "XLA rounding"\nexpires = 2999-12-31\n')
    assert cli.main(["compare", "--known-divergences", str(known), old, new]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED" in out and "known divergence UNMATCHED: autodiff.tape.nested" in out


def test_an_expired_divergence_is_a_regression_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = save(tmp_path, "old.json", doc(BASE))
    new = save(tmp_path, "new.json", doc(changed(BASE, autodiff_tape_nested=results.VIOLATED), evidences={NESTED: XLA}))
    known = tmp_path / "known.toml"
    known.write_text('[[divergence]]\nclaim = "autodiff.tape.nested"\ntests = ["autodiff/*"]\nexception = "AssertionError"\n'
                     'message = "XLA"\nversions = { numpy = "2.*" }\nreason = "r"\nexpires = 2001-01-01\n')
    assert cli.main(["compare", "--known-divergences", str(known), old, new]) == 1
    assert "known divergence EXPIRED on 2001-01-01: autodiff.tape.nested" in capsys.readouterr().out


# ------------------------------------------------------------------ output


def test_markdown_for_step_summaries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = save(tmp_path, "old.json", doc(BASE))
    new = save(tmp_path, "new.json", doc(changed(BASE, autodiff_tape_nested=results.VIOLATED),
                                         reasons={BASE[1][0]: "a | b"}))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    assert cli.main(["compare", "--format", "markdown", "--markdown-file", str(summary), old, new]) == 1
    out = capsys.readouterr().out
    assert out.startswith("### dlconform compare: :x: REGRESSED")
    assert "| `autodiff.tape.nested` | tf/cpu | holds -> violated | a \\| b |" in out
    assert summary.read_text() == "earlier step\n" + out


# ------------------------------------------------------------------ unusable input


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    good = json.dumps(doc(BASE), indent=1)
    files = {
        "not-json.json": "<html>not a report</html>",
        "truncated.json": good[: len(good) // 2],
        "empty.json": "",
        "future.json": json.dumps({**doc(BASE), "schema_version": 99}),
        "other.json": json.dumps({"hello": "world"}),
        "malformed.json": json.dumps({**doc(BASE), "claims": {"a.b": {"tests": [{"verdict": "meh", "nodeid": "x"}]}}}),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return {
        "missing": (str(tmp_path / "nope.json"), "no such file"),
        "directory": (str(tmp_path), "is a directory"),
        "not json": (str(tmp_path / "not-json.json"), r"not JSON \(line 1, column 1: Expecting value\)"),
        "truncated": (str(tmp_path / "truncated.json"), "truncated JSON"),
        "empty": (str(tmp_path / "empty.json"), "empty file"),
        "unknown schema": (str(tmp_path / "future.json"),
                           "report schema version 99 is not supported; this dlconform reads version 1"),
        "not a report": (str(tmp_path / "other.json"), "not a pytest-dlconform report"),
        "malformed": (str(tmp_path / "malformed.json"), "malformed report"),
    }


def test_unusable_input_is_one_line_and_exit_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = save(tmp_path, "good.json", doc(BASE))
    for what, (path, message) in _bad_inputs(tmp_path).items():
        assert cli.main(["compare", good, path]) == compare.EXIT_UNUSABLE, what
        captured = capsys.readouterr()
        assert captured.out == ""
        err = captured.err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"dlconform compare: new report {path}: "), (what, err)
        assert __import__("re").search(message, err[0]), (what, err)


def test_no_claims_in_common_is_unusable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = save(tmp_path, "old.json", doc(BASE[:2]))
    new = save(tmp_path, "new.json", doc(BASE[2:]))
    assert cli.main(["compare", old, new]) == compare.EXIT_UNUSABLE
    assert capsys.readouterr().err == (
        "dlconform compare: the reports have no claims in common within what both ran (2 claims in old, 2 in new): "
        "nothing to compare\n")
    torch_only = save(tmp_path, "torch.json", doc([("t::x", "autodiff.tape.watch", results.HOLDS, TORCH)]))
    assert cli.main(["compare", old, torch_only]) == compare.EXIT_UNUSABLE
    assert "no framework in common (old: tf; new: torch)" in capsys.readouterr().err


def test_bad_divergences_file_is_unusable_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = save(tmp_path, "good.json", doc(BASE))
    (tmp_path / "bad.toml").write_text("[[divergence]]\nclaim = 'x'\n")
    assert cli.main(["compare", "--known-divergences", str(tmp_path / "bad.toml"), good, good]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_console_command_prints_no_traceback(tmp_path: Path) -> None:
    good = save(tmp_path, "good.json", doc(BASE))
    (tmp_path / "cut.json").write_text(json.dumps(doc(BASE))[:100])
    proc = subprocess.run([sys.executable, "-m", "pytest_dlconform.cli", "compare", good, str(tmp_path / "cut.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("dlconform compare: new report ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


def test_every_cut_of_a_report_is_reported_as_truncated() -> None:
    text = json.dumps(doc(BASE), indent=1)
    for cut in range(1, len(text) - 1, 23):
        with pytest.raises(compare.UnusableReport, match="truncated JSON"):
            compare.parse(text[:cut], "r")
    assert compare.parse(text, "r")["schema_version"] == results.SCHEMA_VERSION


def test_a_report_of_a_run_that_stopped_early_is_flagged() -> None:
    new = doc(BASE)
    new["interrupted"] = "stopping after 1 failures"
    result = compare.compare(doc(BASE), new)
    assert "the new run stopped early (stopping after 1 failures): claims it did not reach are missing from it" in (
        result.scope.notes)


def test_errors_on_both_sides_are_listed_as_not_compared() -> None:
    rows = changed(BASE, autodiff_tape_watch=results.ERROR)
    nodeid = BASE[0][0]
    result = compare.compare(doc(rows, reasons={nodeid: "ExceptionGroup: 60 distinct failures"}),
                             doc(rows, reasons={nodeid: "ExceptionGroup: 2 distinct failures"}))
    assert [(c.claim, c.detail) for c in result.still_error] == [
        ("autodiff.tape.watch", "old: ExceptionGroup: 60 distinct failures; new: ExceptionGroup: 2 distinct failures")]
    assert "Harness errors in both reports (not compared): 1" in compare.to_text(result)
    assert result.exit_code == compare.EXIT_OK


def test_dlconform_html_renders_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = save(tmp_path, "r.json", doc(changed(BASE, autodiff_tape_nested=results.VIOLATED)))
    out = tmp_path / "r.html"
    assert cli.main(["html", report, str(out)]) == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert '<a href="#ev-autodiff.tape.nested--tf_cpu">FAIL</a>' in page and 'data-verdict="violated"' in page
    assert '<section class="cell-detail" id="ev-autodiff.tape.nested--tf_cpu">' in page
    (tmp_path / "cut.json").write_text(json.dumps(doc(BASE))[:50])
    assert cli.main(["html", str(tmp_path / "cut.json"), str(out)]) == 2
    assert capsys.readouterr().err.startswith("dlconform html: report ")
