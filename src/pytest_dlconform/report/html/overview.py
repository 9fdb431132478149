"""The top of the page: claims and tests by area, the matrix with its filters and legend,
the known divergences and the comparison with the baseline."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from html import escape
from typing import Any

from .. import results
from .labels import (
    EXPECTED,
    FILTER_ORDER,
    LABEL,
    SHORT,
    TOKEN,
    _row_tokens,
    _tests,
    area_of,
    cell_anchor,
    cell_token,
    slug,
    token_of_claim,
    token_of_test,
)

# --- overview -------------------------------------------------------------------------------


def _areas(doc: Mapping[str, Any]) -> list[str]:
    return sorted({area_of(cid) for cid in doc["claims"]})


def _area_table(doc: Mapping[str, Any]) -> str:
    """Claims and tests by verdict, one row per area, and the time its tests took."""
    claims: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(FILTER_ORDER, 0))
    tests: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(FILTER_ORDER, 0))
    seconds: dict[str, float] = defaultdict(float)
    for cid, entry in doc["claims"].items():
        claims[area_of(cid)][token_of_claim(entry)] += 1
    for _, cid, test in _tests(doc):
        tests[area_of(cid)][token_of_test(test)] += 1
        seconds[area_of(cid)] += float(test.get("duration_s") or 0)
    words = "".join(f'<th class="v-{t}">{escape(SHORT[t])}</th>' for t in FILTER_ORDER)
    head = (f'<tr><th rowspan="2">area</th><th colspan="{len(FILTER_ORDER)}">claims</th>'
            f'<th colspan="{len(FILTER_ORDER)}">tests</th><th rowspan="2">test time (s)</th></tr><tr>{words}{words}</tr>')

    def cells(counts: Mapping[str, int]) -> str:
        return "".join(f'<td class="n{" v-" + t if counts[t] and t != "holds" else (" zero" if not counts[t] else "")}">'
                       f"{counts[t]}</td>" for t in FILTER_ORDER)

    rows = [f'<tr><th><a href="?area={escape(a)}#matrix">{escape(a)}</a></th>{cells(claims[a])}{cells(tests[a])}'
            f'<td class="n">{seconds[a]:.1f}</td></tr>' for a in _areas(doc)]
    total_c = {t: sum(c[t] for c in claims.values()) for t in FILTER_ORDER}
    total_t = {t: sum(c[t] for c in tests.values()) for t in FILTER_ORDER}
    rows.append(f"<tr><th>all</th>{cells(total_c)}{cells(total_t)}<td class=\"n\">{sum(seconds.values()):.1f}</td></tr>")
    return f'<table id="areas"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _filters(doc: Mapping[str, Any]) -> str:
    options = '<option value="">all areas</option>' + "".join(
        f'<option value="{escape(a)}">{escape(a)}</option>' for a in _areas(doc))
    counts: dict[str, int] = dict.fromkeys(FILTER_ORDER, 0)
    for entry in doc["claims"].values():
        for token in _row_tokens(entry):
            counts[token] += 1
    boxes = "".join(
        f'<label><input type="checkbox" class="verdict-filter" value="{t}" checked> {escape(LABEL[t])} '
        f'<span class="n">({counts[t]})</span></label>' for t in FILTER_ORDER)
    return (f'<form id="filters" onsubmit="return false"><label>area <select id="area-filter">{options}</select></label>'
            f"<span>verdict: {boxes}</span></form>")


def _legend() -> str:
    return '<p class="legend">' + "".join(
        f'<span class="v-{t}">{escape(results.EXPECTED_SYMBOL if t == EXPECTED else results.SYMBOL[_verdict_of(t)])}'
        f"</span>{escape(LABEL[t])} " for t in FILTER_ORDER) + '<span class="v-none">.</span>did not run</p>'


def _verdict_of(token: str) -> str:
    return {v: k for k, v in TOKEN.items()}[token]


def matrix_columns(doc: Mapping[str, Any]) -> list[str]:
    """The matrix's columns, those with the most claims first (the report's order among equals):
    a full run's columns for one Keras backend hold a claim or two each, and put first they would push
    tf/cpu and torch/cpu off a laptop's screen."""
    columns = list(doc["columns"])
    filled = {c: sum(1 for e in doc["claims"].values() if cell_token(e, c) is not None) for c in columns}
    return sorted(columns, key=lambda c: (-filled[c], columns.index(c)))


def _grid(doc: Mapping[str, Any]) -> str:
    columns = matrix_columns(doc)
    head = "<tr><th>claim</th>" + "".join(f"<th>{escape(c)}</th>" for c in columns) + "<th>margin</th></tr>"
    rows = []
    for cid, entry in doc["claims"].items():
        cells = []
        for col in columns:
            token = cell_token(entry, col)
            if token is None:
                cells.append('<td class="cell v-none">.</td>')
                continue
            symbol = results.cell_symbol(entry, col)
            cells.append(f'<td class="cell v-{token}" data-verdict="{token}" title="{escape(LABEL[token])}">'
                         f'<a href="#{cell_anchor(cid, col)}">{escape(symbol)}</a></td>')
        margin = results.format_margin(entry.get("worst_margin"))
        rows.append(
            f'<tr class="claim-row" id="row-{slug(cid)}" data-area="{escape(area_of(cid))}" '
            f'data-verdicts="{" ".join(_row_tokens(entry))}"><th class="claim" scope="row">'
            f'<a href="#claim-{slug(cid)}">{escape(cid)}</a></th>{"".join(cells)}<td class="margin">{escape(margin)}</td></tr>'
        )
    return f'<div class="scroll"><table id="matrix"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>'


# --- known divergences, baseline ------------------------------------------------------------

_ACT_ON = ("expired", "unmatched")  # divergences.EXPIRED, UNMATCHED
_LISTED = ("applied", *_ACT_ON)


def _divergences(doc: Mapping[str, Any]) -> str:
    """Applied, expired and unmatched entries as one table; the others (not selected, not
    reached, another stack) as a count line, their entries in a collapsed list."""
    from ..divergences import status_lines, summary_counts

    statuses = list(doc.get("divergences") or [])
    if not statuses:
        return ""
    listed = sorted((s for s in statuses if s["status"] in _LISTED), key=lambda s: (s["status"] == "applied", s["claim"]))
    rows = "".join(
        f'<tr class="{"problem" if s["status"] in _ACT_ON else ""}"><td>{escape(str(s["status"]))}</td>'
        f'<td class="nodeid">{escape(str(s["claim"]))}</td><td>{len(s.get("tests") or [])}</td>'
        f'<td>{escape(_stack(s))}</td><td>{escape(str(s.get("reason") or s.get("why") or ""))}</td></tr>'
        for s in listed)
    table = (f'<table class="div"><tr><th>status</th><th>claim</th><th>tests</th><th>stack</th><th>reason</th></tr>{rows}'
             "</table>" if rows else "")
    rest = [s for s in statuses if s["status"] not in _LISTED]
    counts = summary_counts(rest)
    line = ", ".join(f"{n} {status}" for status, n in counts.items())
    others = ""
    if rest:
        items = "".join(f"<li>{escape(x)}</li>" for x in status_lines(rest))
        others = (f'<details class="div-others"><summary class="div-count">and {len(rest)} other entries: {escape(line)}'
                  f"</summary><ul>{items}</ul></details>")
    problems = sum(1 for s in statuses if s["status"] in _ACT_ON)
    head = (f'<p class="problem">{problems} entries to act on (expired or unmatched)</p>' if problems else "")
    return (f'<section id="divergences"><h2>Known divergences</h2>{head}<p>{len(statuses)} entries in the '
            f'known-divergences file: {escape(", ".join(f"{n} {s}" for s, n in summary_counts(statuses).items()))}</p>'
            f"{table}{others}</section>")


def _stack(s: Mapping[str, Any]) -> str:
    bits = [str(s.get(k)) for k in ("framework", "version", "device") if s.get(k)]
    return " ".join(bits)


def _baseline(doc: Mapping[str, Any]) -> str:
    baseline = doc.get("baseline")
    if not baseline:
        return ""
    return (f'<section id="compared"><h2>Compared with the baseline</h2>'
            f'<pre id="baseline">{escape(str(baseline.get("text", "")))}</pre></section>')
