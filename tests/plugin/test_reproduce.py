"""The reproduce lines of a user's own claim tests run verbatim from another folder (issue 31):
the failed test's line reruns exactly that test, failing the same way; the header's reruns the
run's selection. No framework (tests/integration/test_reproduce_lines.py: the shipped suites)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

USER_CLAIMS = """
import pytest

@pytest.mark.claim("autodiff.tape.nested")
@pytest.mark.parametrize("case", ["a b", "c[d]", "e"])
def test_violated(case):
    assert case == "e", f"broken on {case}"

@pytest.mark.claim("autodiff.tape.watch")
def test_holds():
    pass
"""


def _bash(line: str, cwd: Path, report: Path) -> subprocess.CompletedProcess[str]:
    """``line`` as a user pastes it, from ``cwd``, with this interpreter's ``pytest`` first on PATH."""
    env = {**os.environ, "DLCONFORM_REPORT": str(report),
           "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def header_command(lines: list[str]) -> str:
    """The header's reproduce line as one line (the terminal wraps it with `` \\`` continuations)."""
    start = next(i for i, x in enumerate(lines) if x.startswith("dlconform: reproduce with: "))
    parts = [lines[start].removeprefix("dlconform: reproduce with: ")]
    while parts[-1].endswith(" \\"):
        parts[-1] = parts[-1][:-2]
        parts.append(lines[start + len(parts)].strip())
    return " ".join(parts)


def _tests(report: Path) -> list[dict[str, Any]]:
    doc = json.loads(report.read_text())
    return [t for entry in doc["claims"].values() for t in entry["tests"]]


def test_a_users_failed_test_and_the_header_rerun_from_another_folder(suite: pytest.Pytester,
                                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    claims = suite.path / "tests" / "claims"
    claims.mkdir(parents=True)
    (claims / "test_mine.py").write_text(USER_CLAIMS)
    result = suite.runpytest_subprocess("tests/claims", "--dl-seed=3", "--dl-report=r.json")
    result.assert_outcomes(passed=2, failed=2)
    failed = {t["seed"]: t for t in _tests(suite.path / "r.json") if t["verdict"] == "violated"}
    assert len(failed) == 2
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    for i, test in enumerate(failed.values()):
        line = test["repro"].splitlines()[0]
        assert line.startswith(f"cd {suite.path} && pytest 'tests/claims/test_mine.py::test_violated[")
        assert line in result.stdout.str()  # the terminal's "dlconform reproduction" section says the same
        rerun = _bash(line, elsewhere, elsewhere / f"{i}.json")
        assert rerun.returncode == 1, rerun.stdout + rerun.stderr
        (again,) = _tests(elsewhere / f"{i}.json")
        same = ("claim", "params", "seed", "verdict", "reason")
        assert {k: again[k] for k in same} == {k: test[k] for k in same}
        assert again["evidence"]["exception"]["types"] == test["evidence"]["exception"]["types"]
    line = header_command(result.stdout.lines)
    assert line.startswith(f"cd {suite.path} && pytest tests/claims --dl-profile=ci --dl-seed=3 ")
    collected = _bash(line + " --collect-only -q", elsewhere, elsewhere / "collect.json")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "4 tests collected" in collected.stdout
