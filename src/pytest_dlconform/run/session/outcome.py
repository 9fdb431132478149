"""The end of a run (controller): the report with known divergences applied, reproduction
scripts attached and the baseline compared, computed once; the matrix on the terminal; the
JSON and HTML files; and the exit status where results change it."""

from __future__ import annotations

import datetime
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pytest

from ...core import claims as registry
from ...core import fingerprint
from ...report import results
from ...report.document import Report
from .. import settings as opts
from .environment import Environment


class Conclusion:
    """The controller's end of a run: what :meth:`finish` decides and writes, and what
    :meth:`summarize` prints, from one report computed once."""

    def __init__(self, config: pytest.Config, settings: opts.Settings, collector: results.Collector,
                 environment: Environment) -> None:
        self.config = config
        self.settings = settings
        self.collector = collector
        self.environment = environment
        self._outcome: _Outcome | None = None

    def summarize(self, terminalreporter: Any, head: list[str]) -> None:
        """The conformance matrix, after ``head`` (header lines where the run started late)."""
        outcome = self.outcome()
        if not outcome.doc["claims"] and not outcome.messages:
            return
        terminalreporter.write_sep("=", "dlconform conformance matrix")
        verbose = terminalreporter.config.get_verbosity() > 0
        lines = summary_lines(outcome.doc, outcome.messages, width=terminalreporter._tw.fullwidth,
                              verbose=verbose, header=head)
        for line, bold in lines:
            terminalreporter.write_line(line, bold=bold)

    def finish(self, session: pytest.Session) -> None:
        """Apply known divergences, compare with the baseline, write files.

        pytest calls this before the terminal summary, so :meth:`summarize` prints what
        was decided and written here. A regression against --dl-baseline fails the run;
        failures that are all known divergences do not.
        """
        outcome = self.outcome()
        status = _exit_status(session, outcome)
        if status is not None:
            session.exitstatus = status
        outcome.doc = outcome.doc.replace(interrupted=_interrupted(session), exit_status=int(session.exitstatus))
        s = self.settings
        if s.report:
            results.write_atomic(s.report, outcome.doc.to_json())
            outcome.messages.append(f"JSON report written to {s.report}")
        if s.html:
            from ...report import html

            results.write_atomic(s.html, html.render(outcome.doc))
            outcome.messages.append(f"HTML matrix written to {s.html}")
        if s.autosave and s.shard is None and outcome.doc["claims"]:
            folder = s.autosave_dir or os.path.join(str(session.config.rootpath), opts.SAVED_REPORTS)
            try:
                saved = autosave(folder, outcome.doc)
            except OSError as exc:
                outcome.messages.append(f"cannot save the report in {folder} ({exc.__class__.__name__}: {exc}); "
                                        f"{opts.flag(opts.AUTOSAVE)}=no turns saving off")
            else:
                outcome.messages.append(f"report saved as {_shown(saved)} (`dlconform compare --last`; "
                                        f"{opts.flag(opts.AUTOSAVE)}=no turns saving off)")

    def outcome(self) -> _Outcome:
        """The report of the run with known divergences applied and the baseline compared (once)."""
        if self._outcome is None:
            self._outcome = self._conclude()
        return self._outcome

    def _conclude(self) -> _Outcome:
        claims = {cid: c.as_dict() for cid, c in registry.registry().items()}
        outcome = _Outcome(results.report_document(self.collector, self.environment.doc(), claims))
        from .. import shards  # --dl-shard: which part of the collection this report holds (issue 30)
        outcome.doc = shards.record(outcome.doc, self.settings.shard)
        verbose = self.config.get_verbosity() > 0
        _apply_divergences(self.settings, outcome, verbose)
        from ...report import repro  # each violated test's standalone script (issue 14)
        outcome.doc = repro.attach(outcome.doc)
        from ...report import coverage  # the op suite's coverage ledger (issue 12)
        outcome.doc = outcome.doc.replace(coverage=coverage.ledger(outcome.doc))
        from ...report import modes  # the claims' documented modes (issue 13)
        outcome.doc = outcome.doc.replace(modes=modes.ledger(outcome.doc))
        from ...report import combinations  # the record suites' registered combinations (issue 29)
        outcome.doc = outcome.doc.replace(combinations=combinations.ledger(outcome.doc))
        _compare_baseline(self.settings, outcome, verbose)
        return outcome


def autosave(folder: str, doc: Report, keep: int = opts.AUTOSAVE_KEEP,
             now: datetime.datetime | None = None) -> str:
    """Save ``doc`` in ``folder`` as ``NNNN_<UTC time>_<short suite hash>.json``, the number one
    more than the newest there, atomically (a temporary file linked into place, so two runs
    saving at once never take the same name); then remove all but the newest ``keep``.
    Returns the path. The controller's job alone: xdist workers have no Conclusion."""
    os.makedirs(folder, exist_ok=True)
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    suite = str(doc["environment"].get(fingerprint.ENV_KEY) or "")
    short = re.sub(r"[^0-9A-Za-z]", "", suite.partition(":")[2] or suite)[:10] or "nohash"
    fd, tmp = tempfile.mkstemp(prefix=".dlconform-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(doc.to_json())
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        saved = opts.saved_reports(folder)
        number = int(os.path.basename(saved[-1]).partition("_")[0]) + 1 if saved else 1
        while True:
            path = os.path.join(folder, f"{number:04d}_{stamp}_{short}.json")
            try:
                os.link(tmp, path)  # fails if the name is taken: another run saved at the same moment
                break
            except FileExistsError:
                number += 1
            except OSError:  # no hard links on this file system
                if os.path.exists(path):
                    number += 1
                    continue
                os.replace(tmp, path)
                break
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    for old in opts.saved_reports(folder)[:-keep] if keep > 0 else []:
        try:
            os.unlink(old)
        except FileNotFoundError:  # another run pruned it first
            pass
    return path


def _shown(path: str) -> str:
    """``path`` relative to the current folder when it is below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


# ---------------------------------------------------------------- results of a run (controller)
# What Conclusion.summarize/finish share: the report document of the run, with known
# divergences applied and the baseline compared, computed once per run.


@dataclass
class _Outcome:
    doc: Report  # replaced, never edited: each step derives the next report
    messages: list[str] = field(default_factory=list)
    regressed: list[str] = field(default_factory=list)
    unusable: bool = False  # a --dl-baseline or known-divergences file that cannot be used


def _apply_divergences(settings: opts.Settings, outcome: _Outcome, verbose: bool) -> None:
    from ...report import divergences

    path = settings.divergences
    if not path:
        return
    try:
        entries = divergences.load(path)
    except divergences.DivergenceError as exc:
        outcome.messages.append(f"{opts.flag(opts.DIVERGENCES)} (from {settings.describe(opts.DIVERGENCES)}): {exc}")
        outcome.unusable = True
        return
    outcome.doc = divergences.apply(outcome.doc, entries)
    outcome.messages += divergences.status_lines(list(outcome.doc.divergences), verbose=verbose)


def _compare_baseline(settings: opts.Settings, outcome: _Outcome, verbose: bool) -> None:
    from ...report import compare

    path = settings.baseline
    if not path or not outcome.doc["claims"]:
        return
    try:
        comparison = compare.compare(compare.load(path, "baseline"), outcome.doc,
                                     known_regressions=settings.known_regressions)
    except compare.UnusableReport as exc:
        outcome.messages.append(f"{opts.flag(opts.BASELINE)}: {exc}")
        outcome.unusable = True
        return
    text = compare.to_text(comparison, verbose=verbose, divergences=False)  # the run prints its own entries
    outcome.regressed = compare.names(comparison.failing)  # known regressions too, unless --dl-known-regressions=warn
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


#: Every line of the summary fits this many columns (the matrix: the terminal's width, at most this).
WIDTH = 120


def summary_lines(doc: Report, messages: list[str], width: int = WIDTH, verbose: bool = False,
                  header: list[str] | None = None) -> list[tuple[str, bool]]:
    """The end-of-run summary as (line, bold) pairs, each at most :data:`WIDTH` columns:
    header lines (where a claim test activated the plugin late), the matrix with its counts,
    the failure block, the n/a reasons and harness errors grouped by cause, and messages."""
    width = min(width, WIDTH)
    out = [(line, False) for line in header or []]
    out += [(line, False) for line in results.matrix_lines(doc, width)]
    out += [(line, False) for line in results.failure_lines(doc, WIDTH, max_lines=None if verbose else 40)]
    out += [(line, False) for text in _reason_lines(doc, verbose) for line in results.wrap_line(text, WIDTH)]
    out += [(line, True) for text in messages for line in results.wrap_line(f"dlconform: {text}", WIDTH)]
    return out


def _reason_lines(doc: Report, verbose: bool = False) -> list[str]:
    """Why tests were not applicable, and harness errors kept apart from conformance results,
    grouped by cause: a test's recorded cause (``not_applicable(reason, cause=..., subject=...)``),
    else its reason. A cause's line names its subjects; ``-v`` adds each reason under it."""
    lines = []
    for verdict, label in ((results.NOT_APPLICABLE, "n/a"), (results.ERROR, "harness error, not a conformance result")):
        groups: dict[str, dict[str, Any]] = {}
        for entry in doc["claims"].values():
            for test in entry["tests"]:
                if test["verdict"] != verdict:
                    continue
                reason = test["reason"] or "(no reason given)"
                notes = (test.get("evidence") or {}).get("notes") or {}
                cause = notes.get(NA_CAUSE) if verdict == results.NOT_APPLICABLE else None
                group = groups.setdefault(str(cause or reason), {"n": 0, "cause": bool(cause), "subjects": {}, "reasons": {}})
                group["n"] += 1
                if notes.get(NA_SUBJECT) is not None:
                    group["subjects"][str(notes[NA_SUBJECT])] = None
                group["reasons"][reason] = group["reasons"].get(reason, 0) + 1
        for key, group in sorted(groups.items(), key=lambda kv: (-kv[1]["n"], kv[0])):
            n = group["n"]
            text = f"{label} ({n} test{'s' if n > 1 else ''}): {key}"
            if group["cause"]:
                text += _subjects(sorted(group["subjects"]), WIDTH - len(text))
                if verbose:
                    lines.append(text)
                    lines += [f"    {reason}" + (f" ({k} tests)" if k > 1 else "")
                              for reason, k in sorted(group["reasons"].items())]
                    continue
            lines.append(text)
    return lines


# The evidence notes a test records with not_applicable(reason, cause=..., subject=...).
NA_CAUSE, NA_SUBJECT = "not_applicable_cause", "not_applicable_subject"


def _subjects(subjects: list[str], room: int) -> str:
    """" (qr, svd, ...)": the subjects of a cause, as many as fit ``room`` columns."""
    if not subjects:
        return ""
    shown: list[str] = []
    for i, name in enumerate(subjects):
        rest = len(subjects) - i - 1
        tail = f", ... {len(subjects)} in all" if rest else ""
        if len(" (" + ", ".join([*shown, name]) + tail + ")") > room and shown:
            return " (" + ", ".join(shown) + f", ... {len(subjects)} in all)"
        shown.append(name)
    return " (" + ", ".join(shown) + ")"


def _interrupted(session: pytest.Session) -> str | None:
    """Why the run stopped early (Ctrl-C, -x, --maxfail), or None: a complete report of a
    partial run must say that it is partial."""
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    stop = session.shouldstop or session.shouldfail
    return str(stop) if stop else None
