"""Each claim test's verdict, written onto its pytest reports in the process that ran it.

pytest's own vocabulary tells the truth (README, "What a run tells you"):

=================  ===================================================================
pytest outcome     dlconform verdict
=================  ===================================================================
passed             holds
failed             violated: an oracle failed, or the framework raised (outcomes.py)
xfailed            violated, and a live known divergence pins exactly this symptom
skipped            not applicable, with the exact reason
error              harness error: fixtures, our processes and deadlines, an install
                   that cannot import; in the call phase too (``pytest_report_teststatus``)
=================  ===================================================================

The verdict, claim, parameters, evidence (with the exception, if any) and reproduction
travel in ``report.user_properties``: through xdist, into JUnit XML and the JSON report.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from ..core import budgets
from . import outcomes, results
from .results import PROP_CLAIM, PROP_EVIDENCE, PROP_EXPECTED, PROP_PARAMS, PROP_REPRO, PROP_VERDICT

if TYPE_CHECKING:
    from ..run.session import Worker

WARNINGS_KEY = pytest.StashKey[dict[str, int]]()
SHRINK_KEY = pytest.StashKey[list[str]]()
MAX_WARNING_KINDS = 20  # distinct warnings kept per test in the report
INCONCLUSIVE_ATTR = "dl_inconclusive"  # on a call report turned into a harness error below


def _info(item: pytest.Item) -> Any:
    from ..run.session import ITEM_KEY

    return item.stash.get(ITEM_KEY, None)


# ------------------------------------------------------------------ around each phase


@contextlib.contextmanager
def phase_warnings(item: pytest.Item, worker: Worker | None) -> Iterator[None]:
    """Count a claim test's warnings per kind into its evidence instead of pytest's summary
    (framework deprecation warnings would fill it); ``-v`` shows them as usual."""
    if worker is None or _info(item) is None:
        yield
        return
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught, framework_logs(item):
            yield
    finally:
        _count(item, caught)  # outside the recording: -v hands them on to pytest


#: The loggers of the frameworks and their packages: what they log while a claim test runs
#: (torch.onnx's "torchvision is not installed. Skipping ...") is counted in the evidence
#: with the warnings, not shown in a failure's "Captured log" section, unless -v.
FRAMEWORK_LOGGERS = ("torch", "tensorflow", "keras", "tf_keras", "jax", "absl", "onnx", "onnxscript", "h5py")


_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def warning_kind(text: str) -> str:
    """The kind of a warning as the evidence counts it: its first line (160 characters), with
    object addresses ("<function f at 0x7fa43cd8a340>") written 0x... so that the same warning
    counts as one kind within a run and compares equal between runs (`dlconform compare`
    reported every run's TensorFlow retracing warnings as drift)."""
    return _ADDRESS.sub("0x...", text.splitlines()[0] if text else "")[:160]


def _count_log(item: pytest.Item, record: logging.LogRecord) -> None:
    try:
        text = record.getMessage()
    except Exception:  # a malformed log call must not break the test
        text = str(record.msg)
    counts = item.stash.setdefault(WARNINGS_KEY, {})
    key = f"log {record.levelname} {record.name}: {warning_kind(text)}"
    if key in counts or len(counts) < MAX_WARNING_KINDS:
        counts[key] = counts.get(key, 0) + 1


@contextlib.contextmanager
def framework_logs(item: pytest.Item) -> Iterator[None]:
    """Count the framework loggers' warnings (and worse) of one phase into the test's
    evidence; without -v they stop there: neither the frameworks' own handlers (torch's
    stderr handler, which torch adds when it is imported, inside a phase) nor pytest's log
    capture see them. Records of other loggers are handled as usual."""
    verbose = item.config.get_verbosity() > 0
    original = logging.Logger.callHandlers

    def call_handlers(self: logging.Logger, record: logging.LogRecord) -> None:
        if record.name.split(".", 1)[0] not in FRAMEWORK_LOGGERS or record.levelno < logging.WARNING:
            return original(self, record)
        _count_log(item, record)
        if verbose:
            return original(self, record)
        return None

    logging.Logger.callHandlers = call_handlers  # type: ignore[method-assign]  # this phase only, restored below
    try:
        yield
    finally:
        logging.Logger.callHandlers = original  # type: ignore[method-assign]


def _count(item: pytest.Item, caught: list[warnings.WarningMessage]) -> None:
    counts = item.stash.setdefault(WARNINGS_KEY, {})
    for w in caught:
        key = f"{w.category.__name__}: {warning_kind(str(w.message))}"
        if key in counts or len(counts) < MAX_WARNING_KINDS:
            counts[key] = counts.get(key, 0) + 1
    if item.config.get_verbosity() > 0:
        with warnings.catch_warnings():  # hand them on to pytest's own warnings summary
            warnings.simplefilter("always")
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


@contextlib.contextmanager
def bounded_shrinking(item: pytest.Item, worker: Worker | None) -> Iterator[None]:
    """While a claim test runs: the run's budget as hypothesis's default (nested properties)
    and shrinking bounded as its profile says."""
    info = _info(item) if worker is not None else None
    if worker is None or info is None:
        yield
        return
    profile = worker.settings.profile
    own = worker.config.getoption("hypothesis_profile", None)  # the user's budget: hypothesis's own shrinking
    seconds = None if own else budgets.SHRINK_SECONDS.get(profile)
    left = None if own else budgets.shrinking_left(profile)
    spent = left is not None and left <= 0
    if left is not None and not spent:
        seconds = left if seconds is None else min(seconds, left)
    budget = worker.budget.current()
    with contextlib.ExitStack() as stack:
        # A test a known divergence pins, or any test once the process's shrinking budget is
        # spent, runs to its first failing example.
        pinned = _pinned(worker, item, info)
        if pinned or spent:
            budget = stack.enter_context(budgets.first_failure_only(getattr(item, "function", None), budget))
        notes = stack.enter_context(budgets.bounded_shrinking(seconds, profile))
        stack.enter_context(budgets.as_default(budget))
        try:
            yield
        except (pytest.skip.Exception, pytest.xfail.Exception):
            raise
        except BaseException:
            if pinned:
                notes.append(budgets.pinned_note())
            elif spent:
                notes.append(budgets.run_budget_note(profile))
            raise
        finally:
            if notes:
                item.stash[SHRINK_KEY] = notes


def _pinned(worker: Worker, item: pytest.Item, info: Any) -> bool:
    """Whether a live known-divergence entry pins this claim test (whatever the symptom)."""
    return bool(worker.known.pins(_as_selected(worker, item, info)))


def _as_selected(worker: Worker, item: pytest.Item, info: Any) -> dict[str, Any]:
    """The test as known-divergence entries select it: matched by its identity inside the
    package, since a reproduce line (pytest --pyargs pytest_dlconform.suites.autodiff.test_ops::...)
    gives the test a node id with no path."""
    return {"nodeid": item.nodeid, "identity": worker.guard.test_identity(item), "claim": info.claim,
            "params": info.params}


@contextlib.contextmanager
def brief_repr_if_pinned(worker: Worker | None, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """While pytest makes the report of a claim test whose failure a known divergence pins (it
    will be an xfail, :func:`_known_divergence`): the traceback in pytest's native style, which
    reads source lines only, instead of its long style, which parses the test module's source
    once per traceback entry (about 0.2 s of CPU per xfail in a large suite file; a ci run has
    about 180). The crash line, reason and reproduction the report records are the same."""
    exc = call.excinfo.value if call.excinfo is not None and call.when == "call" else None
    info = _info(item) if exc is not None and worker is not None else None
    if info is None or worker is None or exc is None or outcomes.classify(exc) != results.VIOLATED:
        yield
        return
    from ..run.session import EVIDENCE_KEY

    recorder = item.stash.get(EVIDENCE_KEY, None)
    evidence = recorder.as_dict() if recorder is not None else {"checks": {}, "notes": {}}
    evidence["exception"] = outcomes.exception_evidence(exc)
    if _match(worker, item, info, exc, evidence)[0] is None:
        yield
        return
    def native(excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return excinfo.getrepr(style="native")

    item.repr_failure = native  # type: ignore[method-assign]
    try:
        yield
    finally:
        del item.repr_failure  # the class's method again


# ------------------------------------------------------------------ reports


def phase_verdict(report: pytest.TestReport, call: pytest.CallInfo[None]) -> str:
    if report.failed and getattr(report, INCONCLUSIVE_ATTR, False):
        return results.ERROR
    if report.passed:
        return results.HOLDS
    if report.skipped:
        return results.NOT_APPLICABLE
    exc = call.excinfo.value if call.excinfo is not None else None
    if report.when == "call" and exc is not None:
        return outcomes.classify(exc)
    return results.ERROR


def annotate(worker: Worker, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Verdict, evidence, divergence and reproduction of one phase, on its report."""
    from ..run.session import EVIDENCE_KEY, VERDICT_KEY

    info = _info(item)
    if info is None:
        return
    recorder = item.stash.get(EVIDENCE_KEY, None)
    if report.when == "call" and report.passed and recorder is not None:
        _fail_if_inconclusive(recorder, report)
    # Each phase's verdict is the worst so far, so the teardown report (the one JUnit XML
    # takes user properties from) carries the test's final verdict.
    verdict = results.worst([item.stash.get(VERDICT_KEY, results.HOLDS), phase_verdict(report, call)])
    item.stash[VERDICT_KEY] = verdict
    props: list[tuple[str, Any]] = [(PROP_CLAIM, info.claim), (PROP_PARAMS, info.params), (PROP_VERDICT, verdict)]
    exc = call.excinfo.value if call.excinfo is not None and report.when == "call" else None
    if report.when == "call":
        evidence = recorder.as_dict() if recorder is not None else {"checks": {}, "notes": {}}
        _add_observations(item, evidence, exc)
        props.append((PROP_EVIDENCE, json.dumps(evidence, sort_keys=True)))
        if verdict == results.VIOLATED and exc is not None and report.failed:
            _known_divergence(worker, item, info, exc, evidence, report, props)
    if verdict in (results.VIOLATED, results.ERROR):
        repro = worker.guard.repro(item)
        props.append((PROP_REPRO, repro))
        if not hasattr(report, "wasxfail"):
            report.sections.append(("dlconform reproduction", repro))
    report.user_properties = [*item.user_properties, *props]


def _fail_if_inconclusive(recorder: Any, report: pytest.TestReport) -> None:
    """A test most of whose comparisons could not have failed proves nothing: a harness
    error (its bounds accept a canonical wrong answer), never "holds"."""
    bad, good = recorder.inconclusive_count, recorder.conclusive_count
    notes = recorder.notes
    if isinstance(notes.get("samples_checked"), int) and isinstance(notes.get("samples_inconclusive"), int):
        # A suite that judges samples (low precision) counts them: a sample whose forward bound
        # can fail is checked even where its gradient bound cannot (those stay counted as
        # inconclusive comparisons in the report).
        bad, good = notes["samples_inconclusive"], notes["samples_checked"]
    if bad == 0 or bad <= good:
        return
    reasons = "; ".join(f"{name}: {e['reason']} ({e['count']}x)" for name, e in sorted(recorder.inconclusive.items()))
    report.outcome = "failed"
    report.longrepr = (f"inconclusive: {bad} of {bad + good} comparisons could not have failed ({reasons}); "
                       "this is a harness problem, not a conformance result")
    setattr(report, INCONCLUSIVE_ATTR, True)


def _add_observations(item: pytest.Item, evidence: dict[str, Any], exc: BaseException | None) -> None:
    notes = evidence.setdefault("notes", {})
    counts = item.stash.get(WARNINGS_KEY, None)
    if counts:
        notes["warnings"] = dict(sorted(counts.items()))
    shrink = item.stash.get(SHRINK_KEY, None)
    if shrink:
        notes["shrinking"] = "; ".join(shrink)
    if exc is not None and not isinstance(exc, pytest.skip.Exception):
        evidence["exception"] = outcomes.exception_evidence(exc)


def _match(worker: Worker, item: pytest.Item, info: Any, exc: BaseException,
           evidence: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """The live known-divergence entry that pins this test and this symptom (or None), the
    failure as matched, and the test as the entries select it."""
    failure = outcomes.failure(exc, evidence)
    test = _as_selected(worker, item, info)
    return worker.known.match(test, failure), failure, test


def _known_divergence(worker: Worker, item: pytest.Item, info: Any, exc: BaseException, evidence: dict[str, Any],
                      report: pytest.TestReport, props: list[tuple[str, Any]]) -> None:
    """A live entry that pins this test and this symptom: report an xfail, not a failure."""
    entry, failure, test = _match(worker, item, info, exc, evidence)
    if entry is None:
        near = worker.known.elsewhere(test, failure)
        if near is not None:  # still a failure: the finding is named, on this version not yet confirmed
            report.sections.append(("dlconform known divergence", near.elsewhere_note()))
        return
    report.outcome = "skipped"
    report.wasxfail = f"known divergence {entry.key}: {entry.reason}; observed: {failure.describe()}"  # pytest's xfail attribute
    props.append((PROP_EXPECTED, json.dumps({"key": entry.key, "reason": entry.reason, "observed": failure.describe()})))


def teststatus(report: Any) -> tuple[str, str, str] | None:
    """("error", "E", "ERROR") for a call-phase harness failure of a claim test."""
    if report.when != "call" or not report.failed:
        return None
    props = dict(getattr(report, "user_properties", ()) or ())
    if props.get(PROP_VERDICT) == results.ERROR and PROP_CLAIM in props:
        return "error", "E", "ERROR"
    return None
