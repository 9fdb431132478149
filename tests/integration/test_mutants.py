"""The mutation tool (pytest_dlconform.run.mutants): the runner's verdicts, the import hook in
fresh interpreters (and its absence in a clean run), the library's bookkeeping, bad input.

The runner tests use mutants of this file's own (registered through DLCONFORM_MUTANT_MODULES,
as a library module would be): one that is caught, one that is harmless by construction, one
whose patch cannot apply. Each runs one narrow suite test in a real pytest process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pytest_dlconform.core import claims
from pytest_dlconform.run.mutants import AREAS, ENV_VAR, LOG_VAR, registry, runner, site
from pytest_dlconform.run.mutants.hook import EXTRA_MODULES_VAR

ROOT = Path(__file__).resolve().parents[2]
TRACKERS = ("https://github.com/pytorch/", "https://github.com/tensorflow/", "https://github.com/keras-team/",
            "https://github.com/meta-pytorch/")

TEST_MUTANTS = '''
from pytest_dlconform.run.mutants import mutant
from pytest_dlconform.run.mutants.modules import _torch_dropout_no_rescale


@mutant("test-caught", areas="modules", claims="modules.dropout", target="torch",
        select="inplace_and_rate", cite="https://github.com/pytorch/pytorch/pull/10417", bug="dropout unscaled")
def _caught():
    _torch_dropout_no_rescale()


@mutant("test-harmless", areas="modules", claims="modules.dropout", target="torch",
        select="inplace_and_rate", cite="https://github.com/pytorch/pytorch/pull/10417", bug="changes nothing")
def _harmless():
    import torch
    torch._dlconform_harmless = True  # an attribute nobody reads: behaviour is unchanged


@mutant("test-broken", areas="modules", claims="modules.dropout", target="torch",
        select="inplace_and_rate", cite="https://github.com/pytorch/pytorch/pull/10417", bug="cannot apply")
def _broken():
    import torch
    torch.nn.functional.no_such_function.__name__  # AttributeError: the patch does not fit this torch


@mutant("test-plain-module", areas="modules", claims="modules.dropout", target="dlconform_probe_target",
        cite="https://github.com/pytorch/pytorch/pull/10417", bug="rewrites a probe module's value")
def _probe():
    import dlconform_probe_target
    dlconform_probe_target.VALUE = "mutated"
'''


@pytest.fixture
def mutant_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with this file's mutants and a probe module, importable in every child."""
    (tmp_path / "dlconform_test_mutants.py").write_text(textwrap.dedent(TEST_MUTANTS))
    (tmp_path / "dlconform_probe_target.py").write_text('VALUE = "original"\n')
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv(EXTRA_MODULES_VAR, "dlconform_test_mutants")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.import_module("dlconform_test_mutants")
    return tmp_path


# ----------------------------------------------------------------- classification (pure)


def _outcome(tmp_path: Path, exit_code: int | None = 0) -> runner.Outcome:
    return runner.Outcome("m", "modules", "modules.dropout", "", [], str(tmp_path / "r.json"), str(tmp_path / "l.log"),
                          exit_code=exit_code)


def _doc(*verdicts: str, expected: bool = False) -> dict:
    tests = [{"nodeid": f"t{i}", "verdict": v, "reason": "boom\nmore", "expected": ["x"] if expected else None}
             for i, v in enumerate(verdicts)]
    return {"claims": {"modules.dropout": {"tests": tests}}}


def _log(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "m.mutant.log"
    path.write_text("".join(f"{1000 + i} {line}\n" for i, line in enumerate(lines)))
    return path


@pytest.mark.parametrize(("verdicts", "lines", "exit_code", "want", "detail"), [
    (("holds", "violated"), ("applied m",), 1, "killed", "1 violated, e.g. t1: boom"),
    (("holds", "holds"), ("applied m",), 0, "survived", "all 2 test(s) held"),
    (("holds", "error"), ("applied m",), 1, "error", "1 test error(s), e.g. t1"),
    (("not applicable",), ("applied m",), 0, "error", "nothing ran"),
    (("holds",), (), 0, "error", "mutant never applied"),
    (("violated",), ("applied m", "failed m: AttributeError: x"), 1, "error", "mutant not applied: m: AttributeError"),
    (("holds",), ("applied m",), None, "error", "timed out"),
    (("holds",), ("applied m",), 4, "error", "usage error"),
])
def test_runner_classifies_each_kind_of_run(tmp_path, verdicts, lines, exit_code, want, detail):
    out = _outcome(tmp_path, exit_code)
    runner.classify(out, _doc(*verdicts), mutant_log=_log(tmp_path, *lines), target="torch")
    assert (out.verdict, detail in out.detail) == (want, True), out.detail


@pytest.mark.parametrize(("verdicts", "want", "detail"), [
    (("holds", "violated"), "killed", "1 violated"),  # xdist stopped at --maxfail=1: the report counts
    (("holds", "error"), "error", "1 test error(s)"),
    (("holds",), "error", "interrupted) with nothing violated"),
])
def test_a_run_xdist_stopped_at_the_first_failure_is_judged_by_its_report(tmp_path, verdicts, want, detail):
    out = _outcome(tmp_path, 2)
    out.command = ["pytest", "--maxfail=1"]
    runner.classify(out, _doc(*verdicts), mutant_log=_log(tmp_path, "applied m"), target="torch")
    assert (out.verdict, detail in out.detail) == (want, True), out.detail
    out.command = ["pytest"]  # without our --maxfail an interrupted run is broken
    runner.classify(out, _doc(*verdicts), mutant_log=_log(tmp_path, "applied m"), target="torch")
    assert out.verdict == "error" and "pytest exit 2 (interrupted)" in out.detail, out.detail


def test_a_violation_a_known_divergence_explains_is_not_a_kill(tmp_path):
    out = _outcome(tmp_path, 1)
    runner.classify(out, _doc("holds", "violated", expected=True), mutant_log=_log(tmp_path, "applied m"), target="t")
    assert out.verdict == "survived" and out.counts["expected"] == 1, out


def test_score_counts_per_area(tmp_path):
    outs = [_outcome(tmp_path) for _ in range(4)]
    for o, (area, verdict) in zip(outs, [("data", "killed"), ("data", "survived"), ("modules", "killed"),
                                         ("modules", "error")]):
        o.area, o.verdict = area, verdict
    s = runner.score(outs)
    assert s["per_area"] == {"data": {"killed": 1, "survived": 1, "error": 0},
                             "modules": {"killed": 1, "survived": 0, "error": 1}}
    assert (s["killed"], s["total"], s["score_percent"]) == (2, 4, 50.0)


# ----------------------------------------------------------------- the hook in fresh interpreters


def _child(env: dict[str, str], code: str) -> str:
    """``code`` in a child that itself starts a fresh interpreter through fresh.run_python."""
    outer = textwrap.dedent(f"""
        from pytest_dlconform.frameworks.fresh import run_python
        print(run_python({code!r}, timeout=120))
    """)
    done = subprocess.run([sys.executable, "-c", outer], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_hook_reaches_a_grandchild_interpreter_and_a_clean_run_is_untouched(mutant_dir, tmp_path):
    folder = site.prepare(tmp_path / "site")
    log = tmp_path / "mutant.log"
    probe = "import dlconform_probe_target as m, sys; emit([m.VALUE, 'pytest_dlconform.run.mutants.hook' in sys.modules])"
    assert _child(site.environment(folder, "test-plain-module", log), probe) == "['mutated', True]"
    applied = [line for line in log.read_text().splitlines() if " applied test-plain-module" in line]
    assert len(applied) == 1, log.read_text()  # the grandchild imported the target; the child did not
    clean_log = tmp_path / "clean.log"
    assert _child(site.environment(folder, None, clean_log), probe) == "['original', False]"
    assert not clean_log.exists(), "a run without DLCONFORM_MUTANT wrote to the mutant log"


def test_a_library_mutant_changes_torch_in_a_fresh_interpreter(tmp_path):
    folder = site.prepare(tmp_path / "site")
    code = ("import torch; torch.manual_seed(0); y = torch.nn.functional.dropout(torch.ones(1000), 0.5); "
            "emit(sorted({float(v) for v in y}))")
    assert _child(site.environment(folder, "torch-dropout-no-rescale", None), code) == "[0.0, 1.0]"
    assert _child(site.environment(folder, None, None), code) == "[0.0, 2.0]"  # clean: scaled by 1/(1-p)


def test_the_environment_puts_the_site_folder_first_and_drops_a_stale_mutant(tmp_path):
    env = site.environment(tmp_path, None, None, base={"PYTHONPATH": "/a", ENV_VAR: "old", LOG_VAR: "/x"})
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path), "/a"]) and ENV_VAR not in env and LOG_VAR not in env


# ----------------------------------------------------------------- the runner end to end


def test_runner_kills_the_caught_mutant_keeps_the_harmless_one_and_flags_the_broken_one(mutant_dir, tmp_path):
    out = tmp_path / "out"
    # Two runs at a time (-j 2, as CI runs the sample): the table and mutate.json keep the order given.
    code = runner.main(["--mutant", "test-caught", "test-harmless", "test-broken", "--out", str(out), "-n", "0",
                        "-j", "2"])
    doc = json.loads((out / "mutate.json").read_text())
    assert [m["mutant"] for m in doc["mutants"]] == ["test-caught", "test-harmless", "test-broken"], doc["mutants"]
    assert doc["jobs"] == 2
    got = {m["mutant"]: (m["verdict"], m["detail"]) for m in doc["mutants"]}
    assert got["test-caught"][0] == "killed" and "1 violated" in got["test-caught"][1], got
    assert got["test-harmless"][0] == "survived", got
    assert got["test-broken"][0] == "error" and "AttributeError" in got["test-broken"][1], got
    assert doc["score"]["killed"] == 1 and doc["score"]["total"] == 3 and code == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_runner_stops_its_runs_in_progress(mutant_dir, tmp_path, sig):
    """^C or SIGTERM while mutants run (-j 2, from threads): the runner ends at once, its runs'
    pytest processes (own sessions, which a terminal's ^C does not reach) are stopped too, and
    no further run starts."""
    out = tmp_path / "out"
    argv = ["--mutant", "test-caught", "test-harmless", "test-broken", "--out", str(out), "-n", "0", "-j", "2"]
    # The runner in a process of its own, with this file's mutants registered (mutant_dir's module).
    cmd = [sys.executable, "-c", "import sys, dlconform_test_mutants; from pytest_dlconform.run.mutants import runner; "
           f"sys.exit(runner.main({argv!r}))"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    printed: list[tuple[float, str]] = []  # the runner's lines, with when they arrived

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            printed.append((time.monotonic(), line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not (out / "test-harmless.log").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (out / "test-caught.log").exists() and (out / "test-harmless.log").exists(), "the two runs did not start"
    time.sleep(1.0)  # both runs' pytest processes are up
    stopped_at = time.monotonic()
    proc.send_signal(sig)
    proc.wait(timeout=180)  # a run left to finish would start the third: asserted below
    reader.join(timeout=30)

    def alive() -> list[str]:
        found = []
        for d in Path("/proc").iterdir():
            try:
                line = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(out) in line and "pytest" in line and d.name != str(proc.pid):
                found.append(line[:200])
        return found

    assert not alive(), alive()
    # The runner prints a run's line before it starts it. On a loaded host one of the first two
    # runs can end, and the third start, before the stop arrives: that start is no fault, and
    # the check above saw it stopped with the others. A run announced after the stop may not
    # start: its log holds the command line the runner wrote, and nothing from a pytest.
    third = [t for t, line in printed if "[3/3] test-broken" in line]
    log = out / "test-broken.log"
    if not third:
        assert not log.exists(), "a run started without its line"
    elif third[0] >= stopped_at and log.exists():
        lines = log.read_text().splitlines()
        assert len(lines) <= 1, "a run started after the stop:\n" + "\n".join(lines[:20])
    assert proc.returncode != 0, "".join(line for _, line in printed)


def test_baseline_only_runs_the_clean_run_of_the_selected_claims_and_no_mutant(mutant_dir, tmp_path):
    out = tmp_path / "out"
    code = runner.main(["--mutant", "test-caught", "--baseline-only", "--out", str(out), "-n", "0",
                        "--", "-k", "inplace_and_rate"])
    doc = json.loads((out / "mutate.json").read_text())
    assert doc["mutants"] == [] and doc["baseline"]["verdict"] == "survived", doc  # clean: every test held
    assert doc["baseline"]["counts"]["holds"] >= 1 and not (out / "test-caught.json").exists()
    assert code == 0


# ----------------------------------------------------------------- the library


def test_every_library_mutant_cites_a_framework_tracker_and_names_registered_claims():
    library = {n: m for n, m in registry().items() if not n.startswith("test-")}
    assert len(library) >= 60, f"{len(library)} mutants"
    problems = []
    for m in library.values():
        if not m.cite.startswith(TRACKERS):
            problems.append(f"{m.name}: cite {m.cite} is not a TensorFlow, Keras or PyTorch tracker")
        if not claims.matching(m.claims):
            problems.append(f"{m.name}: claims {m.claims} match no registered claim")
        if m.target not in ("torch", "tensorflow", "keras"):
            problems.append(f"{m.name}: target {m.target}")
    assert not problems, "\n".join(problems)
    covered = {a for m in library.values() for a in m.areas}
    assert covered >= set(AREAS), f"areas without a mutant: {set(AREAS) - covered}"


def test_model_mutants_run_on_a_shipped_example_model():
    sys.path.insert(0, str(Path(__file__).parent))
    from test_model_examples import EXAMPLES

    model_mutants = [m for m in registry().values() if "model" in m.areas]
    assert len(model_mutants) >= 4, [m.name for m in model_mutants]
    for m in model_mutants:
        assert m.model in EXAMPLES and all(c.startswith("model.") for c in m.claims), m
        assert runner._example_folder(m.model) == str(ROOT), m.model  # importable from this checkout
        cmd = runner.command(m, ",".join(m.claims), m.select, Path("r.json"), profile="ci", workers="0",
                             divergences="d", extra=[], models=[m.model])
        assert f"--dl-model={m.model}" in cmd, cmd


def test_a_model_mutant_without_its_example_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "CHECKOUT", tmp_path)  # as from a wheel: no examples/ anywhere
    assert runner.main(["--mutant", "torch-dropout-ignores-manual-seed"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dlconform mutate: --mutant torch-dropout-ignores-manual-seed: its example model "
                          "examples.torch_user:tabular_model is not importable; run from a checkout") and err.count("\n") == 1


def test_a_model_mutant_reaches_the_model_suite_and_is_killed(tmp_path, monkeypatch):
    """End to end: --dl-model passed, the example imported in the factory check's fresh
    interpreter and in pytest, the mutant applied there, the seeded-determinism test violated."""
    monkeypatch.chdir(tmp_path)  # not the checkout: the runner must find examples/ itself
    out = tmp_path / "out"
    code = runner.main(["--mutant", "torch-dropout-ignores-manual-seed", "--out", str(out), "-n", "0"])
    doc = json.loads((out / "mutate.json").read_text())
    (m,) = doc["mutants"]
    assert m["verdict"] == "killed" and m["processes_applied"] >= 1, m
    assert any("test_same_seed_same_model_outputs_and_gradients[examples.torch_user:tabular_model" in k
               for k in m["killers"]), m["killers"]
    assert "training-mode outputs" in m["detail"], m["detail"]
    assert code == 0


# ----------------------------------------------------------------- stop_gradient / detach: the wrong twins

STOP_GRADIENT = "suites/autodiff/test_stop_gradient.py"
STOP_TESTS = {"tf": ("test_tf_stop_gradient_passes_the_value_and_blocks_the_gradient",
                     "test_tf_gradients_in_a_function_do_not_flow_through_stop_gradient"),
              "torch": ("test_torch_detach_passes_the_value_and_blocks_the_gradient",)}


@pytest.mark.parametrize(("name", "framework", "message"), [
    # an identity in place of tf.stop_gradient: the gradient is 3v^2 + cos(v), not v^2 + cos(v)
    ("tf-stop-gradient-is-identity", "tf",
     r"gradient with a tf.stop_gradient factor held constant: max\|actual - expected\| = "),
    # Tensor.detach() still in the graph (pytorch#685)
    ("torch-detach-keeps-graph", "torch", r"Tensor.detach\(\) result requires_grad=True, grad_fn=<ViewBackward0"),
])
def test_the_stop_gradient_suite_fails_on_its_wrong_twins(tmp_path, name, framework, message):
    import re

    folder = site.prepare(tmp_path / "site")
    env = site.environment(folder, name, tmp_path / "mutant.log")
    done = subprocess.run([sys.executable, "-m", "pytest", STOP_GRADIENT, "-p", "no:cacheprovider", "--dl-profile=ci",
                           "-q", "-rA", "--no-header"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    other = "torch" if framework == "tf" else "tf"
    for test in STOP_TESTS[framework]:
        assert f"FAILED {STOP_GRADIENT}::{test}[cpu]" in out, out[-4000:]
    for test in STOP_TESTS[other]:
        assert f"PASSED {STOP_GRADIENT}::{test}[cpu]" in out, out[-4000:]
    assert re.search(message, out), out[-4000:]


@pytest.mark.parametrize(("argv", "message"), [
    (["--mutant", "no-such"], "--mutant no-such: no such mutant; list them with `dlconform mutate --list`"),
    (["--area", "nowhere"], "--area nowhere: no such area"),
    (["--sample", "0"], "--sample 0: give a count from 1 to"),
    (["--area", "data", "--sample", "999"], "--sample 999: give a count from 1 to"),
    (["--fail-under", "150"], "--fail-under 150.0: give a percentage from 0 to 100"),
    (["--baseline-timeout", "0"], "--baseline-timeout 0.0: give a positive number of seconds"),
    (["--jobs", "0"], "--jobs 0: give a positive number of mutant runs at a time"),
])
def test_bad_input_is_one_line_with_the_fix_and_exit_2(argv, message):
    done = subprocess.run([sys.executable, "-m", "pytest_dlconform.cli", "mutate", *argv], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done
    assert done.stderr.startswith("dlconform mutate: " + message) and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_seeded_sample_is_reproducible_and_differs_by_seed():
    def sample(seed: str) -> list[str]:
        args = runner._parser().parse_args(["--sample", "10", "--seed", seed])
        chosen, problem = runner.select(args, registry())
        assert not problem
        return [m.name for m in chosen]
    assert sample("2026-12-01") == sample("2026-12-01") != sample("2026-12-02")
