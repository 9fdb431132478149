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

SUITE = "suites/execution/test_compiled_backward.py"
#: The TorchScript mode end to end (every op: its compiles are cheap), for the coverage ledger.
TORCHSCRIPT = [f"{SUITE}::test_torch_compiled_backward_matches_eager_and_finite_differences[cpu-torchscript-{op}]"
               for op in lp_mutants.OPS]


def _run(ids: list[str], report: Path) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", *ids, "-p", "lp_mutants", "-p", "no:cacheprovider", "--dl-profile=ci",
           "-rA", "-q", f"--dl-report={report}"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, env=env)
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    caught = [i for _, _, _, ids in lp_mutants.MUTANTS.values() for i in ids]
    report = tmp_path_factory.mktemp("lp") / "report.json"
    ids = list(dict.fromkeys(caught + list(lp_mutants.UNAFFECTED) + list(lp_mutants.NOT_APPLICABLE) + TORCHSCRIPT))
    return _run(ids, report), report


@pytest.fixture(scope="module")
def output(run: tuple[str, Path]) -> str:
    return run[0]


@pytest.mark.parametrize("op", sorted(lp_mutants.MUTANTS))
def test_each_wrong_twin_fails_its_ops_test(output: str, op: str) -> None:
    for node in lp_mutants.MUTANTS[op][3]:
        assert f"FAILED {node}" in output, f"{op} ({lp_mutants.MUTANTS[op][2]}) was not caught by {node}:\n{output[-4000:]}"


MESSAGES = {
    # a wrong compiled backward: compiled vs eager names the mode, op and input
    "sin": r"torch aot_eager sin \(float(64|32)\): compiled gradient of input 0 vs eager: max\|actual - expected\|",
    "cos": r"tensorflow (function|xla) cos \(float(64|32)\): compiled gradient of input 0 vs eager",
    # one parameter class only: the reproduction names it
    "leaky_relu": r"torch aot_eager leaky_relu \(float(64|32)\): compiled gradient of input 0 vs eager"
                  r"(.|\n)*class negative_slope=0.0625",
    # one input regime only
    "abs": r"tensorflow (function|xla) abs \(float(64|32)\): compiled gradient of input 0 vs eager(.|\n)*regime "
           r"(large|mixed|wide)",
    # a refusal of a dtype the documentation accepts fails (it is not "not applicable")
    "cube": r"torch refused cube in float16 on cpu, a dtype its documentation accepts: NotImplementedError",
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


def test_a_whole_mode_visits_every_registered_combination(run: tuple[str, Path]) -> None:
    """The TorchScript mode's ledger rows, end to end: every sample of every op, in both dtypes."""
    import json

    from pytest_dlconform.programs import samples as S

    out, report = run
    assert report.exists(), out[-3000:]
    ledger = json.loads(report.read_text())["coverage"]
    want = {tuple(sorted(k.items())) for k in S.registered() if (k["framework"], k["mode"]) == ("torch", "compiled/torchscript")}
    seen = {tuple(sorted((k, str(v)) for k, v in row.items() if k in S.coverage_key("torch", "m", S.samples("tanh")[0])))
            for row in ledger["visited"] if row["mode"] == "compiled/torchscript" and row["count"] > 0}
    assert want and want <= seen, f"{len(want - seen)} TorchScript combinations unvisited, e.g. {sorted(want - seen)[:3]}"
    assert not [u for u in ledger["unvisited"] if u["mode"] == "compiled/torchscript"]


def test_a_documented_unsupported_dtype_is_not_applicable_sample_by_sample(run: tuple[str, Path]) -> None:
    """torch.linalg.det documents float and double only: float16 is "not applicable" with the
    documentation's words, and each of its samples is in the ledger as not applicable."""
    import json

    from pytest_dlconform.programs import samples as S

    out, report = run
    assert report.exists(), out[-3000:]
    doc = json.loads(report.read_text())
    (node,) = lp_mutants.NOT_APPLICABLE
    test = next(t for c in doc["claims"].values() for t in c["tests"] if t["nodeid"] == node)
    assert test["verdict"] == "not applicable" and "Supports input of float, double" in test["reason"], test
    rows = test["evidence"]["notes"]["coverage"]
    assert {r["params"] + "/" + r["regime"] for r in rows} == {s.params.label + "/" + s.regime for s in S.samples("det_dd")}
    assert all(r["count"] == 0 and r["not_applicable"] >= 1 for r in rows), rows


def test_a_low_precision_test_visits_every_sample_of_its_op_in_its_dtype(run: tuple[str, Path]) -> None:
    """The low-precision ids of this run, end to end: each records every registered sample of
    its op (every parameter class and regime) for its framework and dtype in the ledger."""
    import json

    from pytest_dlconform.programs import samples as S

    _, report = run
    doc = json.loads(report.read_text())
    ran = [t for c in doc["claims"].values() for t in c["tests"]
           if "test_low_precision" in t["nodeid"] and t["verdict"] == "holds"]
    assert len(ran) >= 3, [t["nodeid"] for t in ran]
    for t in ran:
        fw, _, op, dtype = t["nodeid"].rsplit("[", 1)[1].rstrip("]").split("-")
        framework = {"tf": "tensorflow"}.get(fw, fw)
        want = {(k["params"], k["regime"]) for k in S.registered()
                if (k["framework"], k["mode"], k["op"], k["dtype"]) == (framework, S.LOW_PRECISION_MODE, op, dtype)}
        # A sample is checked (count) or, where its bound would accept a canonical wrong answer,
        # recorded inconclusive (count 0): either way the ledger names it, never silently.
        rows = t["evidence"]["notes"]["coverage"]
        seen = {(r["params"], r["regime"]) for r in rows if r["count"] > 0 or r.get("inconclusive", 0) > 0}
        assert want and want == seen, (t["nodeid"], sorted(want - seen)[:3])
        vacuous = {(r["params"], r["regime"]) for r in rows if r["count"] == 0}
        assert t["evidence"]["notes"].get("samples_inconclusive", 0) >= len(vacuous), t["nodeid"]
