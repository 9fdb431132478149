"""A good guest: installed into someone else's environment, the plugin changes nothing until
a run asks for dlconform, and its hypothesis budgets only ever apply to claim tests.

Each test runs a host project of its own (pytester, in a subprocess) with the plugin
installed as it is for any user (the pytest11 entry point). A fake ``nvidia-smi`` first on
PATH records every call, so "no probing" is observed, not assumed.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

HOST = '''
from hypothesis import given, settings, strategies as st

def test_records_the_default_settings():
    with open("host-settings.txt", "a") as fh:
        fh.write(repr(settings.default) + "\\n")
    assert settings().max_examples == 100

@given(st.integers())
def test_a_property(x):
    with open("host-examples.txt", "a") as fh:
        fh.write(f"{x}\\n")
'''

PROFILE_CONFTEST = '''
from hypothesis import settings
settings.register_profile("host", max_examples=7)
settings.load_profile("host")
'''

HOST_WITH_PROFILE = '''
from hypothesis import given, settings, strategies as st

def test_own_profile_is_kept():
    assert settings.default.max_examples == 7

@given(st.integers())
def test_a_property(x):
    with open("host-examples.txt", "a") as fh:
        fh.write(f"{x}\\n")
'''

CLAIM = '''
import pytest
from hypothesis import given, strategies as st

@pytest.mark.claim("autodiff.tape.watch")
@given(st.integers())
def test_a_claim(x):
    with open("claim-examples.txt", "a") as fh:
        fh.write(f"{x}\\n")
'''


NESTED = '''
import time
import pytest
from hypothesis import given, strategies as st
from pytest_dlconform.frameworks.inputs import budget

@pytest.mark.claim("autodiff.tape.watch")
def test_a_claim_with_a_property_inside():
    @given(st.integers())
    def prop(x):
        time.sleep(0.25)  # above hypothesis's default 200 ms deadline: the ci profile has none
        with open("nested-examples.txt", "a") as fh:
            fh.write(f"{x}\\n")
    prop()

    @budget(5)
    @given(st.integers())
    def smaller(x):
        with open("nested-budget.txt", "a") as fh:
            fh.write(f"{x}\\n")
    smaller()
'''


MODULE_LEVEL = '''
import time
import pytest
from hypothesis import given, strategies as st
from pytest_dlconform.frameworks.inputs import budget

@budget(5)
@given(st.integers())
def _helper(x):
    time.sleep(0.25)  # above hypothesis's default 200 ms deadline: the ci profile has none
    with open("helper-examples.txt", "a") as fh:
        fh.write(f"{x}\\n")

@pytest.mark.claim("autodiff.tape.watch")
def test_a_claim_calling_a_module_level_property():
    _helper()
'''


@pytest.fixture
def host(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A host project with no dlconform configuration, and a recording fake nvidia-smi."""
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\necho called >> {tmp_path / 'nvidia-smi-calls'}\nexit 9\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for var in [v for v in os.environ if v.startswith("DLCONFORM_")]:
        monkeypatch.delenv(var)
    pytester.nvidia_calls = tmp_path / "nvidia-smi-calls"  # type: ignore[attr-defined]
    return pytester


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_host_project_runs_unchanged(host: pytest.Pytester) -> None:
    """The same host run without the plugin and with it: the same hypothesis settings (whatever
    they are here: hypothesis loads its own "ci" profile where CI is set), the same number of
    examples, no output of ours, no hardware probing."""
    host.makepyfile(test_host=HOST)
    host.runpytest_subprocess("-p", "no:dlconform").assert_outcomes(passed=2)
    without = lines(host.path / "host-settings.txt"), len(lines(host.path / "host-examples.txt"))
    for name in ("host-settings.txt", "host-examples.txt"):
        (host.path / name).unlink()
    result = host.runpytest_subprocess()
    result.assert_outcomes(passed=2)
    out = result.stdout.str() + result.stderr.str()
    assert "dlconform-" in out  # loaded (pytest lists it among the plugins) ...
    assert "dlconform:" not in out and "conformance matrix" not in out  # ... and silent
    assert (lines(host.path / "host-settings.txt"), len(lines(host.path / "host-examples.txt"))) == without
    assert without[1] == 100  # hypothesis's own budget
    assert not host.nvidia_calls.exists()  # type: ignore[attr-defined]  # no hardware probing


def test_the_host_profile_applies_to_host_tests_and_ours_to_claim_tests(host: pytest.Pytester) -> None:
    """One run, both kinds: the host's profile (7 examples) for its tests, the ci budget
    (20 derandomized examples) for the claim test; the conformance matrix shows the claim."""
    host.makeconftest(PROFILE_CONFTEST)
    host.makepyfile(test_host=HOST_WITH_PROFILE, test_claim=CLAIM)
    result = host.runpytest_subprocess("--dl-framework=torch")
    result.assert_outcomes(passed=3)
    assert len(lines(host.path / "host-examples.txt")) == 7
    claim = lines(host.path / "claim-examples.txt")
    assert len(claim) == 20
    assert "dlconform conformance matrix" in result.stdout.str()
    (host.path / "claim-examples.txt").unlink()
    host.runpytest_subprocess("--dl-framework=torch").assert_outcomes(passed=3)
    assert lines(host.path / "claim-examples.txt") == claim  # derandomized: the same examples


def test_a_module_level_property_a_claim_test_calls_gets_the_claim_budget(host: pytest.Pytester) -> None:
    """Decorated at import, before any budget exists: without the run's budget it keeps
    hypothesis's defaults (random examples, a 200 ms deadline that this helper exceeds)."""
    host.makepyfile(test_helper=MODULE_LEVEL)
    host.runpytest_subprocess("--dl-framework=torch").assert_outcomes(passed=1)
    first = lines(host.path / "helper-examples.txt")
    assert len(first) == 5
    (host.path / "helper-examples.txt").unlink()
    host.runpytest_subprocess("--dl-framework=torch").assert_outcomes(passed=1)
    assert lines(host.path / "helper-examples.txt") == first  # derandomized: the same examples


def test_properties_defined_inside_a_claim_test_get_the_claim_budget(host: pytest.Pytester) -> None:
    host.makepyfile(test_nested=NESTED)
    host.runpytest_subprocess("--dl-framework=torch").assert_outcomes(passed=1)
    assert len(lines(host.path / "nested-examples.txt")) == 20  # derandomized ci budget, no deadline
    assert len(lines(host.path / "nested-budget.txt")) == 5
    host.runpytest_subprocess("--dl-framework=torch", "--dl-profile=quick").assert_outcomes(passed=1)
    assert len(lines(host.path / "nested-budget.txt")) == 5 + 1  # budget(5) scaled to quick: 5 * 5/20


def test_a_claim_test_alone_activates_the_plugin(host: pytest.Pytester) -> None:
    """No option at all: collecting a claim test is the ask (here with xdist, whose
    controller collects nothing and learns of the claim from the first report)."""
    host.makepyfile(test_claim=CLAIM)
    result = host.runpytest_subprocess("-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=1)
    assert "dlconform conformance matrix" in result.stdout.str()
    assert "autodiff.tape.watch" in result.stdout.str()
    assert len(lines(host.path / "claim-examples.txt")) == 20


def test_hypothesis_profile_of_the_user_is_the_claim_budget(host: pytest.Pytester) -> None:
    host.makeconftest(PROFILE_CONFTEST)
    host.makepyfile(test_claim=CLAIM)
    host.runpytest_subprocess("--hypothesis-profile=host").assert_outcomes(passed=1)
    assert len(lines(host.path / "claim-examples.txt")) == 7


@pytest.mark.skipif(sys.platform != "linux", reason="builds a venv with the system python")
def test_a_venv_without_any_framework_runs_a_host_project_unchanged(tmp_path: Path) -> None:
    """pytest-dlconform installed as a user would (no extras: no torch, no TensorFlow)."""
    root = Path(__file__).resolve().parents[2]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(root / "constraints" / "ci.txt"), str(root)],
                   check=True, timeout=600, capture_output=True)
    missing = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch'), "
                              "u.find_spec('tensorflow'))"], capture_output=True, text=True, check=True)
    assert missing.stdout.split() == ["None", "None"]
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_host.py").write_text(HOST)
    (project / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLCONFORM_")}
    recorded = []
    for args in (["-p", "no:dlconform"], []):
        done = subprocess.run([str(python), "-m", "pytest", *args], cwd=project, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 passed" in done.stdout and "no framework" not in done.stdout + done.stderr
        recorded.append((project / "host-settings.txt").read_text())
        (project / "host-settings.txt").unlink()
    assert "dlconform-" in done.stdout and "dlconform:" not in done.stdout
    assert recorded[0] == recorded[1]  # the plugin changed nothing
