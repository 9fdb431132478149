"""Shards: ``--dl-shard=I/N`` runs part I of N of a collection, balanced by recorded durations.

A sharded run collects everything, then keeps the tests of shard I (the others are reported
to pytest as deselected). The plan is a pure function of the collection and the durations
file, so the N jobs of a CI matrix, each collecting the same suites with the same settings,
agree on it without talking to each other: every test lands in exactly one shard.

- Keys: a test is known by its node id from the area folder on
  (:func:`pytest_dlconform.report.compare.normalized_nodeid`), the same from a checkout and from an
  installed wheel, as in the reports.
- Durations: :data:`DURATIONS_FILE` (shipped; ``dlconform durations REPORT... -o FILE``
  refreshes it from CI reports) holds each known test's seconds by claim. A test it does not
  know is estimated by the median of its claim's known tests, else of its area's, else of
  all of them.
- Groups: tests that share expensive work whose result depends on which of them ran (the
  compiled-backward suite compiles one batch per chunk of the ops the run selected, and the
  examples an op gets depend on the chunk's other ops) carry ``@pytest.mark.dl_shard_group``
  and stay in one shard.
- Plan: greedy longest-processing-time: groups by decreasing seconds (ties by key) each into
  the bin with the least load (ties by index), so the longest shard is within 4/3 of the best.

The report records the shard (index, count, how many tests, a sha256 of their keys and of the
durations file) in ``environment.shard``; ``dlconform merge`` (:mod:`..report.merge`) joins the N
reports back into one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .settings import parse_shard as parse  # noqa: F401 - the --dl-shard value, validated with the settings

DURATIONS_SCHEMA = "pytest-dlconform/durations"
DURATIONS_VERSION = 1
DURATIONS_FILE = "durations.json"  # in the package
MARKER = "dl_shard_group"
ENV_KEY = "shard"  # the report's environment entry
DEFAULT_SECONDS = 1.0  # no durations at all


def test_key(nodeid: str) -> str:
    """The location-independent key of a test (its node id from the area folder on)."""
    from ..report.compare import normalized_nodeid

    return normalized_nodeid(nodeid, None)


# ------------------------------------------------------------------ durations


@dataclass(frozen=True)
class Durations:
    """Known seconds per test key (with its claim), and the estimate for an unknown test."""

    seconds: Mapping[str, float]
    claim_of: Mapping[str, str]
    digest: str = ""

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], digest: str = "") -> Durations:
        seconds: dict[str, float] = {}
        claim_of: dict[str, str] = {}
        for claim, tests in (doc.get("claims") or {}).items():
            for key, value in tests.items():
                seconds[key], claim_of[key] = float(value), claim
        return cls(seconds, claim_of, digest)

    def estimator(self) -> Callable[[str, str | None], float]:
        """``estimate(key, claim)``: the recorded seconds, else the median of the claim's known
        tests, else of its area's (the claim id's first part), else of all known tests."""
        by_claim: dict[str, list[float]] = {}
        by_area: dict[str, list[float]] = {}
        for key, value in self.seconds.items():
            claim = self.claim_of.get(key, "")
            by_claim.setdefault(claim, []).append(value)
            by_area.setdefault(claim.split(".", 1)[0], []).append(value)
        medians = {c: statistics.median(v) for c, v in by_claim.items()}
        areas = {a: statistics.median(v) for a, v in by_area.items()}
        overall = statistics.median(self.seconds.values()) if self.seconds else DEFAULT_SECONDS

        def estimate(key: str, claim: str | None) -> float:
            if key in self.seconds:
                return self.seconds[key]
            if claim and claim in medians:
                return medians[claim]
            if claim and claim.split(".", 1)[0] in areas:
                return areas[claim.split(".", 1)[0]]
            return overall

        return estimate


def packaged_durations_path() -> str:
    from importlib import resources

    return str(resources.files("pytest_dlconform.run") / DURATIONS_FILE)


def load_durations(path: str | None = None) -> Durations:
    """The durations file (default: the packaged one); a missing or unreadable file is no durations."""
    path = path or packaged_durations_path()
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        doc = json.loads(raw)
    except (OSError, ValueError):
        return Durations({}, {}, "")
    if not isinstance(doc, dict) or doc.get("schema") != DURATIONS_SCHEMA:
        return Durations({}, {}, "")
    return Durations.from_document(doc, hashlib.sha256(raw).hexdigest())


def durations_document(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The durations file from reports: each test's median ``duration_s`` over the reports
    that ran it, by claim, rounded to milliseconds (keys sorted: the file diffs well)."""
    seen: dict[str, list[float]] = {}
    claim_of: dict[str, str] = {}
    for report in reports:
        for claim in report["claims"].values():
            for test in claim["tests"]:
                key = test_key(str(test["nodeid"]))
                seen.setdefault(key, []).append(float(test.get("duration_s") or 0.0))
                claim_of[key] = str(test["claim"])
    claims: dict[str, dict[str, float]] = {}
    for key in sorted(seen):
        claims.setdefault(claim_of[key], {})[key] = round(statistics.median(seen[key]), 3)
    return {"schema": DURATIONS_SCHEMA, "version": DURATIONS_VERSION, "tests": len(seen),
            "seconds": round(sum(sum(c.values()) for c in claims.values()), 1),
            "claims": dict(sorted(claims.items()))}


# ------------------------------------------------------------------ the plan (pure)


@dataclass(frozen=True)
class Job:
    """What the planner places: one group of tests that must share a shard."""

    key: str  # the group's key (its first test key, or module::group); breaks ties
    seconds: float
    tests: tuple[str, ...]


def plan(jobs: Iterable[Job], count: int) -> list[list[Job]]:
    """Greedy longest-processing-time into ``count`` bins: the longest job first (ties by key),
    each into the least loaded bin (ties by index). Deterministic; every job in one bin."""
    bins: list[list[Job]] = [[] for _ in range(count)]
    loads = [0.0] * count
    for job in sorted(jobs, key=lambda j: (-j.seconds, j.key)):
        target = min(range(count), key=lambda i: (loads[i], i))
        bins[target].append(job)
        loads[target] += job.seconds
    return bins


def jobs_of(tests: Iterable[tuple[str, str | None, str | None]], estimate: Callable[[str, str | None], float]) -> list[Job]:
    """Jobs from (test key, claim, group or None) triples: a test without a group is a job of its own."""
    groups: dict[str, list[tuple[str, float]]] = {}
    for key, claim, group in tests:
        groups.setdefault(group if group is not None else f"test:{key}", []).append((key, estimate(key, claim)))
    return [Job(min(k for k, _ in members) if name.startswith("test:") else name, sum(s for _, s in members),
                tuple(k for k, _ in members)) for name, members in groups.items()]


# ------------------------------------------------------------------ pytest side


def group_of(item: Any) -> str | None:
    """The ``dl_shard_group`` key of a pytest item (namespaced by its file), or None."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    by = marker.kwargs.get("by")
    key = by(dict(getattr(getattr(item, "callspec", None), "params", {}) or {})) if by else (
        marker.args[0] if marker.args else marker.kwargs.get("key"))
    if key is None:
        return None
    return f"{test_key(item.nodeid).partition('::')[0]}::{key}"


def _claim_of(item: Any) -> str | None:
    marker = item.get_closest_marker("claim")
    return str(marker.args[0]) if marker and marker.args else None


def keep_shard(config: Any, items: list[Any], shard: tuple[int, int], durations: Durations | None = None) -> None:
    """Keep shard ``shard`` = (I, N) of ``items``; the others are deselected (pytest_deselected)."""
    index, count = shard
    durations = durations or load_durations()
    by_key = {test_key(item.nodeid): item for item in items}
    jobs = jobs_of(((k, _claim_of(i), group_of(i)) for k, i in by_key.items()), durations.estimator())
    mine = {key for job in plan(jobs, count)[index - 1] for key in job.tests}
    keep = [item for item in items if test_key(item.nodeid) in mine]
    dropped = [item for item in items if test_key(item.nodeid) not in mine]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def keys_digest(keys: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()


def record(report: Any, shard: tuple[int, int] | None) -> Any:
    """The report with ``environment.shard`` (index, count, tests, sha256 of their keys and of
    the durations file the plan used); unchanged when the run was not sharded."""
    if shard is None:
        return report
    keys = [test_key(str(t["nodeid"])) for t in report.tests()]
    entry = {"index": shard[0], "count": shard[1], "tests": len(keys), "keys_sha256": keys_digest(keys),
             "durations_sha256": load_durations().digest}
    return report.replace(environment={**report.environment, ENV_KEY: entry})


# ------------------------------------------------------------------ dlconform durations


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dlconform durations",
                                description="write the durations file that --dl-shard balances by, from JSON reports "
                                            "(each test's median duration over the reports that ran it)")
    p.add_argument("reports", nargs="+", metavar="REPORT", help="JSON reports (--dl-report, or merged ones)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help=f"the file to write (the packaged one: src/pytest_dlconform/run/{DURATIONS_FILE})")
    args = p.parse_args(argv)
    from ..report import compare, results

    try:
        docs = [compare.load(path, "report") for path in args.reports]
    except compare.UnusableReport as exc:
        sys.stderr.write(f"dlconform durations: {exc}\n")
        return compare.EXIT_UNUSABLE
    doc = durations_document(docs)
    try:
        results.write_atomic(args.output, json.dumps(doc, indent=1, sort_keys=False) + "\n")
    except OSError as exc:
        sys.stderr.write(f"dlconform durations: cannot write {args.output}: {exc}\n")
        return compare.EXIT_UNUSABLE
    sys.stdout.write(f"{args.output}: {doc['tests']} tests, {doc['seconds']} s from {len(docs)} report(s)\n")
    return 0
