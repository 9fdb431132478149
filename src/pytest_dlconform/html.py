"""The HTML conformance matrix (``--dl-html PATH``): one self-contained page.

The page is rendered from the JSON report document, so it says exactly what the report
says. Everything is inline (styles, the small filtering script); nothing is fetched from
the network, so it opens from a CI artifact, offline. The grid is plain HTML and reads
without JavaScript; the script only filters by area and verdict (also from the query
string: ``report.html?area=autodiff&verdict=violated,error``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape
from typing import Any

from . import coverage, modes, results
from .report import thaw

# Verdict tokens used as CSS classes and filter values.
TOKEN = {results.HOLDS: "holds", results.VIOLATED: "violated", results.NOT_APPLICABLE: "not-applicable",
         results.ERROR: "error"}
EXPECTED = "expected"
LABEL = {"holds": "holds", "violated": "violated", EXPECTED: "violated, expected (known divergence)",
         "not-applicable": "not applicable", "error": "error (harness, not a conformance result)"}
FILTER_ORDER = ("holds", "violated", EXPECTED, "not-applicable", "error")

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em} h2{font-size:1.2em;margin-top:2em} h3{margin-bottom:.2em}
.env{color:#555;margin:.2em 0}
#filters{margin:1em 0;display:flex;gap:1.5em;flex-wrap:wrap;align-items:center}
#filters label{white-space:nowrap}
table#matrix{border-collapse:collapse}
#matrix th,#matrix td{border:1px solid #ccc;padding:2px 8px;text-align:center}
#matrix th.claim{text-align:left;font-weight:normal;font-family:monospace}
#matrix td.cell a{display:block;color:inherit;text-decoration:none;font-weight:bold}
.v-holds{background:#c8ebc9}.v-violated{background:#f4b4b4}.v-expected{background:#f6dd9b}
.v-not-applicable{background:#e4e4e4;color:#666}.v-error{background:#d8c2ef}
.v-none{color:#bbb}
td.dim{opacity:.25}
td.margin{font-family:monospace;color:#444}
.legend span{display:inline-block;padding:0 .6em;margin-right:.4em;border:1px solid #ccc}
article.claim-detail{border-top:1px solid #ddd;margin-top:1em}
section.cell-detail{margin-left:1em}
section.cell-detail:target{outline:3px solid #3875d7}
.test{margin:.5em 0 .8em 1em}
.nodeid{font-family:monospace}
table.ev{border-collapse:collapse;margin:.3em 0}
table.ev td,table.ev th{border:1px solid #ddd;padding:1px 6px;font-family:monospace;font-size:12px;text-align:left}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap}
.problem{color:#a00}
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


def render(doc: Mapping[str, Any]) -> str:
    claims = doc["claims"]
    env = doc.get("environment") or {}
    title = f"dlconform: {len(claims)} claims, {results.environment_line(env)}"
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
        "</header>",
        f'<p class="problem">this run stopped early ({escape(str(doc["interrupted"]))}): claims it did not reach '
        "are missing</p>" if doc.get("interrupted") else "",
        _problems(doc),
        _filters(doc),
        _legend(),
        _grid(doc),
        '<p id="shown-count"></p>',
        coverage.html_section(doc),
        modes.html_section(doc),
        '<section id="evidence"><h2>Evidence</h2>',
        *(_claim_detail(cid, entry) for cid, entry in claims.items()),
        "</section>",
        f"<script>{_SCRIPT}</script></body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _platform_line(env: Mapping[str, Any]) -> str:
    bits = [f"{env.get('os', '?')} ({env.get('machine', '?')})", f"CPU {env.get('processor', '?')}"]
    if env.get("driver"):
        bits.append(f"NVIDIA driver {env['driver']}, CUDA {env.get('cuda') or '?'}")
    libs = env.get("frameworks") or {}
    bits.append(", ".join(f"{k} {v}" for k, v in libs.items() if v != "not installed"))
    return "; ".join(bits)


def _problems(doc: Mapping[str, Any]) -> str:
    from .divergences import status_lines

    lines = status_lines(list(doc.get("divergences") or []))
    baseline = doc.get("baseline")
    out = []
    if lines:
        out.append("<h2>Known divergences</h2><ul>" + "".join(
            f'<li class="{"problem" if ("EXPIRED" in x or "UNMATCHED" in x) else ""}">{escape(x)}</li>' for x in lines
        ) + "</ul>")
    if baseline:
        out.append(f'<h2>Compared with the baseline</h2><pre id="baseline">{escape(str(baseline.get("text", "")))}</pre>')
    return "\n".join(out)


def _areas(doc: Mapping[str, Any]) -> list[str]:
    return sorted({cid.split(".", 1)[0] for cid in doc["claims"]})


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


def _grid(doc: Mapping[str, Any]) -> str:
    columns = list(doc["columns"])
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
            f'<tr class="claim-row" id="row-{slug(cid)}" data-area="{escape(cid.split(".", 1)[0])}" '
            f'data-verdicts="{" ".join(_row_tokens(entry))}"><th class="claim" scope="row">'
            f'<a href="#claim-{slug(cid)}">{escape(cid)}</a></th>{"".join(cells)}<td class="margin">{escape(margin)}</td></tr>'
        )
    return f'<table id="matrix"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _claim_detail(cid: str, entry: Mapping[str, Any]) -> str:
    claim = entry.get("claim") or {}
    out = [f'<article class="claim-detail" id="claim-{slug(cid)}" data-area="{escape(cid.split(".", 1)[0])}" '
           f'data-verdicts="{" ".join(_row_tokens(entry))}">',
           f"<h3>{escape(cid)}: {escape(entry['verdict'])}</h3>"]
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
        token = cell_token(entry, col)
        out.append(f'<section class="cell-detail" id="{cell_anchor(cid, col)}"><h4 class="v-{token}">'
                   f"{escape(col or '-')}: {escape(LABEL[token or 'holds'])}</h4>")
        out += [_test_detail(t) for t in tests]
        out.append("</section>")
    out.append("</article>")
    return "\n".join(out)


def _test_detail(test: Mapping[str, Any]) -> str:
    token = token_of_test(test)
    out = [f'<div class="test v-{token}-test"><span class="nodeid">{escape(test["nodeid"])}</span>: '
           f"<b>{escape(LABEL[token])}</b> in {test.get('duration_s', 0):.3g} s"]
    if test.get("expected"):
        out.append(f"<p>known divergence: {escape(str(test['expected']))}</p>")
    if test.get("reason"):
        out.append(f"<pre class=\"reason\">{escape(str(test['reason']))}</pre>")
    out.append(_evidence(test.get("evidence") or {}))
    if test.get("repro"):
        out.append(f'<p>reproduce:</p><pre class="repro">{escape(str(test["repro"]))}</pre>')
    if test.get("script"):
        out.append(_script(test))
    out.append("</div>")
    return "\n".join(out)


def _script(test: Mapping[str, Any]) -> str:
    """The standalone reproduction (repro.py): the script itself in a collapsed block."""
    from . import repro

    script = test["script"]
    line = escape(repro.describe(test))
    if script.get("kind") == repro.MISSING:
        return f'<p class="script-missing">{line}</p>'
    try:
        text = script.get("text") or repro.shipped_text(str(script.get("name")))
    except repro.Missing as exc:
        return f'<p class="script-missing">{escape(str(exc))}</p>'
    return (f'<details class="script"><summary>{line} (framework and numpy only; exits 1 while the divergence is '
            f'there)</summary><pre class="script">{escape(text)}</pre></details>')


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
            rows.append(f"<tr><td>{escape(name)}</td><td>{escape(_fmt(c.get('observed')))}</td>"
                        f"<td>{escape(_fmt(c.get('tolerance')))}</td><td>{escape(_fmt(c.get('margin')))}</td>"
                        f"<td>{escape(_fmt(c.get('count')))}</td><td>{escape(details)}</td></tr>")
        out.append('<table class="ev">' + "".join(rows) + "</table>")
    if notes:
        out.append('<table class="ev notes">' + "".join(
            f"<tr><td>{escape(k)}</td><td>{escape(_fmt(v))}</td></tr>" for k, v in notes.items()) + "</table>")
    return "\n".join(out)
