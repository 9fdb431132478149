"""What an oracle observed, recorded on the running test's report.

Oracles call :func:`check` (a compared quantity with its tolerance) and :func:`note`
(a plain observation: a trace count, a measured ratio); a test calls :func:`covers` with
the documented modes of its claim it has just checked (the claim's ``modes`` in the
registry; naming one the claim does not declare is a harness error). The plugin opens a recorder
around each claim test; outside one, recording is a no-op, so the oracles work in any
program. Across hypothesis examples, :func:`check` keeps the worst case per name (the
worst margin, for the report) and, beside it, the largest error of the failing observations
(``max_error``: what a known divergence's ceiling is compared with, since a large error
under a large tolerance has a modest margin). :func:`reference` records how far an
observation is from a bug reference (a known divergence's ``reference``), the worst kept.
A check whose bound would also accept a canonical wrong answer (all zeros, a NaN, the
sign-flipped reference: :func:`pytest_dlconform.checks.numerics.accepted_wrong_answers`)
proves nothing: it calls :func:`inconclusive` instead of :func:`check`, and the report counts
it; a test most of whose checks are inconclusive is a harness error, never "holds".
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

_current: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("dlconform_evidence", default=None)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    try:  # numpy scalars and 0-d arrays
        return _jsonable(value.item())
    except (AttributeError, ValueError):
        return repr(value)


def _number(value: Any) -> float:
    """A stored margin back as a float (non-finite values are stored as their repr)."""
    return float(value) if isinstance(value, (int, float)) else float(str(value))


def _worst(entry: dict[str, Any] | None, observed: float, tolerance: float, details: dict[str, Any]) -> dict[str, Any]:
    """A name's record after one more observation: the worst-margin observation, the count,
    and ``max_error``, the largest error of its failing observations (a NaN wins)."""
    margin = observed / tolerance if tolerance > 0 else (0.0 if observed == 0 else math.inf)
    count = 1 if entry is None else entry["count"] + 1
    largest = None if entry is None or "max_error" not in entry else _number(entry["max_error"])
    if not margin <= 1:  # a failing observation (a NaN too)
        largest = observed if largest is None or math.isnan(observed) or observed > largest else largest
    if entry is None or not margin <= _number(entry["margin"]):
        entry = {"observed": observed, "tolerance": tolerance, "margin": margin, **details}
    entry = {**entry, "count": count}
    if largest is not None:
        entry["max_error"] = largest
    return {k: _jsonable(v) for k, v in entry.items()}


@dataclass
class Recorder:
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    #: Observations against bug references (known divergences' ``reference``), worst kept.
    references: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Checks whose bound accepted a canonical wrong answer: name -> count, reason, details.
    inconclusive: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The claim's declared modes (None: unknown, anything is accepted) and those covered.
    declared: Collection[str] | None = None
    modes: Counter[str] = field(default_factory=Counter)
    #: Records' registered combinations (pairwise rows, second-order checks) and those visited:
    #: (family, record) -> {"registered": [...], "visited": Counter} (:func:`registers`, :func:`visits`).
    combinations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def covers(self, *modes: str) -> None:
        if self.declared is not None:
            unknown = [m for m in modes if m not in self.declared]
            if unknown:
                from .exceptions import HarnessError

                raise HarnessError(f"evidence.covers({', '.join(map(repr, unknown))}): not a mode of this test's claim; "
                                   f"its modes are {sorted(self.declared)} (add it to the claim's modes in claims/*.toml)")
        self.modes.update(modes)

    def registers(self, family: str, record: str, combinations: Iterable[str], own: str | None = None) -> None:
        entry = self.combinations.setdefault((family, record), {"registered": [], "visited": Counter()})
        entry["registered"] += [c for c in combinations if c not in entry["registered"]]
        if own is not None:
            entry["own"] = own

    def visits(self, family: str, record: str, *combinations: str) -> None:
        entry = self.combinations.get((family, record))
        unknown = [c for c in combinations if entry is None or c not in entry["registered"]]
        if unknown:
            from .exceptions import HarnessError

            raise HarnessError(f"evidence.visits({family!r}, {record!r}, {', '.join(map(repr, unknown))}): not a "
                               "registered combination of this record (call evidence.registers with the record's "
                               "whole table first)")
        assert entry is not None
        entry["visited"].update(combinations)

    def check(self, name: str, *, observed: float, tolerance: float, **details: Any) -> None:
        self.checks[name] = _worst(self.checks.get(name), observed, tolerance, details)

    def reference(self, name: str, *, observed: float, tolerance: float, **details: Any) -> None:
        self.references[name] = _worst(self.references.get(name), observed, tolerance, details)

    def mark_inconclusive(self, name: str, *, reason: str, **details: Any) -> None:
        entry = self.inconclusive.get(name)
        count = 1 if entry is None else int(entry["count"]) + 1
        if entry is None:
            entry = {"reason": reason, **{k: _jsonable(v) for k, v in details.items()}}
        entry["count"] = count
        self.inconclusive[name] = entry

    @property
    def conclusive_count(self) -> int:
        """How many recorded comparisons could have failed (checks, by their count)."""
        return sum(int(c.get("count", 1)) for c in self.checks.values())

    @property
    def inconclusive_count(self) -> int:
        return sum(int(c["count"]) for c in self.inconclusive.values())

    def note(self, **values: Any) -> None:
        self.notes.update({k: _jsonable(v) for k, v in values.items()})

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"checks": self.checks, "notes": self.notes}
        if self.references:
            out["references"] = self.references
        if self.modes:
            out["modes"] = dict(sorted(self.modes.items()))
        if self.inconclusive:
            out["inconclusive"] = self.inconclusive
        if self.combinations:
            out["combinations"] = [{"family": f, "record": r, "registered": list(e["registered"]),
                                    "visited": dict(sorted(e["visited"].items())),
                                    **({"own": e["own"]} if "own" in e else {})}
                                   for (f, r), e in sorted(self.combinations.items())]
        return out

    @property
    def worst_margin(self) -> float | None:
        margins = [_number(c["margin"]) for c in self.checks.values() if "margin" in c]
        return max(margins) if margins else None


def current() -> Recorder | None:
    return _current.get()


def check(name: str, *, observed: float, tolerance: float, **details: Any) -> None:
    """Record a compared quantity: ``observed`` must stay within ``tolerance`` (margin = ratio)."""
    recorder = _current.get()
    if recorder is not None:
        recorder.check(name, observed=float(observed), tolerance=float(tolerance), **details)


def inconclusive(name: str, *, reason: str, **details: Any) -> None:
    """Record a comparison that could not fail: its bound accepts ``reason`` (a canonical
    wrong answer). It is not a check that held; the report counts it per test."""
    recorder = _current.get()
    if recorder is not None:
        recorder.mark_inconclusive(name, reason=reason, **details)


def reference(name: str, *, observed: float, tolerance: float, **details: Any) -> None:
    """Record how far the observation is from bug reference ``name`` (a known divergence's
    ``reference``): ``observed`` within ``tolerance`` means the framework computed exactly
    what the finding says it computes."""
    recorder = _current.get()
    if recorder is not None:
        recorder.reference(name, observed=float(observed), tolerance=float(tolerance), **details)


def note(**values: Any) -> None:
    """Record plain observations (counts, measured timings and ratios)."""
    recorder = _current.get()
    if recorder is not None:
        recorder.note(**values)


def covers(*modes: str) -> None:
    """Record that the running test has checked these documented modes of its claim (call
    it after the check, so a failing check never counts as coverage)."""
    recorder = _current.get()
    if recorder is not None:
        recorder.covers(*modes)


def registers(family: str, record: str, combinations: Iterable[str], own: str | None = None) -> None:
    """Declare the combinations a record's table registers (its pairwise rows, its second-order
    check): the whole table, before the test visits any of them, so that one it skips shows as
    unvisited in the report's combinations ledger (:mod:`pytest_dlconform.report.combinations`).
    ``own``: the one row a test per row is for (the ledger counts it as visited, not applicable,
    when the test reports itself not applicable, with the reason in its own record)."""
    recorder = _current.get()
    if recorder is not None:
        recorder.registers(family, record, combinations, own)


def visits(family: str, record: str, *combinations: str) -> None:
    """Record that the running test has checked these registered combinations of a record (call
    it after the checks of a combination held, like :func:`covers`)."""
    recorder = _current.get()
    if recorder is not None:
        recorder.visits(family, record, *combinations)


def visiting(family: str, record: str, rows: Iterable[T], label: Callable[[T], str] = repr) -> Iterator[T]:
    """Iterate a record's table (``for row in visiting(...)``): registers every row's label first,
    and records a row as visited once the loop body has run for it without raising (a row the
    loop never reaches, or one whose checks failed, stays unvisited). A body that ``continue``s
    past a row without checking it would count it: write the loop without."""
    rows = list(rows)
    labels = [label(r) for r in rows]
    registers(family, record, labels)
    for row, name in zip(rows, labels):
        yield row
        visits(family, record, name)


@contextlib.contextmanager
def recording(declared: Collection[str] | None = None, into: Recorder | None = None) -> Iterator[Recorder]:
    """Record into a new recorder (or into ``into``, which keeps what it has) while the block runs."""
    recorder = Recorder(declared=declared) if into is None else into
    token = _current.set(recorder)
    try:
        yield recorder
    finally:
        _current.reset(token)


def to_json(recorder: Recorder) -> str:
    import json

    return json.dumps(recorder.as_dict(), sort_keys=True)
