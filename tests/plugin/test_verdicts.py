"""Verdicts, evidence, JUnit properties, xdist equivalence and state restoration."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

VERDICT_SUITE = """
import pytest
from pytest_dlconform import not_applicable
from pytest_dlconform.core import evidence
from pytest_dlconform.frameworks import HarnessError

@pytest.mark.claim("autodiff.tape.watch")
def test_holds():
    evidence.check("error", observed=1e-9, tolerance=1e-8)
    evidence.note(trace_count=3)

@pytest.mark.claim("autodiff.tape.nested")
def test_violated():
    assert 1 + 1 == 3, "arithmetic is broken"

@pytest.mark.claim("autodiff.tape.multiple")
def test_not_applicable():
    not_applicable("no TPU: ValueError('Please provide a TPU Name')")

@pytest.mark.claim("autodiff.tape.persistent")
def test_harness_error():
    raise HarnessError("worker 1 never joined")

@pytest.mark.claim("autodiff.tape.unconnected")
def test_framework_exception_is_a_violation():
    import numpy as np
    np.linalg.inv(np.zeros((2, 2)))  # the library under test raises where the test expects a result

@pytest.mark.claim("autodiff.tape.records-forward")
def test_a_none_result_used_is_a_violation():
    grad = None  # what a tape gives for an unconnected source
    grad.numpy()

@pytest.mark.claim("autodiff.graph.implicit")
def test_a_bug_in_the_test_text_is_an_error():
    undefined_name

@pytest.mark.claim("autodiff.gradient.seed-example")
def test_an_install_that_cannot_import_is_an_error():
    import no_such_framework_module

@pytest.mark.claim("autodiff.gradient.documented-conventions")
def test_an_unhandled_inconclusive_check_is_an_error():
    from pytest_dlconform.api import InconclusiveCheck
    raise InconclusiveCheck("finite differences below their own rounding noise")

@pytest.mark.claim("autodiff.tape.stop-gradient")
def test_mostly_inconclusive_checks_are_an_error():
    evidence.check("error", observed=1e-9, tolerance=1e-8)
    evidence.inconclusive("loose", reason="the bound accepts all zeros")
    evidence.inconclusive("loose", reason="the bound accepts all zeros")

@pytest.mark.claim("autodiff.gradient.forward-reverse")
def test_a_few_inconclusive_checks_still_hold():
    evidence.check("error", observed=1e-9, tolerance=1e-8)
    evidence.check("error", observed=1e-9, tolerance=1e-8)
    evidence.inconclusive("loose", reason="the bound accepts all zeros")

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

@pytest.mark.claim("autodiff.tape.output-gradients")
def test_setup_error(broken):
    pass

@pytest.mark.claim("autodiff.no-such.claim")
def test_unknown_claim():
    pass
"""

EXPECTED = {
    "test_holds": "holds",
    "test_violated": "violated",
    "test_not_applicable": "not applicable",
    "test_harness_error": "error",
    "test_framework_exception_is_a_violation": "violated",
    "test_a_none_result_used_is_a_violation": "violated",
    "test_a_bug_in_the_test_text_is_an_error": "error",
    "test_an_install_that_cannot_import_is_an_error": "error",
    "test_setup_error": "error",
    "test_unknown_claim": "error",
    "test_an_unhandled_inconclusive_check_is_an_error": "error",
    "test_mostly_inconclusive_checks_are_an_error": "error",
    "test_a_few_inconclusive_checks_still_hold": "holds",
}


def _junit_verdicts(path) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        found[case.get("name")] = {p.get("name"): p.get("value") for p in case.iter("property")}
    return found


@pytest.mark.parametrize("workers", ["0", "2"])
def test_each_outcome_maps_to_one_verdict_in_junit_and_matrix(suite, workers):
    suite.makepyfile(test_verdicts=VERDICT_SUITE)
    junit = suite.path / "junit.xml"
    result = suite.runpytest_subprocess("-n", workers, f"--junitxml={junit}", "-p", "xdist")
    props = _junit_verdicts(junit)
    assert {name: p["dl_verdict"] for name, p in props.items()} == EXPECTED
    assert props["test_holds"]["dl_claim"] == "autodiff.tape.watch"
    out = result.stdout.str()
    assert "dlconform conformance matrix" in out
    assert "2 holds, 3 violated, 1 not applicable, 7 error" in out
    # pytest's own words agree: violations fail, harness problems are errors, also in the call.
    result.assert_outcomes(passed=2, failed=3, skipped=1, errors=7)
    assert "inconclusive: 2 of 3 comparisons could not have failed (loose: the bound accepts all zeros (2x))" in out
    assert "ERROR test_verdicts.py::test_an_unhandled_inconclusive_check_is_an_error" in out
    assert "ERROR test_verdicts.py::test_harness_error" in out
    assert "FAILED test_verdicts.py::test_framework_exception_is_a_violation" in out
    assert "LinAlgError" in out
    assert "no TPU: ValueError('Please provide a TPU Name')" in out
    assert "unknown claim id 'autodiff.no-such.claim'" in out


def test_failure_carries_a_reproduction_command(suite):
    suite.makepyfile(test_verdicts=VERDICT_SUITE)
    result = suite.runpytest_subprocess("-k", "violated", "--dl-seed=5")
    result.stdout.fnmatch_lines([
        "*dlconform reproduction*",
        "cd * && pytest test_verdicts.py::test_violated --dl-profile=ci --dl-seed=5 *# test seed *",
    ])


LEAK_SUITE = """
import pytest

@pytest.mark.claim("autodiff.tape.nested")
def test_leaks_default_dtype(torch):
    torch.set_default_dtype(torch.float64)

@pytest.mark.claim("autodiff.tape.nested")
def test_sees_restored_state(torch):
    assert torch.get_default_dtype() == torch.float32
    assert torch.is_grad_enabled()

@pytest.mark.claim("autodiff.tape.nested")
def test_leaks_grad_mode(torch):
    torch.set_grad_enabled(False)

@pytest.mark.claim("autodiff.tape.nested")
def test_restores_properly(torch):
    with torch.no_grad():
        pass
"""


def test_a_state_leak_fails_the_test_that_leaked_not_a_later_one(suite):
    suite.makepyfile(test_leak=LEAK_SUITE)
    result = suite.runpytest_subprocess("-p", "no:randomly", "-v")
    result.assert_outcomes(passed=4, errors=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_leaks_default_dtype*",
        "*changed global framework state and did not restore it: torch.get_default_dtype: torch.float32 -> torch.float64*",
    ])
    assert "torch.is_grad_enabled: True -> False" in out
    assert "test_sees_restored_state[cpu] PASSED" in out


THREADS_SUITE = """
import os
import pytest

@pytest.mark.claim("autodiff.tape.nested")
def test_threads(torch):
    print("THREADS", torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"))
    assert torch.get_num_threads() == {expected}
"""


def test_xdist_workers_split_the_cores_between_them(suite):
    import os

    cores = len(os.sched_getaffinity(0))
    suite.makepyfile(test_threads=THREADS_SUITE.format(expected=max(1, cores // 2)))
    result = suite.runpytest_subprocess("-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=1)


SEED_SUITE = """
import os
import random
import pytest

@pytest.mark.claim("autodiff.tape.nested")
def test_seeded(dl_seed, torch):
    with open(os.environ["SEED_OUT"], "a") as fh:
        fh.write(f"{dl_seed} {random.random()} {float(torch.rand(()))}\\n")
"""


def test_per_test_seed_is_stable_across_runs_and_workers(suite, monkeypatch):
    suite.makepyfile(test_seed=SEED_SUITE)
    out = suite.path / "seeds.txt"
    monkeypatch.setenv("SEED_OUT", str(out))
    suite.runpytest_subprocess().assert_outcomes(passed=1)
    suite.runpytest_subprocess("-n", "1", "-p", "xdist").assert_outcomes(passed=1)
    suite.runpytest_subprocess("--dl-seed=1").assert_outcomes(passed=1)
    first, in_worker, other_base = out.read_text().splitlines()
    assert first == in_worker, "the same test got different seeds in-process and in an xdist worker"
    assert first.split()[0] != other_base.split()[0], "--dl-seed did not change the per-test seed"


TWO_ANSWERS_SUITE = """
import pytest
from hypothesis import given, strategies as st

calls = []

@pytest.mark.claim("data.tfdata.shuffle")
@given(n=st.integers(2, 2))
def test_a_framework_that_answers_one_example_two_ways(n):
    calls.append(n)
    assert len(calls) > 1, "a second pipeline seeded the same way gave another order"
"""


def test_a_failure_that_a_replay_did_not_repeat_is_a_violation(suite):
    """A framework that gives a wrong answer once and a right one on the replay (hypothesis's
    FlakyFailure) gave the wrong answer: violated (pytest: failed), never a harness error, and the
    report says the failure did not repeat."""
    import json

    suite.makepyfile(test_two=TWO_ANSWERS_SUITE)
    result = suite.runpytest_subprocess("--dl-report=r.json", "--dl-autosave=no")
    result.assert_outcomes(failed=1)
    assert "0 holds, 1 violated, 0 not applicable, 0 error" in result.stdout.str()
    [test] = json.loads((suite.path / "r.json").read_text())["claims"]["data.tfdata.shuffle"]["tests"]
    assert test["verdict"] == "violated"
    exception = test["evidence"]["exception"]
    assert "another order" in exception["message"] and "two ways" in exception["did_not_repeat"]
