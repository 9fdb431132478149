"""--dl-shard end to end: a small claim set run whole and as 2 shards, merged: the same
verdict for every test, and compare finds no change; the compiled-backward suite's chunks
stay in one shard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_dlconform.report import compare, merge, modes
from pytest_dlconform.run import shards

ROOT = Path(__file__).resolve().parents[2]
# Cheap claims (about 30 tests, 15 s here) with documented modes, a known divergence applied
# in one shard (forward-mode-accuracy) and entries no shard selects.
CLAIMS = ("execution.function.eager-equivalence,execution.function.python-args,execution.function.retrace-on-new-shape,"
          "autodiff.gradient.forward-mode-accuracy,autodiff.tape.*,modules.torch.module,precision.torch.grad-scaler")


def _run(tmp_path: Path, name: str, *args: str) -> Any:
    report = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "pytest_dlconform.cli", "run", "-n", "0", "-q", "-p", "no:randomly",
           f"--dl-claims={CLAIMS}", f"--dl-report={report}", *args]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert report.exists(), f"no report from {' '.join(cmd)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return compare.load(str(report))


def _verdicts(doc: Any) -> dict[str, tuple[Any, ...]]:
    return {shards.test_key(t["nodeid"]): (t["verdict"], t.get("expected"), t.get("divergence")) for t in doc.tests()}


def test_merged_shards_give_the_verdicts_of_one_run(tmp_path: Path) -> None:
    """Two shards (each run costs about 12 s of imports and collection before its tests: a
    third added that, not a check; the planner's N-way split is tests/unit's)."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    whole = _run(tmp_path, "whole")
    parts = [(f"s{i}", _run(tmp_path, f"s{i}", f"--dl-shard={i}/2")) for i in (1, 2)]
    assert all(p.environment["shard"]["count"] == 2 for _, p in parts)
    keys = [set(_verdicts(p)) for _, p in parts]
    assert all(keys) and not keys[0] & keys[1]
    merged = merge.merge(parts)
    assert _verdicts(merged) == _verdicts(whole)
    assert merged.counts == whole.counts
    assert [dict(d) for d in merged.divergences] == [dict(d) for d in whole.divergences]
    assert any(d["status"] == "applied" for d in merged.divergences)
    assert merged.get("modes") == whole.get("modes") and not modes.problems(merged.get("modes"))
    result = compare.compare(whole, merged)
    assert result.exit_code == 0 and not result.regressed and not result.fixed
    # Framework warnings are counted per process (TensorFlow warns of retracing after the process
    # traced many functions), so a test's count may depend on what ran before it, as under -n 2.
    assert all(str(c.detail).startswith("warnings:") for c in result.drift), result.drift


def test_the_tests_of_a_compiled_chunk_are_planned_into_one_shard(tmp_path: Path) -> None:
    suite = "suites/execution/test_compiled_backward.py"
    found: dict[str, list[str]] = {}
    for i in (1, 2, 3, 4):
        out = subprocess.run([sys.executable, "-m", "pytest", suite, "-p", "no:cacheprovider", "-p", "no:xdist",
                              "--collect-only", "-q", f"--dl-shard={i}/4"], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
        found[str(i)] = [line for line in out.stdout.splitlines() if "::" in line]
        assert found[str(i)], out.stdout[-2000:] + out.stderr[-2000:]
    shard_of = {line: i for i, lines in found.items() for line in lines}
    assert len(shard_of) == sum(len(v) for v in found.values())  # disjoint
    chunks: dict[str, set[str]] = {}
    for line in shard_of:
        params = line.split("[", 1)[1].rstrip("]").split("-")
        test = line.split("::")[1].split("[")[0]
        if "apart" in test:
            continue
        device, *rest = params
        mode, op = (rest[0], "-".join(rest[1:])) if "inductor" not in test else ("inductor", "-".join(rest))
        chunks.setdefault(json.dumps([test, device, mode, _chunk(mode, op)]), set()).add(shard_of[line])
    assert chunks and all(len(s) == 1 for s in chunks.values()), {k: v for k, v in chunks.items() if len(v) > 1}


def _chunk(mode: str, op: str) -> int:
    import importlib

    mod = importlib.import_module("pytest_dlconform.suites.execution.test_compiled_backward")
    return next(i for i, c in enumerate(mod.CHUNKS[mode]) if op in c)
