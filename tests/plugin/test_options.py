"""Options end to end: one-line usage errors (exit 4, no traceback), markers, deselection."""

from __future__ import annotations

import sys

import pytest

NO_FRAMEWORK_TEST = """
import pytest

@pytest.mark.claim("autodiff.tape.watch")
def test_a():
    assert True

@pytest.mark.claim("execution.function.speed")
def test_b():
    assert True

def test_unmarked():
    assert True
"""


def _one_line_error(result: pytest.RunResult, *fragments: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = [line for line in result.stderr.lines if line.strip()]
    assert len(err) == 1, result.stderr.str()
    assert err[0].startswith("ERROR: ")
    for fragment in fragments:
        assert fragment in err[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_bad_flag_value(suite):
    suite.makepyfile(NO_FRAMEWORK_TEST)
    result = suite.runpytest_subprocess("--dl-device=tpu")
    _one_line_error(result, "--dl-device='tpu' (from --dl-device)", "use one of: cpu, gpu, multi-gpu, all, auto")


def test_bad_env_value_names_the_variable(suite, monkeypatch):
    suite.makepyfile(NO_FRAMEWORK_TEST)
    monkeypatch.setenv("DLCONFORM_REPLICAS", "zero")
    result = suite.runpytest_subprocess()
    _one_line_error(result, "from environment variable DLCONFORM_REPLICAS", "not an integer")


def test_bad_ini_value_names_the_key(suite):
    suite.makeini("[pytest]\naddopts = -p no:cacheprovider\ndl_profile = fast\n")
    suite.makepyfile(NO_FRAMEWORK_TEST)
    result = suite.runpytest_subprocess()
    _one_line_error(result, "from ini key dl_profile", "quick, ci, thorough")


def test_gpu_requested_on_a_machine_without_one_is_a_usage_error(suite, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, even on a GPU machine
    suite.makepyfile(NO_FRAMEWORK_TEST)
    result = suite.runpytest_subprocess("--dl-device=gpu")
    _one_line_error(result, "needs at least 1 GPU, but found 0 GPUs", "run with --dl-device=cpu")


def test_markers_are_registered_with_signatures(suite):
    result = suite.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.claim(id): *", "@pytest.mark.min_devices(n): *"])


def test_claims_glob_selects_by_claim_and_deselects_unmarked(suite):
    suite.makepyfile(NO_FRAMEWORK_TEST)
    result = suite.runpytest_subprocess("--dl-claims=autodiff.*", "-v")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*test_a PASSED*"])


def test_no_matching_claim_collects_nothing_exit_5(suite):
    suite.makepyfile(NO_FRAMEWORK_TEST)
    result = suite.runpytest_subprocess("--dl-claims=distributed.*")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_plugin_can_be_disabled_by_name(suite):
    suite.makepyfile("def test_x():\n    assert True\n")
    result = suite.runpytest_subprocess("-p", "no:dlconform", "--dl-device=cpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unrecognized arguments: --dl-device=cpu" in result.stderr.str()


def test_header_is_a_reproduction_recipe(suite):
    suite.makepyfile(NO_FRAMEWORK_TEST)
    result = suite.runpytest_subprocess("--dl-device=cpu", "--dl-seed=7", "--dl-profile=quick")
    result.stdout.fnmatch_lines(["dlconform: *; selected: cpu; devices found: *"])
    # the folder it ran in (a project's own tests), then the settings; wrapped with " \\" continuations
    line = _header_command(result.stdout.lines)
    assert line.startswith(f"cd {suite.path} && pytest --dl-profile=quick --dl-seed=7 --dl-framework=")
    assert " --dl-replicas=2 --dl-device=cpu --hypothesis-seed=" in line


def _header_command(lines):
    """The header's reproduce line as one line (the terminal wraps it with `` \\`` continuations)."""
    start = next(i for i, x in enumerate(lines) if x.startswith("dlconform: reproduce with: "))
    parts = [lines[start].removeprefix("dlconform: reproduce with: ")]
    while parts[-1].endswith(" \\"):
        parts[-1] = parts[-1][:-2]
        parts.append(lines[start + len(parts)].strip())
    return " ".join(parts)


def test_loading_the_plugin_imports_no_framework(suite):
    suite.makepyfile(
        """
        import sys
        def test_frameworks_not_imported():
            assert "tensorflow" not in sys.modules
            assert "torch" not in sys.modules
        """
    )
    result = suite.runpytest_subprocess("-p", "dlconform")
    result.assert_outcomes(passed=1)


def test_list_claims_prints_the_ledger_without_running(suite):
    suite.makepyfile("def test_never():\n    raise SystemExit('ran')\n")
    result = suite.runpytest_subprocess("--dl-list-claims", "--dl-claims=autodiff.tape.*")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["autodiff.tape.watch  [[]tensorflow[]]", "*claims"])
    assert "ran" not in result.stdout.str()


def test_console_script_lists_claims():
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "pytest_dlconform.cli", "claims", "autodiff.gradient.*"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "autodiff.gradient.seed-example" in out and "autodiff.tape.watch" not in out


def test_dlconform_run_passes_every_argument_to_pytest(tmp_path):
    import subprocess

    # Options right after "run" (as in the README's first command) reach pytest untouched.
    out = subprocess.run(
        [sys.executable, "-m", "pytest_dlconform.cli", "run", "-n", "0", "--co", "-q", "--dl-claims=autodiff.tape.watch"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "test_tape.py::test_constants_need_watch_trainable_variables_do_not[cpu]" in out.stdout


FAILING_PROPERTY = """
import pytest
from hypothesis import given, strategies as st

@pytest.mark.claim("autodiff.tape.watch")
@given(st.integers(0, 10**6))
def test_large(x):
    assert x < 1000, f"x={x}"
"""


def test_randomized_run_prints_and_reports_its_seed(suite):
    suite.makepyfile(NO_FRAMEWORK_TEST)
    result = suite.runpytest_subprocess("--dl-device=cpu", "--dl-profile=explore", "--dl-report=r.json")
    line = _header_command(result.stdout.lines)
    seed = line.split("--hypothesis-seed=", 1)[1].split()[0]
    import json

    settings = json.loads((suite.path / "r.json").read_text())["environment"]["settings"]
    assert settings["hypothesis_seed"] == seed and settings["profile"] == "explore"
    # derandomized profiles pick no seed; a seed the user gave is kept
    result = suite.runpytest_subprocess("--dl-device=cpu", "--dl-profile=ci")
    assert "--hypothesis-seed" not in result.stdout.str()
    result = suite.runpytest_subprocess("--dl-device=cpu", "--dl-profile=quick", "--hypothesis-seed=42")
    assert _header_command(result.stdout.lines).endswith(" --hypothesis-seed=42")


def test_examples_db_stores_failures_and_replay_reruns_only_them(suite):
    suite.makepyfile(FAILING_PROPERTY)
    db = suite.path / "db"
    first = suite.runpytest_subprocess("--dl-device=cpu", "--dl-profile=explore", f"--dl-examples-db={db}")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    assert db.is_dir() and any(db.rglob("*")), "the failing example was not saved"
    replay = suite.runpytest_subprocess("--dl-device=cpu", "--dl-profile=replay", f"--dl-examples-db={db}")
    assert replay.ret == pytest.ExitCode.TESTS_FAILED  # the stored failure, replayed without generating
    replay.stdout.fnmatch_lines(["*x=*"])


def test_examples_db_usage_errors(suite):
    suite.makepyfile(NO_FRAMEWORK_TEST)
    _one_line_error(suite.runpytest_subprocess("--dl-profile=ci", "--dl-examples-db=db"),
                    "--dl-examples-db='db'", "the ci profile is derandomized and keeps no example database",
                    "use --dl-profile=explore")
    _one_line_error(suite.runpytest_subprocess("--dl-profile=replay"),
                    "--dl-profile='replay'", "has none to replay", "pass --dl-examples-db=DIR")
    _one_line_error(suite.runpytest_subprocess("--dl-profile=explore", "--dl-examples-db=db", "--hypothesis-seed=3"),
                    "--hypothesis-seed=3 with --dl-examples-db=", "hypothesis ignores the example database under a fixed seed")
    (suite.path / "afile").write_text("x")
    _one_line_error(suite.runpytest_subprocess("--dl-profile=explore", "--dl-examples-db=afile"),
                    "is a file, not a folder")
