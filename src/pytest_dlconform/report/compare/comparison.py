"""The comparison itself: each matched cell's verdict changes sorted into sections, evidence
drift, and what fails the upgrade check."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import divergences as known
from .. import results
from ..document import Report, as_report
from .loading import UnusableReport, load
from .matching import Cell, Scope, _cells, _column, _in_scope, _test_key, _tests, _values, scope_of, suite_warnings

EXIT_OK, EXIT_REGRESSED, EXIT_UNUSABLE = 0, 1, 2
FAIL, WARN = "fail", "warn"
KNOWN_REGRESSION_POLICIES = (FAIL, WARN)  # what a known regression does to the exit status
DEFAULT_DRIFT = 0.25  # margin growth, as a fraction of the tolerance, worth a line


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


def names(changes: Iterable[Change]) -> list[str]:
    return sorted({c.claim for c in changes})
