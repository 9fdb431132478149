"""What an exception in a claim test means, decided where the exception still exists.

The rule (README, "What a run tells you"):

- Inside the checked region of a claim test (its call phase, where the test drives the
  framework and the oracles), any exception is a **violation**: an oracle's assertion, and
  equally an exception the framework under test raised where its documentation says the
  call works (a loader that cannot read what the framework saved, a traced function that
  raises, a ``None`` gradient that the test then uses). The exception goes into the
  evidence, so the report says what was raised and where.
- It is a **harness error** instead when the harness failed: a
  :class:`~pytest_dlconform.core.exceptions.HarnessError` (our processes, deadlines, clusters,
  fresh interpreters, an :class:`~pytest_dlconform.core.exceptions.InconclusiveCheck` no test
  handled), an install that cannot import (``ImportError``), hypothesis refusing
  the test (health checks, unsatisfiable, a strategy that drew differently), a bug in the test's own text
  (``NameError``, ``SyntaxError``), an interrupt; and anything outside the call phase
  (fixtures, setup, teardown).
- A program that raised inside a rank of one of our clusters (``TaskError``) is judged by
  what it raised there: a framework exception or an assertion is a violation; a harness
  error there is a harness error here.
- A failure that did not repeat (hypothesis's ``FlakyFailure``: the first call with an example
  failed, a replay with the same example did not) is judged by the failure it saw. The
  examples a claim test draws are a function of its seed alone (house rule), so a failure that
  does not repeat is the framework answering the same call two ways, and the answer that broke
  the documented contract was really given: a violation when the failure was one, and the
  evidence says it did not repeat.
"""

from __future__ import annotations

import traceback
from typing import Any

from ..core.exceptions import REMOTE_HARNESS_NAMES, HarnessError
from . import results
from .divergences import Failure, failing_errors, reference_margins

# Hypothesis refusing a test (health checks, unsatisfiable, a strategy drawing differently): a
# harness problem. Named, not imported, so that classifying never imports hypothesis's internals.
# (FlakyFailure is not among them: it holds the failure it saw, judged like any other.)
# A deadline is about our timing, never a claim (the profiles set none; a user's may).
_HYPOTHESIS_HARNESS = frozenset({"FailedHealthCheck", "Unsatisfiable", "Flaky", "FlakyStrategyDefinition",
                                 "FlakyBackendFailure", "FlakyReplay", "DeadlineExceeded",
                                 "InvalidArgument", "InvalidDefinition",
                                 "DidNotReproduce", "HypothesisDeprecationWarning"})
# Python's own: a broken install or a bug in the test's text, never the framework's behaviour.
_PYTHON_HARNESS = (ImportError, NameError, SyntaxError)


def type_names(exc: BaseException) -> tuple[str, ...]:
    """The exception's class name and those of its bases (most specific first)."""
    return tuple(dict.fromkeys(cls.__name__ for cls in type(exc).__mro__ if cls not in (object, BaseException)))


def classify(exc: BaseException) -> str:
    """VIOLATED or ERROR for an exception raised in the call phase of a claim test."""
    import pytest

    from ..harness.groups import TaskError

    if isinstance(exc, pytest.fail.Exception):
        return results.VIOLATED  # pytest.fail(...) in a test states a violation
    if isinstance(exc, pytest.skip.Exception):
        return results.NOT_APPLICABLE
    if isinstance(exc, TaskError):  # judged by what the ranks raised
        remote = exc.errors
        return results.VIOLATED if remote and all(_remote_violation(e) for e in remote) else results.ERROR
    if isinstance(exc, (HarnessError, *_PYTHON_HARNESS)) or _is_hypothesis_refusal(exc):
        return results.ERROR
    inner = _group(exc)  # hypothesis reports several failures as a group
    if inner:
        return results.worst(classify(e) for e in inner)
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit
        return results.ERROR
    return results.VIOLATED


def _is_hypothesis_refusal(exc: BaseException) -> bool:
    return (type(exc).__module__.startswith("hypothesis") and not _did_not_repeat(exc)
            and bool(set(type_names(exc)) & _HYPOTHESIS_HARNESS))


def _did_not_repeat(exc: BaseException) -> bool:
    """Hypothesis's FlakyFailure: a group of the failures a first call saw and a replay did not."""
    return type(exc).__module__.startswith("hypothesis") and type(exc).__name__ == "FlakyFailure"


def did_not_repeat(exc: BaseException) -> bool:
    """Whether the exception, or a group inside it, is a failure that a replay did not repeat."""
    return _did_not_repeat(exc) or any(did_not_repeat(e) for e in _group(exc))


def _group(exc: BaseException) -> list[BaseException]:
    """The members of an exception group (BaseExceptionGroup, or the backport on 3.10)."""
    inner = getattr(exc, "exceptions", None)
    return list(inner) if isinstance(inner, (list, tuple)) and all(isinstance(e, BaseException) for e in inner) else []


def _remote_violation(error: Any) -> bool:
    """An exception raised in a rank of our clusters arrives as its class name."""
    name = str(getattr(error, "type", "")).rsplit(".", 1)[-1]
    return bool(name) and name not in REMOTE_HARNESS_NAMES and name not in _HYPOTHESIS_HARNESS


def failure(exc: BaseException, evidence: dict[str, Any] | None = None) -> Failure:
    """The symptom of a violation, for matching known divergences: type names and message
    (of every exception in a group, and of remote errors), and the failing checks' errors."""
    excs = _leaves(exc)
    types: list[str] = []
    messages: list[str] = []
    parts: list[tuple[tuple[str, ...], str]] = []  # each failing part, matched on its own
    for e in excs:
        remote = getattr(e, "errors", None) if "TaskError" in type_names(e) else None
        if remote:
            for r in remote:
                types.append(str(r.type).rsplit(".", 1)[-1])
                messages.append(str(r.message))
                parts.append(((types[-1],), messages[-1]))
        else:
            types.extend(type_names(e))
            messages.append(str(e))
            parts.extend((type_names(e), m) for m in getattr(e, "failed_entries", None) or (str(e),))
    return Failure(tuple(dict.fromkeys(types)), "\n".join(messages), failing_errors(evidence), tuple(parts),
                   reference_margins(evidence))


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions a (possibly nested) group holds: hypothesis groups distinct failures,
    and a test that checks every sample groups the failing ones, so groups nest."""
    inner = _group(exc)
    return [leaf for e in inner for leaf in _leaves(e)] if inner else [exc]


def exception_evidence(exc: BaseException) -> dict[str, Any]:
    """The exception as the report keeps it: types, message, and where it was raised."""
    symptom = failure(exc)
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    parts: dict[str, Any] = {"parts": [[list(t), m[:2000]] for t, m in symptom.parts]} if len(symptom.parts) > 1 else {}
    if did_not_repeat(exc):
        parts["did_not_repeat"] = ("the first call with this example failed as shown; a replay with the same "
                                   "example did not fail: the framework answered the same call two ways")
    return {"types": list(symptom.types), "message": symptom.message[:2000], "raised_at": where, **parts}
