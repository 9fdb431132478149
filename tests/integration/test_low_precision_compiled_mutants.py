"""The low-precision suite (suites/autodiff/test_low_precision.py) and the compiled-backward
suite (suites/execution/test_compiled_backward.py) catch their wrong twins (lp_mutants.py):
a backward wrong only while compiled (a torch.library custom op, a tf.custom_gradient wrong
in graph mode) and gradients wrong in one low-precision dtype only, each failing its op's
test with the message, while the same op in another mode or dtype still passes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import lp_mutants  # noqa: E402  (this folder is the plugin's home, as for op_mutants)


def _run(ids: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", *ids, "-p", "lp_mutants", "-p", "no:cacheprovider", "--dl-profile=ci",
           "-rA", "-q"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, env=env)
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def output() -> str:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    caught = [i for _, _, _, ids in lp_mutants.MUTANTS.values() for i in ids]
    return _run(caught + list(lp_mutants.UNAFFECTED))


@pytest.mark.parametrize("op", sorted(lp_mutants.MUTANTS))
def test_each_wrong_twin_fails_its_ops_test(output: str, op: str) -> None:
    for node in lp_mutants.MUTANTS[op][3]:
        assert f"FAILED {node}" in output, f"{op} ({lp_mutants.MUTANTS[op][2]}) was not caught by {node}:\n{output[-4000:]}"


MESSAGES = {
    # a wrong compiled backward: compiled vs eager names the mode, op and input
    "sin": r"torch aot_eager sin \(float(64|32)\): compiled gradient of input 0 vs eager: max\|actual - expected\|",
    "cos": r"tensorflow (function|xla) cos \(float(64|32)\): compiled gradient of input 0 vs eager",
    # a low-precision gradient off by more than the bound
    "sigmoid": r"tensorflow sigmoid gradient of input 0 in float16 vs float64: max\|actual - expected\| = .* but should be <=",
    "atan": r"torch atan gradient of input 0 in bfloat16 vs float64: max\|actual - expected\| = .* but should be <=",
}


@pytest.mark.parametrize("op", sorted(MESSAGES))
def test_the_failure_message_names_what_is_wrong(output: str, op: str) -> None:
    assert re.search(MESSAGES[op], output), f"no message matching {MESSAGES[op]!r} for {op}:\n{output[-4000:]}"


def test_the_same_ops_in_other_modes_and_dtypes_still_pass(output: str) -> None:
    for node in lp_mutants.UNAFFECTED:
        assert f"PASSED {node}" in output, f"{node} should pass with the mutants loaded:\n{output[-4000:]}"
