"""The combinations ledger: which registered combinations of each record a run visited.

A record suite (a module's, layer's, optimizer's, scheduler's, loss's or data utility's table)
registers, per record, the combinations its table promises to check: the pairwise (covering
array) rows of the record's documented parameters, and its second-order check (``hvp``) where
the record has one. A test calls :func:`pytest_dlconform.core.evidence.registers` with the
record's whole list before it checks anything, and :func:`~pytest_dlconform.core.evidence.visits`
after each combination's checks held; a row it skips, an exception half-way or a table
that grows without its test therefore shows up as *unvisited*.

:func:`ledger` aggregates a report: per family, each record that some test registered, its
registered combinations, the visits (with the verdicts of the tests that made them) and the
unvisited ones (a record whose test a known divergence stopped lists its rest under ``pinned``:
named, not a gap, since the divergence is reported on its own). The JSON report keeps it under
``combinations``, the HTML page shows it
(:func:`html_section`), ``dlconform merge`` recomputes it over the shards, and ``dlconform
modes REPORT --check`` exits 1 when a registered combination went unvisited (CI runs it on the
quick report, whose record suites run every row). A record test split into one test per row
registers the whole table in each, so a shard's report lists the rows of the other shards as
unvisited: check a complete or merged report. A pure function of the report: it reads, never
edits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from .results import ERROR, HOLDS, NOT_APPLICABLE, VIOLATED

RAN = (HOLDS, VIOLATED, ERROR)


def _entries(report: Mapping[str, Any]) -> Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(test, entry) of the tests that ran, and of the not-applicable tests of one row each (their
    ``own`` row: not applicable, with the test's reason, is what the run found for that row)."""
    for claim in report["claims"].values():
        for test in claim["tests"]:
            ran = test.get("verdict") in RAN
            if not ran and test.get("verdict") != NOT_APPLICABLE:
                continue
            for entry in (test.get("evidence") or {}).get("combinations") or ():
                if ran:
                    yield test, entry
                elif entry.get("own"):
                    yield test, {**entry, "visited": {entry["own"]: 0}}


def ledger(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ledger of a report (plain JSON), or None when no test registered a combination."""
    families: dict[str, dict[str, dict[str, Any]]] = {}
    for test, entry in _entries(report):
        rec = families.setdefault(str(entry["family"]), {}).setdefault(
            str(entry["record"]), {"registered": [], "visited": {}})
        rec["registered"] += [str(c) for c in entry.get("registered") or () if str(c) not in rec["registered"]]
        verdict = "expected violation" if test.get("divergence") else str(test["verdict"])
        if test.get("divergence"):  # the row it is for (one test per row), else the record's whole table
            rec.setdefault("pinned", {})[str(entry.get("own") or "*")] = str(test["divergence"])
        for combo, count in (entry.get("visited") or {}).items():
            seen = rec["visited"].setdefault(str(combo), {"checks": 0})
            seen["checks"] += int(count)
            seen[verdict] = seen.get(verdict, 0) + 1
    if not families:
        return None
    out: dict[str, Any] = {}
    registered = visited = 0
    unvisited: list[dict[str, str]] = []
    pinned: list[dict[str, str]] = []
    for family, records in sorted(families.items()):
        fam_unvisited = fam_pinned = 0
        for record, rec in sorted(records.items()):
            missing = [c for c in rec["registered"] if c not in rec["visited"]]
            rec["unvisited"] = missing
            held = rec.get("pinned") or {}
            for c in missing:
                row = {"family": family, "record": record, "combination": c}
                why = held.get(c) or held.get("*")
                if why:  # a known divergence stopped the test first: reported, not a gap
                    pinned.append({**row, "divergence": why})
                    fam_pinned += 1
                else:
                    unvisited.append(row)
                    fam_unvisited += 1
            registered += len(rec["registered"])
            visited += len(rec["registered"]) - len(missing)
        out[family] = {"records": records,
                       "registered": sum(len(r["registered"]) for r in records.values()),
                       "unvisited": fam_unvisited, "pinned": fam_pinned,
                       "second_order": sum(1 for r in records.values() for c in r["registered"] if c == "hvp")}
    return {"families": out, "registered": registered, "visited": visited, "unvisited": unvisited, "pinned": pinned}


def problems(led: Mapping[str, Any] | None) -> list[str]:
    """One line per registered combination the run left unvisited."""
    if not led:
        return []
    return [f"{u['family']}: {u['record']}: {u['combination']}" for u in led["unvisited"]]


def text(led: Mapping[str, Any] | None) -> str:
    if not led:
        return ""
    lines = [f"combinations ledger: {led['visited']} of {led['registered']} registered combinations of "
             f"{sum(len(f['records']) for f in led['families'].values())} records visited"]
    for family, fam in led["families"].items():
        lines.append(f"  {family}: {len(fam['records'])} records, {fam['registered'] - fam['unvisited'] - fam['pinned']}/"
                     f"{fam['registered']} combinations visited ({fam['second_order']} second-order)"
                     + (f", {fam['pinned']} behind a known divergence" if fam["pinned"] else ""))
    lines += [f"  not visited, a known divergence stopped the test first: {p['family']}: {p['record']}: "
              f"{p['combination']} ({p['divergence']})" for p in led["pinned"]]
    return "\n".join(lines) + "\n"


def html_section(doc: Mapping[str, Any]) -> str:
    """The HTML page's combinations section ('' when the report has no combinations ledger)."""
    led = doc.get("combinations")
    if not led:
        return ""
    rows = []
    for family, fam in led["families"].items():
        held = {(p["record"], p["combination"]) for p in led["pinned"] if p["family"] == family}
        missing = [f"{escape(r)}: {escape(c)}" + (" (behind a known divergence)" if (r, c) in held else "")
                   for r, rec in fam["records"].items() for c in rec["unvisited"]]
        rows.append(f"<tr><td>{escape(family)}</td><td>{len(fam['records'])}</td>"
                    f"<td>{fam['registered'] - fam['unvisited'] - fam['pinned']}/{fam['registered']}</td>"
                    f"<td>{fam['second_order']}</td>"
                    f"<td class=\"problem\">{'; '.join(missing[:20])}{' ...' if len(missing) > 20 else ''}</td></tr>")
    return (f'<section id="combinations"><h2>Record combinations</h2><p>{led["visited"]} of {led["registered"]} '
            'registered combinations visited (pairwise rows of each record\'s documented parameters, and its '
            'second-order check).</p><table class="ev"><tr><th>family</th><th>records</th><th>visited</th>'
            f'<th>second-order</th><th>unvisited</th></tr>{"".join(rows)}</table></section>')
