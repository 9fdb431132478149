"""pytest-dlconform: conformance suites for the documented behaviour of TensorFlow and PyTorch.

Importing this package imports no framework.
"""

from __future__ import annotations

from typing import NoReturn

__version__ = "0.1.0"

NOT_APPLICABLE_PREFIX = "not applicable: "


def not_applicable(reason: str, *, cause: str | None = None, subject: str | None = None) -> NoReturn:
    """Report the running claim test as "not applicable here", with the exact reason.

    Use it only for hardware or packages this machine lacks (no GPU, no TPU, a package
    that cannot be installed beside this framework version), or where the error model gives
    a check no bound that a wrong answer could fail (every sample inconclusive), never to
    hide a failure.
    ``cause`` (optional) is the reason without this test's details, shared by every test
    it stops, and ``subject`` what this test is about (an op): the run's summary then
    prints one line per cause with its subjects, where every reason differs in details.
    """
    import pytest

    if cause is not None:
        from .core import evidence

        evidence.note(not_applicable_cause=cause, **({"not_applicable_subject": subject} if subject else {}))

    pytest.skip(NOT_APPLICABLE_PREFIX + reason)
