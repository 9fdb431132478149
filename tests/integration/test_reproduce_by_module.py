"""A reproduce line names its test by module (``pytest --pyargs
pytest_dlconform.suites.autodiff.test_known_limits::test_...``): pytest then gives the test a
node id with no path at all (``::test_...``), so a known divergence selected by node id never
applied and the line reported a failure where the run it came from reported the known
divergence. The test's identity inside the package travels with it instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_dlconform.report import divergences

PACKAGED = str(Path(divergences.__file__).with_name("known_divergences.toml"))
TEST = "pytest_dlconform.suites.autodiff.test_known_limits::test_torch_hardsigmoid_float64_gradient"


def test_a_module_named_test_still_matches_its_known_divergence(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    report = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "--pyargs", TEST,
           f"--dl-divergences={PACKAGED}", "--dl-framework=torch", "--dl-autosave=no", f"--dl-report={report}"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert "1 xfailed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    [test] = [t for c in json.loads(report.read_text())["claims"].values() for t in c["tests"]]
    assert test["nodeid"].startswith("::")  # what pytest calls it here
    assert test["identity"] == "suites/autodiff/test_known_limits.py::test_torch_hardsigmoid_float64_gradient[cpu]"
    assert test["divergence"], test
