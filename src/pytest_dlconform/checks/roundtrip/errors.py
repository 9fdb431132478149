"""What can go wrong in a round trip: the helper failing (a harness error) or the artifact
giving back something else (a conformance result).

:class:`ArtifactError` is a :class:`HarnessError`: the round-trip helper could not write,
verify or open an artifact. :class:`RoundTripMismatch` and its subclasses are
AssertionErrors: what came back from an artifact differs from what went in,
(:class:`LoadFailed`) the framework's own loader raised on an artifact the seal shows intact,
or (:class:`WriteFailed`) the framework's own saver raised or wrote nothing.
"""

from __future__ import annotations

import os
import re

from ...frameworks import HarnessError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line: colour codes dropped, whitespace collapsed, cut at ``limit``."""
    text = " ".join(_ANSI.sub("", str(exc)).split())
    if len(text) > limit:
        text = text[:limit - 1].rstrip() + "\u2026"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ArtifactError(HarnessError):
    """The round-trip helper could not write, verify or open an artifact (not a conformance result)."""

    def __init__(self, step: str, path: str | os.PathLike[str], problem: str) -> None:
        self.step, self.path, self.problem = step, str(path), problem
        super().__init__(f"round-trip step '{step}' on {path}: {problem}")


class RoundTripMismatch(AssertionError):
    """What came back from an artifact differs from what went in."""


class OutputMismatch(RoundTripMismatch):
    pass


class LoadFailed(RoundTripMismatch):
    """The framework's loader raised on an artifact its own saver wrote, after the seal
    verified every file: the documented round trip does not load (a violation, not a
    harness error; e.g. a state_dict without its BatchNorm statistics under strict=True)."""


class WriteFailed(RoundTripMismatch):
    """The framework's saver (or converter) raised on the model, or returned without writing
    the artifact: the documented save does not save (a violation, not a harness error). A
    suite that knows a documented refusal (a format that documents it does not take this
    model) turns exactly that refusal into "not applicable"; ``__cause__`` is what raised."""

    def __init__(self, step: str, path: str | os.PathLike[str], problem: str) -> None:
        self.step, self.path, self.problem = step, str(path), problem
        super().__init__(f"round-trip step '{step}' on {path}: {problem}")


class StateMismatch(RoundTripMismatch):
    pass


class SignatureMismatch(RoundTripMismatch):
    pass


class QuantisationBoundExceeded(RoundTripMismatch):
    pass


class NotQuantised(RoundTripMismatch):
    """An int8 conversion left a large kernel in float: a bound check would pass vacuously."""


class QuantisedWeightsMismatch(RoundTripMismatch):
    pass
