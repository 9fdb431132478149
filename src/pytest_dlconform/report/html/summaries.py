"""Views over every test: plots of margins per claim and of time per area and per test,
the table of every test (sorted and searched by the page's script), the coverage heat maps."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from html import escape
from typing import Any

from ...core import plots
from .. import results
from .labels import (
    EXPECTED,
    FILTER_ORDER,
    LABEL,
    SHORT,
    _margin_key,
    _tests,
    _text,
    area_of,
    shown_id,
    test_margin,
    token_of_claim,
    token_of_test,
)

SLOWEST = 20


# --- plots ----------------------------------------------------------------------------------


def _plots(doc: Mapping[str, Any], numbers: Mapping[tuple[str, str], int]) -> str:
    return ('<section id="plots"><h2>Plots</h2>' + _margin_plot(doc) + _duration_plots(doc, numbers) + "</section>")


def _margin_plot(doc: Mapping[str, Any]) -> str:
    points = []
    for cid, entry in doc["claims"].items():
        margin = entry.get("worst_margin")
        if margin is None:
            continue
        token = token_of_claim(entry)
        points.append(plots.Point(cid, margin, token, f"{cid}: worst margin {results.format_margin(margin)}, "
                                                      f"{LABEL[token]}, {len(entry['tests'])} tests"))
    if not points:
        return ""
    points.sort(key=lambda p: -_margin_key(p.value))
    missing = len(doc["claims"]) - len(points)
    note = f" ({missing} claims without numeric checks are not shown)" if missing else ""
    return (f'<h3 id="margins">Worst margin per claim</h3><p>observed error / tolerance of each claim\'s worst check, '
            f"on a log scale, worst first; 1 is the limit{escape(note)}.</p>"
            + plots.legend({t: SHORT[t] if t != EXPECTED else "violated, expected" for t in FILTER_ORDER})
            + plots.margins(points))


def _duration_plots(doc: Mapping[str, Any], numbers: Mapping[tuple[str, str], int]) -> str:
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    everything = list(_tests(doc))
    for _, cid, test in everything:
        seconds[area_of(cid)] += float(test.get("duration_s") or 0)
        count[area_of(cid)] += 1
    by_area = [plots.Bar(a, seconds[a], "", f"{a}: {seconds[a]:.1f} s in {count[a]} tests")
               for a in sorted(seconds, key=lambda a: -seconds[a])]
    slow = sorted(everything, key=lambda x: -float(x[2].get("duration_s") or 0))[:SLOWEST]
    slowest = [plots.Bar(shown_id(t["nodeid"]), float(t.get("duration_s") or 0), token_of_test(t),
                         f"{shown_id(t['nodeid'])} ({cid}): {float(t.get('duration_s') or 0):.3g} s, {LABEL[token_of_test(t)]}",
                         href=f"#t-{n}") for n, cid, t in slow]
    return ('<h3 id="durations">Test time by area</h3>' + plots.bars(by_area, ident="area-durations")
            + f'<h3 id="slowest">The {len(slowest)} slowest tests</h3>' + plots.bars(slowest, ident="slowest-tests"))


# --- the test table -------------------------------------------------------------------------


def _test_table(doc: Mapping[str, Any]) -> str:
    """Every test in one plain table (report order); the script sorts and searches it.
    End tags are left out where HTML allows it: 2,000 rows add up."""
    heads = [("test", "text", "test"), ("claim", "text", "claim"), ("column", "text", "column"),
             ("verdict", "text", "verdict"), ("s", "num", "duration"), ("margin", "num", "margin")]
    head = "".join(f'<th data-sort="{kind}" data-key="{key}" scope="col">{words}</th>' for words, kind, key in heads)
    rows = []
    for n, cid, test in _tests(doc):
        token = token_of_test(test)
        margin = test_margin(test)
        shown = results.format_margin(margin)
        sort_value = "" if margin is None else ("1e999" if shown == results.BITWISE else "")
        rows.append(f'<tr><td><a href="#t-{n}">{_text(shown_id(test["nodeid"]))}</a><td>{_text(cid)}<td>{_text(test["column"])}'
                    f'<td class="v-{token}">{SHORT[token]}<td>{float(test.get("duration_s") or 0):.3g}'
                    f'<td{f" data-v={sort_value}" if sort_value else ""}>{escape(shown)}')
    return (f'<section id="tests"><h2>All tests</h2><p id="test-search" hidden><label>search <input id="q" type="search" '
            f'placeholder="words in the test, claim, column or verdict"></label> <span id="q-count"></span> '
            "(click a column head to sort)</p>"
            f'<table id="tests-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></section>')


# --- coverage heat map ----------------------------------------------------------------------


def _coverage_map(doc: Mapping[str, Any]) -> str:
    """The ledger as two heat maps: mode x dtype, and op x mode; a cell's colour is the
    share of its registered combinations that some test visited."""
    cov = doc.get("coverage")
    if not cov:
        return ""
    seen: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])  # visited, registered, examples
    by_dtype: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for rows, hit in ((cov.get("visited") or [], 1), (cov.get("unvisited") or [], 0)):
        for r in rows:
            mode = f"{r.get('framework', '')} {r.get('mode', '')}"
            for cell in (seen[(str(r.get("op", "")), mode)], by_dtype[(mode, str(r.get("dtype", "")))]):
                cell[0] += hit
                cell[1] += 1
                cell[2] += int(r.get("count", 0)) if hit else 0

    def cells(table: Mapping[tuple[str, str], list[int]]) -> dict[tuple[str, str], float]:
        return {k: v[0] / v[1] for k, v in table.items()}

    def titles(table: Mapping[tuple[str, str], list[int]]) -> dict[str, str]:
        """A row's tooltip: its totals, and each column where not everything was visited."""
        out: dict[str, str] = {}
        for row in sorted({r for r, _ in table}):
            mine = {c: v for (r, c), v in table.items() if r == row}
            hit, total = sum(v[0] for v in mine.values()), sum(v[1] for v in mine.values())
            short = [f"{c} {v[0]}/{v[1]}" for c, v in sorted(mine.items()) if v[0] < v[1]]
            out[row] = (f"{row}: {hit} of {total} combinations visited in {len(mine)} columns, "
                        f"{sum(v[2] for v in mine.values())} examples" + (f"; short: {', '.join(short)}" if short else ""))
        return out

    modes_ = sorted({m for _, m in seen})
    ops = sorted({o for o, _ in seen})
    dtypes = sorted({d for _, d in by_dtype})
    swatches = " ".join(f'<span style="background:{c}">&nbsp;{w}&nbsp;</span>' for c, w in plots.HEAT_LEGEND)
    return ('<section id="coverage-map"><h3>Coverage heat maps</h3><p>A cell is the share of its registered '
            f"combinations (op x parameter class x regime x dtype x layout) some test visited: {swatches}; "
            "no cell: no registered combination there. Hover a row for its counts.</p><h4>Mode by dtype</h4>"
            + plots.heatmap(modes_, dtypes, cells(by_dtype), titles(by_dtype), ident="coverage-dtype", cell_w=60)
            + "<h4>Op by mode</h4>" + plots.heatmap(ops, modes_, cells(seen), titles(seen), ident="coverage-ops")
            + "</section>")
