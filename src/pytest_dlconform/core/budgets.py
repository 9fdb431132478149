"""Hypothesis budgets for claim tests only, per test, never for the host project.

The plugin never loads a hypothesis profile globally: a project that installs
pytest-dlconform keeps its own ``settings.default`` and its own tests' budgets. Instead,
each selected claim test's settings (what ``@given`` / ``@settings`` attached to it) are
replaced at collection by the same settings with the ``--dl-profile`` budget laid over
them: example count (scaled by :func:`pytest_dlconform.frameworks.inputs.budget`), derandomization,
example database, deadline, blob printing, health checks. A test's own phases stay.

When the user passes ``--hypothesis-profile``, that profile (loaded by hypothesis's own
plugin) is the budget instead, still scaled per test. Properties that a claim test defines
and runs inside itself get the budget as hypothesis's default while the test runs
(:func:`as_default`), and ``budget(n)`` scales them when they are decorated.

Shrinking a failing example is bounded per test in the quick and ci profiles
(:data:`SHRINK_SECONDS`), so a broken stack fails fast; the thorough profile keeps
hypothesis's own limit. A cut-short shrink is recorded in the test's evidence.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

CI_EXAMPLES = 20  # max_examples of the ci profile, the unit budgets are written in
ATTR = "_dlconform_ci_examples"
_APPLIED = "_dlconform_budget_applied"

# Seconds of shrinking per failing test; None keeps hypothesis's own limit (five minutes).
SHRINK_SECONDS: dict[str, float | None] = {"quick": 2.0, "ci": 5.0, "thorough": None, "explore": None, "replay": None}
# Seconds of shrinking per process (an xdist worker, or the run without one), over all its
# failing claim tests: a broken stack fails many tests, and shrinking each for its bound made
# a failing ci run several times a passing one's wall time (a mutant failing 100 of the 200
# tests of autodiff.gradient.forward-reverse: 2.2x with 30 s a process; the first two or three
# failures of each process are still shrunk). Once a process has spent them, its
# later failing tests run to their first failing example (first_failure_only) and say so
# (run_budget_note). Which failures get shrunk depends on the order a worker meets them; the
# verdicts do not. None: no bound.
RUN_SHRINK_SECONDS: dict[str, float | None] = {"quick": 4.0, "ci": 10.0, "thorough": None, "explore": None,
                                               "replay": None}
_shrink_spent = [0.0]  # this process's seconds of shrinking so far


def shrinking_left(profile: str | None) -> float | None:
    """Seconds of shrinking this process has left in ``profile`` (None: unbounded)."""
    total = RUN_SHRINK_SECONDS.get(profile or "")
    return None if total is None else max(0.0, total - _shrink_spent[0])


def pinned_note() -> str:
    """What a failing claim test that a known divergence pins says of its example."""
    return ("dlconform did not shrink this failure: a known divergence entry pins this test, which stops at its "
            "first failing example; to shrink it, run its reproduce line without --dl-divergences and with "
            "--dl-profile=thorough")


def run_budget_note(profile: str | None) -> str:
    """What a failing claim test says when the process's shrinking budget was spent before it ran."""
    total = RUN_SHRINK_SECONDS.get(profile or "")
    return (f"dlconform did not shrink this failure: this process spent its {total:g} s of shrinking "
            f"(--dl-profile={profile}) on earlier failures; the example shown is the first failing one; "
            "use --dl-profile=thorough to shrink fully")


_active: list[Any] = []  # the budget of this process's run, once a claim test needs it


def set_active(budget: Any) -> None:
    _active[:] = [budget]


def scaled(ci_examples: int) -> int:
    """``ci_examples`` scaled to the run's profile, for budgets that are not hypothesis
    examples (rounds of a batch): n in the ci profile, n/10 (at least 1) in quick, 10 n in thorough."""
    if not _active:
        return ci_examples
    return max(1, round(ci_examples * _active[0].max_examples / CI_EXAMPLES))


def ci_examples_of(test_settings: Any) -> int | None:
    """The ``budget(n)`` a test declared, looking through its settings' parents."""
    current = test_settings
    while current is not None:
        value = getattr(current, ATTR, None)
        if value is not None:
            return int(value)
        current = getattr(current, "_fallback", None)
    return None


def claim_settings(test_settings: Any, budget: Any) -> Any:
    """``test_settings`` with the run's ``budget`` (a hypothesis settings object) laid over it."""
    from hypothesis import settings

    declared = ci_examples_of(test_settings)
    examples = budget.max_examples if declared is None else max(1, round(declared * budget.max_examples / CI_EXAMPLES))
    health = tuple(dict.fromkeys([*test_settings.suppress_health_check, *budget.suppress_health_check]))
    # A test's own phases, within the budget's: a budget which generates nothing (replay)
    # keeps the test from generating too; quick and ci leave out hypothesis's explain phase
    # (profiles.PHASES).
    phases = tuple(p for p in test_settings.phases if p in budget.phases)
    return settings(
        test_settings, max_examples=examples, derandomize=budget.derandomize,
        database=None if budget.derandomize else budget.database, deadline=budget.deadline,
        print_blob=budget.print_blob, suppress_health_check=health, phases=phases,
    )


def apply_to(function: Any, budget: Any, label: str) -> bool:
    """Give one hypothesis test function the claim budget (once: parametrized items share it)."""
    target = getattr(function, "__func__", function)
    current = getattr(target, "_hypothesis_internal_use_settings", None)
    if current is None or not getattr(target, "is_hypothesis_test", False):
        return False
    if getattr(target, _APPLIED, None) == label:
        return True
    target._hypothesis_internal_use_settings = claim_settings(current, budget)
    setattr(target, _APPLIED, label)
    return True


@contextlib.contextmanager
def as_default(budget: Any) -> Iterator[None]:
    """The run's budget as hypothesis's default while a claim test runs, for the properties a
    test defines and runs inside itself (a nested ``@given``): they take their settings when
    they are decorated, at call time. Restored afterwards, so nothing outside the claim test
    sees it."""
    try:
        from hypothesis._settings import local_settings
    except ImportError:  # pragma: no cover - a hypothesis release without it: nested budgets are hypothesis's
        yield
        return
    with local_settings(budget):
        yield


@contextlib.contextmanager
def first_failure_only(function: Any, budget: Any) -> Iterator[Any]:
    """While a test that a known divergence pins runs (or any test, once the process has spent
    its shrinking budget, :data:`RUN_SHRINK_SECONDS`): its hypothesis settings without the
    shrink phase (and the explain phase inside it), so hypothesis stops at the first failing
    example and reports that one, instead of generating on, shrinking and explaining a
    failure whose finding already has its standalone script (shrunk, a failure costs about 6
    times a passing test: 0.76 s against 0.13 s a test in a quick run). The
    failure's type and place, which the entry's symptom names, are the same either way: a
    symptom that does not match still fails the test, with an example that is not minimal
    and a note that says so (:func:`pinned_note`). Yields ``budget`` with the same phases, for
    the properties the test defines inside itself; the test's settings are restored afterwards."""
    from hypothesis import Phase, settings

    drop = (Phase.shrink, Phase.explain)
    target = getattr(function, "__func__", function)
    current = getattr(target, "_hypothesis_internal_use_settings", None)
    nested = settings(budget, phases=tuple(p for p in budget.phases if p not in drop))
    if current is None or not getattr(target, "is_hypothesis_test", False):
        yield nested
        return
    target._hypothesis_internal_use_settings = settings(current, phases=tuple(p for p in current.phases if p not in drop))
    try:
        yield nested
    finally:
        target._hypothesis_internal_use_settings = current


#: The start of what hypothesis reports when it stops a slow shrink (its five-minute limit,
#: which :func:`bounded_shrinking` lowers): "... PLEASE REPORT THIS ...", wrong for a cut the
#: plugin made, so claim tests show :func:`shrink_note` instead.
HYPOTHESIS_SLOW_SHRINK = "WARNING: Hypothesis has spent more than five minutes working to shrink"


def shrink_note(seconds: float, profile: str | None) -> str:
    """What a claim test says when the plugin cut its shrinking short."""
    which = f" (--dl-profile={profile})" if profile else " (the profile's bound)"
    return (f"dlconform stopped shrinking after {seconds:g} s{which}; the example shown is not minimal; "
            "use --dl-profile=thorough to shrink fully")


@contextlib.contextmanager
def bounded_shrinking(seconds: float | None, profile: str | None = None) -> Iterator[list[str]]:
    """Limit hypothesis's shrinking to ``seconds`` while a claim test runs; the yielded list
    gets a note when a shrink was cut short. Uses hypothesis's engine limit
    (``MAX_SHRINKING_SECONDS``, read when shrinking starts); if a hypothesis release moves
    it, shrinking keeps hypothesis's own limit and the note says so. Hypothesis's report of
    the cut (:data:`HYPOTHESIS_SLOW_SHRINK`, which asks users to report a hypothesis bug) is
    replaced by :func:`shrink_note` meanwhile; nothing outside the claim test changes."""
    notes: list[str] = []
    if seconds is None:
        yield notes
        return
    try:
        from hypothesis.internal.conjecture import engine
        runner, reason = engine.ConjectureRunner, engine.ExitReason.very_slow_shrinking
        old_limit, old_exit, old_report = engine.MAX_SHRINKING_SECONDS, runner.exit_with, engine.report
    except (ImportError, AttributeError):
        notes.append("shrinking not bounded: this hypothesis release has no MAX_SHRINKING_SECONDS")
        yield notes
        return
    note = shrink_note(seconds, profile)

    def exit_with(self: Any, why: Any) -> Any:
        if why == reason and note not in notes:
            notes.append(note)
        return old_exit(self, why)

    def report(text: str) -> None:
        old_report(note if str(text).startswith(HYPOTHESIS_SLOW_SHRINK) else text)

    old_shrink = runner.shrink_interesting_examples

    def shrink_interesting_examples(self: Any) -> Any:  # counted in the process's shrinking budget
        import time

        started = time.monotonic()
        try:
            return old_shrink(self)
        finally:
            _shrink_spent[0] += time.monotonic() - started

    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]  # a module constant, restored below
    runner.exit_with = exit_with  # type: ignore[method-assign,assignment]  # restored below; claim tests only
    runner.shrink_interesting_examples = shrink_interesting_examples  # type: ignore[method-assign]  # restored below
    engine.report = report  # restored below; claim tests only
    try:
        yield notes
    finally:
        engine.MAX_SHRINKING_SECONDS = old_limit
        runner.exit_with = old_exit  # type: ignore[method-assign]
        runner.shrink_interesting_examples = old_shrink  # type: ignore[method-assign]
        engine.report = old_report
