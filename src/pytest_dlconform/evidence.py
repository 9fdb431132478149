"""What an oracle observed, recorded on the running test's report.

Oracles call :func:`check` (a compared quantity with its tolerance) and :func:`note`
(a plain observation: a trace count, a measured ratio); a test calls :func:`covers` with
the documented modes of its claim it has just checked (the claim's ``modes`` in the
registry; naming one the claim does not declare is a harness error). The plugin opens a recorder
around each claim test; outside one, recording is a no-op, so the oracles work in any
program. Across hypothesis examples, :func:`check` keeps the worst case per name.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class Recorder:
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    #: The claim's declared modes (None: unknown, anything is accepted) and those covered.
    declared: Collection[str] | None = None
    modes: Counter[str] = field(default_factory=Counter)

    def covers(self, *modes: str) -> None:
        if self.declared is not None:
            unknown = [m for m in modes if m not in self.declared]
            if unknown:
                from .frameworks.base import HarnessError

                raise HarnessError(f"evidence.covers({', '.join(map(repr, unknown))}): not a mode of this test's claim; "
                                   f"its modes are {sorted(self.declared)} (add it to the claim's modes in claims/*.toml)")
        self.modes.update(modes)

    def check(self, name: str, *, observed: float, tolerance: float, **details: Any) -> None:
        margin = observed / tolerance if tolerance > 0 else (0.0 if observed == 0 else math.inf)
        entry = self.checks.get(name)
        count = 1 if entry is None else entry["count"] + 1
        if entry is None or not margin <= _number(entry["margin"]):
            entry = {"observed": observed, "tolerance": tolerance, "margin": margin, **details}
        entry["count"] = count
        self.checks[name] = {k: _jsonable(v) for k, v in entry.items()}

    def note(self, **values: Any) -> None:
        self.notes.update({k: _jsonable(v) for k, v in values.items()})

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"checks": self.checks, "notes": self.notes}
        if self.modes:
            out["modes"] = dict(sorted(self.modes.items()))
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
