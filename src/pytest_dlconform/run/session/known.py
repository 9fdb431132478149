"""The known divergences as the process that runs a test matches them: a violated test whose
symptom a live entry pins becomes an xfail on its own report (verdicts.py)."""

from __future__ import annotations

from typing import Any

from .. import settings as opts
from .environment import Environment


class KnownDivergences:
    def __init__(self, settings: opts.Settings, environment: Environment) -> None:
        self.entries = _load(settings)
        self.environment = environment

    def match(self, test: dict[str, Any], failure: Any) -> Any:
        """The live entry that pins this test and this symptom, or None."""
        from ...report import divergences

        if not self.entries:
            return None
        return divergences.match_failure(self.entries, test, failure, self.environment.doc())

    def pins(self, test: dict[str, Any]) -> bool:
        """Whether a live entry for this run's stack pins ``test`` (whatever its symptom): such a
        test runs to its first failing example (budgets.first_failure_only)."""
        from ...report import divergences

        return bool(self.entries) and bool(divergences.pinning(self.entries, test, self.environment.doc()))

    def elsewhere(self, test: dict[str, Any], failure: Any) -> Any:
        """The entry a violated test would match but for the version (divergences.match_elsewhere)."""
        from ...report import divergences

        if not self.entries:
            return None
        return divergences.match_elsewhere(self.entries, test, failure, self.environment.doc())


def _load(settings: opts.Settings) -> list[Any]:
    from ...report import divergences

    if not settings.divergences:
        return []
    try:
        return divergences.load(settings.divergences)
    except divergences.DivergenceError:
        return []  # the controller reports it (a usage error before any test runs)
