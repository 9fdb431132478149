"""How the page names things: verdict tokens and labels, anchors, node ids as shown,
escaped text and formatted numbers; every section of the page uses them."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from html import escape
from typing import Any

from .. import results
from ..document import thaw

# Verdict tokens used as CSS classes and filter values.
TOKEN = {results.HOLDS: "holds", results.VIOLATED: "violated", results.NOT_APPLICABLE: "not-applicable",
         results.ERROR: "error"}
EXPECTED = "expected"
LABEL = {"holds": "holds", "violated": "violated", EXPECTED: "violated, expected (known divergence)",
         "not-applicable": "not applicable", "error": "error (harness, not a conformance result)"}
SHORT = {"holds": "holds", "violated": "violated", EXPECTED: "expected", "not-applicable": "n/a", "error": "error"}
FILTER_ORDER = ("holds", "violated", EXPECTED, "not-applicable", "error")
FAILING = ("violated", "error")  # tokens whose tests the page shows in full, first


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


def _row_tokens(entry: Mapping[str, Any]) -> list[str]:
    return sorted({tok for col in entry["columns"] if (tok := cell_token(entry, col))})


def shown_id(nodeid: str) -> str:
    """A test's node id as the page shows it: from its area folder on (``autodiff/test_ops.py::...``).
    The folders above ``suites/`` say where the suites were installed (a venv's site-packages, a
    checkout), the same for every test: repeated on every row they would be a tenth of a full run's page."""
    path, sep, rest = nodeid.partition("::")
    return re.sub(r"^(?:.*/)?suites/", "", path.replace("\\", "/")) + sep + rest


def test_margin(test: Mapping[str, Any]) -> Any:
    """A test's worst check margin: a float, "inf" (a failed exact check) or None (no checks)."""
    return results.worst_margin([test])


def _margin_key(value: Any) -> float:
    if value == "inf":
        return math.inf
    try:
        return float(value)
    except (TypeError, ValueError):
        return -math.inf


def _text(value: str) -> str:
    """Escaped for a text node (quotes need no escaping there: a fifth of the evidence's size)."""
    return escape(value, quote=False)


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(thaw(value))  # a frozen report's tuples and mapping views print as the JSON lists and dicts
