"""Verdicts per test, aggregated by the controller into a matrix and a JSON report.

Workers compute each phase's verdict (they still have the exception) and attach it to
the report's ``user_properties`` with the claim id, parameters and evidence; those
travel through xdist and into JUnit XML. The controller only reads reports.

The JSON report document (:func:`report_document`) is the one result of a run: the
terminal matrix, the HTML page and ``dlconform compare`` all read it, so what a person
sees on screen is what the file says.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .. import NOT_APPLICABLE_PREFIX
from .document import SCHEMA, SCHEMA_VERSION, ClaimRecord, Report, TestRecord, freeze

HOLDS, VIOLATED, NOT_APPLICABLE, ERROR = "holds", "violated", "not applicable", "error"
VERDICTS = (HOLDS, VIOLATED, NOT_APPLICABLE, ERROR)
_SEVERITY = {HOLDS: 0, NOT_APPLICABLE: 1, VIOLATED: 2, ERROR: 3}
SYMBOL = {HOLDS: "ok", VIOLATED: "FAIL", NOT_APPLICABLE: "n/a", ERROR: "ERR"}
EXPECTED_SYMBOL = "exp"  # violated, and listed in the known-divergences file
PARAM_KEYS = ("framework", "device", "strategy", "model", "backend")

PROP_CLAIM, PROP_VERDICT, PROP_PARAMS, PROP_EVIDENCE, PROP_REPRO, PROP_EXPECTED = (
    "dl_claim", "dl_verdict", "dl_params", "dl_evidence", "dl_repro", "dl_expected",
)
PROP_IDENTITY = "dl_identity"  # the test inside the package (session.identity), whatever its node id
PROP_SEED = "dl_seed"  # the test's seed (session.guard: from --dl-seed and its identity inside the package)

__all__ = [
    "NOT_APPLICABLE_PREFIX", "SCHEMA", "SCHEMA_VERSION", "Collector", "TestResult", "failure_lines", "matrix_lines",
    "report_document", "with_counts", "write_atomic",
]


def is_claim_report(report: Any) -> bool:
    """Whether a pytest report is a claim test's (it carries the claim id)."""
    return any(name == PROP_CLAIM for name, _ in getattr(report, "user_properties", ()) or ())


def worst(verdicts: Iterable[str]) -> str:
    items = list(verdicts)
    return max(items, key=_SEVERITY.__getitem__) if items else NOT_APPLICABLE


_OVERALL = {NOT_APPLICABLE: 0, HOLDS: 1, VIOLATED: 2, ERROR: 3}


def overall(verdicts: Iterable[str]) -> str:
    """The verdict of a claim (or a matrix cell) over its tests: error, else violated, else
    holds where it could run at all, else not applicable. Unlike :func:`worst` (the phases
    of one test), a claim that held on one framework and could not run on the other holds."""
    items = list(verdicts)
    return max(items, key=_OVERALL.__getitem__) if items else NOT_APPLICABLE


def column_of(params: Mapping[str, str]) -> str:
    """The matrix column of a test: framework/device/strategy, whichever it has."""
    return "/".join(str(params[k]) for k in PARAM_KEYS if params.get(k))


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
    expected: str | None = None  # the reason of the known divergence that matched
    divergence: str | None = None  # that entry's key
    observed: str = ""  # what the matched violation showed
    seed: int | None = None  # the test's seed (PROP_SEED)
    identity: str | None = None  # the test inside the package (PROP_IDENTITY)

    @property
    def column(self) -> str:
        return column_of(self.params)

    def record(self) -> TestRecord:
        return TestRecord(
            nodeid=self.nodeid, claim=self.claim, params=freeze(self.params), column=self.column,
            verdict=self.verdict, reason=self.reason, evidence=freeze(self.evidence), repro=self.repro,
            duration_s=round(self.duration, 4), expected=self.expected, divergence=self.divergence,
            observed=self.observed, seed=self.seed, identity=self.identity,
        )


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
            result.reason = ""  # the worse phase explains the verdict
        if props.get(PROP_EVIDENCE):
            result.evidence = json.loads(props[PROP_EVIDENCE])
        if verdict != HOLDS and not result.reason:
            result.reason = _group_reason(result.evidence) or _reason(report)
        if props.get(PROP_SEED) is not None:
            result.seed = int(props[PROP_SEED])
        if props.get(PROP_IDENTITY):
            result.identity = str(props[PROP_IDENTITY])
        if props.get(PROP_EXPECTED):
            known = json.loads(props[PROP_EXPECTED])
            result.expected, result.divergence, result.observed = known["reason"], known["key"], known["observed"]
        if verdict in (VIOLATED, ERROR) and props.get(PROP_REPRO) and not result.repro:
            result.repro = reproduction(str(props[PROP_REPRO]), _longrepr_text(report))
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


def _group_reason(evidence: Mapping[str, Any] | None) -> str:
    """For a failure made of several (an exception group: hypothesis's distinct failures, a
    test that checks every sample): the first failing part's own words, and how many more."""
    parts = ((evidence or {}).get("exception") or {}).get("parts") or []
    if len(parts) < 2:
        return ""
    types, message = parts[0]
    first = str(message).strip().splitlines()[0] if str(message).strip() else ""
    name = types[0] if types else "Exception"
    return f"{name}: {first}"[:500] + f" (and {len(parts) - 1} more failing part(s))"


def _reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # skip: (path, line, reason)
        reason = str(longrepr[2])
        return reason.removeprefix("Skipped: ").removeprefix(NOT_APPLICABLE_PREFIX)
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
    return (crash or str(longrepr)).strip().splitlines()[0][:500] if longrepr else ""


def _longrepr_text(report: Any) -> str:
    longrepr = report.longrepr
    if longrepr is None or isinstance(longrepr, tuple):
        return ""
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
    return crash or str(longrepr)


_FALSIFYING = re.compile(r"^(?:E\s{0,7})?(Falsifying (?:explicit )?example: .*)$")
_BLOB = re.compile(r"@reproduce_failure\([^)]*\)")


def reproduction(command: str, failure_text: str) -> str:
    """The command that reruns exactly this test, plus hypothesis's shrunk example and blob.

    Hypothesis prints the minimal falsifying example as a call (``test_x(\\n    x=10,\\n)``)
    in the failure message; we keep it verbatim so the reader can paste it, and the
    ``@reproduce_failure`` decorator that replays it byte for byte.
    """
    lines = [command]
    example = _falsifying_example(failure_text)
    if example:
        lines.append(example)
    blob = _BLOB.search(failure_text)
    if blob:
        lines.append(f"# replay exactly: add {blob.group(0)} above the test")
    return "\n".join(lines)


def _falsifying_example(text: str) -> str:
    raw = [re.sub(r"^E {0,7}", "", line) for line in text.splitlines()]
    for start, line in enumerate(raw):
        match = _FALSIFYING.match(line)
        if not match:
            continue
        block = [match.group(1)]
        end = start
        if line.rstrip().endswith("("):
            for end, follow in enumerate(raw[start + 1:], start + 1):  # noqa: B007 - end is read below
                block.append(follow)
                if follow.rstrip() == ")":  # hypothesis closes the call at column 0
                    break
        # What the test drew with data.draw() follows as "Draw 1 (case): ProgramCase(...)".
        block += [d for d in raw[end + 1:] if _DRAW.match(d)]
        return "\n".join(block)
    return ""


_DRAW = re.compile(r"^Draw \d+(?: \([^)]*\))?: ")


# ------------------------------------------------------------------ the document


def report_document(collector: Collector, env: Mapping[str, Any], claims: Mapping[str, Any]) -> Report:
    """The report of a run (schema :data:`SCHEMA_VERSION`), frozen: later steps derive new ones."""
    per_claim = {
        claim_id: claim_entry([r.record() for r in sorted(found, key=lambda r: r.nodeid)], claims.get(claim_id))
        for claim_id, found in collector.by_claim().items()
    }
    report = Report(
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        duration_s=round(time.time() - collector.started, 3),
        environment=freeze(env),
        claims=MappingProxyType(per_claim),
    )
    return with_counts(report)


def claim_entry(tests: Sequence[TestRecord], claim: Any, expected: str | None = None) -> ClaimRecord:
    columns: dict[str, str] = {}
    for col in sorted({t.column for t in tests}):
        columns[col] = overall(t.verdict for t in tests if t.column == col)
    return ClaimRecord(
        verdict=overall(t.verdict for t in tests),
        claim=freeze(claim),
        columns=MappingProxyType(columns),
        duration_s=round(sum(t.duration_s for t in tests), 4),
        worst_margin=worst_margin(tests),
        expected=expected,
        tests=tuple(tests),
    )


def with_counts(report: Report) -> Report:
    """The report with its per-verdict counts of tests and claims recomputed (after
    divergences were applied) and its list of matrix columns."""
    tests = dict.fromkeys(VERDICTS, 0)
    claims = dict.fromkeys(VERDICTS, 0)
    expected = {"tests": 0, "claims": 0}
    inconclusive = {"tests": 0, "comparisons": 0}  # comparisons whose bound accepted a wrong answer
    for entry in report.claims.values():
        claims[entry.verdict] += 1
        expected["claims"] += bool(entry.expected)
        for test in entry.tests:
            tests[test.verdict] += 1
            expected["tests"] += bool(test.expected)
            found = inconclusive_count(test.evidence)
            inconclusive["tests"] += bool(found)
            inconclusive["comparisons"] += found
    columns = sorted({col for e in report.claims.values() for col in e.columns})
    counts = {"tests": tests, "claims": claims, "expected": expected, "inconclusive": inconclusive}
    return report.replace(counts=counts, columns=tuple(columns))


def inconclusive_count(evidence: Mapping[str, Any] | None) -> int:
    """How many of a test's comparisons could not have failed (evidence.inconclusive)."""
    found = (evidence or {}).get("inconclusive") or {}
    return sum(int(e.get("count", 1)) for e in found.values() if isinstance(e, Mapping))


def margins_of(test: Mapping[str, Any]) -> dict[str, float]:
    """margin = observed / tolerance for each compared quantity of a test (1.0 is the limit)."""
    checks = (test.get("evidence") or {}).get("checks") or {}
    out = {}
    for name, check in checks.items():
        margin = check.get("margin") if isinstance(check, Mapping) else None
        if isinstance(margin, (int, float)) and not isinstance(margin, bool):
            out[name] = float(margin)
        elif margin == "inf":
            out[name] = float("inf")
    return out


def worst_margin(tests: Iterable[Mapping[str, Any]]) -> float | str | None:
    """The largest margin over the tests' checks; "inf" (JSON has no infinity) when a
    check with a zero tolerance saw a non-zero difference; None without checks."""
    margins = [m for t in tests for m in margins_of(t).values()]
    if not margins:
        return None
    top = max(margins)
    return "inf" if top == float("inf") else top


BITWISE = "bitwise"  # the margin of a failed exact check (tolerance 0): no ratio to show
NO_MARGIN = "-"  # a failure without a failing numeric check (an exception, a wrong type)


def format_margin(margin: Any) -> str:
    """A margin for people: "" without checks, "bitwise" for a failed exact check ("inf" in
    the report: JSON has no infinity), else two significant digits."""
    if margin is None:
        return ""
    if margin == "inf" or margin == float("inf"):
        return BITWISE
    return margin if isinstance(margin, str) else f"{margin:.2g}"


def _row_margin(tests: Sequence[Mapping[str, Any]]) -> str:
    """A matrix row's margin: "-" where it failed without a failing numeric check (a margin
    of 0 next to FAIL would read as "comfortably inside")."""
    margin = worst_margin(tests)
    failed = [t for t in tests if t["verdict"] in (VIOLATED, ERROR)]
    if failed and not any(_failing_checks(t) for t in failed):
        return NO_MARGIN
    return format_margin(margin)


def _failing_checks(test: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """A test's checks outside their tolerance (margin above 1, infinite or NaN), worst first."""
    checks = (test.get("evidence") or {}).get("checks") or {}
    out = []
    for name, check in checks.items():
        if not isinstance(check, Mapping) or "margin" not in check:
            continue
        try:
            margin = float(check["margin"])
        except (TypeError, ValueError):
            continue
        if not margin <= 1:
            out.append((name, check, margin))
    out.sort(key=lambda c: -c[2] if c[2] == c[2] else float("-inf"))  # a NaN margin first
    return [(name, check) for name, check, _ in out]


def cell_symbol(entry: Mapping[str, Any], column: str) -> str:
    verdict = entry["columns"].get(column)
    if verdict is None:
        return "."
    return _symbol([t for t in entry["tests"] if t["column"] == column])


def _symbol(tests: list[Mapping[str, Any]]) -> str:
    if not tests:
        return "."
    verdict = overall(t["verdict"] for t in tests)
    if verdict == VIOLATED and all(t.get("expected") for t in tests if t["verdict"] == VIOLATED):
        return EXPECTED_SYMBOL
    return SYMBOL[verdict]


ROW_KEYS = ("strategy", "model", "backend")  # terminal matrix: these make sub-rows, not columns
COLUMN_KEYS = ("framework", "device")


def _base_and_row(test: Mapping[str, Any]) -> tuple[str, str]:
    params = test.get("params") or {}
    base = "/".join(str(params[k]) for k in COLUMN_KEYS if params.get(k)) or "-"
    row = "/".join(str(params[k]) for k in ROW_KEYS if params.get(k))
    return base, row


def matrix_lines(doc: Mapping[str, Any], width: int = 120, max_rows: int = 40) -> list[str]:
    """Claims by framework/device, one screen, a verdict per cell, counts below.

    Strategies (and registered models) are sub-rows of their claim, so the matrix has a
    column per framework/device only and fits ``width`` (120 by default) with full claim
    ids. With more than ``max_rows`` rows, the rows whose every cell holds are folded into
    one line per area (cells then read "held/ran"), so the screen shows what needs a look.
    """
    claims = doc["claims"]
    if not claims:
        return []
    rows: dict[tuple[str, str], dict[str, list[Mapping[str, Any]]]] = {}
    for cid, entry in claims.items():
        for test in entry["tests"]:
            base, sub = _base_and_row(test)
            rows.setdefault((cid, sub), {}).setdefault(base, []).append(test)
    columns = sorted({base for cells in rows.values() for base in cells})
    col_w = max(6, *(len(c) + 1 for c in columns))
    fold = len(rows) > max_rows
    labels = {key: key[0] + (f" [{key[1]}]" if key[1] else "") for key in rows}
    shown = {key: cells for key, cells in rows.items()
             if not fold or any(_symbol(cells.get(c, [])) not in (SYMBOL[HOLDS], ".") for c in columns)}
    names = [("  " if fold else "") + labels[k] for k in shown] + [f"{a}.* ({n} claims)" for a, n in _areas(claims).items()]
    claim_w = min(max(len(n) for n in names), max(24, width - col_w * len(columns) - 9))
    lines = [" " * claim_w + "".join(c.rjust(col_w) for c in columns) + "  margin"]
    for area, count in (_areas(claims).items() if fold else [(None, 0)]):
        mine = [k for k in rows if area is None or k[0].split(".", 1)[0] == area]
        if fold:
            lines.append(_fit(f"{area}.* ({count} claims)", claim_w) + "".join(
                _held_of_ran([rows[k] for k in mine], col).rjust(col_w) for col in columns))
        for key in mine:
            if key not in shown:
                continue
            cells = "".join(_symbol(rows[key].get(col, [])).rjust(col_w) for col in columns)
            margin = _row_margin([t for tests in rows[key].values() for t in tests])
            lines.append((_fit(("  " if fold else "") + labels[key], claim_w) + cells + "  " + margin).rstrip())
    note = (f"margin: worst observed/tolerance over a claim's checks (1 is the limit; {BITWISE}: an exact check "
            f"differed; {NO_MARGIN}: failed without a numeric check); {EXPECTED_SYMBOL}: known divergence")
    if fold:
        note += "; rows that hold everywhere are folded per area (held/ran); all are in --dl-report/--dl-html"
    lines += textwrap.wrap(note, width)
    lines.append(count_line("tests", doc["counts"]["tests"], doc["counts"]["expected"]["tests"]))
    lines.append(count_line("claims", doc["counts"]["claims"], doc["counts"]["expected"]["claims"]))
    vacuous = doc["counts"].get("inconclusive") or {}
    if vacuous.get("comparisons"):
        lines += textwrap.wrap(f"inconclusive: {vacuous['comparisons']} comparisons in {vacuous['tests']} tests had a bound "
                               "that accepts a wrong answer (zeros, a NaN, the sign flip): not counted as checks", width)
    return lines


def _areas(claims: Mapping[str, Any]) -> dict[str, int]:
    areas: dict[str, int] = {}
    for cid in claims:
        areas[cid.split(".", 1)[0]] = areas.get(cid.split(".", 1)[0], 0) + 1
    return areas


def _fit(name: str, width: int) -> str:
    return (name if len(name) <= width else name[: width - 1] + "~").ljust(width)


def _held_of_ran(rows: Iterable[Mapping[str, list[Mapping[str, Any]]]], column: str) -> str:
    ran = [overall(t["verdict"] for t in cells[column]) for cells in rows if cells.get(column)]
    return f"{sum(v == HOLDS for v in ran)}/{len(ran)}" if ran else "."


def count_line(what: str, counts: Mapping[str, int], expected: int) -> str:
    parts = []
    for verdict in VERDICTS:
        text = f"{counts.get(verdict, 0)} {verdict}"
        if verdict == VIOLATED and expected:
            text += f" ({expected} expected)"
        parts.append(text)
    return f"{what}: " + ", ".join(parts)


def failure_lines(doc: Mapping[str, Any], width: int = 120, max_lines: int | None = 40) -> list[str]:
    """The failure block under the matrix: one line per violated (not a known divergence) or
    error test, under a line naming its claim (claims sorted): its symbol, margin (``-``
    without a failing numeric check), short test id and the symptom in a sentence. At most
    ``max_lines`` tests (None: all)."""
    failed = sorted(((cid, t) for cid, entry in doc["claims"].items() for t in entry["tests"]
                     if t["verdict"] == ERROR or (t["verdict"] == VIOLATED and not t.get("expected"))),
                    key=lambda item: (item[0], item[1]["nodeid"]))
    if not failed:
        return []
    lines = [_clip(f"failures ({len(failed)}, by claim; margin: the worst failing check's observed/allowed, "
                   f"{BITWISE}: exact check, {NO_MARGIN}: none failed):", width)]
    claim = None
    for cid, test in failed[:max_lines]:
        if cid != claim:  # the claim once, its tests under it
            claim = cid
            lines.append(_clip(f"  {cid}", width))
        margin, symptom = failure_symptom(test)
        prefix = f"    {SYMBOL[test['verdict']]:<4} {margin:>7}  "
        room = width - len(prefix) - 2
        test_id = short_id(test["nodeid"])
        if len(test_id) + len(symptom) > room:  # the test id gives way first, down to 24 columns
            test_id = _shorten_id(test_id, max(24, room - min(len(symptom), 60)))
        lines.append(_clip(f"{prefix}{test_id}: {symptom}", width))
    if max_lines is not None and len(failed) > max_lines:
        lines.append(f"  ... and {len(failed) - max_lines} more (-v lists all; every test is in --dl-report/--dl-html)")
    return lines


def short_id(nodeid: str) -> str:
    """A node id without its file: ``test_name[params]`` (``Class::test_name[params]``)."""
    path, sep, rest = nodeid.partition("::")
    return rest if sep else path.rsplit("/", 1)[-1]


def _shorten_id(test_id: str, width: int) -> str:
    """``test_id`` in ``width`` columns: its name cut (``~``) before its parameters."""
    if len(test_id) <= width:
        return test_id
    name, bracket, params = test_id.partition("[")
    params = bracket + params
    if len(params) > width // 2:
        params = params[: max(width // 2 - 2, 1)] + "~]"
    keep = max(width - len(params) - 1, 4)
    return name[:keep] + "~" + params


def failure_symptom(test: Mapping[str, Any]) -> tuple[str, str]:
    """(margin, symptom) of a failed test: its worst failing check with observed vs allowed,
    else the exception's type and the first line of its message, else its reason."""
    failing = _failing_checks(test)
    if failing:
        name, check = failing[0]
        observed, tolerance = check.get("observed"), check.get("tolerance")
        margin = format_margin(check.get("margin"))
        allowed = "0 (bitwise)" if margin == BITWISE else _num(tolerance)
        more = f" (+{len(failing) - 1} more failing checks)" if len(failing) > 1 else ""
        return margin, f"observed {_num(observed)}, allowed {allowed}{more}: {name}"
    exc = (test.get("evidence") or {}).get("exception") or {}
    types, message = list(exc.get("types") or []), str(exc.get("message") or "")
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    if types and types[0] == "Failed" and first:  # pytest.fail(...): the message says it all
        return NO_MARGIN, first
    if types:
        return NO_MARGIN, f"{types[0]}: {first}" if first else str(types[0])
    return NO_MARGIN, str(test.get("reason") or "(no reason given)")


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def wrap_line(line: str, width: int = 120, indent: str = "    ") -> list[str]:
    """One logical line as terminal lines of at most ``width`` columns (continuations indented)."""
    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [line[:width]]


def wrap_command(line: str, width: int = 120, indent: str = "    ") -> list[str]:
    """A shell command over lines of at most ``width`` columns, each but the last ending in
    `` \\`` so that the lines paste as one command."""
    if len(line) <= width:
        return [line]
    words, out, current = _SHELL_WORD.findall(line), [], ""  # never split inside quotes
    for word in words:
        candidate = f"{current} {word}" if current else word
        if current and len(candidate) + 2 > width:
            out.append(current + " \\")
            current = indent + word
        else:
            current = candidate
    return [*out, current]


_SHELL_WORD = re.compile(r"""(?:[^\s'"]+|'[^']*'|"(?:\\.|[^"\\])*")+""")


def _clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "~"


# ------------------------------------------------------------------ environment


def environment(settings_dict: Mapping[str, Any], versions: Mapping[str, str], devices: str,
                gpu: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The stack of a run. ``gpu`` is :func:`pytest_dlconform.core.devices.gpu_details` of the GPUs
    this run found (the ones CUDA_VISIBLE_DEVICES leaves), so the report and the header agree."""
    from ..core.fingerprint import suite_hash

    gpu = gpu or {"gpus": [], "driver": None, "cuda": None}
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpus": gpu["gpus"],
        "driver": gpu["driver"],
        "cuda": gpu["cuda"],
        "frameworks": dict(versions),
        "devices": devices,
        "profile": settings_dict.get("profile"),
        "seed": settings_dict.get("seed"),
        "settings": dict(settings_dict),
        # the claim registry and suites this run judged with (fingerprint.py; compare warns on a difference)
        "suite_hash": suite_hash(),
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


def environment_line(env: Mapping[str, Any]) -> str:
    """One line naming the stack of a report: frameworks, Python, devices, profile, seed."""
    fws = env.get("frameworks") or {}
    settings = env.get("settings") or {}
    names = [f"{k} {v}" for k, v in fws.items() if v and v != "not installed" and k in settings.get("frameworks", fws)]
    gpus = ", ".join(g.get("name", "?") for g in env.get("gpus") or []) or "no GPU"
    return (
        f"{'; '.join(names) or 'no framework'}; Python {env.get('python', '?')}; "
        f"devices {','.join(settings.get('selected_devices', [])) or '?'} ({gpus}); "
        f"profile {env.get('profile', settings.get('profile', '?'))}, seed {env.get('seed', settings.get('seed', '?'))}"
    )


# ------------------------------------------------------------------ files


def write_atomic(path: str, text: str) -> None:
    """Write to a temporary file in the same directory, then rename over the target.

    A run killed at any moment leaves either the previous file or the complete new one,
    never a truncated document under the target name.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".dlconform-", suffix=".tmp", dir=folder)
    try:
        os.chmod(tmp, _file_mode(path))  # mkstemp makes it 0600; a report is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _file_mode(path: str) -> int:
    """The mode the file has (when replacing it), else what the umask gives a new file."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
