"""``dlconform merge``: the N shard reports of a ``--dl-shard`` run joined into one report.

The merged report is what one unsharded run of the same collection would have written: the
claims' tests are the union of the shards' (each claim's verdict, columns and margin computed
again), the counts recomputed (:func:`results.with_counts`), each known divergence's status
decided over the union as :func:`divergences.apply` decides it (an entry unmatched in one
shard and applied in another is applied), and the coverage and modes ledgers computed over
the union as the run's end computes them (``run/session/outcome.py``). So ``compare`` and
``modes --check`` read it like any report.

The shards must be one run: the same number of shards, each index once, none missing, the
same stack (framework and library versions, Python, suites, settings but the shard, the same
known-divergences entries and durations file). Anything else is a one-line
:class:`MergeError` (exit status 2, like ``compare``'s unusable input).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import re
import sys
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..run.shards import ENV_KEY, test_key
from . import results
from .document import ClaimRecord, Report, TestRecord, thaw

EXIT_UNUSABLE = 2
#: Settings that name files on the machine that ran a shard: compared by what they hold.
_PATH_SETTINGS = ("divergences", "examples_db")
#: Environment entries that must agree between the shards (the stack, not the machine).
_STACK = ("python", "implementation", "frameworks", "profile", "seed", "suite_hash")


class MergeError(ValueError):
    """Shard reports that do not make one run; the message is one line."""


def _shard_of(report: Report, path: str) -> tuple[int, int]:
    entry = report.environment.get(ENV_KEY)
    if not isinstance(entry, Mapping) or not isinstance(entry.get("index"), int):
        raise MergeError(f"{path} is not a shard report (its environment has no shard: run with --dl-shard=I/N)")
    return int(entry["index"]), int(entry["count"])


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            out += _differences(x, y, f"{prefix}{key}.")
        elif thaw(x) != thaw(y):
            out.append(f"{prefix}{key} {thaw(x)!r} vs {thaw(y)!r}")
    return out


def _stack(report: Report) -> dict[str, Any]:
    env = report.environment
    stack = {key: env.get(key) for key in _STACK}
    settings = dict(env.get("settings") or {})
    for key in _PATH_SETTINGS:
        settings.pop(key, None)
    stack["settings"] = settings
    stack["durations"] = (env.get(ENV_KEY) or {}).get("durations_sha256")
    stack["divergences"] = [(d.get("key"), d.get("claim"), thaw(d.get("tests_pinned")), d.get("expires"))
                            for d in report.divergences]
    return stack


def check(shards: Sequence[tuple[str, Report]]) -> list[tuple[str, Report]]:
    """The shards ordered by index; MergeError unless they are all N shards of one run."""
    if not shards:
        raise MergeError("no shard reports given")
    found: dict[int, str] = {}
    counts: dict[int, str] = {}
    for path, report in shards:
        index, count = _shard_of(report, path)
        counts.setdefault(count, path)
        if index in found:
            raise MergeError(f"shard {index}/{count} given twice: {found[index]} and {path}")
        found[index] = path
    if len(counts) > 1:
        (n1, p1), (n2, p2) = sorted(counts.items())[:2]
        raise MergeError(f"shards of different runs: {p1} is one of {n1} shards, {p2} one of {n2}")
    (count,) = counts
    missing = [i for i in range(1, count + 1) if i not in found]
    if missing:
        raise MergeError(f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing: pass all {count} shard "
                         "reports of the run")
    ordered = sorted(shards, key=lambda s: _shard_of(s[1], s[0])[0])
    first_path, first = ordered[0]
    reference = _stack(first)
    for path, report in ordered[1:]:
        diff = _differences(reference, _stack(report))
        if diff:
            raise MergeError(f"{path} ran another stack than {first_path}: {diff[0]}"
                             + (f" (and {len(diff) - 1} more)" if len(diff) > 1 else ""))
    seen: dict[str, str] = {}
    for path, report in ordered:
        for test in report.tests():
            key = test_key(test.nodeid)
            if key in seen:
                raise MergeError(f"test {key} is in two shards ({seen[key]} and {path}): not shards of one plan")
            seen[key] = path
    return ordered


def _claims(shards: Sequence[Report]) -> dict[str, ClaimRecord]:
    tests: dict[str, list[TestRecord]] = {}
    meta: dict[str, Any] = {}
    for report in shards:
        for cid, claim in report.claims.items():
            tests.setdefault(cid, []).extend(claim.tests)
            meta.setdefault(cid, claim.claim)
    out = {}
    for cid in sorted(tests):
        found = sorted(tests[cid], key=lambda t: t.nodeid)  # as results.report_document orders them
        violated = [t for t in found if t.verdict == results.VIOLATED]
        expected = "; ".join(sorted({str(t.expected) for t in violated})) if violated and all(
            t.expected for t in violated) else None  # as divergences.apply decides it
        out[cid] = results.claim_entry(found, meta[cid], expected)
    return out


_KEY = re.compile(r"^entry (\d+) ")


def _divergences(shards: Sequence[Report], merged: Report) -> list[dict[str, Any]]:
    """Each known divergence's status over the union, by :func:`divergences._status`, the
    function a run's end uses, from the entry as the shards recorded it."""
    from . import divergences as dv

    statuses = [dict(thaw(s)) for s in shards[0].divergences]
    if not statuses:
        return []
    today = max(_date(r.created) for r in shards)
    tests = list(merged.tests())
    return [dv._status(_entry(s), tests, merged.environment, today).as_dict() for s in statuses]


def _date(created: str) -> dt.date:
    try:
        return dt.date.fromisoformat(created[:10])
    except ValueError:
        return dt.date.today()


def _entry(status: Mapping[str, Any]) -> Any:
    """The Divergence a status dict describes (what selection and the status need; the symptom
    as recorded, for the status's words)."""
    from . import divergences as dv

    @dataclasses.dataclass(frozen=True)
    class Recorded(dv.Divergence):
        recorded_symptom: str = ""

        def symptom(self) -> str:
            return self.recorded_symptom

    match = _KEY.match(str(status.get("key", "")))
    return Recorded(
        claim=status["claim"], reason=status["reason"], expires=dt.date.fromisoformat(status["expires"]),
        tests=tuple(status.get("tests_pinned") or ()), framework=status.get("framework"), version=status.get("version"),
        versions=tuple((status.get("versions") or {}).items()), device=status.get("device"), script=status.get("script"),
        occurs_with=tuple((k, tuple(v)) for k, v in (status.get("occurs_with") or {}).items()),
        reference=status.get("reference"), modes=tuple(status.get("modes") or ()),
        index=int(match.group(1)) if match else 0, where=status.get("where", ""),
        recorded_symptom=str(status.get("symptom", "")),
    )


def _exit_status(statuses: Sequence[int | None]) -> int | None:
    """What one run would have ended with: tests failed if any shard's did, else the most
    severe other status; no tests collected only if no shard had any."""
    known = [s for s in statuses if s is not None]
    if not known:
        return None
    if 1 in known:
        return 1
    others = [s for s in known if s not in (0, 5)]
    if others:
        return max(others)
    return 5 if all(s == 5 for s in known) else 0


def merge(shards: Sequence[tuple[str, Report]]) -> Report:
    """One report from the N shard reports of one run (MergeError if they are not)."""
    ordered = check(shards)
    reports = [r for _, r in ordered]
    first = reports[0]
    count = _shard_of(first, ordered[0][0])[1]
    env = dict(first.environment)
    env[ENV_KEY] = {"merged": count, "count": count, "tests": sum(len(list(r.tests())) for r in reports),
                    "durations_sha256": (first.environment.get(ENV_KEY) or {}).get("durations_sha256"),
                    "shards": [{"index": i + 1, "created": r.created, "duration_s": r.duration_s,
                                "tests": (r.environment.get(ENV_KEY) or {}).get("tests"),
                                "keys_sha256": (r.environment.get(ENV_KEY) or {}).get("keys_sha256")}
                               for i, r in enumerate(reports)]}
    interrupted = [f"shard {i + 1}: {r.interrupted}" for i, r in enumerate(reports) if r.interrupted]
    merged = Report(created=max(r.created for r in reports), duration_s=max(r.duration_s for r in reports),
                    environment=MappingProxyType({}), claims=MappingProxyType(_claims(reports)))
    merged = merged.replace(environment=env, interrupted="; ".join(interrupted) or None,
                            exit_status=_exit_status([r.exit_status for r in reports]))
    merged = merged.replace(divergences=_divergences(reports, merged))
    merged = results.with_counts(merged)
    from . import combinations, coverage, modes  # as run/session/outcome.py's _outcome computes them

    return merged.replace(coverage=coverage.ledger(merged), modes=modes.ledger(merged),
                          combinations=combinations.ledger(merged))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dlconform merge",
                                description="join the JSON reports of the N shards of a --dl-shard run into one "
                                            "report. Exit status 2 when the reports are not all N shards of one run "
                                            "(a shard missing or given twice, another N, another stack).")
    p.add_argument("shards", nargs="+", metavar="SHARD.json", help="the shard reports (--dl-report of each shard)")
    p.add_argument("-o", "--output", required=True, metavar="MERGED.json", help="the merged report to write")
    p.add_argument("--html", metavar="MERGED.html", help="also write the merged report's HTML page")
    args = p.parse_args(argv)
    from . import compare, html

    try:
        merged = merge([(path, compare.load(path, "shard report")) for path in args.shards])
    except (compare.UnusableReport, MergeError) as exc:
        sys.stderr.write(f"dlconform merge: {exc}\n")
        return EXIT_UNUSABLE
    try:
        results.write_atomic(args.output, merged.to_json())
        if args.html:
            results.write_atomic(args.html, html.render(merged))
    except OSError as exc:
        sys.stderr.write(f"dlconform merge: cannot write: {exc}\n")
        return EXIT_UNUSABLE
    sys.stdout.write("\n".join(results.matrix_lines(merged)) + "\n")
    sys.stdout.write(f"merged {len(args.shards)} shard reports into {args.output}\n")
    return 0
