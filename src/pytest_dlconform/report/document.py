"""The report of a run as a frozen, typed value (the JSON document, schema 1).

A run's result is built once (:func:`pytest_dlconform.report.results.report_document`) and then
only transformed: applying known divergences, attaching reproduction scripts, comparing
with a baseline and recording how the run ended are functions from a :class:`Report` to a
new :class:`Report` (``dataclasses.replace``), never edits in place. Everything that reads
a report (the terminal matrix, ``html``, ``compare``, ``cli``) gets the same value.

The records are also read-only mappings keyed by their JSON field names (``test["verdict"]``
is ``test.verdict``), so code that reads the JSON document and code that reads the model
are the same code. Nested JSON (evidence, environment, claim metadata) is frozen too:
mappings become read-only views, lists become tuples. :meth:`Report.to_dict` gives the
plain JSON document back, key for key as schema 1 defines it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

SCHEMA = "pytest-dlconform/report"
SCHEMA_VERSION = 1
EMPTY: Mapping[str, Any] = MappingProxyType({})


def freeze(value: Any) -> Any:
    """A deep read-only copy of a JSON value: mappings as views, lists as tuples."""
    if isinstance(value, _Record):
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain JSON value of a frozen one (dicts and lists again)."""
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """The JSON fields of a record class (its dataclass fields but ``extra``), computed once:
    mapping access runs for every key of every test the matrix, html and compare read."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "extra")


class _Record(Mapping[str, Any]):
    """Read-only mapping access to a frozen dataclass by its JSON field names.

    ``OPTIONAL`` fields are left out of the mapping (and of the JSON) while they are None,
    as schema 1 writes them only when they apply.
    """

    OPTIONAL: frozenset[str] = frozenset()
    extra: Mapping[str, Any]  # each record's keys of a newer writer (a dataclass field there)

    def _keys(self) -> list[str]:
        names = _field_names(type(self))
        keys = [n for n in names if not (n in self.OPTIONAL and getattr(self, n) is None)]
        return keys + [k for k in self.extra if k not in names]

    def __getitem__(self, key: str) -> Any:
        if key in _field_names(type(self)):
            if key in self.OPTIONAL and getattr(self, key) is None:
                raise KeyError(key)
            return getattr(self, key)
        return self.extra[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def to_dict(self) -> dict[str, Any]:
        return {k: thaw(self[k]) for k in self._keys()}


def _split(cls: type, data: Mapping[str, Any]) -> tuple[dict[str, Any], Mapping[str, Any]]:
    names = _field_names(cls)
    known = {k: v for k, v in data.items() if k in names}
    return known, freeze({k: v for k, v in data.items() if k not in names})


@dataclass(frozen=True, eq=False)
class TestRecord(_Record):
    """One claim test: its verdict, why, the evidence its checks recorded, how to rerun it."""

    nodeid: str
    claim: str
    params: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    column: str = ""
    verdict: str = "holds"
    reason: str = ""
    evidence: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    repro: str = ""
    duration_s: float = 0.0
    expected: str | None = None  # the reason of the known divergence that matched
    divergence: str | None = None  # that entry's key
    observed: str = ""  # what the matched violation showed
    script: Mapping[str, Any] | None = None  # violated tests: the standalone reproduction (repro.attach)
    seed: int | None = None  # the test's seed (from --dl-seed and its identity inside the package)
    identity: str | None = None  # the test inside the package (``suites/area/test_x.py::test[p]``)
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)

    OPTIONAL = frozenset({"script", "seed", "identity"})
    __test__ = False  # not a pytest test class

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TestRecord:
        known, extra = _split(cls, data)
        for name in ("params", "evidence", "script"):
            if known.get(name) is not None:
                known[name] = freeze(known[name])
        return cls(**known, extra=extra)


@dataclass(frozen=True, eq=False)
class ClaimRecord(_Record):
    """One claim over its tests: the overall verdict and one per matrix column."""

    verdict: str
    claim: Mapping[str, Any] | None = None  # the registry entry (id, statement, source, ...)
    columns: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    duration_s: float = 0.0
    worst_margin: float | str | None = None
    expected: str | None = None  # set when every violated test is a known divergence
    tests: tuple[TestRecord, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClaimRecord:
        known, extra = _split(cls, data)
        known["tests"] = tuple(TestRecord.from_dict(t) for t in known.get("tests") or ())
        for name in ("claim", "columns"):
            if known.get(name) is not None:
                known[name] = freeze(known[name])
        return cls(**known, extra=extra)


@dataclass(frozen=True, eq=False)
class Report(_Record):
    """A run: environment, claims by id, known-divergence statuses, counts, how it ended."""

    created: str
    duration_s: float
    environment: Mapping[str, Any]
    claims: Mapping[str, ClaimRecord]
    schema: str = SCHEMA
    schema_version: int = SCHEMA_VERSION
    divergences: tuple[Mapping[str, Any], ...] = ()
    counts: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    columns: tuple[str, ...] = ()
    interrupted: str | None = None
    exit_status: int | None = None
    baseline: Mapping[str, Any] | None = None  # --dl-baseline: path, regressed claims, text
    coverage: Mapping[str, Any] | None = None  # the op suite's coverage ledger (coverage.ledger)
    modes: Mapping[str, Any] | None = None  # the claims' documented modes checked (modes.ledger)
    combinations: Mapping[str, Any] | None = None  # the records' registered combinations (combinations.ledger)
    extra: Mapping[str, Any] = field(default_factory=lambda: EMPTY)

    OPTIONAL = frozenset({"baseline", "coverage", "modes", "combinations"})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        known, extra = _split(cls, data)
        known["claims"] = MappingProxyType({cid: ClaimRecord.from_dict(c) for cid, c in (known.get("claims") or {}).items()})
        for name in ("environment", "counts", "baseline", "coverage", "modes", "combinations"):
            if known.get(name) is not None:
                known[name] = freeze(known[name])
        known["divergences"] = freeze(known.get("divergences") or ())
        known["columns"] = tuple(known.get("columns") or ())
        known.setdefault("environment", EMPTY)
        known.setdefault("created", "")
        known.setdefault("duration_s", 0.0)
        return cls(**known, extra=extra)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def tests(self) -> Iterator[TestRecord]:
        for claim in self.claims.values():
            yield from claim.tests

    def replace(self, **changes: Any) -> Report:
        """A new report with ``changes``; nested JSON values are frozen on the way in."""
        frozen = {k: (v if k == "claims" else freeze(v)) for k, v in changes.items()}
        if "claims" in frozen:
            frozen["claims"] = MappingProxyType(dict(frozen["claims"]))
        return dataclasses.replace(self, **frozen)

    def map_tests(self, fn: Any) -> Report:
        """A new report whose every test is ``fn(test)`` (a TestRecord); claims keep their order."""
        claims = {cid: dataclasses.replace(c, tests=tuple(fn(t) for t in c.tests)) for cid, c in self.claims.items()}
        return self.replace(claims=claims)


def as_report(doc: Report | Mapping[str, Any]) -> Report:
    """A Report from a report or a JSON document (as loaded from a file)."""
    return doc if isinstance(doc, Report) else Report.from_dict(doc)
