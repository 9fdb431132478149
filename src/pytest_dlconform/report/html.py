"""The HTML conformance page (``--dl-html PATH``): one self-contained page.

The page is rendered from the JSON report document, so it says exactly what the report
says. Everything is inline (styles, SVG plots, a small script); nothing is fetched from the
network, so it opens from a CI artifact, offline. In reading order: the overview (claims and
tests by verdict per area, the matrix), the known divergences, the failures (violated and
error tests, expected violations) expanded, plots (margins per claim, durations, the slowest
tests), a table of every test, the coverage ledger as a heat map, the modes, and the
evidence per claim, collapsed: a failing test's evidence in full, a passing test's as one
summary line with its key figures and the checks behind it one click away.

Everything reads without JavaScript (plain tables, ``<details>``, SVG). The script only
filters the matrix by area and verdict (also from the query string:
``report.html?area=autodiff&verdict=violated,error``), sorts and searches the test table
(``?q=WORDS&sort=duration&order=desc``) and opens the collapsed block a link points into.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from html import escape
from typing import Any

from ..core import plots
from . import coverage, modes, results
from .document import thaw

# Verdict tokens used as CSS classes and filter values.
TOKEN = {results.HOLDS: "holds", results.VIOLATED: "violated", results.NOT_APPLICABLE: "not-applicable",
         results.ERROR: "error"}
EXPECTED = "expected"
LABEL = {"holds": "holds", "violated": "violated", EXPECTED: "violated, expected (known divergence)",
         "not-applicable": "not applicable", "error": "error (harness, not a conformance result)"}
SHORT = {"holds": "holds", "violated": "violated", EXPECTED: "expected", "not-applicable": "n/a", "error": "error"}
FILTER_ORDER = ("holds", "violated", EXPECTED, "not-applicable", "error")
FAILING = ("violated", "error")  # tokens whose tests the page shows in full, first
SLOWEST = 20

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd} h3{margin-bottom:.2em}
.env{color:#555;margin:.2em 0}
nav#toc{margin:.6em 0;display:flex;gap:1em;flex-wrap:wrap} nav#toc a{white-space:nowrap}
#filters{margin:1em 0;display:flex;gap:1.5em;flex-wrap:wrap;align-items:center}
#filters label{white-space:nowrap}
table#matrix,table#areas,table#tests-table,table.div{border-collapse:collapse}
#matrix th,#matrix td,#areas th,#areas td{border:1px solid #ccc;padding:2px 8px;text-align:center}
#areas td.n{text-align:right;font-variant-numeric:tabular-nums} #areas td.zero{color:#bbb}
#matrix th.claim{text-align:left;font-weight:normal;font-family:monospace;white-space:nowrap}
.scroll{overflow-x:auto;max-width:100%}
#matrix td.cell a{display:block;color:inherit;text-decoration:none;font-weight:bold}
.v-holds{background:#c8ebc9}.v-violated{background:#f4b4b4}.v-expected{background:#f6dd9b}
.v-not-applicable{background:#e4e4e4;color:#666}.v-error{background:#d8c2ef}
.v-none{color:#bbb}
td.dim{opacity:.25}
td.margin{font-family:monospace;color:#444}
.legend span{display:inline-block;padding:0 .6em;margin-right:.4em;border:1px solid #ccc}
table.div td,table.div th{border:1px solid #ddd;padding:1px 6px;text-align:left;vertical-align:top;font-size:13px}
article.claim-detail{border-top:1px solid #ddd;margin-top:.3em}
article.claim-detail>details>summary h3{display:inline;font-size:1em}
section.cell-detail{margin-left:1em}
section.cell-detail:target,.cell-detail>details:target,div.test:target{outline:3px solid #3875d7}
.test,.cell-detail>details{margin:.4em 0 .6em 1em}
.cell-detail>details>summary{cursor:pointer}
.failure{border-left:4px solid #c62828;padding-left:.6em;margin:.8em 0}
.failure.v-expected-test{border-left-color:#d98c00}.failure.v-error-test{border-left-color:#6a1b9a}
.nodeid{font-family:monospace}
table.ev{border-collapse:collapse;margin:.3em 0}
table.ev td,table.ev th{border:1px solid #ddd;padding:1px 6px;font-family:monospace;font-size:12px;text-align:left}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap}
.cell-detail>details pre{font-size:12px;margin:.2em 0}
code{font-family:monospace}
.problem{color:#a00}
.plot{display:block;margin:.5em 0 1.2em;max-width:100%;height:auto}
.plot-legend .mark{margin-right:1em;white-space:nowrap}.plot-legend svg{vertical-align:middle}
#tests-table th,#tests-table td{border:1px solid #ddd;padding:1px 6px;font-size:12px;text-align:left}
#tests-table td:nth-child(1){font-family:monospace;word-break:break-all}
#tests-table td:nth-child(5),#tests-table td:nth-child(6){text-align:right;font-family:monospace}
#tests-table th{background:#f3f3f3;position:sticky;top:0}
#tests-table th[data-sort]{cursor:pointer}
#tests-table th[aria-sort=ascending]::after{content:" \\25B2"}#tests-table th[aria-sort=descending]::after{content:" \\25BC"}
#q{width:32em;font:inherit;padding:2px 4px}
"""

_SCRIPT = """
(function(){
  var area=document.getElementById('area-filter');
  var boxes=Array.prototype.slice.call(document.querySelectorAll('input.verdict-filter'));
  var total=document.querySelectorAll('tr.claim-row').length;
  function visible(el,a,on){
    var vs=el.getAttribute('data-verdicts').split(' ');
    return (!a||el.getAttribute('data-area')===a)&&vs.some(function(v){return on[v];});
  }
  function apply(){
    var a=area.value,on={},shown=0;
    boxes.forEach(function(b){on[b.value]=b.checked;});
    document.querySelectorAll('tr.claim-row').forEach(function(r){
      var vis=visible(r,a,on); r.hidden=!vis; if(vis){shown++;}
      r.querySelectorAll('td.cell[data-verdict]').forEach(function(c){
        c.classList.toggle('dim',!on[c.getAttribute('data-verdict')]);
      });
    });
    document.querySelectorAll('article.claim-detail').forEach(function(d){d.hidden=!visible(d,a,on);});
    document.getElementById('shown-count').textContent=shown+' of '+total+' claims shown';
  }
  var q=new URLSearchParams(window.location.search);
  if(q.get('area')!==null){area.value=q.get('area');}
  if(q.get('verdict')!==null){
    var want=q.get('verdict').split(',');
    boxes.forEach(function(b){b.checked=want.indexOf(b.value)>=0;});
  }
  area.addEventListener('change',apply);
  boxes.forEach(function(b){b.addEventListener('change',apply);});
  apply();

  /* the test table: search (every word must occur in the row) and sort by a column */
  var table=document.getElementById('tests-table');
  if(table){
    var body=table.tBodies[0], rows=Array.prototype.slice.call(body.rows), box=document.getElementById('q');
    var count=document.getElementById('q-count'), heads=Array.prototype.slice.call(table.tHead.rows[0].cells);
    var texts=rows.map(function(r){return r.textContent.toLowerCase();});
    document.getElementById('test-search').hidden=false;
    function search(){
      var words=box.value.toLowerCase().split(/\\s+/).filter(Boolean), n=0;
      rows.forEach(function(r,i){
        var ok=words.every(function(w){return texts[i].indexOf(w)>=0;}); r.hidden=!ok; if(ok){n++;}
      });
      count.textContent=n+' of '+rows.length+' tests';
    }
    function key(r,i,num){
      var t=r.cells[i].getAttribute('data-v')||r.cells[i].textContent;
      if(!num){return t;}
      var v=parseFloat(t); return isNaN(v)?-1:v;
    }
    function sort(i,desc){
      var num=heads[i].getAttribute('data-sort')==='num';
      var order=rows.map(function(r,k){return [key(r,i,num),k,r];});
      order.sort(function(a,b){
        var c=num?a[0]-b[0]:(a[0]<b[0]?-1:a[0]>b[0]?1:0); return (desc?-c:c)||a[1]-b[1];
      });
      order.forEach(function(o){body.appendChild(o[2]);});
      heads.forEach(function(h,k){if(k===i){h.setAttribute('aria-sort',desc?'descending':'ascending');}
                                  else{h.removeAttribute('aria-sort');}});
    }
    heads.forEach(function(h,i){h.addEventListener('click',function(){
      sort(i,h.getAttribute('aria-sort')==='ascending'||(!h.getAttribute('aria-sort')&&h.getAttribute('data-sort')==='num'));
    });});
    box.addEventListener('input',search);
    if(q.get('q')!==null){box.value=q.get('q');}
    var by=q.get('sort');
    heads.forEach(function(h,i){if(h.getAttribute('data-key')===by){sort(i,q.get('order')==='desc');}});
    search();
  }

  /* a link into a collapsed block (a matrix cell, a test row) opens the blocks around its target */
  function reveal(){
    var id=decodeURIComponent(location.hash.slice(1)), el=id&&document.getElementById(id);
    if(!el){return;}
    for(var p=el;p;p=p.parentElement){if(p.tagName==='DETAILS'){p.open=true;}}
    el.scrollIntoView();
  }
  window.addEventListener('hashchange',reveal);
  reveal();
})();
"""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def cell_anchor(claim: str, column: str) -> str:
    return f"ev-{slug(claim)}--{slug(column)}"


def cell_token(entry: Mapping[str, Any], column: str) -> str | None:
    symbol = results.cell_symbol(entry, column)
    if symbol == ".":
        return None
    if symbol == results.EXPECTED_SYMBOL:
        return EXPECTED
    return TOKEN[entry["columns"][column]]


def token_of_test(test: Mapping[str, Any]) -> str:
    if test["verdict"] == results.VIOLATED and test.get("expected"):
        return EXPECTED
    return TOKEN[test["verdict"]]


def token_of_claim(entry: Mapping[str, Any]) -> str:
    if entry["verdict"] == results.VIOLATED and entry.get("expected"):
        return EXPECTED
    return TOKEN[entry["verdict"]]


def area_of(cid: str) -> str:
    return cid.split(".", 1)[0]


def _tests(doc: Mapping[str, Any]) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
    """Every test of the report with its page-wide number (the ``t-N`` anchor) and claim."""
    n = 0
    for cid, entry in doc["claims"].items():
        for test in entry["tests"]:
            yield n, cid, test
            n += 1


def render(doc: Mapping[str, Any]) -> str:
    claims = doc["claims"]
    env = doc.get("environment") or {}
    title = f"dlconform: {len(claims)} claims, {results.environment_line(env)}"
    numbers = {(cid, test["nodeid"]): n for n, cid, test in _tests(doc)}
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        "<header><h1>dlconform conformance matrix</h1>",
        f'<p class="env">{escape(results.environment_line(env))}</p>',
        f'<p class="env">{escape(_platform_line(env))}</p>',
        f'<p class="env">created {escape(str(doc.get("created", "?")))}, {doc.get("duration_s", "?")} s; '
        f'schema version {doc.get("schema_version")}</p>',
        "".join(f'<p class="counts">{escape(results.count_line(what, doc["counts"][what], doc["counts"]["expected"][what]))}</p>'
                for what in ("claims", "tests")),
        _toc(doc),
        "</header>",
        f'<p class="problem">this run stopped early ({escape(str(doc["interrupted"]))}): claims it did not reach '
        "are missing</p>" if doc.get("interrupted") else "",
        '<section id="overview"><h2>Overview</h2>',
        _area_table(doc),
        _filters(doc),
        _legend(),
        _grid(doc),
        '<p id="shown-count"></p></section>',
        _divergences(doc),
        _baseline(doc),
        _failures(doc, numbers),
        _plots(doc, numbers),
        _test_table(doc),
        coverage.html_section(doc),
        _coverage_map(doc),
        modes.html_section(doc),
        '<section id="evidence"><h2>Evidence</h2><p>One block per claim, collapsed: open one, or follow a matrix '
        "cell or a test. A failing test links to its full evidence under Failures; a passing test shows its key "
        "figures in one line, its checks (<i>name: observed / tolerance = margin (examples); details</i>) and notes "
        "one click away.</p>",
        *(_claim_detail(cid, entry, numbers) for cid, entry in claims.items()),
        "</section>",
        f"<script>{_SCRIPT}</script></body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _toc(doc: Mapping[str, Any]) -> str:
    failing = sum(1 for _, _, t in _tests(doc) if token_of_test(t) in (*FAILING, EXPECTED))
    links = [("overview", "overview"), ("divergences", "known divergences"), ("failures", f"failures ({failing})"),
             ("plots", "plots"), ("tests", f"all tests ({sum(1 for _ in _tests(doc))})")]
    if doc.get("coverage"):
        links.append(("coverage", "coverage"))
    if doc.get("modes"):
        links.append(("modes", "modes"))
    links.append(("evidence", "evidence"))
    return '<nav id="toc">' + "".join(f'<a href="#{a}">{escape(w)}</a>' for a, w in links) + "</nav>"


def _platform_line(env: Mapping[str, Any]) -> str:
    bits = [f"{env.get('os', '?')} ({env.get('machine', '?')})", f"CPU {env.get('processor', '?')}"]
    if env.get("driver"):
        bits.append(f"NVIDIA driver {env['driver']}, CUDA {env.get('cuda') or '?'}")
    libs = env.get("frameworks") or {}
    bits.append(", ".join(f"{k} {v}" for k, v in libs.items() if v != "not installed"))
    return "; ".join(bits)


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


def _row_tokens(entry: Mapping[str, Any]) -> list[str]:
    return sorted({tok for col in entry["columns"] if (tok := cell_token(entry, col))})


def shown_id(nodeid: str) -> str:
    """A test's node id as the page shows it: from its area folder on (``autodiff/test_ops.py::...``).
    The folders above ``suites/`` say where the suites were installed (a venv's site-packages, a
    checkout), the same for every test: repeated on every row they were a tenth of a full run's page."""
    path, sep, rest = nodeid.partition("::")
    return re.sub(r"^(?:.*/)?suites/", "", path.replace("\\", "/")) + sep + rest


def matrix_columns(doc: Mapping[str, Any]) -> list[str]:
    """The matrix's columns, those with the most claims first (the report's order among equals):
    a full run's columns for one Keras backend hold a claim or two each, and put first they pushed
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
    from .divergences import status_lines, summary_counts

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


# --- failures -------------------------------------------------------------------------------


def _failures(doc: Mapping[str, Any], numbers: Mapping[tuple[str, str], int]) -> str:
    """Violated and error tests, then expected violations, each with its evidence in full."""
    failing = [(cid, t) for _, cid, t in _tests(doc) if token_of_test(t) in FAILING]
    expected = [(cid, t) for _, cid, t in _tests(doc) if token_of_test(t) == EXPECTED]
    shown: set[str] = set()
    out = ['<section id="failures"><h2>Failures</h2>']
    if not failing:
        out.append('<p class="none">no violated test and no harness error.</p>')
    out += [_failure(cid, t, numbers, shown) for cid, t in failing]
    if expected:
        out.append(f'<h3 id="expected">Expected violations (known divergences): {len(expected)} tests</h3>')
        out += [_failure(cid, t, numbers, shown) for cid, t in expected]
    out.append("</section>")
    return "\n".join(out)


def _failure(cid: str, test: Mapping[str, Any], numbers: Mapping[tuple[str, str], int], shown: set[str]) -> str:
    link = (f'<p class="where">claim <a href="#{cell_anchor(cid, test["column"])}">{escape(cid)}, '
            f'{escape(test["column"] or "-")}</a></p>')
    return _test_detail(test, f"f-{numbers[(cid, test['nodeid'])]}", extra=link, css="failure", shown=shown)


# --- plots ----------------------------------------------------------------------------------


def _plots(doc: Mapping[str, Any], numbers: Mapping[tuple[str, str], int]) -> str:
    return ('<section id="plots"><h2>Plots</h2>' + _margin_plot(doc) + _duration_plots(doc, numbers) + "</section>")


def _margin_key(value: Any) -> float:
    if value == "inf":
        return math.inf
    try:
        return float(value)
    except (TypeError, ValueError):
        return -math.inf


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


def test_margin(test: Mapping[str, Any]) -> Any:
    """A test's worst check margin: a float, "inf" (a failed exact check) or None (no checks)."""
    return results.worst_margin([test])


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


# --- evidence -------------------------------------------------------------------------------


def _claim_detail(cid: str, entry: Mapping[str, Any], numbers: Mapping[tuple[str, str], int]) -> str:
    claim = entry.get("claim") or {}
    token = token_of_claim(entry)
    margin = results.format_margin(entry.get("worst_margin"))
    n = len(entry["tests"])
    figures = f"{n} test{'' if n == 1 else 's'}" + (f", worst margin {margin}" if margin else "")
    out = [f'<article class="claim-detail" id="claim-{slug(cid)}" data-area="{escape(area_of(cid))}" '
           f'data-verdicts="{" ".join(_row_tokens(entry))}"><details><summary>',
           f'<h3>{escape(cid)}: {escape(entry["verdict"])}</h3> <span class="v-{token}">&nbsp;{SHORT[token]}&nbsp;</span> '
           f"{escape(figures)}</summary>"]
    if claim:
        out.append(f"<p>{escape(str(claim.get('statement', '')))}</p>")
        out.append(f"<p><b>source:</b> {escape(str(claim.get('source', '')))}; "
                   f"<b>frameworks:</b> {escape(', '.join(claim.get('frameworks') or []))}</p>")
        if claim.get("seed_accuracy") not in (None, "accurate"):
            out.append(f"<p><b>the seed's wording is {escape(claim['seed_accuracy'])}:</b> "
                       f"{escape(str(claim.get('seed') or ''))}</p>")
    else:
        out.append('<p class="problem">not in the claim registry of this version</p>')
    for col in entry["columns"]:
        tests = [t for t in entry["tests"] if t["column"] == col]
        cell = cell_token(entry, col)
        out.append(f'<section class="cell-detail" id="{cell_anchor(cid, col)}"><h4 class="v-{cell}">'
                   f"{escape(col or '-')}: {escape(LABEL[cell or 'holds'])}</h4>")
        function = None
        for t in tests:
            n = numbers[(cid, t["nodeid"])]
            failing = token_of_test(t) in (*FAILING, EXPECTED)
            # A test function's name once, then each of its tests by its parameters: a cell of
            # the op suites holds hundreds of tests of one function.
            head, params = _split_params(shown_id(t["nodeid"]))
            if head != function and params:
                out.append(f'<p class="function"><code>{_text(head)}</code></p>')
            function = head if params else None
            out.append(_test_line(t, f"t-{n}", f"f-{n}" if failing else "", label=params or None))
        out.append("</section>")
    out.append("</details></article>")
    return "\n".join(out)


def _test_detail(test: Mapping[str, Any], anchor: str, *, extra: str = "", css: str = "",
                 shown: set[str] | None = None) -> str:
    """A test in full: verdict, known divergence, reason, evidence tables, reproduction, script."""
    token = token_of_test(test)
    out = [f'<div class="test v-{token}-test{" " + css if css else ""}" id="{anchor}"><span class="nodeid">'
           f'{_text(shown_id(test["nodeid"]))}</span>: <b>{escape(LABEL[token])}</b> in {test.get("duration_s", 0):.3g} s', extra]
    if test.get("expected"):
        out.append(f"<p>known divergence: {escape(str(test['expected']))}</p>")
    if test.get("reason"):
        out.append(f"<pre class=\"reason\">{_text(str(test['reason']))}</pre>")
    out.append(_evidence(test.get("evidence") or {}))
    if test.get("repro"):
        out.append(f'<p>reproduce:</p><pre class="repro">{escape(str(test["repro"]))}</pre>')
    if test.get("script"):
        out.append(_script(test, shown))
    out.append("</div>")
    return "\n".join(p for p in out if p)


def _split_params(nodeid: str) -> tuple[str, str]:
    """``path::function[params]`` as (``path::function``, ``[params]``); ``[params]`` is empty
    for a test without parameters."""
    if nodeid.endswith("]") and "[" in nodeid:
        i = nodeid.index("[")
        return nodeid[:i], nodeid[i:]
    return nodeid, ""


def _test_line(test: Mapping[str, Any], anchor: str, failures_anchor: str = "", *, label: str | None = None) -> str:
    """A test in one summary line with its key figures (time, checks, worst margin, the
    reason it does not apply), the checks and notes behind it as compact text lines in
    the collapsed block. A failing test also shows its reason and reproduction here and
    links to its full evidence under Failures."""
    token = token_of_test(test)
    ev = test.get("evidence") or {}
    checks = ev.get("checks") or {}
    figures = [f"{test.get('duration_s', 0):.3g} s"]
    if checks:
        figures.append(f"{len(checks)} checks, worst margin {results.format_margin(test_margin(test)) or '-'}")
    reason = str(test.get("reason") or "")
    if reason.strip() and not failures_anchor:
        figures.append(_short(reason.strip().splitlines()[0], 120))
    line = (f'<code>{_text(label or shown_id(test["nodeid"]))}</code>: <b>{_text(SHORT[token])}</b>, '
            f"{_text('; '.join(figures))}")
    if failures_anchor:
        out = [f'<div class="test v-{token}-test" id="{anchor}">{line}; <a href="#{failures_anchor}">full evidence '
               "under Failures</a>"]
        if reason:
            out.append(f'<pre class="reason">{_text(reason)}</pre>')
        if test.get("repro"):
            out.append(f'<pre class="repro">{_text(str(test["repro"]))}</pre>')
        return "".join(out) + "</div>"
    body = _evidence_text(ev, reason)
    if not body:
        return f'<div class="test v-{token}-test" id="{anchor}">{line}</div>'
    # No class: the cell's section styles its tests (a class on each of 3,000 tests is 40 kB).
    return f'<details id="{anchor}"><summary>{line}</summary><pre>{body}</pre></details>'


def _text(value: str) -> str:
    """Escaped for a text node (quotes need no escaping there: a fifth of the evidence's size)."""
    return escape(value, quote=False)


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def _evidence_text(ev: Mapping[str, Any], reason: str) -> str:
    """Checks and notes as lines of text (escaped), a header line naming the figures once:
    under half the size of tables, and the page has 2,000 tests."""
    lines = []
    if "\n" in reason.strip() or len(reason) > 120:
        lines.append(reason)
    checks = ev.get("checks") or {}
    shown = dict(checks)
    if len(checks) > MAX_CHECK_LINES:
        # The worst margins first; a held test with a hundred checks (a DDP run, a polynomial's
        # every point) is a screenful that says "within bounds" a hundred times.
        ranked = sorted(checks, key=lambda n: -_check_margin(checks[n]))
        shown = {n: checks[n] for n in ranked[:MAX_CHECK_LINES]}
    for name, c in shown.items():
        if not isinstance(c, Mapping):
            lines.append(f"{name}: {_fmt(c)}")
            continue
        details = ", ".join(f"{k}={_fmt(v)}" for k, v in c.items() if k not in ("observed", "tolerance", "margin", "count"))
        lines.append(f"{name}: {_fmt(c.get('observed'))} / {_fmt(c.get('tolerance'))} = {_fmt(c.get('margin'))} "
                     f"({_fmt(c.get('count'))})" + (f"; {details}" if details else ""))
    if len(shown) < len(checks):
        lines.append(f"... and {len(checks) - len(shown)} more checks with smaller margins (every check is in the "
                     "JSON report)")
    for key, value in (ev.get("notes") or {}).items():
        lines.append(f"{key}: {_note(key, value)}")
    return _text("\n".join(lines))


#: The checks a collapsed test shows (its worst margins); a failing test shows every check.
MAX_CHECK_LINES = 3


def _check_margin(check: Any) -> float:
    """A check's margin for ranking (a plain value, not a check, ranks last)."""
    return _margin_key(check.get("margin")) if isinstance(check, Mapping) else -math.inf


def _note(key: str, value: Any) -> str:
    if key == "coverage" and isinstance(value, Sequence) and not isinstance(value, str):
        return f"{len(value)} combinations"
    return _fmt(value)


def _script(test: Mapping[str, Any], shown: set[str] | None = None) -> str:
    """The standalone reproduction (repro.py): the script itself in a collapsed block, once
    per page (``shown``: the scripts already on it; a later test links to the first)."""
    from . import repro

    script = test["script"]
    line = escape(repro.describe(test))
    if script.get("kind") == repro.MISSING:
        return f'<p class="script-missing">{line}</p>'
    try:
        text = script.get("text") or repro.shipped_text(str(script.get("name")))
    except repro.Missing as exc:
        return f'<p class="script-missing">{escape(str(exc))}</p>'
    anchor = f"script-{slug(str(script.get('name') or ''))}-{len(text)}"
    if shown is not None and anchor in shown:
        return f'<p class="script">{line} (<a href="#{anchor}">the script, shown above</a>)</p>'
    if shown is not None:
        shown.add(anchor)
    return (f'<details class="script" id="{anchor}"><summary>{line} (framework and numpy only; exits 1 while the '
            f'divergence is there)</summary><pre class="script">{_text(text)}</pre></details>')


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(thaw(value))  # a frozen report's tuples and mapping views print as the JSON lists and dicts


def _evidence(ev: Mapping[str, Any]) -> str:
    checks = ev.get("checks") or {}
    notes = ev.get("notes") or {}
    out = []
    if checks:
        rows = ["<tr><th>check</th><th>observed</th><th>tolerance</th><th>margin</th><th>examples</th><th>details</th></tr>"]
        for name, c in checks.items():
            details = ", ".join(f"{k}={_fmt(v)}" for k, v in c.items() if k not in ("observed", "tolerance", "margin", "count"))
            rows.append(f"<tr><td>{_text(name)}</td><td>{_text(_fmt(c.get('observed')))}</td>"
                        f"<td>{_text(_fmt(c.get('tolerance')))}</td><td>{_text(_fmt(c.get('margin')))}</td>"
                        f"<td>{_text(_fmt(c.get('count')))}</td><td>{_text(details)}</td></tr>")
        out.append('<table class="ev">' + "".join(rows) + "</table>")
    if notes:
        out.append('<table class="ev notes">' + "".join(
            f"<tr><td>{_text(k)}</td><td>{_text(_note(k, v))}</td></tr>" for k, v in notes.items()) + "</table>")
    return "\n".join(out)
