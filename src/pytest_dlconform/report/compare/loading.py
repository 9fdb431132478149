"""The reports to compare: read, validated, or refused with a one-line :class:`UnusableReport`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import results
from ..document import Report


class UnusableReport(ValueError):
    """An input that cannot be compared; the message is one line (exit status 2)."""


def load(path: str, label: str = "report") -> Report:
    """Read and validate one report document; every problem is a one-line UnusableReport."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise UnusableReport(f"{label} {path}: no such file") from None
    except IsADirectoryError:
        raise UnusableReport(f"{label} {path}: is a directory, not a JSON report") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableReport(f"{label} {path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    return parse(text, f"{label} {path}")


def parse(text: str, name: str) -> Report:
    if not text.strip():
        raise UnusableReport(f"{name}: empty file (a run that was killed before writing its report?)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if _ends_early(text):
            raise UnusableReport(
                f"{name}: truncated JSON (it ends after {len(text)} characters with the document still open: "
                "a partial copy?)"
            ) from None
        raise UnusableReport(f"{name}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(doc, dict) or doc.get("schema") != results.SCHEMA:
        raise UnusableReport(f"{name}: not a pytest-dlconform report (no \"schema\": \"{results.SCHEMA}\")")
    version = doc.get("schema_version")
    if version != results.SCHEMA_VERSION:
        raise UnusableReport(
            f"{name}: report schema version {version!r} is not supported; this dlconform reads version "
            f"{results.SCHEMA_VERSION} (compare reports written by the same pytest-dlconform version)"
        )
    _validate(doc, name)
    return Report.from_dict(doc)


def _ends_early(text: str) -> bool:
    """True when the text starts a JSON object or array that is still open at its end."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    depth, in_string, escaped = 0, False, False
    for char in stripped:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return False  # closed: whatever is wrong, it is not a truncation
    return True


def _validate(doc: Mapping[str, Any], name: str) -> None:
    claims = doc.get("claims")
    if not isinstance(claims, dict) or not isinstance(doc.get("environment"), dict):
        raise UnusableReport(f"{name}: malformed report (\"claims\" and \"environment\" must be objects)")
    for claim_id, entry in claims.items():
        tests = entry.get("tests") if isinstance(entry, dict) else None
        if not isinstance(tests, list):
            raise UnusableReport(f"{name}: malformed report (claim {claim_id} has no \"tests\" list)")
        for test in tests:
            if not isinstance(test, dict) or test.get("verdict") not in results.VERDICTS or "nodeid" not in test:
                raise UnusableReport(f"{name}: malformed report (a test of claim {claim_id} has no valid verdict)")


def last_two(folder: str | None = None) -> tuple[str, str]:
    """The two newest reports saved by --dl-autosave in ``folder`` (default:
    :func:`settings.saved_dir`), older first: ``dlconform compare --last``."""
    from ...run import settings

    folder = folder or settings.saved_dir()
    saved = settings.saved_reports(folder)
    if len(saved) < 2:
        found = "none" if not saved else "only one"
        raise UnusableReport(f"--last needs two saved reports and {folder} has {found}: run the suites "
                             f"(`dlconform run`, or pytest with dlconform active, saves each report; "
                             f"{settings.flag(settings.AUTOSAVE)}) {2 - len(saved)} more time(s), or compare two "
                             "--dl-report files: dlconform compare OLD.json NEW.json")
    return saved[-2], saved[-1]
