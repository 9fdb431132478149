"""The reproduce lines of the shipped suites run verbatim from any folder (issue 31).

A real ``dlconform mutate`` run of one cheap torch mutant on one cheap shipped claim test
fails it; ``scripts/rerun_repro.py`` (what .ci/run does after the mutation sample) takes
the failed test's reproduce line from the run's report and runs it with bash from a new
empty folder under the same mutant: exactly that test runs, violated the same way. And the
header's line of a ``dlconform run`` from an empty folder collects, from another empty
folder, what the run collected.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MUTANT = "torch-shuffle-same-every-epoch"  # breaks data.torch.shuffle's per-epoch reshuffle
SELECT = "reproducible_permutation and generator"  # one test, a few seconds

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


def _env() -> dict[str, str]:
    """This interpreter's ``pytest`` and ``dlconform`` first on PATH, as an activated venv has them."""
    return {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}


def _header_command(lines: list[str]) -> str:
    """The header's reproduce line as one line (the terminal wraps it with `` \\`` continuations)."""
    start = next(i for i, x in enumerate(lines) if x.startswith("dlconform: reproduce with: "))
    parts = [lines[start].removeprefix("dlconform: reproduce with: ")]
    while parts[-1].endswith(" \\"):
        parts[-1] = parts[-1][:-2]
        parts.append(lines[start + len(parts)].strip())
    return " ".join(parts)


def test_a_mutants_failed_test_reruns_from_an_empty_folder(tmp_path: Path) -> None:
    out, cwd = tmp_path / "mutate-out", tmp_path / "run"
    cwd.mkdir()
    mutate = subprocess.run(
        [sys.executable, "-m", "pytest_dlconform.cli", "mutate", "--mutant", MUTANT, "-n", "0", "--out", str(out),
         "--", "-k", SELECT, "--dl-device=cpu", "--dl-framework=torch"],
        cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    summary = json.loads((out / "mutate.json").read_text())
    assert summary["mutants"][0]["verdict"] == "killed", mutate.stdout + mutate.stderr
    doc = json.loads(Path(summary["mutants"][0]["report"]).read_text())
    (failed,) = [t for e in doc["claims"].values() for t in e["tests"] if t["verdict"] == "violated"]
    line = failed["repro"].splitlines()[0]
    assert line.startswith("pytest --pyargs 'pytest_dlconform.suites.data.test_torch_loader::"
                           "test_seeded_shuffle_is_a_reproducible_permutation_per_epoch[cpu-generator]' --dl-profile=ci ")
    assert "--dl-framework=torch" in line and "--dl-device=cpu" in line and " cd " not in line
    log = Path(summary["mutants"][0]["log"]).read_text()
    assert "dlconform reproduction" in log and line in log  # what the terminal printed
    rerun = subprocess.run([sys.executable, str(ROOT / "scripts" / "rerun_repro.py"), str(out)],
                           cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "rerun_repro: reproduced data.torch.shuffle" in rerun.stdout
    assert "['AssertionError', 'Exception']" in rerun.stdout


def test_the_header_of_dlconform_run_collects_the_same_from_another_empty_folder(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    args = ["--collect-only", "-q", "--dl-claims=data.torch.shuffle", "--dl-framework=torch", "--dl-device=cpu"]
    run = subprocess.run([sys.executable, "-m", "pytest_dlconform.cli", "run", *args], cwd=first, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    line = _header_command(run.stdout.splitlines())
    assert line.startswith("dlconform run --dl-profile=ci --dl-seed=0 --dl-framework=torch ")
    again = subprocess.run(["bash", "-c", line + " --collect-only -q"], cwd=second, env=_env(),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    counted = [re.search(r"(\d+)/\d+ tests? collected", p.stdout) for p in (run, again)]
    assert all(counted) and counted[0].group(1) == counted[1].group(1) != "0"  # type: ignore[union-attr]
