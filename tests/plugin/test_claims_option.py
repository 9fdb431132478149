"""--dl-claims (and DLCONFORM_CLAIMS, dl_claims) with a glob that matches no registered claim
id: a one-line usage error (exit 4) with the closest ids, before anything is collected; and
the suite version every JSON report records."""

from __future__ import annotations

import json

import pytest

from pytest_dlconform.core import fingerprint

TEST = """
import pytest

@pytest.mark.claim("data.torch.shuffle")
def test_a():
    assert True
"""


def _one_line_error(result: pytest.RunResult, *fragments: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = [line for line in result.stderr.lines if line.strip()]
    assert len(err) == 1, result.stderr.str()
    assert err[0].startswith("ERROR: ")
    for fragment in fragments:
        assert fragment in err[0], err[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "deselected" not in result.stdout.str()


def test_a_typo_in_dl_claims_is_a_usage_error_naming_the_closest_id(suite: pytest.Pytester) -> None:
    suite.makepyfile(TEST)
    result = suite.runpytest_subprocess("--dl-claims", "data.torch.shufle")
    _one_line_error(result, "--dl-claims='data.torch.shufle' (from --dl-claims): 'data.torch.shufle' matches no "
                            "registered claim id; did you mean 'data.torch.shuffle'")


def test_a_glob_matching_no_claim_is_a_usage_error_from_the_environment_or_the_ini(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    suite.makepyfile(TEST)
    monkeypatch.setenv("DLCONFORM_CLAIMS", "nosuch.*")
    result = suite.runpytest_subprocess()
    _one_line_error(result, "from environment variable DLCONFORM_CLAIMS", "'nosuch.*' matches no registered claim id",
                    "a claim id starts with its area")
    monkeypatch.delenv("DLCONFORM_CLAIMS")
    suite.makeini("[pytest]\naddopts = -p no:cacheprovider\ndl_claims = autodif.*\n")
    _one_line_error(suite.runpytest_subprocess(), "from ini key dl_claims", "did you mean 'autodiff.*'")


def test_a_report_records_the_suite_hash(suite: pytest.Pytester) -> None:
    suite.makepyfile(TEST)
    result = suite.runpytest_subprocess("--dl-claims=data.torch.*", "--dl-report=r.json")
    result.assert_outcomes(passed=1)
    env = json.loads((suite.path / "r.json").read_text())["environment"]
    assert env["suite_hash"] == fingerprint.suite_hash()
