"""Upgrade checks: what changed between two JSON reports (``dlconform compare OLD NEW``).

Reports are compared on what they share. Tests are matched by claim, framework,
strategy, device and node id (the path up to ``suites/`` dropped, so an installed run and
a checkout run match). Only frameworks and device kinds that both runs covered are
compared; when the two runs share no device kind at all (a CPU report against a GPU
report) the same tests are compared across devices, and the output says so.

Per matched cell (claim x framework/device/strategy) the verdicts give:

- regressed: held, now violated (the exit status is 1 when there is one);
- held, now error: the new stack broke the harness where the old one held (exit status 1
  too: an upgrade check that cannot vouch for a claim that used to hold must not pass);
- fixed: violated, now holds;
- moved to / from "not applicable", with the reason;
- harness errors: error on one side, never shown as a conformance result;
- known regression: held, now violated with the symptom of a live known divergence. The
  framework regressed into a bug the known-divergences file already describes: named with
  its entry, and the exit status is 1 unless ``known_regressions="warn"``
  (``--known-regressions=warn``; a run's ``--dl-baseline`` the same, through
  :attr:`Comparison.failing`). A known divergence explains a failure; it does not make an
  upgrade into it a non-event.

Claims that ran on only one side within the shared scope appeared or disappeared.
Evidence drift: a check's margin (observed / tolerance) that grew towards the tolerance
by at least the threshold, a changed tolerance, and changed integer or text notes (trace
counts, graph counts). Float notes are timings and measured ratios: machine noise, never
compared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core import fingerprint
from . import divergences as known
from . import results
from .document import Report, as_report

EXIT_OK, EXIT_REGRESSED, EXIT_UNUSABLE = 0, 1, 2
FAIL, WARN = "fail", "warn"
KNOWN_REGRESSION_POLICIES = (FAIL, WARN)  # what a known regression does to the exit status
DEFAULT_DRIFT = 0.25  # margin growth, as a fraction of the tolerance, worth a line


class UnusableReport(ValueError):
    """An input that cannot be compared; the message is one line (exit status 2)."""


# ------------------------------------------------------------------ loading


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


# ------------------------------------------------------------------ matching


@dataclass(frozen=True)
class Scope:
    frameworks: tuple[str, ...]
    devices: tuple[str, ...]  # () when compared across devices
    across_devices: bool
    notes: tuple[str, ...]


def _tests(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [t for entry in doc["claims"].values() for t in entry["tests"]]


def _values(doc: Mapping[str, Any], key: str) -> set[str]:
    return {str((t.get("params") or {}).get(key, "")) for t in _tests(doc)}


def scope_of(old: Mapping[str, Any], new: Mapping[str, Any]) -> Scope:
    notes: list[str] = []
    fws_old, fws_new = _values(old, "framework"), _values(new, "framework")
    frameworks = tuple(sorted(fws_old & fws_new))
    for side, only in (("old", fws_old - fws_new), ("new", fws_new - fws_old)):
        if only:
            notes.append(f"framework(s) {', '.join(sorted(f or '-' for f in only))} ran only in the {side} report: not compared")
    dev_old, dev_new = _values(old, "device"), _values(new, "device")
    devices = tuple(sorted(dev_old & dev_new))
    across = not devices
    if across:
        notes.append(
            f"the reports share no device kind (old: {', '.join(sorted(dev_old))}; new: {', '.join(sorted(dev_new))}): "
            "the same tests are compared across devices, on the claims both ran"
        )
    else:
        for side, only in (("old", dev_old - dev_new), ("new", dev_new - dev_old)):
            if only:
                notes.append(f"device kind(s) {', '.join(sorted(only))} ran only in the {side} report: not compared")
    notes += _environment_notes(old.get("environment", {}), new.get("environment", {}))
    for side, doc in (("old", old), ("new", new)):
        if doc.get("interrupted"):
            notes.append(f"the {side} run stopped early ({doc['interrupted']}): claims it did not reach are missing from it")
    return Scope(frameworks, devices, across, tuple(notes))


def _environment_notes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    notes = []
    for key in ("profile", "seed"):
        if old.get(key) != new.get(key):
            notes.append(f"{key} differs ({old.get(key)} vs {new.get(key)}): "
                         "different examples ran, so margins may drift by chance")
    fw_old, fw_new = old.get("frameworks") or {}, new.get("frameworks") or {}
    for lib in ("numpy", "hypothesis"):
        if fw_old.get(lib) != fw_new.get(lib):
            notes.append(f"{lib} differs ({fw_old.get(lib)} vs {fw_new.get(lib)}): a change may come from it, not the framework")
    return notes


def suite_warnings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line when the reports were judged by different claims and suites (fingerprint.py),
    or when a report does not say (written before reports recorded it)."""
    key = fingerprint.ENV_KEY
    a, b = old.get(key), new.get(key)
    missing = [side for side, value in (("old", a), ("new", b)) if not value]
    if missing:
        which = "neither report records" if len(missing) == 2 else f"the {missing[0]} report does not record"
        return [f"{which} which suites it ran (written by an older pytest-dlconform): "
                "cannot tell whether both were judged by the same claims and tests"]
    if a != b:
        return [f"the reports come from different suite versions (claims and suites {_short(a)} vs {_short(b)}): "
                "a changed verdict may come from a changed test, not from the framework"]
    return []


def _short(value: Any) -> str:
    text = str(value)
    return text[: text.index(":") + 13] if ":" in text else text[:12]


def normalized_nodeid(nodeid: str, device: str | None) -> str:
    """Node id without the folders above ``suites/`` and, if given, without the device id."""
    path, sep, rest = nodeid.partition("::")
    path = re.sub(r"^(?:.*/)?suites/", "", path.replace("\\", "/"))
    if device and "[" in rest:
        head, _, ids = rest.partition("[")
        ids = re.sub(rf"(?:(?<=\[)|(?<=-)){re.escape(device)}(?=-|\]|$)", "", "[" + ids)
        rest = head + re.sub(r"-{2,}", "-", ids).replace("[-", "[").replace("-]", "]").replace("[]", "")
    return path + sep + rest


def _test_key(test: Mapping[str, Any], scope: Scope) -> tuple[str, ...]:
    params = test.get("params") or {}
    device = str(params.get("device", ""))
    return (
        str(test["claim"]), str(params.get("framework", "")), str(params.get("strategy", "")),
        "*" if scope.across_devices else device,
        normalized_nodeid(str(test.get("identity") or test["nodeid"]), device if scope.across_devices else None),
    )


def _in_scope(test: Mapping[str, Any], scope: Scope) -> bool:
    params = test.get("params") or {}
    if str(params.get("framework", "")) not in scope.frameworks:
        return False
    return scope.across_devices or str(params.get("device", "")) in scope.devices


def _column(key: tuple[str, ...]) -> str:
    return "/".join(p for p in key[1:4] if p and p != "*") or "-"


# ------------------------------------------------------------------ the comparison


@dataclass
class Change:
    claim: str
    column: str
    old: str | None
    new: str | None
    detail: str = ""
    tests: list[str] = field(default_factory=list)


@dataclass
class ClaimRow:
    claim: str
    old: str
    new: str
    old_margin: float | str | None
    new_margin: float | str | None


@dataclass
class Comparison:
    old_env: str
    new_env: str
    scope: Scope
    shared_claims: int
    regressed: list[Change] = field(default_factory=list)
    held_to_error: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)
    known_regressed: list[Change] = field(default_factory=list)  # held, now a known divergence's symptom
    to_not_applicable: list[Change] = field(default_factory=list)
    from_not_applicable: list[Change] = field(default_factory=list)
    errors: list[Change] = field(default_factory=list)
    appeared: list[Change] = field(default_factory=list)
    disappeared: list[Change] = field(default_factory=list)
    drift: list[Change] = field(default_factory=list)
    still_violated: list[Change] = field(default_factory=list)
    still_error: list[Change] = field(default_factory=list)
    divergences: list[str] = field(default_factory=list)  # a line per known-divergence entry (the JSON output)
    statuses: list[Mapping[str, Any]] = field(default_factory=list)  # the entries' statuses (quiet output counts them)
    threshold: float = DEFAULT_DRIFT
    unchanged: dict[str, int] = field(default_factory=dict)  # matched tests with the same verdict, by verdict
    claims: list[ClaimRow] = field(default_factory=list)  # every shared claim, side by side
    warnings: list[str] = field(default_factory=list)  # e.g. the reports were judged by different suites
    known_regressions: str = FAIL  # FAIL: a known regression fails the check; WARN: it is reported only

    @property
    def failing(self) -> list[Change]:
        """The changes that fail the upgrade check (``dlconform compare``'s exit status 1, a
        run's ``--dl-baseline``): regressions, held-now-error, and known regressions unless
        the policy is WARN."""
        known_fail = self.known_regressed if self.known_regressions == FAIL else []
        return [*self.regressed, *self.held_to_error, *known_fail]

    @property
    def exit_code(self) -> int:
        return EXIT_REGRESSED if self.failing else EXIT_OK


def compare(old: Report | Mapping[str, Any], new: Report | Mapping[str, Any], *, threshold: float = DEFAULT_DRIFT,
            divergence_entries: list[known.Divergence] | None = None, known_regressions: str = FAIL) -> Comparison:
    """Compare two validated reports; raises UnusableReport if they share no claim.

    With ``divergence_entries``, the new report is judged by those entries alone (the
    matches it came with are forgotten first). ``known_regressions`` (FAIL or WARN): whether
    a test that held and is now a known divergence fails the comparison."""
    if known_regressions not in KNOWN_REGRESSION_POLICIES:
        raise UnusableReport(f"known regressions policy {known_regressions!r} is not one of "
                             f"{', '.join(KNOWN_REGRESSION_POLICIES)}")
    old, new = as_report(old), as_report(new)
    if divergence_entries is not None:
        new = known.apply(new, divergence_entries, rematch=True)
    statuses = list(new.divergences)
    scope = scope_of(old, new)
    if not scope.frameworks:
        raise UnusableReport(
            f"the reports have no framework in common (old: {', '.join(sorted(_values(old, 'framework')))}; "
            f"new: {', '.join(sorted(_values(new, 'framework')))})"
        )
    cells_old, cells_new = _cells(old, scope), _cells(new, scope)
    claims_old = {k[0] for k in cells_old}
    claims_new = {k[0] for k in cells_new}
    shared = claims_old & claims_new
    if not shared:
        raise UnusableReport(
            f"the reports have no claims in common within what both ran ({len(claims_old)} claims in old, "
            f"{len(claims_new)} in new): nothing to compare"
        )
    result = Comparison(
        results.environment_line(old["environment"]), results.environment_line(new["environment"]),
        scope, len(shared), threshold=threshold, divergences=known.status_lines(statuses), statuses=statuses,
        warnings=suite_warnings(old["environment"], new["environment"]), known_regressions=known_regressions,
    )
    for claim in sorted(claims_new - claims_old):
        result.appeared.append(_presence(claim, cells_new, "new"))
    for claim in sorted(claims_old - claims_new):
        result.disappeared.append(_presence(claim, cells_old, "old"))
    for cell in sorted(set(cells_old) | set(cells_new)):
        if cell[0] in shared:
            _compare_cell(result, cell, cells_old.get(cell, []), cells_new.get(cell, []), scope)
    _drift(result, old, new, scope)
    for claim in sorted(shared):
        before = [t for k, ts in cells_old.items() if k[0] == claim for t in ts]
        after = [t for k, ts in cells_new.items() if k[0] == claim for t in ts]
        result.claims.append(ClaimRow(claim, results.overall(t["verdict"] for t in before),
                                      results.overall(t["verdict"] for t in after),
                                      results.worst_margin(before), results.worst_margin(after)))
    return result


Cell = tuple[str, str, str, str]  # claim, framework, strategy, device ("*" across devices)


def _cells(doc: Mapping[str, Any], scope: Scope) -> dict[Cell, list[dict[str, Any]]]:
    cells: dict[Cell, list[dict[str, Any]]] = {}
    for test in _tests(doc):
        if _in_scope(test, scope):
            key = _test_key(test, scope)
            cells.setdefault((key[0], key[1], key[2], key[3]), []).append(test)
    return cells


def _presence(claim: str, cells: Mapping[Cell, list[dict[str, Any]]], side: str) -> Change:
    tests = [t for key, ts in cells.items() if key[0] == claim for t in ts]
    verdict = results.overall(t["verdict"] for t in tests)
    return Change(claim, ", ".join(sorted({_column(k) for k in cells if k[0] == claim})),
                  verdict if side == "old" else None, verdict if side == "new" else None,
                  f"{len(tests)} test(s), only in the {side} report", [t["nodeid"] for t in tests])


def _compare_cell(result: Comparison, cell: Cell, old: list[dict[str, Any]], new: list[dict[str, Any]],
                  scope: Scope) -> None:
    """Match the cell's tests one to one and sort each verdict change into its section."""
    column = _column(cell)
    if not old or not new:
        side = "new" if not old else "old"
        target = result.appeared if not old else result.disappeared
        verdict = results.overall(t["verdict"] for t in old or new)
        target.append(Change(cell[0], column, verdict if old else None, verdict if new else None,
                             f"this cell ran only in the {side} report", [t["nodeid"] for t in old or new]))
        return
    before = {_test_key(t, scope): t for t in old}
    after = {_test_key(t, scope): t for t in new}
    groups: dict[tuple[str, str, str], list[tuple[dict[str, Any] | None, dict[str, Any] | None]]] = {}
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a and b and a["verdict"] == b["verdict"]:
            result.unchanged[a["verdict"]] = result.unchanged.get(a["verdict"], 0) + 1
        section = _section(a, b)
        if section:
            groups.setdefault((section, a["verdict"] if a else "-", b["verdict"] if b else "-"), []).append((a, b))
    for (section, was, now), pairs in groups.items():
        getattr(result, section).append(_grouped(cell[0], column, was, now, section, pairs))


def _section(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str | None:
    if a is None:
        return "appeared"
    if b is None:
        return "disappeared"
    was, now = a["verdict"], b["verdict"]
    if was == now:
        return {results.VIOLATED: "still_violated", results.ERROR: "still_error"}.get(now)
    if was == results.HOLDS and now == results.ERROR:
        return "held_to_error"
    if results.ERROR in (was, now):
        return "errors"
    if now == results.NOT_APPLICABLE:
        return "to_not_applicable"
    if was == results.NOT_APPLICABLE:
        return "from_not_applicable"
    if now == results.VIOLATED:  # it held before
        return "known_regressed" if b.get("expected") else "regressed"
    return "fixed"


def _grouped(claim: str, column: str, was: str, now: str, section: str,
             pairs: list[tuple[dict[str, Any] | None, dict[str, Any] | None]]) -> Change:
    """One line per (cell, kind of change), explained by the side that has the reason."""
    explain = [b for a, b in pairs if b and b.get("reason")] + [a for a, b in pairs if a and a.get("reason")]
    if section == "fixed" or (section == "errors" and was == results.ERROR):
        explain = [a for a, _ in pairs if a and a.get("reason")]  # why it failed before
    detail = explain[0]["reason"] if explain else ""
    if section == "known_regressed":
        entries = sorted({str(b.get("divergence") or "?") for _, b in pairs if b})
        detail = (f"held before, now violated with the symptom of known divergence {', '.join(entries)}: "
                  + "; ".join(sorted({str(b["expected"]) for _, b in pairs if b})))
    elif section == "regressed":
        near = sorted({str(b[known.KNOWN_ELSEWHERE]["note"]) for _, b in pairs
                       if b and isinstance(b.get(known.KNOWN_ELSEWHERE), Mapping)})
        if near:
            detail = (detail + "; " if detail else "") + "; ".join(near)
    elif section == "held_to_error":
        detail = f"held before, the new run could not check it (harness error): {detail}"
    elif section == "errors":
        side = "new" if now == results.ERROR else "old"
        detail = f"harness error in the {side} run, not a conformance result: {detail}"
    elif section == "still_error":
        reasons = [(str(a.get("reason", "")), str(b.get("reason", ""))) for a, b in pairs if a and b]
        detail = "; ".join(f"old: {x}; new: {y}" if x != y else x for x, y in reasons)
    elif section in ("appeared", "disappeared"):
        detail = f"test(s) only in the {'new' if section == 'appeared' else 'old'} report"
    tests = [str((b or a or {}).get("nodeid")) for a, b in pairs]
    return Change(claim, column, None if was == "-" else was, None if now == "-" else now, detail, tests)


def _drift(result: Comparison, old: Mapping[str, Any], new: Mapping[str, Any], scope: Scope) -> None:
    olds = {_test_key(t, scope): t for t in _tests(old) if _in_scope(t, scope)}
    for test in _tests(new):
        if not _in_scope(test, scope):
            continue
        key = _test_key(test, scope)
        before = olds.get(key)
        if before is None:
            continue
        lines = evidence_drift(before.get("evidence") or {}, test.get("evidence") or {}, result.threshold)
        if lines:
            result.drift.append(Change(key[0], _column(key), before["verdict"], test["verdict"], "; ".join(lines),
                                       [str(test["nodeid"])]))


def evidence_drift(old: Mapping[str, Any], new: Mapping[str, Any], threshold: float) -> list[str]:
    """Margins that moved towards the tolerance by >= threshold, changed tolerances, changed counts."""
    lines = []
    old_checks, new_checks = old.get("checks") or {}, new.get("checks") or {}
    for name in sorted(set(old_checks) & set(new_checks)):
        a, b = old_checks[name], new_checks[name]
        ma, mb = _num(a.get("margin")), _num(b.get("margin"))
        if ma is not None and mb is not None and mb - ma >= threshold:
            lines.append(f"{name}: margin {ma:.3g} -> {mb:.3g} of the tolerance")
        ta, tb = _num(a.get("tolerance")), _num(b.get("tolerance"))
        if ta is not None and tb is not None and ta != tb:
            lines.append(f"{name}: tolerance {ta:.3g} -> {tb:.3g}")
    old_notes, new_notes = old.get("notes") or {}, new.get("notes") or {}
    for name in sorted(set(old_notes) & set(new_notes)):
        a, b = old_notes[name], new_notes[name]
        if _counted(a) and _counted(b) and a != b:
            lines.append(f"{name}: {a!r} -> {b!r}")
    return lines


def _num(value: Any) -> float | None:
    if value == "inf":
        return float("inf")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _counted(value: Any) -> bool:
    """Counts and categorical notes are compared; floats (timings, ratios) are noise."""
    if isinstance(value, float):
        return False
    if isinstance(value, (list, tuple)):
        return all(_counted(v) for v in value)
    if isinstance(value, Mapping):
        return all(_counted(v) for v in value.values())
    return isinstance(value, (int, str, bool)) or value is None


# ------------------------------------------------------------------ output

SECTIONS = (
    ("regressed", "Regressed (held, now violated)"),
    ("held_to_error", "Held, now a harness error (the new run could not check these: exit status 1)"),
    ("known_regressed", "Known regressions (held, now violated with a known divergence's symptom: the framework "
                        "regressed into a known bug)"),
    ("errors", "Harness errors (not conformance results)"),
    ("fixed", "Fixed (violated, now holds)"),
    ("to_not_applicable", "Now not applicable"),
    ("from_not_applicable", "No longer not applicable"),
    ("appeared", "Appeared (only in the new report)"),
    ("disappeared", "Disappeared (only in the old report)"),
    ("drift", "Evidence drift"),
    ("still_violated", "Still violated (in both reports)"),
    ("still_error", "Harness errors in both reports (not compared)"),
)


def _verdict_move(change: Change) -> str:
    return f"{change.old or '-'} -> {change.new or '-'}"


SHORT = {"held_to_error": "held, now error", "known_regressed": "known regression(s)", "errors": "harness error(s)",
         "fixed": "fixed", "to_not_applicable": "now n/a",
         "from_not_applicable": "no longer n/a", "appeared": "appeared", "disappeared": "disappeared",
         "drift": "with evidence drift", "still_violated": "still violated", "still_error": "error in both"}


def _headline(c: Comparison) -> str:
    lead = ("regressed", "held_to_error", "known_regressed")
    counts = ", ".join(f"{len(getattr(c, attr))} {SHORT[attr]}" for attr, _ in SECTIONS
                       if getattr(c, attr) and attr not in lead)
    known_line = _known_regressions(c)
    if c.regressed:
        names = ", ".join(sorted({ch.claim for ch in c.regressed}))
        also = "; ".join(p for p in (known_line, counts) if p)
        return f"REGRESSED: {len(c.regressed)} cell(s) of {len({ch.claim for ch in c.regressed})} claim(s): {names}" + (
            f"; also {also}" if also else "")
    if c.held_to_error:
        names = ", ".join(sorted({ch.claim for ch in c.held_to_error}))
        also = "; ".join(p for p in (known_line, counts) if p)
        return f"HELD, NOW ERROR: {len(c.held_to_error)} cell(s): {names}" + (f"; also {also}" if also else "")
    if c.known_regressed:
        return known_line + (f"; also {counts}" if counts else "")
    return "no regression" + (f"; {counts}" if counts else "")


def _known_regressions(c: Comparison) -> str:
    """``1 known regression: CLAIM (entry N)``: held before, now a known divergence's symptom."""
    if not c.known_regressed:
        return ""
    n = len(c.known_regressed)
    names = ", ".join(sorted({ch.claim for ch in c.known_regressed}))
    policy = " (--known-regressions=warn: not failing)" if c.known_regressions == WARN else ""
    return f"{n} known regression{'s' if n > 1 else ''}: {names}{policy}"


def _frameworks(c: Comparison) -> str:
    return ", ".join(f or "(none)" for f in c.scope.frameworks)


def _devices(c: Comparison) -> str:
    return "across device kinds (none in common)" if c.scope.across_devices else f"devices {', '.join(c.scope.devices)}"


def _unchanged(c: Comparison) -> str:
    if not c.unchanged:
        return "no test kept its verdict"
    parts = ", ".join(f"{n} {v}" for v, n in sorted(c.unchanged.items(), key=lambda kv: results.VERDICTS.index(kv[0])))
    return f"{sum(c.unchanged.values())} matched test(s) kept their verdict ({parts})"


FAILING_SECTIONS = ("regressed", "held_to_error", "known_regressed")  # shown before the divergence lines


def divergence_lines(c: Comparison, verbose: bool = False) -> list[str]:
    """The known-divergence entries: a line each with ``verbose``; otherwise a line each only
    for those a person must act on (expired, unmatched) and one line counting the rest."""
    return known.status_lines(list(c.statuses), verbose=verbose) if c.statuses else list(c.divergences)


def _ordered_sections() -> list[tuple[str, str] | None]:
    """SECTIONS with None where the divergence lines go: after what fails the check."""
    lead = [s for s in SECTIONS if s[0] in FAILING_SECTIONS]
    return [*lead, None, *(s for s in SECTIONS if s[0] not in FAILING_SECTIONS)]


def to_text(c: Comparison, verbose: bool = False, divergences: bool = True) -> str:
    """The comparison for a terminal. Known-divergence entries come after the regressions,
    counted on one line unless ``verbose`` (``-v``); ``divergences=False`` leaves them out
    (a run's --dl-baseline: the run prints its own)."""
    out = [f"dlconform compare: {_headline(c)}", f"  old: {c.old_env}", f"  new: {c.new_env}",
           f"  compared: {c.shared_claims} claim(s) both ran; frameworks {_frameworks(c)}; "
           f"{_devices(c)}; drift threshold {c.threshold:g} of the tolerance",
           f"  unchanged: {_unchanged(c)}"]
    out += [f"  warning: {w}" for w in c.warnings]
    out += [f"  note: {n}" for n in c.scope.notes]
    for section in _ordered_sections():
        if section is None:
            out += divergence_lines(c, verbose) if divergences else []  # a line of its own, after the regressions
            continue
        attr, title = section
        changes: list[Change] = getattr(c, attr)
        if not changes:
            continue
        out.append(f"{title}: {len(changes)}")
        for ch in changes:
            out.append(f"  {ch.claim} [{ch.column}] {_verdict_move(ch)}" + (f": {ch.detail}" if ch.detail else ""))
            out += [f"      {nodeid}" for nodeid in ch.tests[:5]]
            if len(ch.tests) > 5:
                out.append(f"      ... and {len(ch.tests) - 5} more")
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(c: Comparison, verbose: bool = False) -> str:
    """The comparison as Markdown (a CI step summary); known divergences as in :func:`to_text`."""
    icon = ":x:" if c.failing else ":warning:" if c.known_regressed else ":white_check_mark:"
    out = [f"### dlconform compare: {icon} {_md(_headline(c))}", "",
           f"- **old:** {_md(c.old_env)}", f"- **new:** {_md(c.new_env)}",
           f"- **compared:** {c.shared_claims} claim(s) both ran; frameworks {_frameworks(c)}; "
           f"{_devices(c)}; drift threshold {c.threshold:g} of the tolerance", f"- **unchanged:** {_unchanged(c)}"]
    out += [f"- **warning:** {_md(w)}" for w in c.warnings]
    out += [f"- note: {_md(n)}" for n in c.scope.notes]
    for section in _ordered_sections():
        if section is None:
            lines = divergence_lines(c, verbose)
            out += ["", *(f"- {_md(line)}" for line in lines)] if lines else []
            continue
        attr, title = section
        changes: list[Change] = getattr(c, attr)
        if not changes:
            continue
        out += ["", f"#### {title}: {len(changes)}", "", "| claim | cell | verdict | detail |", "|---|---|---|---|"]
        for ch in changes:
            out.append(f"| `{ch.claim}` | {ch.column} | {_verdict_move(ch)} | {_md(ch.detail)[:300]} |")
    out += ["", f"<details><summary>All {len(c.claims)} compared claims, side by side</summary>", "",
            "| claim | old | new | worst margin old | worst margin new |", "|---|---|---|---|---|"]
    for row in c.claims:
        out.append(f"| `{row.claim}` | {row.old} | {row.new} | {results.format_margin(row.old_margin) or '-'} | "
                   f"{results.format_margin(row.new_margin) or '-'} |")
    out += ["", "</details>"]
    return "\n".join(out) + "\n"


JSON_SCHEMA = "dlconform-compare"
JSON_SCHEMA_VERSION = 1


def _change_dict(change: Change) -> dict[str, Any]:
    return {"claim": change.claim, "cell": change.column, "old": change.old, "new": change.new,
            "detail": change.detail, "tests": list(change.tests)}


def _margin(value: float | str | None) -> float | str | None:
    """JSON has no infinity or NaN: those as the strings the report itself uses."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    return value


def to_dict(c: Comparison) -> dict[str, Any]:
    """The comparison as plain data (``dlconform compare --format json``): the headline, every
    section of verdict changes, the scope, and each shared claim's verdict before and after."""
    doc: dict[str, Any] = {
        "schema": JSON_SCHEMA, "schema_version": JSON_SCHEMA_VERSION,
        "headline": _headline(c), "exit_code": c.exit_code, "known_regressions_policy": c.known_regressions,
        "old": c.old_env, "new": c.new_env,
        "scope": {"frameworks": list(c.scope.frameworks), "devices": list(c.scope.devices),
                  "across_devices": c.scope.across_devices, "shared_claims": c.shared_claims},
        "threshold": _margin(c.threshold), "warnings": list(c.warnings), "notes": list(c.scope.notes),
        "divergences": list(c.divergences),
        "unchanged": {v: c.unchanged[v] for v in results.VERDICTS if v in c.unchanged},
    }
    for attr, _ in SECTIONS:
        doc[attr] = [_change_dict(ch) for ch in getattr(c, attr)]
    doc["claims"] = [{"claim": row.claim, "old": row.old, "new": row.new,
                      "old_margin": _margin(row.old_margin), "new_margin": _margin(row.new_margin)} for row in c.claims]
    return doc


def to_json(c: Comparison) -> str:
    return json.dumps(to_dict(c), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def run(old_path: str, new_path: str, *, threshold: float = DEFAULT_DRIFT,
        divergences_path: str | None = None, known_regressions: str = FAIL) -> Comparison:
    """Load both files (and the known-divergences file) and compare; UnusableReport on bad input."""
    old = load(old_path, "old report")
    new = load(new_path, "new report")
    entries = None
    if divergences_path:
        try:
            entries = known.load(divergences_path)
        except known.DivergenceError as exc:
            raise UnusableReport(str(exc)) from None
    return compare(old, new, threshold=threshold, divergence_entries=entries, known_regressions=known_regressions)


def last_two(folder: str | None = None) -> tuple[str, str]:
    """The two newest reports saved by --dl-autosave in ``folder`` (default:
    :func:`settings.saved_dir`), older first: ``dlconform compare --last``."""
    from ..run import settings

    folder = folder or settings.saved_dir()
    saved = settings.saved_reports(folder)
    if len(saved) < 2:
        found = "none" if not saved else "only one"
        raise UnusableReport(f"--last needs two saved reports and {folder} has {found}: run the suites "
                             f"(`dlconform run`, or pytest with dlconform active, saves each report; "
                             f"{settings.flag(settings.AUTOSAVE)}) {2 - len(saved)} more time(s), or compare two "
                             "--dl-report files: dlconform compare OLD.json NEW.json")
    return saved[-2], saved[-1]


def names(changes: Iterable[Change]) -> list[str]:
    return sorted({c.claim for c in changes})
