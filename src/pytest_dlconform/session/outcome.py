"""The end of a run (controller): the report with known divergences applied, reproduction
scripts attached and the baseline compared, computed once; the matrix on the terminal; the
JSON and HTML files; and the exit status where results change it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from .. import claims as registry
from .. import results
from .. import settings as opts
from ..report import Report


class Outcome:
    """Run's results part (a mixin of :class:`pytest_dlconform.session.Run`)."""

    settings: opts.Settings
    collector: results.Collector
    workerinput: dict[str, Any] | None

    if TYPE_CHECKING:
        def environment(self) -> dict[str, Any]: ...  # Run's
        def header_lines(self) -> list[str]: ...  # Workers'

    @property
    def is_controller(self) -> bool:
        return self.workerinput is None

    def summarize(self, terminalreporter: Any, header: bool = False) -> None:
        if not self.is_controller:
            return
        outcome = _outcome(self)
        if not outcome.doc["claims"] and not outcome.messages:
            return
        terminalreporter.write_sep("=", "dlconform conformance matrix")
        for line in self.header_lines() if header else ():  # activated by a claim test, after the header
            terminalreporter.write_line(line)
        for line in results.matrix_lines(outcome.doc, terminalreporter._tw.fullwidth):
            terminalreporter.write_line(line)
        for line in _reason_lines(outcome.doc):
            terminalreporter.write_line(line)
        for line in outcome.messages:
            terminalreporter.write_line(f"dlconform: {line}", bold=True)

    def finish(self, session: pytest.Session) -> None:
        """Controller only: apply known divergences, compare with the baseline, write files.

        pytest calls this before the terminal summary, so :meth:`summarize` prints what
        was decided and written here. A regression against --dl-baseline fails the run;
        failures that are all known divergences do not.
        """
        if not self.is_controller:
            return
        outcome = _outcome(self)
        status = _exit_status(session, outcome)
        if status is not None:
            session.exitstatus = status
        outcome.doc = outcome.doc.replace(interrupted=_interrupted(session), exit_status=int(session.exitstatus))
        s = self.settings
        if s.report:
            results.write_atomic(s.report, outcome.doc.to_json())
            outcome.messages.append(f"JSON report written to {s.report}")
        if s.html:
            from .. import html

            results.write_atomic(s.html, html.render(outcome.doc))
            outcome.messages.append(f"HTML matrix written to {s.html}")


# ---------------------------------------------------------------- results of a run (controller)
# What Run.summarize/finish share: the report document of the run, with known divergences
# applied and the baseline compared, computed once per run.


@dataclass
class _Outcome:
    doc: Report  # replaced, never edited: each step derives the next report
    messages: list[str] = field(default_factory=list)
    regressed: list[str] = field(default_factory=list)
    unusable: bool = False  # a --dl-baseline or known-divergences file that cannot be used


def _outcome(run: Any) -> _Outcome:
    cached: _Outcome | None = getattr(run, "_dl_outcome", None)
    if cached is not None:
        return cached
    claims = {cid: c.as_dict() for cid, c in registry.registry().items()}
    outcome = _Outcome(results.report_document(run.collector, run.environment(), claims))
    _apply_divergences(run, outcome)
    from .. import repro  # each violated test's standalone script (issue 14)
    outcome.doc = repro.attach(outcome.doc)
    from .. import coverage  # the op suite's coverage ledger (issue 12)
    outcome.doc = outcome.doc.replace(coverage=coverage.ledger(outcome.doc))
    from .. import modes  # the claims' documented modes (issue 13)
    outcome.doc = outcome.doc.replace(modes=modes.ledger(outcome.doc))
    _compare_baseline(run, outcome)
    run._dl_outcome = outcome  # computed once: finish, then summarize
    return outcome


def _apply_divergences(run: Any, outcome: _Outcome) -> None:
    from .. import divergences

    path = run.settings.divergences
    if not path:
        return
    try:
        entries = divergences.load(path)
    except divergences.DivergenceError as exc:
        outcome.messages.append(f"{opts.flag(opts.DIVERGENCES)} (from {run.settings.describe(opts.DIVERGENCES)}): {exc}")
        outcome.unusable = True
        return
    outcome.doc = divergences.apply(outcome.doc, entries)
    outcome.messages += divergences.status_lines(list(outcome.doc.divergences))


def _compare_baseline(run: Any, outcome: _Outcome) -> None:
    from .. import compare

    path = run.settings.baseline
    if not path or not outcome.doc["claims"]:
        return
    try:
        comparison = compare.compare(compare.load(path, "baseline"), outcome.doc)
    except compare.UnusableReport as exc:
        outcome.messages.append(f"{opts.flag(opts.BASELINE)}: {exc}")
        outcome.unusable = True
        return
    text = compare.to_text(comparison)
    outcome.regressed = compare.names([*comparison.regressed, *comparison.held_to_error])
    outcome.doc = outcome.doc.replace(baseline={"path": path, "regressed": outcome.regressed, "text": text})
    outcome.messages += text.rstrip("\n").splitlines()


def _exit_status(session: pytest.Session, outcome: _Outcome) -> int | None:
    """The run's exit status where results change it, else None."""
    if outcome.unusable:
        return int(pytest.ExitCode.USAGE_ERROR)
    if outcome.regressed:
        outcome.messages.append(f"failing the run: regressed against the baseline: {', '.join(outcome.regressed)}")
        return int(pytest.ExitCode.TESTS_FAILED)
    return None


def _reason_lines(doc: Report) -> list[str]:
    """Why tests were not applicable, and harness errors kept apart from conformance results."""
    lines = []
    for verdict, label in ((results.NOT_APPLICABLE, "n/a"), (results.ERROR, "harness error, not a conformance result")):
        reasons: dict[str, int] = {}
        for entry in doc["claims"].values():
            for test in entry["tests"]:
                if test["verdict"] == verdict:
                    key = test["reason"] or "(no reason given)"
                    reasons[key] = reasons.get(key, 0) + 1
        lines += [f"{label} ({n} test{'s' if n > 1 else ''}): {reason}" for reason, n in sorted(reasons.items())]
    return lines


def _interrupted(session: pytest.Session) -> str | None:
    """Why the run stopped early (Ctrl-C, -x, --maxfail), or None: a complete report of a
    partial run must say that it is partial."""
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    stop = session.shouldstop or session.shouldfail
    return str(stop) if stop else None
