"""Hypothesis budgets for conformance runs (``--dl-profile``)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PREFIX = "dlconform-"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
THOROUGH_EXAMPLES = 200


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
        PREFIX + "thorough", max_examples=THOROUGH_EXAMPLES, deadline=None, database=None, derandomize=True,
        print_blob=True, suppress_health_check=_SLOW_OK,
    )
    # explore: the thorough budget, randomized (the nightly soak, python -m pytest_dlconform.soak):
    # --hypothesis-seed picks the examples (derandomize would ignore it), so each run explores
    # new inputs and a flawed tolerance cannot hide behind one fixed draw.
    settings.register_profile(
        PREFIX + "explore", max_examples=THOROUGH_EXAMPLES, deadline=None, database=None, derandomize=False,
        print_blob=True, suppress_health_check=_SLOW_OK,
    )


def load(profile: str) -> None:
    settings.load_profile(PREFIX + profile)
