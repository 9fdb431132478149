"""Results of real runs: JSON report, HTML page, JUnit XML, --dl-baseline, known divergences.

Each run is a pytest subprocess (pytester). The upgrade check is done for real: the same
suite runs against torch's own adapter and against a deliberately broken one (its VJP
scaled by 1.01), and `dlconform compare` must exit 1 naming the claim that broke. The
other runs use claim tests that need no framework, so they stay cheap.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from pytest_dlconform.report import compare

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BROKEN_ADAPTER = """
import os

if os.environ.get("DLCONFORM_TEST_BREAK_VJP"):
    # A deliberately broken adapter: every reverse-mode product is 1% too large.
    from pytest_dlconform.frameworks.torch import TorchAdapter

    _right = TorchAdapter.vjp

    def _broken(self, fn, xs, w, dtype, device):
        return [g * 1.01 for g in _right(self, fn, xs, w, dtype, device)]

    TorchAdapter.vjp = _broken
"""

SUITE = """
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import arrays

import pytest_dlconform
from pytest_dlconform.checks.numerics import assert_close, tolerance
from pytest_dlconform.frameworks import HarnessError

VALUES = arrays(np.float64, 3, elements=st.floats(-2, 2))


@pytest.mark.claim("autodiff.tape.output-gradients")
@given(x=VALUES, w=VALUES)
def test_vjp_is_w_times_the_jacobian(dl_framework, x, w):
    # f(x) = x * sin(x) elementwise, so w^T J = w * (sin(x) + x cos(x)).
    (g,) = dl_framework.vjp(lambda xs: xs[0] * dl_framework.module.sin(xs[0]), [x], w, "float64", "cpu")
    assert_close(g, w * (np.sin(x) + x * np.cos(x)), tolerance("float64", ops=4), what="w^T J of x*sin(x)")


@pytest.mark.claim("autodiff.tape.records-forward")
def test_no_grad_results_do_not_require_grad(torch):
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert not y.requires_grad


@pytest.mark.claim("autodiff.tape.nested")
def test_needs_a_gpu(dl_device):
    pytest_dlconform.not_applicable("needs a GPU: nvidia-smi not found")


@pytest.mark.claim("autodiff.tape.unconnected")
def test_harness_breaks(dl_device):
    raise HarnessError("the worker could not start")
"""

# Claim tests that import no framework: verdicts without the cost of torch.
PLAIN = """
import os, time
import pytest


@pytest.mark.claim("autodiff.tape.watch")
def test_holds(dl_device):
    assert True


@pytest.mark.claim("autodiff.tape.persistent")
def test_violated(dl_device):
    assert os.environ.get("PLAIN_VIOLATE") is None, "planted violation"


@pytest.mark.claim("autodiff.tape.multiple")
def test_slow(dl_device):
    if os.environ.get("PLAIN_SLOW"):
        open(os.environ["PLAIN_SLOW"], "w").close()
        time.sleep(120)
"""


def run(pytester: pytest.Pytester, *args: str, env: dict[str, str] | None = None) -> pytest.RunResult:
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", *args,
                                             timeout=600)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def dlconform(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_dlconform.cli", *args], capture_output=True, text=True, timeout=120)


def by_test(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tests by function name (parameter ids left out: their order is the plugin's business)."""
    return {t["nodeid"].split("::")[1].split("[")[0]: t for c in doc["claims"].values() for t in c["tests"]}


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two real torch runs of the same suite: the adapter as shipped, then broken."""
    pytest.importorskip("torch")
    pytester_dir = tmp_path_factory.mktemp("upgrade")
    (pytester_dir / "conftest.py").write_text(BROKEN_ADAPTER)
    (pytester_dir / "test_suite.py").write_text(SUITE)
    out = {"dir": pytester_dir}
    common = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
              "--dl-framework=torch", "--dl-device=cpu"]
    env = {k: v for k, v in os.environ.items() if k != "DLCONFORM_TEST_BREAK_VJP"}
    old = subprocess.run([*common, "--dl-report=old.json", "--dl-html=old.html", "--junitxml=old.xml"],
                         cwd=pytester_dir, env=env, capture_output=True, text=True, timeout=600)
    new = subprocess.run([*common, "-n", "2", "--dl-report=new.json", "--dl-baseline=old.json"],
                         cwd=pytester_dir, env={**env, "DLCONFORM_TEST_BREAK_VJP": "1"},
                         capture_output=True, text=True, timeout=600)
    out.update(old=old, new=new)
    return out


def test_a_run_writes_the_json_report_html_and_junit(upgrade: dict[str, Any]) -> None:
    old = upgrade["old"]
    assert old.returncode == 1, old.stdout  # the harness error fails the run, as an error
    folder = upgrade["dir"]
    doc = json.loads((folder / "old.json").read_text())
    assert (doc["schema"], doc["schema_version"]) == ("pytest-dlconform/report", 1)
    env = doc["environment"]
    assert {"python", "os", "processor", "gpus", "driver", "cuda", "frameworks", "profile", "seed"} <= set(env)
    assert env["frameworks"]["torch"].startswith("2.") and env["profile"] == "ci" and env["seed"] == 0
    tests = by_test(doc)
    assert {k: t["verdict"] for k, t in tests.items()} == {
        "test_vjp_is_w_times_the_jacobian": "holds",
        "test_no_grad_results_do_not_require_grad": "holds",
        "test_needs_a_gpu": "not applicable",
        "test_harness_breaks": "error",
    }
    assert tests["test_needs_a_gpu"]["reason"] == "needs a GPU: nvidia-smi not found"
    assert tests["test_harness_breaks"]["reason"].startswith("pytest_dlconform.core.exceptions.HarnessError: the worker")
    check = tests["test_vjp_is_w_times_the_jacobian"]["evidence"]["checks"]["w^T J of x*sin(x)"]
    assert 0 <= check["margin"] < 1 and check["tolerance"] > 0 and check["count"] == 20
    assert doc["claims"]["autodiff.tape.output-gradients"]["claim"]["statement"].startswith("gradient(target, sources")
    assert doc["counts"]["claims"] == {"holds": 2, "violated": 0, "not applicable": 1, "error": 1}
    matrix = old.stdout[old.stdout.index("dlconform conformance matrix"):]
    assert "autodiff.tape.output-gradients" in matrix and "claims: 2 holds, 0 violated, 1 not applicable, 1 error" in matrix
    assert "harness error, not a conformance result (1 test): pytest_dlconform.core.exceptions.HarnessError" in matrix
    assert "n/a (1 test): needs a GPU: nvidia-smi not found" in matrix
    page = (folder / "old.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="matrix"' in page
    assert not any(tag in page for tag in ("<script src", "<link", "<img", "url(", "@import"))
    cases = ET.parse(folder / "old.xml").getroot().iter("testcase")
    claims = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    vjp = next(props for name, props in claims.items() if name.startswith("test_vjp_is_w_times_the_jacobian["))
    assert vjp["dl_claim"] == "autodiff.tape.output-gradients"
    assert all(props.get("dl_claim") for props in claims.values()) and len(claims) == 4


def test_the_broken_adapter_regresses_against_the_baseline(upgrade: dict[str, Any]) -> None:
    new = upgrade["new"]
    assert new.returncode == 1, new.stdout
    assert "REGRESSED: 1 cell(s) of 1 claim(s): autodiff.tape.output-gradients" in new.stdout
    assert "failing the run: regressed against the baseline: autodiff.tape.output-gradients" in new.stdout
    doc = json.loads((upgrade["dir"] / "new.json").read_text())
    assert doc["baseline"]["regressed"] == ["autodiff.tape.output-gradients"]
    failed = by_test(doc)["test_vjp_is_w_times_the_jacobian"]
    assert failed["verdict"] == "violated"
    assert failed["reason"].startswith("pytest_dlconform.checks.numerics.ToleranceExceeded: w^T J of x*sin(x)")
    repro = failed["repro"].splitlines()
    assert repro[0].startswith(f"cd {upgrade['dir']} && pytest 'test_suite.py::test_vjp_is_w_times_the_jacobian[")
    assert "]' --dl-profile=ci --dl-seed=0 --dl-framework=torch" in repro[0]
    assert repro[1] == "Falsifying example: test_vjp_is_w_times_the_jacobian("
    assert any(line.startswith("# replay exactly: add @reproduce_failure(") for line in repro)
    leftovers = [p.name for p in upgrade["dir"].iterdir() if p.name.startswith(".dlconform-")]
    assert leftovers == []  # xdist: one writer, the controller, and it renamed its file into place


def test_dlconform_compare_names_the_regressed_claim(upgrade: dict[str, Any]) -> None:
    folder = upgrade["dir"]
    proc = dlconform("compare", str(folder / "old.json"), str(folder / "new.json"))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(
        "dlconform compare: REGRESSED: 1 cell(s) of 1 claim(s): autodiff.tape.output-gradients")
    assert "autodiff.tape.output-gradients [torch/cpu] holds -> violated: pytest_dlconform.checks.numerics" in proc.stdout
    same = dlconform("compare", str(folder / "old.json"), str(folder / "old.json"))
    assert same.returncode == 0 and same.stdout.startswith("dlconform compare: no regression")


# ------------------------------------------------------------------ framework-free runs


@pytest.fixture
def plain(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_plain=PLAIN)
    return pytester


KNOWN = """
    [[divergence]]
    claim = "autodiff.tape.persistent"
    tests = ["test_plain.py::test_violated[*]"]
    exception = "AssertionError"
    message = "planted violation"
    versions = { pytest = "*" }
    reason = "tracked upstream"
    expires = 2999-01-01

    [[divergence]]
    claim = "autodiff.tape.watch"
    tests = ["test_plain.py::test_holds*"]
    exception = "AssertionError"
    message = "broken once"
    versions = { pytest = "*" }
    reason = "was broken once"
    expires = 2999-01-01

    [[divergence]]
    claim = "autodiff.tape.multiple"
    tests = ["test_plain.py::test_slow*"]
    exception = "AssertionError"
    message = "old"
    versions = { pytest = "*" }
    reason = "old"
    expires = 2000-01-01

    [[divergence]]
    claim = "data.*"
    tests = ["data/*"]
    exception = "AssertionError"
    message = "other stack"
    versions = { pytest = "*" }
    reason = "its claim did not run"
    expires = 2999-01-01
"""


def test_known_divergences_are_xfails_with_their_reason_and_no_traceback(plain: pytest.Pytester) -> None:
    plain.makefile(".toml", known=KNOWN)
    quiet = run(plain, "--dl-divergences=known.toml", env={"PLAIN_VIOLATE": "1"})
    quiet.stdout.fnmatch_lines([  # entries that need action one per line; the others counted on one line
        "*known divergence UNMATCHED: autodiff.tape.watch*",
        "*known divergence EXPIRED on 2000-01-01: autodiff.tape.multiple*",
        "dlconform: known divergences: 1 applied, 1 not selected (none of their tests ran); -v lists each entry",
    ])
    assert "known divergence not selected" not in quiet.stdout.str()
    result = run(plain, "--dl-divergences=known.toml", "--dl-report=r.json", "-rx", "-v", env={"PLAIN_VIOLATE": "1"})
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "autodiff.tape.persistent*exp*",
        "tests: 2 holds, 1 violated (1 expected), 0 not applicable, 0 error",
        # wrapped at 120 columns: where depends on the length of the file's path
        "dlconform: known divergence applied: autodiff.tape.persistent*",
        "*1 violated test(s) shown as xfailed*",
        "dlconform: known divergence UNMATCHED: autodiff.tape.watch*",
        "*its 1 test(s) ran: holds*",
        "dlconform: known divergence EXPIRED on 2000-01-01: autodiff.tape.multiple*",
        "dlconform: known divergence not selected: data.*",
        "XFAIL test_plain.py::test_violated[[]cpu[]] - known divergence entry 1 (autodiff.tape.persistent): "
        "tracked upstream; observed: AssertionError: planted violation*",
        "*2 passed, 1 xfailed*",
    ])
    assert not re.search(r"\bfailed", out.splitlines()[-1]) and "Traceback" not in out and "planted violation\nassert" not in out
    doc = json.loads((plain.path / "r.json").read_text())
    assert [d["status"] for d in doc["divergences"]] == ["applied", "unmatched", "expired", "not selected"]
    [test] = doc["claims"]["autodiff.tape.persistent"]["tests"]
    assert test["verdict"] == "violated" and test["expected"] == "tracked upstream"
    assert test["evidence"]["exception"]["types"][0] == "AssertionError"  # all detail in the report


def test_a_pinned_failure_keeps_its_crash_line_with_a_native_traceback(plain: pytest.Pytester) -> None:
    """A failure a known divergence pins is formatted in pytest's native style (its long style
    parses the test module once per traceback entry, the cost of every xfail in a large suite),
    and the report records the same crash line as before; an unpinned failure keeps the long style."""
    plain.makeconftest("""
        import json

        def pytest_runtest_logreport(report):
            if report.when == "call" and report.longrepr is not None and not isinstance(report.longrepr, tuple):
                with open("styles.jsonl", "a") as fh:
                    fh.write(json.dumps([report.nodeid, hasattr(report, "wasxfail"),
                                         type(report.longrepr.reprtraceback).__name__]) + "\\n")
    """)
    plain.makefile(".toml", known=KNOWN)
    result = run(plain, "--dl-divergences=known.toml", "--dl-report=r.json", env={"PLAIN_VIOLATE": "1"})
    assert result.ret == 0, result.stdout.str()
    styles = [json.loads(line) for line in (plain.path / "styles.jsonl").read_text().splitlines()]
    assert [s for s in styles if "test_violated" in s[0]] == [["test_plain.py::test_violated[cpu]", True,
                                                              "ReprTracebackNative"]], styles
    [test] = json.loads((plain.path / "r.json").read_text())["claims"]["autodiff.tape.persistent"]["tests"]
    assert test["reason"].startswith("AssertionError: planted violation"), test["reason"]
    # outside the pin: pytest's own long style, as always
    plain.makefile(".toml", known=KNOWN.replace('message = "planted violation"', 'message = "another symptom"'))
    (plain.path / "styles.jsonl").unlink()
    assert run(plain, "--dl-divergences=known.toml", env={"PLAIN_VIOLATE": "1"}).ret == 1
    styles = [json.loads(line) for line in (plain.path / "styles.jsonl").read_text().splitlines()]
    assert [s[1:] for s in styles if "test_violated" in s[0]] == [[False, "ReprTraceback"]], styles


def test_a_violation_outside_the_pin_fails(plain: pytest.Pytester) -> None:
    """The same test, another symptom: the entry pins the message, the test fails as usual."""
    plain.makefile(".toml", known=KNOWN.replace('message = "planted violation"', 'message = "another symptom"'))
    result = run(plain, "--dl-divergences=known.toml", env={"PLAIN_VIOLATE": "1"})
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*known divergence UNMATCHED: autodiff.tape.persistent*", "*1 failed, 2 passed*"])


def test_an_unusable_divergences_file_or_baseline_is_a_usage_error(plain: pytest.Pytester) -> None:
    # Checked up front, before any test runs: a one-line usage error, exit 4, no traceback.
    plain.makefile(".toml", bad="[[divergence]]\nclaim = 'x'\n")
    result = run(plain, "--dl-divergences=bad.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --dl-divergences (from --dl-divergences): *bad.toml, entry 1: 'reason' is required*"])
    assert "passed" not in result.stdout.str()
    plain.makefile(".json", cut='{"schema": "pytest-dlconform/report", "schema_version": 1, "clai')
    result = run(plain, "--dl-baseline=cut.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --dl-baseline (from --dl-baseline): baseline *cut.json: truncated JSON*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_run_that_stopped_early_says_so_in_its_report(plain: pytest.Pytester) -> None:
    result = run(plain, "-x", "--dl-report=r.json", "--dl-html=r.html", env={"PLAIN_VIOLATE": "1"})
    assert result.ret == 1
    doc = json.loads((plain.path / "r.json").read_text())
    assert doc["interrupted"] == "stopping after 1 failures" and doc["exit_status"] == 1
    assert "this run stopped early (stopping after 1 failures)" in (plain.path / "r.html").read_text()


def test_list_claims_prints_the_ledger_without_running(plain: pytest.Pytester) -> None:
    result = run(plain, "--dl-list-claims", "--dl-claims=autodiff.tape.*")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["autodiff.tape.watch  [[]tensorflow[]]", "    source: *", "* claims"])
    assert "passed" not in result.stdout.str()


def test_a_killed_run_leaves_no_report(plain: pytest.Pytester) -> None:
    started = plain.path / "started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--dl-report=killed.json", "--dl-html=killed.html"],
        cwd=plain.path, env={**os.environ, "PLAIN_SLOW": str(started)}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the slow test never started"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the session we started, by its id
        proc.wait()
    assert sorted(p.name for p in plain.path.iterdir() if "killed" in p.name or p.name.startswith(".dlconform")) == []
    with pytest.raises(compare.UnusableReport, match="no such file"):
        compare.load(str(plain.path / "killed.json"))
