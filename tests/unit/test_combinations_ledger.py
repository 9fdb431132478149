"""The combinations ledger (report/combinations.py): record tests register their table's
combinations (pairwise rows, second-order checks) and record the ones they checked; a report that
leaves one unvisited names it, and ``dlconform modes --check`` fails on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform.core import evidence
from pytest_dlconform.frameworks import HarnessError
from pytest_dlconform.report import combinations, merge, modes
from pytest_dlconform.report.document import Report


def _test(nodeid: str, verdict: str, entries: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"nodeid": nodeid, "claim": "modules.x", "verdict": verdict, "params": {}, "column": "torch/cpu",
            "evidence": {"checks": {}, "notes": {}, "modes": {"m": 1}, "combinations": entries}, **extra}


def _entry(record: str, registered: list[str], visited: dict[str, int], family: str = "torch.optim") -> dict[str, Any]:
    return {"family": family, "record": record, "registered": registered, "visited": visited}


def _report(tests: list[dict[str, Any]], **env: Any) -> dict[str, Any]:
    return {"schema": "pytest-dlconform/report", "schema_version": 1, "created": "2026-01-01T00:00:00Z",
            "duration_s": 1.0, "environment": {"profile": "ci", **env}, "exit_status": 0,
            "claims": {"modules.x": {"verdict": "holds", "claim": {"id": "modules.x", "modes": ["m"]}, "tests": tests}}}


def test_registers_and_visits_record_and_refuse_an_unregistered_combination() -> None:
    with evidence.recording() as rec:
        evidence.registers("torch.optim", "SGD", ["row 0", "row 1", "hvp"])
        evidence.visits("torch.optim", "SGD", "row 0")
        evidence.visits("torch.optim", "SGD", "row 0", "hvp")
        with pytest.raises(HarnessError, match=r"evidence.visits\('torch.optim', 'SGD', 'row 9'\): not a registered "
                                               r"combination of this record"):
            evidence.visits("torch.optim", "SGD", "row 9")
        with pytest.raises(HarnessError, match="not a registered combination"):
            evidence.visits("torch.optim", "Adam", "row 0")  # a record that registered nothing
    assert rec.as_dict()["combinations"] == [_entry("SGD", ["row 0", "row 1", "hvp"], {"hvp": 1, "row 0": 2})]
    evidence.registers("f", "r", ["a"])  # outside a recorder: a no-op, as for covers
    evidence.visits("f", "r", "zzz")


def test_the_ledger_lists_what_no_test_visited_and_counts_second_order() -> None:
    doc = _report([
        _test("t0", "holds", [_entry("SGD", ["row 0", "row 1", "hvp"], {"row 0": 1, "hvp": 1})]),
        # one test per row: each registers the whole table, the union visits it
        _test("t1", "violated", [_entry("Adam", ["row 0", "row 1"], {"row 0": 1})]),
        _test("t2", "holds", [_entry("Adam", ["row 0", "row 1"], {"row 1": 3})]),
        # a not-applicable or skipped test checked nothing: its entries are not counted
        _test("t3", "not_applicable", [_entry("Rprop", ["row 0"], {})]),
    ])
    led = combinations.ledger(doc)
    assert led is not None
    fam = led["families"]["torch.optim"]
    assert sorted(fam["records"]) == ["Adam", "SGD"]
    assert fam["records"]["Adam"]["visited"] == {"row 0": {"checks": 1, "violated": 1},
                                                 "row 1": {"checks": 3, "holds": 1}}
    assert fam["records"]["SGD"]["unvisited"] == ["row 1"]
    assert (led["registered"], led["visited"], fam["second_order"]) == (5, 4, 1)
    assert combinations.problems(led) == ["torch.optim: SGD: row 1"]
    assert combinations.ledger(_report([_test("t", "holds", [])])) is None


def test_check_command_fails_on_an_unvisited_combination(tmp_path: Path, capsys: Any) -> None:
    def write(visited: dict[str, int]) -> str:
        report = Report.from_dict(_report([_test("t0", "holds", [_entry("SGD", ["row 0", "hvp"], visited)])]))
        path = tmp_path / "r.json"
        path.write_text(report.replace(combinations=combinations.ledger(report)).to_json())
        return str(path)

    assert modes.main([write({"row 0": 1, "hvp": 1}), "--check"]) == 0
    assert "combinations ledger: 2 of 2 registered combinations of 1 records visited" in capsys.readouterr().out
    assert modes.main([write({"row 0": 1}), "--check"]) == 1
    out = capsys.readouterr()
    assert "torch.optim: 1 records, 1/2 combinations visited (1 second-order)" in out.out
    assert "1 registered record combinations no test visited" in out.err and "torch.optim: SGD: hvp" in out.err


def test_a_merged_report_visits_what_its_shards_visited() -> None:
    def shard(index: int, visited: dict[str, int]) -> Report:
        env = {"python": "3", "frameworks": {"torch": "2"}, "seed": 0, "suite_hash": "h", "settings": {},
               "shard": {"index": index, "count": 2, "tests": 1, "durations_sha256": "d"}}
        doc = _report([_test(f"t{index}", "holds", [_entry("Adam", ["row 0", "row 1"], visited)])], **env)
        return Report.from_dict(doc)

    s1, s2 = shard(1, {"row 0": 1}), shard(2, {"row 1": 1})
    assert combinations.problems(combinations.ledger(s1.to_dict())) == ["torch.optim: Adam: row 1"]
    merged = merge.merge([("s1", s1), ("s2", s2)])
    assert merged.combinations is not None and merged.combinations["unvisited"] == ()


def test_html_section_names_the_unvisited() -> None:
    doc = _report([_test("t0", "holds", [_entry("SGD", ["row 0", "hvp"], {"row 0": 1})])])
    page = combinations.html_section({"combinations": combinations.ledger(doc)})
    assert "1 of 2 registered combinations visited" in page and "SGD: hvp" in page


def test_a_record_stopped_by_a_known_divergence_is_named_but_not_a_gap(tmp_path: Path, capsys: Any) -> None:
    pinned = _test("t0", "violated", [_entry("LazyInstanceNorm1d", ["gradcheck", "hvp"], {})],
                   divergence="entry 7 (modules.x)", expected="a known bug")
    report = Report.from_dict(_report([pinned, _test("t1", "holds", [_entry("SGD", ["row 0"], {"row 0": 1})])]))
    led = combinations.ledger(report.to_dict())
    assert led is not None and led["unvisited"] == [] and combinations.problems(led) == []
    assert [p["combination"] for p in led["pinned"]] == ["gradcheck", "hvp"]
    path = tmp_path / "r.json"
    path.write_text(report.replace(combinations=led).to_json())
    assert modes.main([str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert "2 behind a known divergence" in out
    assert "LazyInstanceNorm1d: hvp (entry 7 (modules.x))" in out


def test_a_not_applicable_row_test_visits_its_own_row_as_not_applicable() -> None:
    """One test per row: a test that reports itself not applicable (with its reason) is what the
    run found for its own row, not a gap; its other registered rows are the other tests' business."""
    with evidence.recording() as rec:
        evidence.registers("keras.optimizers", "Muon", ["row 0", "row 1"], own="row 1")
    entry = rec.as_dict()["combinations"][0]
    assert entry["own"] == "row 1"
    doc = _report([_test("t0", "holds", [_entry("Muon", ["row 0", "row 1"], {"row 0": 1}, "keras.optimizers")]),
                   _test("t1", "not applicable", [entry])])
    led = combinations.ledger(doc)
    assert led is not None and led["unvisited"] == []
    assert led["families"]["keras.optimizers"]["records"]["Muon"]["visited"]["row 1"] == {"checks": 0,
                                                                                          "not applicable": 1}
    # without "own", a not-applicable test's entries say nothing about any row
    doc = _report([_test("t0", "holds", [_entry("Muon", ["row 0", "row 1"], {"row 0": 1}, "keras.optimizers")]),
                   _test("t1", "not applicable", [_entry("Muon", ["row 0", "row 1"], {}, "keras.optimizers")])])
    assert combinations.problems(combinations.ledger(doc)) == ["keras.optimizers: Muon: row 1"]


def test_a_pinned_row_excuses_its_own_row_only() -> None:
    pinned = _test("t0", "violated", [{**_entry("CTC", ["row 0", "row 1", "row 2"], {}), "own": "row 0"}],
                   divergence="entry 51 (modules.x)", expected="a known bug")
    held = _test("t1", "holds", [{**_entry("CTC", ["row 0", "row 1", "row 2"], {"row 1": 1}), "own": "row 1"}])
    led = combinations.ledger(_report([pinned, held]))  # row 2's test did not run: a gap
    assert led is not None
    assert [p["combination"] for p in led["pinned"]] == ["row 0"]
    assert combinations.problems(led) == ["torch.optim: CTC: row 2"]
