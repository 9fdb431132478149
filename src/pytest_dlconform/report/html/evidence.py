"""Tests in full and in one line: the failures (violated and error tests, then expected
violations) and the evidence per claim, a failing test's evidence in full, a passing test's
as one summary line with its checks one click away."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from .. import results
from .labels import (
    EXPECTED,
    FAILING,
    LABEL,
    SHORT,
    _fmt,
    _margin_key,
    _row_tokens,
    _short,
    _tests,
    _text,
    area_of,
    cell_anchor,
    cell_token,
    shown_id,
    slug,
    test_margin,
    token_of_claim,
    token_of_test,
)

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
    from .. import repro

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
