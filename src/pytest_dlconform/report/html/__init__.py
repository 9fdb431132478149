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

from .evidence import MAX_CHECK_LINES
from .labels import (
    EXPECTED,
    FAILING,
    FILTER_ORDER,
    LABEL,
    SHORT,
    TOKEN,
    area_of,
    cell_anchor,
    cell_token,
    shown_id,
    slug,
    test_margin,
    token_of_claim,
    token_of_test,
)
from .overview import matrix_columns
from .page import render
from .summaries import SLOWEST

__all__ = [
    "EXPECTED",
    "FAILING",
    "FILTER_ORDER",
    "LABEL",
    "MAX_CHECK_LINES",
    "SHORT",
    "SLOWEST",
    "TOKEN",
    "area_of",
    "cell_anchor",
    "cell_token",
    "matrix_columns",
    "render",
    "shown_id",
    "slug",
    "test_margin",
    "token_of_claim",
    "token_of_test",
]
