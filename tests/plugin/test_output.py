"""Output a person can read: framework warnings counted per claim in the report instead of
filling pytest's summary, TensorFlow's C++ logging off in workers and fresh interpreters
unless asked for, and failing examples shrunk for a bounded time in the ci profile."""

from __future__ import annotations

import json

import pytest

WARN_SUITE = """
import os, warnings
import pytest
from pytest_dlconform.frameworks.fresh import run_python

@pytest.mark.claim("autodiff.tape.watch")
def test_warns():
    for _ in range(3):
        warnings.warn("framework API is deprecated", DeprecationWarning)
    child = run_python("import os\\nemit({'level': os.environ.get('TF_CPP_MIN_LOG_LEVEL')})", timeout=60,
                       what="a fresh interpreter")
    print("LEVELS", os.environ.get("TF_CPP_MIN_LOG_LEVEL"), child["level"])

def test_host_warns():
    warnings.warn("the host's own warning", UserWarning)
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    return pytester


def test_claim_warnings_are_counted_in_the_report_not_printed(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_warn=WARN_SUITE)
    result = suite.runpytest_subprocess("--dl-framework=torch", "--dl-report=r.json", "-s")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "framework API is deprecated" not in out  # not in pytest's warnings summary ...
    assert "the host's own warning" in out  # ... which still shows the host's own tests' warnings
    doc = json.loads((suite.path / "r.json").read_text())
    [test] = doc["claims"]["autodiff.tape.watch"]["tests"]
    assert test["evidence"]["notes"]["warnings"] == {"DeprecationWarning: framework API is deprecated": 3}
    assert "LEVELS 2 2" in out  # C++ logging off here and in the fresh interpreter


def test_verbose_shows_warnings_and_leaves_the_log_level_alone(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_warn=WARN_SUITE)
    result = suite.runpytest_subprocess("--dl-framework=torch", "-v", "-s")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "framework API is deprecated" in out
    assert "LEVELS None None" in out


def test_a_user_log_level_is_kept(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    suite.makepyfile(test_warn=WARN_SUITE)
    result = suite.runpytest_subprocess("--dl-framework=torch", "-s")
    assert "LEVELS 0 0" in result.stdout.str()


SLOW_SHRINK = """
import time
import pytest
from hypothesis import given, strategies as st

@pytest.mark.claim("autodiff.tape.watch")
@given(st.lists(st.integers(0, 10**6), min_size=8, max_size=8))
def test_slow_to_shrink(xs):
    time.sleep(0.25)  # each example costs like a framework call: shrinking 8 numbers takes many
    assert sum(xs) < 1000, "fails for most examples"
"""


HOST_PROPERTY = """
from hypothesis import given, strategies as st
from hypothesis.internal.conjecture import engine
import hypothesis.reporting

@given(st.integers())
def test_host_property(x):  # a host project's own property: hypothesis's limit and messages
    assert engine.MAX_SHRINKING_SECONDS == 300
    assert engine.report is hypothesis.reporting.report
"""


def test_shrinking_is_bounded_in_the_ci_profile_and_the_report_says_so(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_shrink=SLOW_SHRINK, test_zhost=HOST_PROPERTY)
    result = suite.runpytest_subprocess("--dl-framework=torch", "--dl-report=r.json", "--dl-profile=quick")
    result.assert_outcomes(failed=1, passed=1)  # the host's property ran after the claim test, untouched
    doc = json.loads((suite.path / "r.json").read_text())
    [test] = doc["claims"]["autodiff.tape.watch"]["tests"]
    assert test["verdict"] == "violated"
    note = "dlconform stopped shrinking after 2 s (--dl-profile=quick); the example shown is not minimal"
    assert note in test["evidence"]["notes"]["shrinking"]
    # hypothesis's own "spent more than five minutes ... PLEASE REPORT THIS" is wrong for the
    # plugin's cut: the failure shows the plugin's note instead
    out = result.stdout.str()
    assert "PLEASE REPORT THIS" not in out and "five minutes" not in out
    assert note + "; use --dl-profile=thorough to shrink fully" in out


PINNED_PROPERTY = """
import pytest
from hypothesis import given, strategies as st

@pytest.mark.claim("autodiff.tape.watch")
@given(st.integers(0, 10**6))
def test_pinned(x):
    with open("calls.txt", "a") as fh:
        fh.write(f"{x}\\n")
    assert x < 1000, "planted violation"
"""

PIN = """
[[divergence]]
claim = "autodiff.tape.watch"
tests = ["TESTS"]
exception = "AssertionError"
message = "planted violation"
versions = { pytest = "*" }
reason = "tracked upstream"
expires = 2999-01-01
"""


def test_a_pinned_test_stops_at_its_first_failing_example(suite: pytest.Pytester) -> None:
    """A test a known divergence pins runs without shrinking: hypothesis stops at the first
    failing example and replays it once (a pinned failure cost about 6 times a passing test);
    the same test unpinned is shrunk as before, to the minimal example 1000."""
    suite.makepyfile(test_pin=PINNED_PROPERTY)
    calls = suite.path / "calls.txt"

    def failing(args: tuple[str, ...], tests: str) -> list[int]:
        suite.makefile(".toml", known=PIN.replace("TESTS", tests))
        if calls.exists():
            calls.unlink()
        result = suite.runpytest_subprocess("--dl-framework=torch", "--dl-divergences=known.toml", "--dl-report=r.json",
                                            *args)
        assert result.ret == (0 if tests.startswith("test_pin") else 1), result.stdout.str()
        return [x for x in map(int, calls.read_text().split()) if x >= 1000]

    for profile in ("ci", "thorough"):  # a bounded shrink and hypothesis's own
        args = (f"--dl-profile={profile}", "--hypothesis-seed=1")
        pinned = failing(args, "test_pin.py::test_pinned*")
        assert len(pinned) == 2 and pinned[0] == pinned[1] != 1000, (profile, pinned)  # found, then replayed
        [test] = json.loads((suite.path / "r.json").read_text())["claims"]["autodiff.tape.watch"]["tests"]
        assert test["verdict"] == "violated" and test["expected"] == "tracked upstream"
        assert test["evidence"]["notes"]["shrinking"].startswith("dlconform did not shrink this failure: a known "
                                                                 "divergence entry pins this test")
        shrunk = failing(args, "other.py::*")  # the entry pins another test: this one is not pinned
        assert len(set(shrunk)) > 2 and shrunk[-1] == 1000, (profile, shrunk[-5:])


MANY_SLOW_SHRINKS = """
import time
import pytest
from hypothesis import given, strategies as st

@pytest.mark.claim("autodiff.tape.watch")
@pytest.mark.parametrize("case", range(8))
@given(st.lists(st.integers(0, 10**6), min_size=8, max_size=8))
def test_slow_to_shrink(case, xs):
    time.sleep(0.1)
    assert sum(xs) < 1000, "fails for most examples"
"""


def test_a_process_shrinks_for_at_most_its_run_budget(suite: pytest.Pytester) -> None:
    """Eight failing tests, each slow to shrink: the process shrinks the first ones for 2 s each
    (quick), then its 4 s are spent and the rest stop at their first failing example, saying so."""
    suite.makepyfile(test_shrinks=MANY_SLOW_SHRINKS)
    result = suite.runpytest_subprocess("--dl-framework=torch", "--dl-report=r.json", "--dl-profile=quick",
                                        "-p", "no:xdist")
    result.assert_outcomes(failed=8)
    doc = json.loads((suite.path / "r.json").read_text())
    notes = [t["evidence"]["notes"].get("shrinking", "") for t in doc["claims"]["autodiff.tape.watch"]["tests"]]
    cut = [n for n in notes if "stopped shrinking after" in n]
    spent = [n for n in notes if n.startswith("dlconform did not shrink this failure: this process spent its 4 s")]
    assert 2 <= len(cut) <= 3 and len(cut) + len(spent) == 8, notes
    assert notes[-1] in spent and "use --dl-profile=thorough to shrink fully" in notes[-1]
    assert all(t["verdict"] == "violated" for t in doc["claims"]["autodiff.tape.watch"]["tests"])


LOGGING_SUITE = """
import pytest

@pytest.mark.claim("autodiff.tape.watch")
def test_logs_then_fails():
    from torch.onnx._internal.exporter._registration import _get_overload
    assert _get_overload("torchvision::nms") is None  # torch logs a warning: no torchvision
    assert False, "planted failure"
"""


def test_framework_log_warnings_are_counted_not_shown_in_failures(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_log=LOGGING_SUITE)
    result = suite.runpytest_subprocess("--dl-framework=torch", "--dl-report=r.json")
    result.assert_outcomes(failed=1)
    out = result.stdout.str() + result.stderr.str()
    assert "planted failure" in out and "torchvision is not installed" not in out
    doc = json.loads((suite.path / "r.json").read_text())
    [test] = doc["claims"]["autodiff.tape.watch"]["tests"]
    [(key, count)] = test["evidence"]["notes"]["warnings"].items()
    assert key.startswith("log WARNING torch.onnx.") and "torchvision is not installed" in key and count == 1
    verbose = suite.runpytest_subprocess("--dl-framework=torch", "-v")
    assert "torchvision is not installed" in verbose.stdout.str() + verbose.stderr.str()  # -v shows them
