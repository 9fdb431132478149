"""The modes ledger: which documented modes of each claim a run checked.

A claim's ``modes`` (core/claims/*.toml) enumerate what its documentation distinguishes: a
parameter's values, train/eval x frozen combinations, implementations, replica counts. A
test records each mode it has checked with ``evidence.covers(mode)`` (the guard refuses a
mode the claim does not declare). :func:`ledger` aggregates a report: per claim that ran,
every declared mode with the tests that checked it and their verdicts, and the modes no
test checked. The JSON report keeps it under ``modes``, the HTML page shows it, and
``dlconform modes REPORT.json --check`` exits 1 when a claim that ran left a declared mode
unchecked, or when the report's coverage ledger (:mod:`.coverage`) lists a registered
op-suite combination of a mode the run checked that no test visited (CI runs it after the
suites). A mode that only a pinned test reaches, named in its known divergence's ``modes``, is
listed apart while that test fails with the pinned symptom ("behind a known divergence"), not
as unchecked. A pure function of the report: it reads, never edits.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from .results import ERROR, HOLDS, VIOLATED

#: Verdicts of a test that ran its checks (a not-applicable test checked nothing).
RAN = (HOLDS, VIOLATED, ERROR)


def ledger(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """Per claim with declared modes and at least one test that ran: each mode's tests by
    verdict, and the unchecked modes. None when no claim in the report declares modes."""
    out: dict[str, Any] = {}
    for cid, claim in report["claims"].items():
        declared = list((claim.get("claim") or {}).get("modes") or ())
        if not declared:
            continue
        # A test matched to a known divergence counts the modes it recorded before its pinned
        # failure (evidence.covers is called once a check holds); one that recorded none checked
        # none, and a claim whose only tests are such is left out.
        ran = [t for t in claim["tests"] if t.get("verdict") in RAN]
        if not any(not t.get("divergence") or (t.get("evidence") or {}).get("modes") for t in ran):
            continue
        per: dict[str, dict[str, int]] = {m: {} for m in declared}
        for test in ran:
            verdict = "expected violation" if test.get("divergence") else test["verdict"]
            for mode, count in ((test.get("evidence") or {}).get("modes") or {}).items():
                entry = per.setdefault(mode, {})
                entry[verdict] = entry.get(verdict, 0) + 1
                entry["checks"] = entry.get("checks", 0) + int(count)
        blocked = {m: key for m, key in _blocked(report, claim["tests"]).items() if m in per and not per[m]}
        out[cid] = {"declared": declared,
                    "covered": {m: v for m, v in per.items() if v},
                    "unchecked": [m for m in declared if not per[m] and m not in blocked]}
        if blocked:
            out[cid]["blocked"] = blocked
    return {"claims": out, "unchecked": sum(len(c["unchecked"]) for c in out.values()),
            "declared": sum(len(c["declared"]) for c in out.values()),
            "blocked": sum(len(c.get("blocked") or ()) for c in out.values())} if out else None


def _blocked(report: Mapping[str, Any], tests: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The modes a known divergence's entry names (its ``modes``) whose pinned test failed with
    the symptom in this run, each with the entry's key: the pinned failure stopped the only test
    that reaches them. Only an entry that applied to one of ``tests`` counts; a pinned test
    that passed, or failed otherwise, blocks nothing."""
    stopped = {t.get("divergence") for t in tests if t.get("verdict") == VIOLATED and t.get("divergence")}
    out: dict[str, str] = {}
    for status in report.get("divergences") or ():
        if status.get("key") in stopped:
            for mode in status.get("modes") or ():
                out.setdefault(mode, str(status["key"]))
    return out


def problems(led: Mapping[str, Any] | None) -> list[str]:
    """One line per claim of the ledger ``led`` that ran and left declared modes unchecked."""
    if not led:
        return []
    return [f"{cid}: {', '.join(c['unchecked'])}" for cid, c in led["claims"].items() if c["unchecked"]]


def text(led: Mapping[str, Any] | None) -> str:
    if not led:
        return "no claim of this report declares modes\n"
    blocked = led.get("blocked") or 0
    lines = [f"{led['declared'] - led['unchecked'] - blocked} of {led['declared']} documented modes checked "
             f"over {len(led['claims'])} claims" + (f", {blocked} behind a known divergence" if blocked else "")]
    for cid, c in led["claims"].items():
        lines.append(f"{cid}: {len(c['covered'])}/{len(c['declared'])}")
        for mode, v in c["covered"].items():
            verdicts = ", ".join(f"{k} {n}" for k, n in sorted(v.items()) if k != "checks")
            lines.append(f"  {mode}: {v.get('checks', 0)} checks ({verdicts})")
        lines += [f"  {mode}: not checked, behind known divergence {key}" for mode, key in (c.get("blocked") or {}).items()]
        lines += [f"  {mode}: UNCHECKED" for mode in c["unchecked"]]
    return "\n".join(lines) + "\n"


def len_checked(led: Mapping[str, Any]) -> int:
    """How many declared modes the run checked (neither unchecked nor behind a known divergence)."""
    return int(led["declared"]) - int(led["unchecked"]) - int(led.get("blocked") or 0)


def html_section(doc: Mapping[str, Any]) -> str:
    """The HTML page's modes section ('' when the report has no modes ledger)."""
    led = doc.get("modes")
    if not led:
        return ""
    rows = []
    for cid, c in led["claims"].items():
        cells = [f"{escape(m)} ({c['covered'][m].get('checks', 0)})" for m in c["covered"]]
        missing = ", ".join([escape(m) for m in c["unchecked"]] + [f"{escape(m)} (behind known divergence {escape(k)})"
                                                                    for m, k in (c.get("blocked") or {}).items()])
        rows.append(f"<tr><td>{escape(cid)}</td><td>{len(c['covered'])}/{len(c['declared'])}</td>"
                    f"<td>{', '.join(cells)}</td><td class=\"problem\">{missing}</td></tr>")
    return (f'<section id="modes"><h2>Documented modes</h2><p>{len_checked(led)} of {led["declared"]} '
            f'declared modes checked (checks per mode in brackets).</p><table class="ev"><tr><th>claim</th><th>checked</th>'
            f'<th>modes checked</th><th>unchecked</th></tr>{"".join(rows)}</table></section>')


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dlconform modes", description="the modes ledger of a JSON report")
    p.add_argument("report", help="a JSON report (--dl-report)")
    p.add_argument("--check", action="store_true", help="exit 1 when a claim that ran left a declared mode unchecked, "
                   "or a registered op-suite combination of a mode the run checked went unvisited")
    args = p.parse_args(argv)
    from . import compare

    try:
        doc = compare.load(args.report, "report")
    except compare.UnusableReport as exc:
        sys.stderr.write(f"dlconform modes: {exc}\n")
        return 2
    led = doc.get("modes") or ledger(doc)  # a report from before the ledger existed: computed here
    sys.stdout.write(text(led))
    cov = doc.get("coverage")  # the op suites' coverage ledger (coverage.py)
    if cov:
        sys.stdout.write(f"coverage ledger: {len(cov['visited'])} combinations visited, {len(cov['unvisited'])} "
                         f"registered ones unvisited in the modes the run checked, {cov['not_in_run']} in modes it did "
                         "not run\n")
        from .coverage import subset_line

        line = subset_line(cov)  # a quick report: the subset it checks by design
        if line:
            sys.stdout.write(line + "\n")
    from . import combinations

    combos = doc.get("combinations") or combinations.ledger(doc)
    sys.stdout.write(combinations.text(combos))
    bad = problems(led)
    if bad and (doc.get("environment") or {}).get("profile") == "quick":
        # The quick profile draws 2 examples per property (profiles.QUICK_EXAMPLES): a mode that
        # only some draws reach is left to the ci profile, which --check holds to every mode.
        sys.stdout.write(f"quick profile: {len(bad)} claims left documented modes to their undrawn examples, by design "
                         "(--dl-profile=ci checks every mode):\n" + "".join(f"  {b}\n" for b in bad))
        bad = []
    if args.check and bad:
        sys.stderr.write("dlconform modes: documented modes no test checked (add a test that calls "
                         "evidence.covers(mode) after checking it):\n" + "".join(f"  {b}\n" for b in bad))
        return 1
    if args.check and cov and cov["unvisited"]:
        from .coverage import KEYS

        shown = "".join(f"  {', '.join(str(row.get(k)) for k in KEYS)}\n" for row in cov["unvisited"][:10])
        sys.stderr.write(f"dlconform modes: {len(cov['unvisited'])} registered op-suite combinations no test visited "
                         f"({', '.join(KEYS)}), e.g.:\n{shown}")
        return 1
    unvisited = combinations.problems(combos)
    if args.check and unvisited:
        shown = "".join(f"  {u}\n" for u in unvisited[:10])
        sys.stderr.write(f"dlconform modes: {len(unvisited)} registered record combinations no test visited "
                         f"(family: record: combination), e.g.:\n{shown}")
        return 1
    return 0
