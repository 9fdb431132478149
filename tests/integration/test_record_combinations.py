"""The record suites register their tables' combinations (pairwise rows, second-order checks) and
visit every one in a ci run; a run that stops half-way through a record's table leaves the rest
unvisited, and ``dlconform modes --check`` fails on it (report/combinations.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlconform.core import evidence
from pytest_dlconform.report import combinations, modes
from pytest_dlconform.report.document import Report

torch = pytest.importorskip("torch")

from suites.data import test_torch_data_utilities as data_suite  # noqa: E402
from suites.modules import test_torch_lr_schedulers as sched_suite  # noqa: E402
from suites.modules import test_torch_optimizers as optim_suite  # noqa: E402


def _report(recorders: list[evidence.Recorder], verdict: str = "holds") -> dict[str, Any]:
    tests = [{"nodeid": f"t{i}", "claim": "modules.x", "verdict": verdict, "params": {}, "column": "torch/cpu",
              "evidence": r.as_dict()} for i, r in enumerate(recorders)]
    return {"schema": "pytest-dlconform/report", "schema_version": 1, "created": "2026-01-01T00:00:00Z",
            "duration_s": 1.0, "environment": {"profile": "ci"}, "exit_status": 0,
            "claims": {"modules.x": {"verdict": verdict, "claim": {"id": "modules.x"}, "tests": tests}}}


def test_a_scheduler_test_visits_every_row_of_its_covering_array() -> None:
    with evidence.recording() as rec:
        sched_suite.test_cyclic_lr_follows_the_triangular_policy_and_its_scalings(torch)
    led = combinations.ledger(_report([rec]))
    assert led is not None
    cyclic = led["families"][sched_suite.FAMILY]["records"]["CyclicLR"]
    assert len(cyclic["registered"]) == len(sched_suite.covering_array(sched_suite.CYCLIC)) > 4
    assert not cyclic["unvisited"] and not led["unvisited"]


def test_a_table_cut_short_by_a_failing_row_leaves_the_rest_unvisited(monkeypatch: Any, tmp_path: Any,
                                                                     capsys: Any) -> None:
    """A CyclicLR whose exp_range mode ignores gamma: the first exp_range row fails, and every row
    from it on is unvisited in the ledger, which modes --check names."""
    real = torch.optim.lr_scheduler.CyclicLR

    class IgnoresGamma(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["gamma"] = 1.0
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(torch.optim.lr_scheduler, "CyclicLR", IgnoresGamma)
    with evidence.recording() as rec, pytest.raises(AssertionError, match="exp_range"):
        sched_suite.test_cyclic_lr_follows_the_triangular_policy_and_its_scalings(torch)
    report = Report.from_dict(_report([rec], verdict="violated"))
    led = combinations.ledger(report.to_dict())
    assert led is not None
    rows = sched_suite.covering_array(sched_suite.CYCLIC)
    first_bad = next(i for i, r in enumerate(rows) if r["mode"] == "exp_range" and r["gamma"] != 1.0)
    missing = led["families"][sched_suite.FAMILY]["records"]["CyclicLR"]["unvisited"]
    assert missing == [sched_suite._label("CyclicLR", r) for r in rows[first_bad:]]
    path = tmp_path / "r.json"
    path.write_text(report.replace(combinations=led).to_json())
    assert modes.main([str(path), "--check"]) == 1
    assert f"{len(missing)} registered record combinations no test visited" in capsys.readouterr().err


def test_per_row_tests_register_the_whole_table_so_a_deselected_row_shows() -> None:
    """The optimizer and DataLoader suites run one test per pairwise row: each registers its
    record's whole table, so a run that skips one row's test reports that row unvisited."""
    name = "Adam"
    rows = optim_suite.COVERING[name]
    recorders = []
    for row in rows[1:]:  # the first row's test "deselected"
        with evidence.recording() as rec:
            optim_suite.test_torch_optimizer_follows_its_documented_update_rule(torch, name, row)
        recorders.append(rec)
    led = combinations.ledger(_report(recorders))
    assert led is not None
    assert combinations.problems(led) == [f"torch.optim: {name}: {optim_suite._case_id(name, rows[0])}"]
    assert [optim_suite._case_id(name, r) for r in rows] == [optim_suite._case_id(n, r) for n, r in optim_suite.CASES
                                                            if n == name]
    labels = [data_suite._case_label(c) for c in data_suite.LOADER_CASES]
    assert len(set(labels)) == len(labels), "two DataLoader rows share a label: the ledger could not tell them apart"
