"""The ``dlconform`` command itself: --version, a bare call, the help, claim globs that match
nothing, ``compare --format json`` and the suite version every report records.

In-process through cli.main with capsys; as a process only where "no framework import" or
"no traceback" is the point.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform import cli
from pytest_dlconform.core import claims as registry
from pytest_dlconform.core import fingerprint
from pytest_dlconform.report import compare, results
from pytest_dlconform.run import settings as opts

ENV = {"python": "3.11.7", "frameworks": {"tensorflow": "2.20.0", "numpy": "2.4.6", "hypothesis": "6.155.2"},
       "profile": "ci", "seed": 0, "settings": {"frameworks": ["tensorflow"], "selected_devices": ["cpu"]}}
TF = {"framework": "tf", "device": "cpu"}
ROWS = [
    ("suites/autodiff/test_a.py::test_watch[cpu-tf]", "autodiff.tape.watch", results.HOLDS),
    ("suites/autodiff/test_a.py::test_nested[cpu-tf]", "autodiff.tape.nested", results.HOLDS),
    ("suites/autodiff/test_a.py::test_persistent[cpu-tf]", "autodiff.tape.persistent", results.VIOLATED),
]


def report(tmp_path: Path, name: str, verdicts: dict[str, str] | None = None, **env: Any) -> str:
    collector = results.Collector()
    for nodeid, claim, verdict in ROWS:
        collector.tests[nodeid] = results.TestResult(nodeid, claim, dict(TF), verdict=(verdicts or {}).get(claim, verdict))
    doc = json.loads(results.report_document(collector, {**ENV, **env}, {}).to_json())
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------ --version, bare call, help


def test_version_names_the_package_and_the_frameworks_without_importing_them() -> None:
    code = ("import sys; from pytest_dlconform import cli; rc = cli.main(['--version']); "
            "print('imported:', [m for m in ('tensorflow', 'torch', 'keras') if m in sys.modules]); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("pytest-dlconform ") and "(Python " in lines[0]
    for fw in opts.FRAMEWORK_CHOICES:
        assert f"{fw} {opts.framework_version(fw) or 'not installed'}" in lines
    assert lines[-1] == "imported: []"


def test_a_bare_call_prints_the_help_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: dlconform") and captured.err == ""


def test_help_lists_every_command_in_users_words(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    commands = {"claims", "run", "model", "compare", "html", "modes", "repro", "soak", "mutate", "merge", "durations", "coverage"}
    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == commands and set(cli.DELEGATED) <= commands
    for command in commands:
        assert f"    {command} " in out or f"    {command}\n" in out, command  # a long name: help on the next line
    assert ".py" not in out and "mutants/" not in out  # no source file names


@pytest.mark.parametrize("command", ["claims", "compare", "html", "modes", "repro", "soak", "mutate", "merge",
                                     "durations", "coverage", "model"])
def test_every_subcommands_help_is_in_users_words(command: str) -> None:
    """Each subcommand's own help: no docstring markup (``...``) and no source file names."""
    proc = subprocess.run([sys.executable, "-m", "pytest_dlconform.cli", command, "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "``" not in proc.stdout, proc.stdout[:400]
    assert not re.search(r"\b[\w/]+\.py\b", proc.stdout), proc.stdout[:400]


def test_html_arguments_have_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["html", "--help"])
    out = capsys.readouterr().out
    assert "the JSON report of a run (--dl-report)" in out and "the HTML file to write" in out


def test_run_help_says_what_run_adds_before_pytests_help(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_dlconform.cli", "run", "--help"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    head, _, rest = proc.stdout.partition("pytest's own help follows.")
    assert "--pyargs pytest_dlconform.suites" in head and "known-divergences" in head and "--dl-report" in head
    assert "usage:" in rest and "--dl-claims" in rest


# ------------------------------------------------------------------ claim globs that match nothing


@pytest.mark.parametrize(("pattern", "hint"), [
    ("data.torch.shufle", "did you mean 'data.torch.shuffle'"),
    ("autodif.*", "did you mean 'autodiff.*'"),
    ("Autodiff.tape.*", "did you mean 'autodiff.tape.*'"),
    ("nosuch.*", "a claim id starts with its area ('execution.*', 'autodiff.*'"),
])
def test_a_claims_glob_that_matches_nothing_is_a_usage_error_with_a_hint(
        pattern: str, hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["claims", pattern]) == cli.EXIT_USAGE == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"dlconform claims: {pattern!r} matches no registered claim id; ")
    assert hint in err[0] and "`dlconform claims` lists every claim id" in err[0]


def test_the_close_match_is_a_registered_id() -> None:
    assert registry.closest("data.torch.shufle")[0] == "data.torch.shuffle"
    assert registry.closest("autodiff.tape.wach")[0] == "autodiff.tape.watch"
    assert registry.unmatched(["autodiff.*", "nosuch.*", "data.torch.shuffle"]) == ["nosuch.*"]
    for near in registry.closest("distributed.mirored.*"):
        assert not registry.unmatched([near]), near


def _settings(**cli_values: str) -> opts.Settings:
    return opts.build(opts.make_lookup(cli_values, {}, {}), installed=opts.FRAMEWORK_CHOICES)


def test_settings_refuse_a_claims_glob_that_matches_no_registered_id() -> None:
    with pytest.raises(opts.SettingsError) as err:
        _settings(claims="autodiff.*, data.torch.shufle")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("--dl-claims='autodiff.*, data.torch.shufle' (from --dl-claims): "
                              "'data.torch.shufle' matches no registered claim id; did you mean 'data.torch.shuffle'")
    assert _settings(claims="autodiff.*,data.torch.shuffle").claims == ("autodiff.*", "data.torch.shuffle")
    with pytest.raises(opts.SettingsError, match=r"from environment variable DLCONFORM_CLAIMS.*'nosuch\.\*' matches no"):
        opts.build(opts.make_lookup({}, {"DLCONFORM_CLAIMS": "nosuch.*"}, {}), installed=opts.FRAMEWORK_CHOICES)


# ------------------------------------------------------------------ compare --format json


def test_compare_json_is_the_comparison_as_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = report(tmp_path, "old.json")
    new = report(tmp_path, "new.json", {"autodiff.tape.nested": results.VIOLATED, "autodiff.tape.persistent": results.HOLDS})
    assert cli.main(["compare", "--format", "json", old, new]) == compare.EXIT_REGRESSED
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "dlconform-compare" and doc["exit_code"] == 1
    assert doc["headline"].startswith("REGRESSED: 1 cell(s) of 1 claim(s): autodiff.tape.nested")
    assert {"regressed", "fixed", "appeared", "disappeared", "held_to_error", "drift", "claims", "scope",
            "warnings", "notes", "old", "new"} <= set(doc)
    assert [(c["claim"], c["cell"], c["old"], c["new"]) for c in doc["regressed"]] == [
        ("autodiff.tape.nested", "tf/cpu", "holds", "violated")]
    assert doc["regressed"][0]["tests"] == ["suites/autodiff/test_a.py::test_nested[cpu-tf]"]
    assert [c["claim"] for c in doc["fixed"]] == ["autodiff.tape.persistent"]
    assert doc["appeared"] == [] and doc["disappeared"] == []
    per_claim = {row["claim"]: (row["old"], row["new"]) for row in doc["claims"]}
    assert per_claim == {"autodiff.tape.nested": ("holds", "violated"), "autodiff.tape.persistent": ("violated", "holds"),
                         "autodiff.tape.watch": ("holds", "holds")}
    assert doc["scope"]["frameworks"] == ["tf"] and doc["scope"]["shared_claims"] == 3


# ------------------------------------------------------------------ the suite version of a report


def test_every_report_records_the_suite_hash() -> None:
    env = results.environment({"profile": "ci", "seed": 0}, {}, "cpu")
    assert env[fingerprint.ENV_KEY] == fingerprint.suite_hash()
    assert fingerprint.suite_hash().startswith("sha256:") and len(fingerprint.suite_hash()) == 7 + 64
    names = [name for name, _ in fingerprint._files()]
    assert names == sorted(names) and "claims/autodiff.toml" in names
    assert any(n.startswith("suites/autodiff/test_") and n.endswith(".py") for n in names)


def test_compare_warns_once_when_the_suites_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = report(tmp_path, "a.json", suite_hash="sha256:" + "a" * 64)
    assert cli.main(["compare", same, same]) == 0
    assert "warning:" not in capsys.readouterr().out
    other = report(tmp_path, "b.json", suite_hash="sha256:" + "b" * 64)
    assert cli.main(["compare", same, other]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if "warning:" in line]
    assert warnings == ["  warning: the reports come from different suite versions (claims and suites "
                        "sha256:aaaaaaaaaaaa vs sha256:bbbbbbbbbbbb): a changed verdict may come from a changed test, "
                        "not from the framework"]


def test_compare_says_once_that_an_old_report_has_no_suite_hash(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    old = report(tmp_path, "old.json")  # written before reports recorded it
    new = report(tmp_path, "new.json", suite_hash="sha256:" + "b" * 64)
    assert cli.main(["compare", "--format", "json", old, new]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == [
        "the old report does not record which suites it ran (written by an older pytest-dlconform): cannot tell "
        "whether both were judged by the same claims and tests"]
    assert cli.main(["compare", old, old]) == 0
    out = capsys.readouterr().out
    assert out.count("warning:") == 1 and "neither report records which suites it ran" in out


def test_a_reader_that_stops_reading_ends_the_command_quietly() -> None:
    """`dlconform claims | head -1`: no BrokenPipeError traceback, and a status that is not
    success (the output was cut short). The listing (about 250 KB) outgrows the pipe's buffer,
    so the command is still writing when the reader goes away."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "pytest_dlconform.cli", "claims"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
