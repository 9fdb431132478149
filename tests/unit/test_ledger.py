"""The claims ledger and the project's own rule: suites and claim registry agree.

Every suite test names a registered claim, and every registered claim is checked by some
test. The check reads the suites' source (AST), so it needs no framework.
"""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from pytest_dlconform import cli
from pytest_dlconform.core import claims as registry
from pytest_dlconform.report import ledger

REPO_SUITES = Path(__file__).resolve().parents[2] / "suites"


def test_suites_and_claim_registry_agree() -> None:
    result = ledger.coverage(REPO_SUITES)
    assert result.lines() == [], "\n".join(result.lines())


# ------------------------------------------------------------------ the scanner can fail


def _suites(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "suites"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_scan_finds_markers_on_functions_classes_modules_and_params(tmp_path: Path) -> None:
    root = _suites(tmp_path, {
        "autodiff/test_a.py": """
            import pytest
            from pytest import mark

            @pytest.mark.claim("autodiff.tape.watch")
            def test_one(): ...

            @mark.claim("autodiff.tape.nested")
            @pytest.mark.parametrize("x", [1])
            def test_two(x): ...

            @pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.claim("autodiff.tape.multiple"))])
            def test_three(x): ...

            @pytest.mark.claim("autodiff.tape.persistent")
            class TestGroup:
                def test_inherits(self): ...

            def helper(): ...

            CLAIM = "autodiff.gradient.seed-example"

            @pytest.mark.claim(CLAIM)
            def test_named_by_a_module_constant(): ...
        """,
        "execution/test_b.py": """
            import pytest
            pytestmark = [pytest.mark.claim("autodiff.tape.unconnected")]

            def test_module_marked(): ...
        """,
    })
    scan = ledger.scan_suites(root)
    assert dict(scan.uses.items()) == {
        "autodiff.tape.watch": ["suites/autodiff/test_a.py:5"],
        "autodiff.tape.nested": ["suites/autodiff/test_a.py:8"],
        "autodiff.tape.multiple": ["suites/autodiff/test_a.py:12"],
        "autodiff.tape.persistent": ["suites/autodiff/test_a.py:15"],
        "autodiff.gradient.seed-example": ["suites/autodiff/test_a.py:23"],
        "autodiff.tape.unconnected": ["suites/execution/test_b.py:3"],
    }
    assert scan.unmarked == [] and scan.dynamic == []


def test_unknown_unchecked_unmarked_and_dynamic_ids_are_problems(tmp_path: Path) -> None:
    root = _suites(tmp_path, {
        "autodiff/test_a.py": """
            import pytest
            AREA = "autodiff"

            @pytest.mark.claim("autodiff.tape.wacth")
            def test_typo(): ...

            def test_forgot_the_marker(): ...

            @pytest.mark.claim(f"{AREA}.tape.watch")
            def test_dynamic(): ...

            class TestNoMarker:
                def test_inside(self): ...
        """,
        "bogus/test_c.py": """
            import pytest

            @pytest.mark.claim("nosucharea.topic.name")
            def test_x(): ...
        """,
    })
    result = ledger.coverage(root, areas=["autodiff"])
    assert result.unknown == {"autodiff.tape.wacth": ["suites/autodiff/test_a.py:5"],
                              "nosucharea.topic.name": ["suites/bogus/test_c.py:4"]}
    assert result.unchecked == sorted(c.id for c in registry.matching(["autodiff.*"]))
    assert result.unmarked == ["suites/autodiff/test_a.py:8 test_forgot_the_marker",
                               "suites/autodiff/test_a.py:14 test_inside"]
    assert result.dynamic == ["suites/autodiff/test_a.py:10"]
    assert not result.ok
    lines = result.lines()
    assert lines[0] == ("unknown claim id 'autodiff.tape.wacth' used at suites/autodiff/test_a.py:5: "
                        "register it in claims/autodiff.toml or fix the marker")
    assert "registered claim 'autodiff.tape.watch' is checked by no test in the suites" in lines


def test_dlconform_claims_check_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _suites(tmp_path, {"autodiff/test_a.py": "def test_x(): ...\n"})
    assert cli.main(["claims", "--check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "test without a claim marker: suites/autodiff/test_a.py:1 test_x" in out
    assert out.rstrip().endswith("problem(s)")


# ------------------------------------------------------------------ printing


def test_text_ledger_shows_statement_source_frameworks_and_the_seeds_accuracy() -> None:
    out = io.StringIO()
    assert ledger.print_ledger(["autodiff.graph.implicit"], out=out) == 0
    text = out.getvalue()
    claim = registry.get("autodiff.graph.implicit")
    assert claim is not None and claim.seed_accuracy == "imprecise"
    assert text.startswith("autodiff.graph.implicit  [tensorflow]\n")
    assert "    source: " + claim.source in text
    assert f"    the seed's wording is imprecise: {claim.seed}" in text
    assert text.endswith("1 claims\n")


def test_markdown_and_json_ledgers(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["claims", "--format", "json", "autodiff.*"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in data] == [c.id for c in registry.matching(["autodiff.*"])]
    assert set(data[0]) >= {"id", "statement", "source", "frameworks", "seed", "seed_accuracy"}
    assert cli.main(["claims", "--format", "markdown", "autodiff.graph.implicit"]) == 0
    md = capsys.readouterr().out
    assert md.splitlines()[0] == "| claim | statement | source | frameworks | seed's wording |"
    assert "| `autodiff.graph.implicit` |" in md and "**imprecise**" in md


def test_no_matching_claim_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["claims", "nothing.matches.this"]) == 4  # as --dl-claims: see tests/unit/test_cli.py
    captured = capsys.readouterr()
    assert captured.out == "" and "'nothing.matches.this' matches no registered claim id" in captured.err
