"""The page itself: head, table of contents, and the sections in reading order."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from .. import combinations, coverage, modes, results
from .assets import _SCRIPT, _STYLE
from .evidence import _claim_detail, _failures
from .labels import EXPECTED, FAILING, _tests, token_of_test
from .overview import _area_table, _baseline, _divergences, _filters, _grid, _legend
from .summaries import _coverage_map, _plots, _test_table


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
        combinations.html_section(doc),
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
    if doc.get("combinations"):
        links.append(("combinations", "combinations"))
    links.append(("evidence", "evidence"))
    return '<nav id="toc">' + "".join(f'<a href="#{a}">{escape(w)}</a>' for a, w in links) + "</nav>"


def _platform_line(env: Mapping[str, Any]) -> str:
    bits = [f"{env.get('os', '?')} ({env.get('machine', '?')})", f"CPU {env.get('processor', '?')}"]
    if env.get("driver"):
        bits.append(f"NVIDIA driver {env['driver']}, CUDA {env.get('cuda') or '?'}")
    libs = env.get("frameworks") or {}
    bits.append(", ".join(f"{k} {v}" for k, v in libs.items() if v != "not installed"))
    return "; ".join(bits)
