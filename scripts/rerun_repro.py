#!/usr/bin/env python3
"""Run one reproduce line of a ``dlconform mutate`` run verbatim; check that it fails the same way.

    python scripts/rerun_repro.py MUTATE_OUT [--timeout SECONDS]

From ``MUTATE_OUT/mutate.json`` the killed mutants; from their reports the violated test
(no known divergence) that took least time; its reproduce line (the report's ``repro``,
first line: what the terminal's "dlconform reproduction" section prints) runs with
``bash -c`` from a new empty folder, under the same mutant (mutate's start-up folder
``MUTATE_OUT/site`` first on PYTHONPATH, ``DLCONFORM_MUTANT``), with ``DLCONFORM_REPORT``
set to a report of its own. It must run exactly one claim test, the same one (claim,
parameters, seed: the seed comes from the test's identity), violated with the same
exception types.

Exit 0: it did; 1: it did not (the difference is printed); 2: nothing to check.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def _tests(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for entry in (doc.get("claims") or {}).values() for t in entry.get("tests", [])]


def _types(test: dict[str, Any]) -> list[str]:
    return list(((test.get("evidence") or {}).get("exception") or {}).get("types") or [])


def candidates(out: Path) -> list[tuple[float, str, dict[str, Any]]]:
    """(duration, mutant, test) of every violated, unexplained test of a killed mutant, cheapest first."""
    summary = json.loads((out / "mutate.json").read_text())
    found = []
    for m in summary.get("mutants", []):
        if m.get("verdict") != "killed":
            continue
        try:
            doc = json.loads(Path(m["report"]).read_text())
        except (OSError, ValueError):
            continue
        for t in _tests(doc):
            if t.get("verdict") == "violated" and not t.get("expected") and t.get("repro"):
                found.append((float(t.get("duration_s") or 0.0), str(m["mutant"]), t))
    return sorted(found, key=lambda c: c[0])


def same_failure(original: dict[str, Any], rerun: dict[str, Any]) -> list[str]:
    """What differs between the test the line names and the tests the line ran (empty: nothing)."""
    tests = _tests(rerun)
    if len(tests) != 1:
        return [f"the line ran {len(tests)} claim tests, not 1: {[t.get('nodeid') for t in tests]}"]
    (t,) = tests
    problems = [f"{key}: {original.get(key)!r} then {t.get(key)!r}"
                for key in ("claim", "params", "seed") if original.get(key) != t.get(key)]
    if t.get("verdict") != "violated":
        problems.append(f"verdict: violated then {t.get('verdict')!r} ({t.get('reason', '')[:300]})")
    if _types(original) != _types(t):
        problems.append(f"exception: {_types(original)} then {_types(t)}")
    return problems


def rerun(line: str, mutant: str, site_folder: Path, timeout: float) -> tuple[int, str, dict[str, Any] | None]:
    """Run ``line`` with bash from an empty folder under ``mutant``: exit code, output, its report."""
    from pytest_dlconform.run.mutants import site

    with tempfile.TemporaryDirectory(prefix="dlconform-rerun-") as tmp:
        empty, report = Path(tmp) / "empty", Path(tmp) / "rerun.json"
        empty.mkdir()
        env = site.environment(site_folder, mutant, None)
        env["DLCONFORM_REPORT"] = str(report)
        proc = subprocess.run(["bash", "-c", line], cwd=empty, env=env, capture_output=True, text=True, timeout=timeout)
        doc = json.loads(report.read_text()) if report.exists() else None
    return proc.returncode, proc.stdout + proc.stderr, doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("out", type=Path, help="the --out folder of a `dlconform mutate` run")
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    args.out = args.out.resolve()  # the rerun starts from an empty folder: a relative path would not reach the mutant's site
    found = candidates(args.out)
    if not found:
        print(f"rerun_repro: no violated test of a killed mutant in {args.out / 'mutate.json'}", file=sys.stderr)
        return 2
    _, mutant, test = found[0]
    line = str(test["repro"]).splitlines()[0]
    print(f"rerun_repro: DLCONFORM_MUTANT={mutant} (from an empty folder) {line}", flush=True)
    code, output, doc = rerun(line, mutant, args.out / "site", args.timeout)
    problems = ["no report: the line did not run a dlconform session"] if doc is None else same_failure(test, doc)
    if code != 1:
        problems.append(f"pytest exit {code}, not 1 (tests failed)")
    if problems:
        print(output[-6000:], file=sys.stderr)
        print("rerun_repro: the reproduce line does not reproduce: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"rerun_repro: reproduced {test['claim']} {test.get('params')}: violated, {_types(test) or 'no exception'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
