"""A wheel of this repository, installed in a fresh venv, draws the same examples as the
checkout: the per-test seeds in the two reports and every check's observed values agree.

Before, a test's seed and hypothesis's derandomized examples came from the node id, which
starts with the install path (``suites/...`` in a checkout, ``modules/...`` from a wheel
with the rootdir in site-packages, ``../..`` from a project elsewhere): two reports of one
upgrade check made from two venvs compared different inputs. The venv is made with
``--system-site-packages`` (torch, hypothesis and pytest come from this interpreter) and the
wheel installed into it with ``--no-deps``; the test checks that the venv imports the wheel,
not this checkout. One cheap claim (modules.dropout, its seed-drawn and hypothesis cases,
torch on the CPU): about 35 s in all.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--dl-claims=modules.dropout", "--dl-framework=torch", "--dl-device=cpu", "--dl-profile=ci", "--dl-seed=0",
       "-p", "no:xdist", "-q", "-k", "drawn or inference"]
WHERE = "import pytest_dlconform, pytest_dlconform.suites as s; print(pytest_dlconform.__file__); print(s.__path__[0])"

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="builds a venv with the system python (bin/ layout)"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the claim it runs (modules.dropout) needs torch"),
]


def _env() -> dict[str, str]:
    """No run settings, no PYTHONPATH (it would put this checkout ahead of the venv's wheel)."""
    drop = ("DLCONFORM_", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONPATH")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def _wheel(tmp: Path) -> Path:
    """Build the wheel offline from a copy of the sources (so no build/ or egg-info lands in the checkout)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("src", "suites"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                            "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=300, env=_env())
    wheels = sorted((tmp / "dist").glob("pytest_dlconform-*.whl"))
    if built.returncode != 0 or not wheels:
        pytest.skip("cannot build this repository's wheel offline (pip wheel --no-deps --no-build-isolation "
                    f"--no-index): {(built.stderr or built.stdout).strip()[-600:]}")
    return wheels[0]


def _venv(tmp: Path, wheel: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120, env=_env())
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=300, capture_output=True, env=_env())
    where = subprocess.run([str(python), "-c", WHERE], capture_output=True, text=True, check=True, timeout=120,
                           cwd=tmp, env=_env()).stdout.split()
    site = venv.resolve()
    assert all(Path(p).resolve().is_relative_to(site) for p in where), (
        f"the venv imports pytest_dlconform from {where}, not from the wheel installed in {site}")
    return python


def _run(python: Path | str, cwd: Path, report: Path) -> dict[str, Any]:
    done = subprocess.run([str(python), "-m", "pytest_dlconform.cli", "run", *RUN, f"--dl-report={report}"],
                          cwd=cwd, capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # In-process pytest.main after the cli had imported the package printed this warning (and its
    # 160-column line) at the end of every run from a wheel; an editable checkout never showed it.
    assert "PytestAssertRewriteWarning" not in done.stdout + done.stderr, done.stdout[-2000:]
    tests = [t for c in json.loads(report.read_text())["claims"].values() for t in c["tests"]]
    return {t["nodeid"]: t for t in tests}


def _by_identity(tests: dict[str, Any]) -> dict[str, Any]:
    """Tests keyed from their suites/ folder on, so the two runs' tests pair up."""
    return {nodeid.rpartition("suites/")[2] if "suites/" in nodeid else nodeid: t for nodeid, t in tests.items()}


def test_a_wheel_in_a_venv_draws_the_checkouts_seeds_and_examples(tmp_path: Path) -> None:
    python = _venv(tmp_path, _wheel(tmp_path))
    project = tmp_path / "project"  # a user's project: no ini file, the suites come from site-packages
    project.mkdir()
    installed = _run(python, project, tmp_path / "venv.json")
    checkout = _run(sys.executable, ROOT, tmp_path / "checkout.json")
    assert set(installed).isdisjoint(checkout), (
        f"both runs had the same node ids ({sorted(installed)}): the test compares nothing across locations")
    a, b = _by_identity(checkout), _by_identity(installed)
    assert a.keys() == b.keys() and len(a) == 5, (sorted(a), sorted(b))
    for key in a:
        assert isinstance(a[key].get("seed"), int), f"{key}: the report records no seed ({a[key].get('seed')!r})"
        assert a[key]["seed"] == b[key]["seed"], f"{key}: seed {b[key]['seed']} (wheel), {a[key]['seed']} (checkout)"
        # Every check's observed value (and, for the hypothesis test, the drawn rates in the checks' names).
        assert a[key]["evidence"]["checks"] == b[key]["evidence"]["checks"], f"{key}: other examples ran from the wheel"
    assert {t["verdict"] for t in [*a.values(), *b.values()]} == {"holds"}
