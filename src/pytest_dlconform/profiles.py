"""Hypothesis budgets for conformance runs (``--dl-profile``)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PREFIX = "dlconform-"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]


def register() -> None:
    # quick: development loops; a handful of examples, still no example database so a
    # shared checkout never replays another person's failures silently.
    settings.register_profile(
        PREFIX + "quick", max_examples=5, deadline=None, database=None, suppress_health_check=_SLOW_OK
    )
    # ci: derandomized (the same examples every run, so two runs differ only by the stack
    # under test), no example database, failure blobs printed for reproduction.
    settings.register_profile(
        PREFIX + "ci", max_examples=20, deadline=None, database=None, derandomize=True,
        print_blob=True, suppress_health_check=_SLOW_OK,
    )
    # thorough: nightly and upgrade checks.
    settings.register_profile(
        PREFIX + "thorough", max_examples=200, deadline=None, database=None, derandomize=True,
        print_blob=True, suppress_health_check=_SLOW_OK,
    )


def load(profile: str) -> None:
    settings.load_profile(PREFIX + profile)
