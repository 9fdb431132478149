"""The report is a frozen, typed value: built once, transformed by pure functions, and
its JSON (schema 1) round-trips key for key."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_dlconform.report import results
from pytest_dlconform.report.document import Report, TestRecord, freeze

TF = {"framework": "tf", "device": "cpu"}


def _report() -> Report:
    collector = results.Collector()
    ev = {"checks": {"err": {"observed": 0.5, "tolerance": 1.0, "margin": 0.5, "count": 3, "shape": [2, 3]}}, "notes": {"n": 1}}
    collector.tests["a::1"] = results.TestResult("a::1", "autodiff.tape.watch", dict(TF), evidence=ev)
    collector.tests["b::1"] = results.TestResult("b::1", "autodiff.tape.nested", dict(TF), verdict=results.VIOLATED,
                                                 reason="AssertionError: no")
    return results.report_document(collector, {"python": "3.11", "settings": {"frameworks": ["tensorflow"]}},
                                   {"autodiff.tape.watch": {"id": "autodiff.tape.watch"}})


def test_records_are_frozen_all_the_way_down() -> None:
    report = _report()
    test = report["claims"]["autodiff.tape.watch"]["tests"][0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        test.verdict = "violated"  # type: ignore[misc]
    with pytest.raises(TypeError):
        test["verdict"] = "violated"  # type: ignore[index]
    with pytest.raises(TypeError):
        test["evidence"]["checks"]["err"]["margin"] = 9  # nested JSON is a read-only view
    assert test["evidence"]["checks"]["err"]["shape"] == (2, 3)


def test_json_round_trips_key_for_key_and_mapping_access_reads_the_fields() -> None:
    report = _report()
    doc = json.loads(report.to_json())
    assert set(doc) == {"schema", "schema_version", "created", "duration_s", "environment", "claims", "divergences",
                        "counts", "columns", "interrupted", "exit_status"}
    test = doc["claims"]["autodiff.tape.watch"]["tests"][0]
    assert set(test) == {"nodeid", "claim", "params", "column", "verdict", "reason", "evidence", "repro", "duration_s",
                         "expected", "divergence", "observed"}  # "script" only once attached, "baseline" only with one
    assert Report.from_dict(doc).to_dict() == doc
    assert dict(report["claims"]["autodiff.tape.watch"]["tests"][0]) .keys() == test.keys()
    assert report.claims["autodiff.tape.nested"].verdict == report["claims"]["autodiff.tape.nested"]["verdict"] == "violated"


def test_unknown_keys_of_a_newer_writer_survive_a_round_trip() -> None:
    doc = json.loads(_report().to_json())
    doc["future"] = {"x": [1]}
    doc["claims"]["autodiff.tape.nested"]["tests"][0]["future_field"] = "kept"
    again = Report.from_dict(doc)
    assert again["future"] == {"x": (1,)} and again.to_dict() == doc


def test_transformations_derive_new_reports_and_leave_the_old_one() -> None:
    report = _report()
    before = report.to_dict()
    marked = report.map_tests(lambda t: dataclasses.replace(t, expected="known") if t.verdict == results.VIOLATED else t)
    counted = results.with_counts(marked)
    assert report.to_dict() == before
    assert counted["counts"]["expected"]["tests"] == 1 and report["counts"]["expected"]["tests"] == 0
    assert isinstance(next(counted.tests()), TestRecord)
    assert counted.replace(baseline={"path": "b.json"})["baseline"]["path"] == "b.json"
    assert "baseline" not in counted
    assert freeze({"a": [1, {"b": 2}]}) == {"a": (1, {"b": 2})}
