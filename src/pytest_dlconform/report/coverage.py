"""The coverage ledger: what the op suite visited in a run, against what is registered.

Each per-op test (``suites/autodiff/test_ops.py``) records the combinations it ran in its
evidence, ``notes["coverage"]``: rows of framework, mode, op, parameter class, regime, dtype
and layout with a count (and how many finite-difference checks were inconclusive).
:func:`ledger` aggregates a report's rows into counts per combination and lists the
registered combinations (:func:`pytest_dlconform.programs.samples.registered`) that were not
visited, for every (framework, mode) that the run checked at all; the JSON report keeps it
under ``coverage`` and the HTML page shows it (:func:`html_section`). A pure function of the
report: it reads, never edits.

A quick-profile report (``environment.profile``) is held to the quick profile's subset: its
compiled-backward modes and low-precision dtypes check a stratified sample of the ops for the
run's ``--dl-seed`` (:func:`pytest_dlconform.run.profiles.quick_op_sample`), so the combinations
of the other ops are left out by design, counted under ``profile_subset`` (and named by ``dlconform
modes``: "quick profile: N of M combinations, by design"), never listed as unvisited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

KEYS = ("framework", "mode", "op", "params", "regime", "dtype", "layout")
Key = tuple[str, ...]


def _rows(report: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for claim in report["claims"].values():
        for test in claim["tests"]:
            notes = (test.get("evidence") or {}).get("notes") or {}
            yield from notes.get("coverage") or ()


def _key(row: Mapping[str, Any]) -> Key:
    return tuple(str(row.get(k, "")) for k in KEYS)


def visited(report: Mapping[str, Any]) -> dict[Key, dict[str, int]]:
    """Combination -> {"count", "inconclusive"} summed over the report's tests."""
    out: dict[Key, dict[str, int]] = {}
    for row in _rows(report):
        entry = out.setdefault(_key(row), {"count": 0, "inconclusive": 0})
        entry["count"] += int(row.get("count", 0))
        entry["inconclusive"] += int(row.get("inconclusive", 0))
    return out


def ledger(report: Mapping[str, Any], registered: Iterable[Mapping[str, str]] | None = None) -> dict[str, Any] | None:
    """The ledger of a report (plain JSON), or None when no op test recorded coverage.

    ``unvisited`` lists the registered combinations of every (framework, mode) the run
    checked that no test visited; ``not_in_run`` counts those of the other (framework,
    mode) pairs (a run that selected only some claims or frameworks)."""
    seen = visited(report)
    if not seen:
        return None
    if registered is None:
        from ..programs.samples import registered as _registered

        registered = _registered()
    expected = [_key(r) for r in registered]
    scope = {k[:2] for k in seen}
    in_scope = [k for k in expected if k[:2] in scope]
    subset = _profile_subset(report)
    wanted = [k for k in in_scope if subset is None or subset[1](k)]
    out = {
        "keys": list(KEYS),
        "registered": len(expected),
        "visited": [{**dict(zip(KEYS, k)), **v} for k, v in sorted(seen.items())],
        "unvisited": [dict(zip(KEYS, k)) for k in wanted if k not in seen],
        "not_in_run": len(expected) - len(in_scope),
    }
    if subset is not None:
        out["profile_subset"] = {"profile": subset[0], "expected": len(wanted), "in_scope": len(in_scope),
                                 "left_out": len(in_scope) - len(wanted)}
    return out


def _profile_subset(report: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(profile, the predicate of the combinations it expects) for a report of a profile that
    checks a subset by design (quick), else None."""
    env = report.get("environment") or {}
    profile = env.get("profile") or (env.get("settings") or {}).get("profile")
    if profile != "quick":
        return None
    from ..programs.samples import LOW_PRECISION_MODE
    from ..run.profiles import quick_op_sample

    seed = int(env.get("seed", (env.get("settings") or {}).get("seed", 0)) or 0)
    compiled = {f"compiled/{mode}": set(ops) for mode, ops in quick_op_sample("compiled", seed).items()}
    low = {dtype: set(ops) for dtype, ops in quick_op_sample("low-precision", seed).items()}

    def expected(k: Key) -> bool:
        if k[1] in compiled:
            return k[2] in compiled[k[1]]
        if k[1] == LOW_PRECISION_MODE:
            return k[2] in low.get(k[5], ())
        return True

    return profile, expected


def subset_line(cov: Mapping[str, Any]) -> str | None:
    """"quick profile: N of M combinations, by design" for a ledger of a subset profile."""
    sub = cov.get("profile_subset")
    if not sub:
        return None
    return (f"{sub['profile']} profile: {sub['expected']} of {sub['in_scope']} combinations of the modes it ran, by "
            f"design ({sub['left_out']} left out: the compiled-backward modes and the low-precision dtypes check a "
            "stratified sample of the ops, one of every op family, rotated by --dl-seed; --dl-profile=ci checks them "
            "all)")


def summary(cov: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, int]]:
    """(framework, mode) -> ops, combinations visited, examples, inconclusive, unvisited."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for row in cov["visited"]:
        s = out.setdefault((row["framework"], row["mode"]), {"ops": set(), "combinations": 0, "examples": 0,
                                                            "inconclusive": 0, "unvisited": 0})
        s["ops"].add(row["op"])
        s["combinations"] += 1
        s["examples"] += row["count"]
        s["inconclusive"] += row["inconclusive"]
    for row in cov["unvisited"]:
        key = (row["framework"], row["mode"])
        if key in out:
            out[key]["unvisited"] += 1
    return {k: {**v, "ops": len(v["ops"])} for k, v in sorted(out.items())}


def html_section(doc: Mapping[str, Any]) -> str:
    """The HTML page's coverage section ('' when the report has no ledger)."""
    cov = doc.get("coverage")
    if not cov:
        return ""
    head = "".join(f"<th>{h}</th>" for h in ("framework", "mode", "ops", "combinations visited", "examples",
                                            "inconclusive FD", "unvisited"))
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in (fw, mode, s["ops"], s["combinations"], s["examples"],
                                                               s["inconclusive"], s["unvisited"])) + "</tr>"
        for (fw, mode), s in summary(cov).items())
    missing = "".join(f"<li>{escape(', '.join(f'{k}={row[k]}' for k in KEYS))}</li>" for row in cov["unvisited"][:200])
    more = len(cov["unvisited"]) - 200
    return (f'<section id="coverage"><h2>Coverage ledger</h2><p>{len(cov["visited"])} of {cov["registered"]} registered '
            f'combinations (op x parameter class x regime x dtype x layout x mode) visited; '
            f'{len(cov["unvisited"])} unvisited in the modes this run checked; {cov["not_in_run"]} in modes it did not '
            f'run.</p><table class="ev"><tr>{head}</tr>{rows}</table>'
            + (f'<h3 class="problem">Unvisited</h3><ul>{missing}</ul>' if missing else "")
            + (f"<p>... and {more} more</p>" if more > 0 else "") + "</section>")
