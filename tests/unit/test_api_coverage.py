"""The API ledger's document, its out-of-scope data and its diff: plain JSON, no framework."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform.report import api_coverage, api_ledger


def _part(entries: dict[str, str], called: list[str], version: str = "2.13.0") -> dict[str, Any]:
    catalog = {"torch.nn.functional": {"framework": "torch", "area": "modules", "version": version, "entries": entries}}
    return {"catalog": catalog, "tests": {"t.py::test_a": {"claim": "modules.x.y", "apis": called}}}


def test_the_packaged_out_of_scope_file_reads_with_one_line_reasons() -> None:
    entries = api_coverage.load_out_of_scope()
    assert entries and all(reason and "\n" not in reason for reason in entries.values())
    assert all(api_ledger.namespace_of(name) is not None for name in entries)


@pytest.mark.parametrize(("text", "message"), [
    ('[[api]]\nname = "torch.nn.functional.upsample"\n', "give reason"),
    ('[[api]]\nname = "torch.nn.functional.upsample"\nreason = """two\nlines"""\n', "on one line"),
    ('[[api]]\nname = "torch.nope.thing"\nreason = "x"\n', "is in no ledger namespace"),
    ('[[api]]\nname = "tf.nn.relu"\nreason = "x"\nexpires = 1\n', "unknown key"),
])
def test_a_bad_out_of_scope_entry_is_a_one_line_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "oos.toml"
    path.write_text(text)
    with pytest.raises(api_coverage.LedgerError, match=message) as info:
        api_coverage.load_out_of_scope(str(path))
    assert "\n" not in str(info.value)


def test_an_out_of_scope_name_the_installed_version_lacks_is_a_one_line_error() -> None:
    part = _part({"relu": "function"}, [])
    with pytest.raises(api_coverage.LedgerError) as info:
        api_coverage.build([part], {"torch.nn.functional.relu6_typo": "deprecated"})
    assert str(info.value) == ("api_out_of_scope.toml: torch.nn.functional.relu6_typo is no public API of torch 2.13.0 "
                               "(namespace torch.nn.functional); fix the name or remove the entry")


def test_out_of_scope_names_of_a_namespace_not_enumerated_are_not_checked() -> None:
    api_coverage.build([_part({"relu": "function"}, [])], {"tf.nn.not_here": "needs hardware: a TPU"})


def test_covered_uncovered_and_out_of_scope_per_namespace() -> None:
    part = _part({"relu": "function", "gelu": "function", "upsample": "function"}, ["torch.nn.functional.relu"])
    doc = api_coverage.build([part], {"torch.nn.functional.upsample": "deprecated"})
    apis = doc["namespaces"]["torch.nn.functional"]["apis"]
    assert apis["relu"] == {"kind": "function", "status": "covered", "tests": 1, "claims": ["modules.x.y"]}
    assert apis["gelu"]["status"] == "uncovered"
    assert apis["upsample"] == {"kind": "function", "status": "out of scope", "reason": "deprecated"}
    assert doc["namespaces"]["torch.nn.functional"]["counts"] == {"covered": 1, "uncovered": 1, "out of scope": 1}
    assert doc["versions"] == {"torch": "2.13.0"}
    page = api_coverage.render_html(doc)
    assert page.startswith("<!doctype html>") and "torch.nn.functional" in page and "http" not in page
    assert "1/2" in api_coverage.to_text(doc)


def test_the_diff_shows_an_api_new_in_the_later_ledger_as_unchecked(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    old = api_coverage.build([_part({"relu": "function"}, ["torch.nn.functional.relu"])], {})
    new = api_coverage.build([_part({"relu": "function", "swiglu": "function"}, ["torch.nn.functional.relu"],
                                    version="2.14.0")], {})
    result = api_coverage.diff(old, new)
    assert result["new_unchecked"] == ["torch.nn.functional.swiglu"]
    assert result["removed"] == [] and result["no_longer_covered"] == []
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    args = ["--api", str(tmp_path / "old.json"), str(tmp_path / "new.json")]
    assert api_coverage.main([*args, "--fail-on-new"]) == 1
    out = capsys.readouterr().out
    assert "torch 2.13.0 -> torch 2.14.0" in out and "new and unchecked: 1\n  torch.nn.functional.swiglu" in out
    assert api_coverage.main(args) == 0


def test_coverage_refuses_a_file_that_is_no_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.json").write_text('{"claims": {}}')
    assert api_coverage.main(["--api", str(tmp_path / "r.json")]) == 2
    assert "not an API ledger" in capsys.readouterr().err


def test_namespace_of_picks_the_longest_namespace() -> None:
    ns = api_ledger.namespace_of("tf.data.Dataset.map")
    assert ns is not None and ns.name == "tf.data.Dataset"
    ns = api_ledger.namespace_of("tf.data.Dataset")
    assert ns is not None and ns.name == "tf.data"
    assert api_ledger.namespace_of("torch.nn.functional.relu").name == "torch.nn.functional"  # type: ignore[union-attr]
