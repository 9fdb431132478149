"""dlconform merge: shard reports join into the report of one run, or a one-line error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform import cli
from pytest_dlconform.report import merge
from pytest_dlconform.report.document import Report

ENTRY = {"claim": "data.a", "reason": "a known bug", "expires": "2099-01-01", "framework": None, "version": None,
         "versions": {}, "device": None, "tests_pinned": ["data/t.py::t1"], "symptom": "ValueError",
         "where": "k.toml, entry 1", "key": "entry 1 (data.a)", "script": None, "occurs_with": {}, "reference": None}


def _test(name: str, verdict: str, known: bool = False) -> dict[str, Any]:
    test = {"nodeid": f"suites/data/t.py::{name}", "claim": "data.a", "params": {"framework": "torch", "device": "cpu"},
            "column": "torch/cpu", "verdict": verdict, "duration_s": 1.0}
    if known:
        test.update(expected="a known bug", divergence="entry 1 (data.a)")
    return test


def _shard(index: int, count: int, tests: list[dict[str, Any]], status: str, **env: Any) -> Report:
    environment = {"python": "3.11.7", "frameworks": {"torch": "2.13.0"}, "profile": "ci", "seed": 0,
                   "suite_hash": "abc", "settings": {"claims": ["data.*"], "divergences": f"/m{index}/k.toml"},
                   "shard": {"index": index, "count": count, "tests": len(tests), "durations_sha256": "d"}, **env}
    claims = {"data.a": {"verdict": "holds", "claim": {"id": "data.a"}, "tests": tests}} if tests else {}
    return Report.from_dict({"schema": "pytest-dlconform/report", "schema_version": 1, "created": "2026-01-02T00:00:00Z",
                             "duration_s": 10.0 * index, "environment": environment, "claims": claims, "exit_status": 0,
                             "divergences": [{**ENTRY, "status": status, "tests": [], "why": ""}]})


def test_an_entry_unmatched_in_one_shard_and_applied_in_another_is_applied() -> None:
    merged = merge.merge([("s2", _shard(2, 3, [_test("t2", "holds")], "unmatched")),
                          ("s1", _shard(1, 3, [_test("t1", "violated", known=True)], "applied")),
                          ("s3", _shard(3, 3, [], "not selected"))])
    (status,) = merged.divergences
    assert status["status"] == "applied" and list(status["tests"]) == ["suites/data/t.py::t1"]
    claim = merged.claims["data.a"]
    assert [t.nodeid for t in claim.tests] == ["suites/data/t.py::t1", "suites/data/t.py::t2"]
    assert claim.verdict == "violated" and claim.expected == "a known bug"
    assert merged.counts["tests"]["violated"] == 1 and merged.counts["expected"]["tests"] == 1
    assert merged.environment["shard"]["merged"] == 3 and merged.duration_s == 30.0


def test_an_entry_whose_tests_all_held_is_unmatched_over_the_union() -> None:
    merged = merge.merge([("s1", _shard(1, 2, [_test("t1", "holds")], "unmatched")),
                          ("s2", _shard(2, 2, [_test("t2", "holds")], "not selected"))])
    assert merged.divergences[0]["status"] == "unmatched"
    assert merged.divergences[0]["why"] == "its 1 test(s) ran: holds, none with ValueError"


@pytest.mark.parametrize(("shards", "message"), [
    ([(1, 3), (2, 3)], "shard(s) 3/3 missing"),
    ([(1, 2), (1, 2), (2, 2)], "shard 1/2 given twice"),
    ([(1, 2), (2, 3)], "shards of different runs"),
])
def test_shards_that_are_not_one_run_are_refused(shards: list[tuple[int, int]], message: str) -> None:
    reports = [(f"s{i}.json", _shard(i, n, [_test(f"t{i}{k}", "holds")], "applied")) for k, (i, n) in enumerate(shards)]
    with pytest.raises(merge.MergeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        merge.merge(reports)


def test_shards_of_another_stack_are_refused_naming_the_difference() -> None:
    other = _shard(2, 2, [_test("t2", "holds")], "applied", frameworks={"torch": "2.14.1"})
    with pytest.raises(merge.MergeError, match=r"s2 ran another stack than s1: frameworks.torch '2.13.0' vs '2.14.1'"):
        merge.merge([("s1", _shard(1, 2, [_test("t1", "holds")], "applied")), ("s2", other)])


def test_a_test_in_two_shards_and_a_report_without_a_shard_are_refused() -> None:
    with pytest.raises(merge.MergeError, match="is in two shards"):
        merge.merge([("s1", _shard(1, 2, [_test("t1", "holds")], "applied")),
                     ("s2", _shard(2, 2, [_test("t1", "holds")], "applied"))])
    plain = Report.from_dict({**_shard(1, 1, [], "applied").to_dict(), "environment": {"python": "3.11.7"}})
    with pytest.raises(merge.MergeError, match=r"p\.json is not a shard report"):
        merge.merge([("p.json", plain)])


def test_the_command_exits_2_with_one_line_on_a_missing_shard(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "s1.json"
    path.write_text(_shard(1, 2, [_test("t1", "holds")], "applied").to_json())
    assert cli.main(["merge", str(path), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shard(s) 2/2 missing" in err


def test_the_command_writes_the_merged_report_and_page(tmp_path: Path) -> None:
    paths = []
    for i in (1, 2):
        paths.append(tmp_path / f"s{i}.json")
        paths[-1].write_text(_shard(i, 2, [_test(f"t{i}", "holds")], "unmatched").to_json())
    out, page = tmp_path / "m.json", tmp_path / "m.html"
    assert cli.main(["merge", *map(str, paths), "-o", str(out), "--html", str(page)]) == 0
    doc = json.loads(out.read_text())
    assert doc["counts"]["tests"]["holds"] == 2 and page.read_text().startswith("<!")
