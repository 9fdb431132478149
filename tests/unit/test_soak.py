"""The soak's judgement of a run: from its JSON report, never from terminal output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dlconform.core import soak


def _report(tmp_path: Path, tests: list[dict]) -> Path:
    path = tmp_path / "r.json"
    counts = {"holds": 0, "violated": 0, "error": 0, "not applicable": 0}
    for t in tests:
        counts[t["verdict"]] += 1
    path.write_text(json.dumps({"claims": {"a.b.c": {"tests": tests}}, "counts": {"tests": counts}}))
    return path


def _run(tmp_path: Path, report: Path, exit_code: int | None = 1) -> soak.Run:
    log = tmp_path / "r.log"
    log.write_text("[ 50%]\n - 5 passing examples, 0 failing examples, 1 invalid examples\n"
                   " - 3 passing examples, 0 failing examples, 0 invalid examples\n[100%]\n")
    run = soak.Run(0, "quick", 1234, ["pytest"], "", str(report), str(log), exit_code=exit_code)
    soak.judge(run, "/x/known.toml")
    return run


def test_unexpected_failures_are_violated_or_error_tests_no_divergence_explains(tmp_path: Path) -> None:
    tests = [
        {"nodeid": "suites/t.py::ok", "verdict": "holds"},
        {"nodeid": "suites/t.py::known", "verdict": "violated", "expected": {"reason": "pinned"}},
        {"nodeid": "suites/t.py::new", "verdict": "violated", "reason": "tolerance",
         "repro": "cd /r && pytest 'suites/t.py::new' --dl-seed=1234  # test seed 9"},
        {"nodeid": "suites/t.py::broken", "verdict": "error", "reason": "harness"},
        {"nodeid": "suites/t.py::na", "verdict": "not applicable"},
    ]
    run = _run(tmp_path, _report(tmp_path, tests))
    assert [f.nodeid for f in run.failures] == ["suites/t.py::new", "suites/t.py::broken"]
    assert not run.clean and run.problem == ""
    repro = run.failures[0].repro
    assert repro.startswith("cd /r && pytest 'suites/t.py::new' --dl-seed=1234")
    assert "--hypothesis-seed=1234" in repro and "--dl-divergences=/x/known.toml" in repro and "#" not in repro
    assert run.examples == {"passing": 8, "failing": 0, "invalid": 1} and run.progress_percent == 100


def test_a_run_with_only_known_divergences_is_clean(tmp_path: Path) -> None:
    tests = [{"nodeid": "k", "verdict": "violated", "expected": {"reason": "r"}}, {"nodeid": "h", "verdict": "holds"}]
    run = _run(tmp_path, _report(tmp_path, tests), exit_code=1)  # pytest still exits 1 for the known failure
    assert run.clean


@pytest.mark.parametrize(("exit_code", "problem"), [(4, "usage error"), (3, "internal error"), (None, "timed out at 100%")])
def test_broken_or_timed_out_runs_are_failures(tmp_path: Path, exit_code: int | None, problem: str) -> None:
    run = _run(tmp_path, _report(tmp_path, [{"nodeid": "h", "verdict": "holds"}]), exit_code=exit_code)
    assert problem in run.problem and not run.clean


def test_missing_or_empty_report_is_a_failure(tmp_path: Path) -> None:
    assert "no usable JSON report" in _run(tmp_path, tmp_path / "absent.json", exit_code=0).problem
    assert "no tests" in _run(tmp_path, _report(tmp_path, []), exit_code=0).problem


def test_command_carries_the_seed_profile_report_and_divergences(tmp_path: Path) -> None:
    cmd = soak.command("explore", 77, tmp_path / "r.json", workers="2", divergences="/d.toml", extra=["-k", "x"])
    for part in ("--dl-profile=explore", "--hypothesis-seed=77", "--dl-seed=77", f"--dl-report={tmp_path / 'r.json'}",
                 "--dl-divergences=/d.toml", "pytest_dlconform.suites"):
        assert part in cmd
    assert cmd[-5:] == ["-n", "2", "--dist=worksteal", "-k", "x"]  # core/scheduling.py
    own = soak.command("explore", 77, tmp_path / "r.json", workers="2", divergences="/d.toml", extra=["--dist", "load"])
    assert "--dist=worksteal" not in own and own[-4:] == ["-n", "2", "--dist", "load"]
    assert "--dist=worksteal" not in soak.command("explore", 77, tmp_path / "r.json", workers="0", divergences="/d",
                                                  extra=[])
    assert "--dl-claims=autodiff.*" in soak.command("quick", 1, tmp_path / "r.json", workers="0", divergences="/d",
                                                    extra=[], claims="autodiff.*")


@pytest.mark.parametrize(("argv", "message"), [
    (["--quick", "0", "--explore", "0"], "ask for at least one run"),
    (["--quick", "1", "--explore", "0", "--seeds", "1", "2"], "--seeds has 2 seeds for 1 runs"),
    (["--timeout", "-3"], "--timeout -3.0: give a positive number"),
    (["--divergences", "/nonexistent.toml"], "no such file"),
])
def test_bad_arguments_get_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert soak.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_plan_uses_given_seeds_first_then_random_ones() -> None:
    args = soak._parser().parse_args(["--quick", "2", "--explore", "1", "--seeds", "5"])
    plan = soak._plan(args)
    assert [p for p, _, _ in plan] == ["quick", "quick", "explore"] and plan[0][1] == 5
    assert all(0 <= s < 2**31 and c == "" for _, s, c in plan)
    split = soak._plan(soak._parser().parse_args(["--quick", "0", "--explore", "1", "--seeds", "9", "--split"]))
    assert {s for _, s, _ in split} == {9} and next(c for _, _, c in split) == "autodiff.*"
    assert {c for _, _, c in split} == {f"{a}.*" for a in soak.areas()} and "distributed.*" in {c for _, _, c in split}


def test_explore_profile_is_the_thorough_budget_randomized() -> None:
    from hypothesis import settings

    from pytest_dlconform.run import profiles
    from pytest_dlconform.run.settings import PROFILE_CHOICES

    profiles.register()
    explore, thorough = settings.get_profile("dlconform-explore"), settings.get_profile("dlconform-thorough")
    assert explore.max_examples == thorough.max_examples == profiles.THOROUGH_EXAMPLES
    assert thorough.derandomize and not explore.derandomize  # derandomize would ignore --hypothesis-seed
    assert explore.database is None and "explore" in PROFILE_CHOICES


def test_dlconform_soak_subcommand_reaches_the_soak(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_dlconform import cli

    assert cli.main(["soak", "--quick", "0", "--explore", "0"]) == 2
    assert "dlconform soak: --quick 0 --explore 0" in capsys.readouterr().err


def test_with_an_examples_db_runs_keep_it_and_failures_replay_from_it(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    cmd = soak.command("explore", 77, tmp_path / "r.json", workers="0", divergences="/d.toml", extra=[], examples_db=db)
    assert f"--dl-examples-db={db}" in cmd and "--dl-seed=77" in cmd
    assert not any(c.startswith("--hypothesis-seed") for c in cmd)  # hypothesis ignores a database under a seed
    line = soak.repro({"nodeid": "suites/x.py::t", "repro": "pytest suites/x.py::t --dl-profile=explore --dl-seed=77"},
                      "explore", 77, "/d.toml", db)
    assert "--dl-profile=replay" in line and f"--dl-examples-db={db}" in line and "--hypothesis-seed" not in line


def test_examples_db_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    assert soak.main(["--examples-db", str(f)]) == 2
    assert "is a file; give a folder" in capsys.readouterr().err


def test_replay_profile_generates_nothing() -> None:
    from hypothesis import Phase, settings

    from pytest_dlconform.core import budgets
    from pytest_dlconform.run import profiles

    profiles.register()
    replay = settings.get_profile("dlconform-replay")
    assert Phase.generate not in replay.phases and Phase.reuse in replay.phases
    laid = budgets.claim_settings(settings(), replay)
    assert Phase.generate not in laid.phases and Phase.reuse in laid.phases
    explore = budgets.claim_settings(settings(phases=[Phase.explicit, Phase.generate]), settings.get_profile("dlconform-explore"))
    assert tuple(explore.phases) == (Phase.explicit, Phase.generate)  # a test's own phases stay otherwise


def test_quick_and_ci_leave_out_only_the_explain_phase() -> None:
    """hypothesis's explain phase re-runs a shrunk failure many times to comment on it: quick
    and ci leave it out of every claim test, the other profiles keep a test's own phases."""
    from hypothesis import Phase, settings

    from pytest_dlconform.core import budgets
    from pytest_dlconform.run import profiles

    profiles.register()
    everything = settings(phases=list(Phase))
    for name in ("quick", "ci"):
        laid = budgets.claim_settings(everything, settings.get_profile(f"dlconform-{name}"))
        assert set(laid.phases) == set(Phase) - {Phase.explain}, name
    for name in ("thorough", "explore"):
        laid = budgets.claim_settings(everything, settings.get_profile(f"dlconform-{name}"))
        assert set(laid.phases) == set(Phase), name
    own = budgets.claim_settings(settings(phases=[Phase.generate]), settings.get_profile("dlconform-ci"))
    assert tuple(own.phases) == (Phase.generate,)  # never phases the test left out


def test_xdist_runs_steal_work_unless_the_command_line_chose_or_disabled_xdist() -> None:
    from pytest_dlconform.core.scheduling import WORKSTEAL, xdist_args

    assert xdist_args(["-n", "2", "--dl-profile=quick"]) == [WORKSTEAL]
    for chosen in (["--dist", "load"], ["--dist=loadgroup"], ["-d", "load"], ["-p", "no:xdist"], ["-pno:xdist"]):
        assert xdist_args(["-n", "2", *chosen]) == [], chosen
    assert xdist_args(["-k", "no:xdist"]) == [WORKSTEAL]  # a -k expression is not -p
