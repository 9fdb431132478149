"""The comparison for people and programs: terminal text, Markdown (a CI step summary) and
JSON (``dlconform compare --format json``)."""

from __future__ import annotations

import json
from typing import Any

from .. import divergences as known
from .. import results
from .comparison import WARN, Change, Comparison

SECTIONS = (
    ("regressed", "Regressed (held, now violated)"),
    ("held_to_error", "Held, now a harness error (the new run could not check these: exit status 1)"),
    ("known_regressed", "Known regressions (held, now violated with a known divergence's symptom: the framework "
                        "regressed into a known bug)"),
    ("errors", "Harness errors (not conformance results)"),
    ("fixed", "Fixed (violated, now holds)"),
    ("to_not_applicable", "Now not applicable"),
    ("from_not_applicable", "No longer not applicable"),
    ("appeared", "Appeared (only in the new report)"),
    ("disappeared", "Disappeared (only in the old report)"),
    ("drift", "Evidence drift"),
    ("still_violated", "Still violated (in both reports)"),
    ("still_error", "Harness errors in both reports (not compared)"),
)


def _verdict_move(change: Change) -> str:
    return f"{change.old or '-'} -> {change.new or '-'}"


SHORT = {"held_to_error": "held, now error", "known_regressed": "known regression(s)", "errors": "harness error(s)",
         "fixed": "fixed", "to_not_applicable": "now n/a",
         "from_not_applicable": "no longer n/a", "appeared": "appeared", "disappeared": "disappeared",
         "drift": "with evidence drift", "still_violated": "still violated", "still_error": "error in both"}


def _headline(c: Comparison) -> str:
    lead = ("regressed", "held_to_error", "known_regressed")
    counts = ", ".join(f"{len(getattr(c, attr))} {SHORT[attr]}" for attr, _ in SECTIONS
                       if getattr(c, attr) and attr not in lead)
    known_line = _known_regressions(c)
    if c.regressed:
        names = ", ".join(sorted({ch.claim for ch in c.regressed}))
        also = "; ".join(p for p in (known_line, counts) if p)
        return f"REGRESSED: {len(c.regressed)} cell(s) of {len({ch.claim for ch in c.regressed})} claim(s): {names}" + (
            f"; also {also}" if also else "")
    if c.held_to_error:
        names = ", ".join(sorted({ch.claim for ch in c.held_to_error}))
        also = "; ".join(p for p in (known_line, counts) if p)
        return f"HELD, NOW ERROR: {len(c.held_to_error)} cell(s): {names}" + (f"; also {also}" if also else "")
    if c.known_regressed:
        return known_line + (f"; also {counts}" if counts else "")
    return "no regression" + (f"; {counts}" if counts else "")


def _known_regressions(c: Comparison) -> str:
    """``1 known regression: CLAIM (entry N)``: held before, now a known divergence's symptom."""
    if not c.known_regressed:
        return ""
    n = len(c.known_regressed)
    names = ", ".join(sorted({ch.claim for ch in c.known_regressed}))
    policy = " (--known-regressions=warn: not failing)" if c.known_regressions == WARN else ""
    return f"{n} known regression{'s' if n > 1 else ''}: {names}{policy}"


def _frameworks(c: Comparison) -> str:
    return ", ".join(f or "(none)" for f in c.scope.frameworks)


def _devices(c: Comparison) -> str:
    return "across device kinds (none in common)" if c.scope.across_devices else f"devices {', '.join(c.scope.devices)}"


def _unchanged(c: Comparison) -> str:
    if not c.unchanged:
        return "no test kept its verdict"
    parts = ", ".join(f"{n} {v}" for v, n in sorted(c.unchanged.items(), key=lambda kv: results.VERDICTS.index(kv[0])))
    return f"{sum(c.unchanged.values())} matched test(s) kept their verdict ({parts})"


FAILING_SECTIONS = ("regressed", "held_to_error", "known_regressed")  # shown before the divergence lines


def divergence_lines(c: Comparison, verbose: bool = False) -> list[str]:
    """The known-divergence entries: a line each with ``verbose``; otherwise a line each only
    for those a person must act on (expired, unmatched) and one line counting the rest."""
    return known.status_lines(list(c.statuses), verbose=verbose) if c.statuses else list(c.divergences)


def _ordered_sections() -> list[tuple[str, str] | None]:
    """SECTIONS with None where the divergence lines go: after what fails the check."""
    lead = [s for s in SECTIONS if s[0] in FAILING_SECTIONS]
    return [*lead, None, *(s for s in SECTIONS if s[0] not in FAILING_SECTIONS)]


def to_text(c: Comparison, verbose: bool = False, divergences: bool = True) -> str:
    """The comparison for a terminal. Known-divergence entries come after the regressions,
    counted on one line unless ``verbose`` (``-v``); ``divergences=False`` leaves them out
    (a run's --dl-baseline: the run prints its own)."""
    out = [f"dlconform compare: {_headline(c)}", f"  old: {c.old_env}", f"  new: {c.new_env}",
           f"  compared: {c.shared_claims} claim(s) both ran; frameworks {_frameworks(c)}; "
           f"{_devices(c)}; drift threshold {c.threshold:g} of the tolerance",
           f"  unchanged: {_unchanged(c)}"]
    out += [f"  warning: {w}" for w in c.warnings]
    out += [f"  note: {n}" for n in c.scope.notes]
    for section in _ordered_sections():
        if section is None:
            out += divergence_lines(c, verbose) if divergences else []  # a line of its own, after the regressions
            continue
        attr, title = section
        changes: list[Change] = getattr(c, attr)
        if not changes:
            continue
        out.append(f"{title}: {len(changes)}")
        for ch in changes:
            out.append(f"  {ch.claim} [{ch.column}] {_verdict_move(ch)}" + (f": {ch.detail}" if ch.detail else ""))
            out += [f"      {nodeid}" for nodeid in ch.tests[:5]]
            if len(ch.tests) > 5:
                out.append(f"      ... and {len(ch.tests) - 5} more")
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(c: Comparison, verbose: bool = False) -> str:
    """The comparison as Markdown (a CI step summary); known divergences as in :func:`to_text`."""
    icon = ":x:" if c.failing else ":warning:" if c.known_regressed else ":white_check_mark:"
    out = [f"### dlconform compare: {icon} {_md(_headline(c))}", "",
           f"- **old:** {_md(c.old_env)}", f"- **new:** {_md(c.new_env)}",
           f"- **compared:** {c.shared_claims} claim(s) both ran; frameworks {_frameworks(c)}; "
           f"{_devices(c)}; drift threshold {c.threshold:g} of the tolerance", f"- **unchanged:** {_unchanged(c)}"]
    out += [f"- **warning:** {_md(w)}" for w in c.warnings]
    out += [f"- note: {_md(n)}" for n in c.scope.notes]
    for section in _ordered_sections():
        if section is None:
            lines = divergence_lines(c, verbose)
            out += ["", *(f"- {_md(line)}" for line in lines)] if lines else []
            continue
        attr, title = section
        changes: list[Change] = getattr(c, attr)
        if not changes:
            continue
        out += ["", f"#### {title}: {len(changes)}", "", "| claim | cell | verdict | detail |", "|---|---|---|---|"]
        for ch in changes:
            out.append(f"| `{ch.claim}` | {ch.column} | {_verdict_move(ch)} | {_md(ch.detail)[:300]} |")
    out += ["", f"<details><summary>All {len(c.claims)} compared claims, side by side</summary>", "",
            "| claim | old | new | worst margin old | worst margin new |", "|---|---|---|---|---|"]
    for row in c.claims:
        out.append(f"| `{row.claim}` | {row.old} | {row.new} | {results.format_margin(row.old_margin) or '-'} | "
                   f"{results.format_margin(row.new_margin) or '-'} |")
    out += ["", "</details>"]
    return "\n".join(out) + "\n"


JSON_SCHEMA = "dlconform-compare"
JSON_SCHEMA_VERSION = 1


def _change_dict(change: Change) -> dict[str, Any]:
    return {"claim": change.claim, "cell": change.column, "old": change.old, "new": change.new,
            "detail": change.detail, "tests": list(change.tests)}


def _margin(value: float | str | None) -> float | str | None:
    """JSON has no infinity or NaN: those as the strings the report itself uses."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    return value


def to_dict(c: Comparison) -> dict[str, Any]:
    """The comparison as plain data (``dlconform compare --format json``): the headline, every
    section of verdict changes, the scope, and each shared claim's verdict before and after."""
    doc: dict[str, Any] = {
        "schema": JSON_SCHEMA, "schema_version": JSON_SCHEMA_VERSION,
        "headline": _headline(c), "exit_code": c.exit_code, "known_regressions_policy": c.known_regressions,
        "old": c.old_env, "new": c.new_env,
        "scope": {"frameworks": list(c.scope.frameworks), "devices": list(c.scope.devices),
                  "across_devices": c.scope.across_devices, "shared_claims": c.shared_claims},
        "threshold": _margin(c.threshold), "warnings": list(c.warnings), "notes": list(c.scope.notes),
        "divergences": list(c.divergences),
        "unchanged": {v: c.unchanged[v] for v in results.VERDICTS if v in c.unchanged},
    }
    for attr, _ in SECTIONS:
        doc[attr] = [_change_dict(ch) for ch in getattr(c, attr)]
    doc["claims"] = [{"claim": row.claim, "old": row.old, "new": row.new,
                      "old_margin": _margin(row.old_margin), "new_margin": _margin(row.new_margin)} for row in c.claims]
    return doc


def to_json(c: Comparison) -> str:
    return json.dumps(to_dict(c), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
