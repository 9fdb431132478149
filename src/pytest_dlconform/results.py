"""Verdicts per test, aggregated by the controller into a matrix and a JSON report.

Workers compute each phase's verdict (they still have the exception) and attach it to
the report's ``user_properties`` with the claim id, parameters and evidence; those
travel through xdist and into JUnit XML. The controller only reads reports.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from . import NOT_APPLICABLE_PREFIX

HOLDS, VIOLATED, NOT_APPLICABLE, ERROR = "holds", "violated", "not applicable", "error"
VERDICTS = (HOLDS, VIOLATED, NOT_APPLICABLE, ERROR)
_SEVERITY = {HOLDS: 0, NOT_APPLICABLE: 1, VIOLATED: 2, ERROR: 3}
SYMBOL = {HOLDS: "ok", VIOLATED: "FAIL", NOT_APPLICABLE: "n/a", ERROR: "ERR"}
SCHEMA_VERSION = 1

PROP_CLAIM, PROP_VERDICT, PROP_PARAMS, PROP_EVIDENCE, PROP_REPRO = (
    "dl_claim", "dl_verdict", "dl_params", "dl_evidence", "dl_repro",
)


def is_violation(exc: BaseException) -> bool:
    """An assertion (from an oracle or a test) is a conformance result; anything else is an error."""
    if isinstance(exc, AssertionError):
        return True
    inner = getattr(exc, "exceptions", None)  # hypothesis reports several failures as a group
    return bool(inner) and all(is_violation(e) for e in inner)


def worst(verdicts: Iterable[str]) -> str:
    items = list(verdicts)
    return max(items, key=_SEVERITY.__getitem__) if items else NOT_APPLICABLE


@dataclass
class TestResult:
    nodeid: str
    claim: str
    params: dict[str, str]
    verdict: str = HOLDS
    reason: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    repro: str = ""
    duration: float = 0.0

    @property
    def column(self) -> str:
        return "/".join(self.params[k] for k in ("framework", "device", "strategy") if self.params.get(k))

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid, "claim": self.claim, "params": self.params, "verdict": self.verdict,
            "reason": self.reason, "evidence": self.evidence, "repro": self.repro,
            "duration_s": round(self.duration, 4),
        }


class Collector:
    """Controller-side: one TestResult per claim test, from its phase reports."""

    def __init__(self) -> None:
        self.tests: dict[str, TestResult] = {}
        self.started = time.time()

    def add(self, report: Any) -> None:
        props = dict(report.user_properties)
        claim = props.get(PROP_CLAIM)
        verdict = props.get(PROP_VERDICT)
        if claim is None or verdict is None:
            return
        result = self.tests.get(report.nodeid)
        if result is None:
            result = self.tests[report.nodeid] = TestResult(report.nodeid, claim, dict(props.get(PROP_PARAMS) or {}))
            result.verdict = verdict
        elif _SEVERITY[verdict] > _SEVERITY[result.verdict]:
            result.verdict = verdict
        if verdict != HOLDS and not result.reason:
            result.reason = _reason(report)
        if props.get(PROP_EVIDENCE):
            result.evidence = json.loads(props[PROP_EVIDENCE])
        if verdict in (VIOLATED, ERROR) and props.get(PROP_REPRO):
            result.repro = props[PROP_REPRO]
        result.duration += getattr(report, "duration", 0.0)

    def by_claim(self) -> dict[str, list[TestResult]]:
        grouped: dict[str, list[TestResult]] = {}
        for result in self.tests.values():
            grouped.setdefault(result.claim, []).append(result)
        return dict(sorted(grouped.items()))

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(VERDICTS, 0)
        for result in self.tests.values():
            counts[result.verdict] += 1
        return counts


def _reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # skip: (path, line, reason)
        reason = str(longrepr[2])
        return reason.removeprefix("Skipped: ")
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
    return (crash or str(longrepr)).strip().splitlines()[0][:500] if longrepr else ""


def matrix_lines(collector: Collector, width: int = 120) -> list[str]:
    """Claims by (framework, device, strategy): one screen, a verdict per cell."""
    grouped = collector.by_claim()
    if not grouped:
        return []
    columns = sorted({r.column for r in collector.tests.values()})
    claim_w = min(max(len(c) for c in grouped), max(24, width - 8 * len(columns) - 2))
    col_w = max(6, *(len(c) + 1 for c in columns))
    lines = [" " * claim_w + " " + "".join(c.rjust(col_w) for c in columns)]
    for claim, results in grouped.items():
        cells = []
        for col in columns:
            here = [r.verdict for r in results if r.column == col]
            cells.append((SYMBOL[worst(here)] if here else ".").rjust(col_w))
        name = claim if len(claim) <= claim_w else claim[: claim_w - 1] + "~"
        lines.append(name.ljust(claim_w) + " " + "".join(cells))
    counts = collector.counts()
    lines.append(", ".join(f"{n} {v}" for v, n in counts.items() if n) + f" ({len(grouped)} claims)")
    return lines


def environment(settings_dict: Mapping[str, Any], versions: Mapping[str, str], devices: str) -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "frameworks": dict(versions),
        "devices": devices,
        "settings": dict(settings_dict),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def report_document(collector: Collector, env: Mapping[str, Any], claims: Mapping[str, Any]) -> dict[str, Any]:
    per_claim = {}
    for claim_id, results in collector.by_claim().items():
        per_claim[claim_id] = {
            "verdict": worst(r.verdict for r in results),
            "claim": claims.get(claim_id),
            "tests": [r.as_dict() for r in results],
        }
    return {
        "schema": "pytest-dlconform/report",
        "schema_version": SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "duration_s": round(time.time() - collector.started, 3),
        "environment": dict(env),
        "counts": collector.counts(),
        "claims": per_claim,
    }


def write_atomic(path: str, text: str) -> None:
    """Write to a temporary file in the same directory, then rename over the target."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".dlconform-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
