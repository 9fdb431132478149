"""Saved reports in real runs: a run with dlconform active saves its report under the
rootdir's .dlconform/reports, --dl-baseline=last compares with the one before it, and
`dlconform compare --last` reads them; a run that never asked for dlconform writes nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CLAIMS = """
import os
import pytest


@pytest.mark.claim("autodiff.tape.watch")
def test_holds(dl_device):
    assert True


@pytest.mark.claim("autodiff.tape.persistent")
def test_maybe_violated(dl_device):
    assert os.environ.get("PLAIN_VIOLATE") is None, "planted violation"
"""

HOST = """
def test_plain():
    assert True
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    for var in [v for v in os.environ if v.startswith("DLCONFORM_")]:
        monkeypatch.delenv(var)
    return pytester


def saved(project: pytest.Pytester) -> list[str]:
    folder = project.path / ".dlconform" / "reports"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return project.runpytest_subprocess("-W", "ignore::DeprecationWarning", "--dl-device=cpu", *args, timeout=600)


def test_runs_save_their_reports_and_compare_with_the_last(project: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_claims=CLAIMS)
    run(project).assert_outcomes(passed=2)
    (first,) = saved(project)
    assert re.fullmatch(r"0001_\d{8}T\d{6}Z_[0-9a-f]{10}\.json", first), first
    document = json.loads((project.path / ".dlconform" / "reports" / first).read_text())
    assert set(document["claims"]) == {"autodiff.tape.watch", "autodiff.tape.persistent"}
    leftovers = [p.name for p in (project.path / ".dlconform" / "reports").iterdir() if p.name.startswith(".")]
    assert leftovers == []  # renamed into place: no temporary file left

    monkeypatch.setenv("PLAIN_VIOLATE", "1")
    second = run(project, "--dl-baseline=last")
    second.assert_outcomes(passed=1, failed=1)
    assert second.ret == 1
    out = second.stdout.str()
    assert "dlconform compare: REGRESSED: 1 cell(s) of 1 claim(s): autodiff.tape.persistent" in out
    assert "dlconform: report saved as .dlconform/reports/0002_" in out
    assert len(saved(project)) == 2

    proc = subprocess.run([sys.executable, "-m", "pytest_dlconform.cli", "compare", "--last"], cwd=project.path,
                          capture_output=True, text=True, timeout=120, env={**os.environ})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("dlconform compare: REGRESSED: 1 cell(s) of 1 claim(s): autodiff.tape.persistent")
    assert "Traceback" not in proc.stderr


def test_autosave_no_and_a_missing_last_baseline(project: pytest.Pytester) -> None:
    project.makepyfile(test_claims=CLAIMS)
    missing = run(project, "--dl-baseline=last")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in missing.stderr.str().splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--dl-baseline='last' (from --dl-baseline): no saved report in" in errors[0], errors
    run(project, "--dl-autosave=no").assert_outcomes(passed=2)
    assert saved(project) == [] and not (project.path / ".dlconform").exists()
    run(project, f"--dl-autosave={project.path / 'mine'}").assert_outcomes(passed=2)
    assert len(os.listdir(project.path / "mine")) == 1 and not (project.path / ".dlconform").exists()


def test_a_run_that_never_asked_for_dlconform_saves_nothing(project: pytest.Pytester) -> None:
    project.makepyfile(test_host=HOST)
    result = project.runpytest_subprocess("-W", "ignore::DeprecationWarning")
    result.assert_outcomes(passed=1)
    assert not (project.path / ".dlconform").exists()
    assert "dlconform:" not in result.stdout.str()
