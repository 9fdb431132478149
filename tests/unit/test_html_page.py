"""The HTML page's layout and size, read as markup (the browser checks: tests/integration/test_html_browser.py)."""

from __future__ import annotations

import re
from typing import Any

from pytest_dlconform.report import html, results

AREAS = ("autodiff", "execution", "distributed", "export", "data", "modules", "precision", "interop")
COLUMNS = [("tf", "cpu"), ("torch", "cpu"), ("tf+torch", "cpu")]
BASIS = ("(4 * ops 9 + reduction 40) * u(float64)=1.11e-16 + atol 1.07e-12 [2 runs x gradient_error_bound "
         "(B 1.62e-14 x ||w||_1 + floor 1.4e-306)]")


def _evidence(i: int) -> dict[str, Any]:
    """About what a real full run's test carries (measured on 2,873 tests, 16 MB of JSON: 2.7 checks
    a test, names of 58 characters, 54 tests with ten checks or more): three checks, and one test in
    50 with forty (a DDP run, a polynomial checked at every point)."""
    checks = {f"gradient of input {k}, layout 'transposed' (float{32 << (k % 2)}), case {i}": {
        "observed": 1.1e-7 * (k + 1), "tolerance": 3.3e-6, "margin": 0.033 * (k + 1), "count": 20,
        **({"atol": 2.8e-16, "basis": BASIS, "scale": 0.12} if k == 0 else {})} for k in range(40 if i % 50 == 3 else 3)}
    coverage = [{"framework": "torch", "mode": "forward", "op": f"op{i % 97}", "params": "default", "regime": r,
                 "dtype": "float64", "layout": "contiguous", "count": 3, "inconclusive": 0} for r in range(6)]
    return {"checks": checks, "notes": {"coverage": coverage, "samples_checked": 20, "fd_checks": 14, "fd_inconclusive": 0}}


#: Where an installed user's suites live: every node id of a run from a wheel starts with it.
INSTALLED = "venv/lib/python3.11/site-packages/pytest_dlconform/suites/"


def full_scale_document(n: int = 2900) -> Any:
    """A synthetic report of a full run's scale (2,873 tests in the ci profile, run from a wheel):
    n tests over 100 claims, 2% expected violations."""
    collector = results.Collector()
    for i in range(n):
        claim = f"{AREAS[i % 100 % 8]}.topic{i % 100 % 13}.claim-{i % 100}"
        fw, dev = COLUMNS[i % 3]
        nodeid = (f"{INSTALLED}{AREAS[i % 8]}/test_generated_programs.py::"
                  f"test_gradient_matches_finite_differences[{dev}-{fw}-case{i}]")
        extra: dict[str, Any] = {}
        verdict = results.HOLDS
        if i % 50 == 7:
            verdict, extra = results.VIOLATED, {"expected": "a known divergence of this stack", "reason": "GradientMismatch: "
                                                + "relative error 2.98e-08 " * 8, "repro": f"pytest '{nodeid}' --dl-seed=0"}
        elif i % 33 == 5:
            verdict, extra = results.NOT_APPLICABLE, {"reason": "needs a GPU: none found"}
        collector.tests[nodeid] = results.TestResult(nodeid, claim, {"framework": fw, "device": dev}, verdict=verdict,
                                                     duration=0.01 * (i % 70), evidence=_evidence(i), **extra)
    doc = results.report_document(collector, {"python": "3.11"}, {})
    visited = [{"framework": fw, "mode": m, "op": f"op{o}", "params": f"p{p}", "regime": "unit", "dtype": d,
                "layout": "contiguous", "count": 2, "inconclusive": 0}
               for fw in ("tensorflow", "torch") for m in ("forward", "reverse-fd", "compiled/xla", "low-precision")
               for o in range(98) for p in range(4) for d in ("float32", "float64")]
    divergences = [{"claim": f"autodiff.topic{k}.claim", "key": f"entry {k}", "where": f"entry {k}", "reason": "x " * 40,
                    "status": "applied" if k < 24 else "not selected", "why": "none of its tests ran", "tests": ["t"] * 2,
                    "framework": "torch", "version": "2.13.*"} for k in range(40)]
    return doc.replace(coverage={"keys": ["framework", "mode", "op", "params", "regime", "dtype", "layout"],
                                 "registered": len(visited) + 10, "visited": visited, "unvisited": visited[:10],
                                 "not_in_run": 0}, divergences=divergences)


def test_a_full_run_page_stays_under_3_mb() -> None:
    page = html.render(full_scale_document())
    assert len(page.encode()) <= 3_000_000, f"the page of a 2,900-test run is {len(page.encode()) / 1e6:.2f} MB"
    assert page.count("<tr><td><a href=\"#t-") == 2900  # every test in the plain-HTML table
    # Node ids from the area folder on: the install path is the same on every row (a reproduce line
    # keeps it: it is a command).
    table = page[page.index('<table id="tests-table">'):page.index("</table>", page.index('<table id="tests-table">'))]
    assert INSTALLED not in table and INSTALLED not in page[page.index('<section id="evidence">'):].replace(
        "pytest '" + INSTALLED, "")


def test_a_collapsed_test_shows_its_worst_checks_and_counts_the_rest() -> None:
    page = html.render(full_scale_document(60))
    assert "and 37 more checks with smaller margins" in page
    evidence = page[page.index('<section id="evidence">'):]
    worst = "gradient of input 39, layout 'transposed' (float64), case 3: "
    assert worst in evidence and "gradient of input 0, layout 'transposed' (float32), case 3:" not in evidence


def test_matrix_columns_with_the_most_claims_come_first() -> None:
    doc = full_scale_document(31)
    filled = {c: sum(1 for e in doc["claims"].values() if html.cell_token(e, c)) for c in doc["columns"]}
    assert html.matrix_columns(doc) == sorted(doc["columns"], key=lambda c: -filled[c])
    assert len(set(filled.values())) > 1  # the order is decided by the counts, not by ties


def test_overview_comes_first_then_divergences_failures_plots_tests_evidence() -> None:
    page = html.render(full_scale_document(300))
    order = [page.index(marker) for marker in ('<section id="overview">', 'id="areas"', 'id="matrix"',
                                                '<section id="divergences">', '<section id="failures">',
                                                'id="margin-plot"', 'id="slowest-tests"', '<section id="tests">',
                                                'id="coverage-ops"', '<section id="evidence">')]
    assert order == sorted(order)
    header = page[:page.index('<section id="overview">')]
    assert "not selected" not in header  # a subset run's other entries no longer sit above the matrix


def test_not_selected_divergences_are_one_count_line() -> None:
    page = html.render(full_scale_document(300))
    section = page[page.index('<section id="divergences">'):page.index('<section id="failures">')]
    assert "16 other entries: 16 not selected" in section
    assert section.count("<td>applied</td>") == 24 and "<td>not selected</td>" not in section


def test_failures_are_expanded_and_passing_evidence_is_one_line() -> None:
    page = html.render(full_scale_document(300))
    failures = page[page.index('<section id="failures">'):page.index('<section id="plots">')]
    assert failures.count('class="test v-expected-test failure"') == 6
    expected = failures.split("<h3", 1)[1]
    assert '<table class="ev">' in failures and "<details" not in expected.split('<details class="script')[0]
    evidence = page[page.index('<section id="evidence">'):]
    line = re.search(r'<details id="t-0"><summary>(.*?)</summary>', evidence)
    assert line and "holds" in line.group(1) and "3 checks, worst margin 0.099" in line.group(1)
    assert "coverage: 6 combinations" in evidence and "&#x27;" not in evidence


def test_the_margin_plot_lists_claims_worst_first() -> None:
    """The log-scale plot of each claim's worst margin, worst first ("inf", a failed exact check, first of all)."""
    page = html.render(full_scale_document(300))
    plot = page[page.index('id="margin-plot"'):]
    plot = plot[:plot.index("</svg>")]
    titles = re.findall(r'<g class="pt"[^>]*><title>([^<]*)</title>', plot)
    shown = [t.rsplit("worst margin ", 1)[1].split(",")[0] for t in titles]
    values = [float("inf") if v == "inf" else float(v) for v in shown]
    assert len(values) > 10 and values == sorted(values, reverse=True), shown
