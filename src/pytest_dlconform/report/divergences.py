"""Known divergences: framework behaviours that violate a claim, each pinned to its symptom.

A TOML file of ``[[divergence]]`` entries::

    [[divergence]]
    claim = "autodiff.gradient.forward-mode-coverage"   # a claim id or a glob
    tests = ["autodiff/test_known_limits.py::test_softsign*"]  # which tests (node-id globs)
    exception = "LookupError"                           # the symptom: an exception type ...
    message = "SoftsignGrad"                            # ... and a pattern of its message,
    # max_error = 1e-8                                  # or a ceiling on the observed error
    reason = "no gradient registered for SoftsignGrad"
    expires = 2027-06-30                                # last day the entry applies
    framework = "tensorflow"                            # optional: only tests on this framework
    version = "2.21.*"                                  # version glob of that framework
    versions = { keras = "3.15.*" }                     # optional: other packages' version globs
    device = "cpu"                                      # optional: cpu, gpu or multi-gpu

Every entry pins *which tests* (``tests``: node-id globs relative to the suites folder,
``*`` and ``?`` only, brackets are literal) and *what was seen* (``exception`` with an
optional ``message`` regular expression, or ``max_error``: every failing check of the
test observed at most this error), and says which versions it is for (``version`` with
``framework``, or ``versions``). A violation outside the pin (another test of the claim,
a larger error, another exception) stays a plain violation.

Matching happens where the exception still exists (:func:`match_failure`, called by the
plugin in the process that ran the test): a matched violation is reported to pytest as
an xfail whose reason is the entry's reason and what was observed. After the run,
:func:`apply` gives each entry its status: applied, expired (the violation fails again),
unmatched (its tests ran, none failed with that symptom: the claim holds there now, or
fails differently), not reached (its tests held in a run without the settings its entry
says the symptom needs: ``occurs_with``), not selected (none of its tests ran) or for
another stack.

Every failing part must show the symptom: each member of an exception group (hypothesis'
failing examples), each remote error, and each entry of a multi-entry check (an exception
with a ``failed_entries`` tuple of messages, one per wrong entry, such as the edge-case
oracle's ``EdgeMismatch``) must have the pinned type and match the pattern; the ceiling is
compared with the largest error any failing observation of each check recorded (evidence
keeps it beside the worst margin), not with the worst-margin observation's.

A violated test that an entry would match but for the version (its framework and device
ran, its tests and symptom match, a version glob does not: :func:`match_elsewhere`) stays a
failure, never an xfail: the bug is not yet confirmed on that version. :func:`apply` names
the finding on the test's record (``known_elsewhere``: the entry, its reason, the versions it
was seen on) and in the entry's status line ("matches known divergence N (reason), seen on
tensorflow 2.21; not yet confirmed on this version").

``reference`` (optional) names a registered bug reference (:data:`REFERENCES`): a function
that recomputes what the framework computes under the finding. The test computes that
reference where its check fails and records the deviation with ``evidence.reference(name,
observed=..., tolerance=...)``; the entry matches only when every failing observation
equals the reference within the test's error model (margin <= 1). Use it where no ceiling
can tell the finding from another bug of the same size.

``occurs_with`` (optional) is a table of run settings under which the symptom occurs, e.g.
``occurs_with = { replicas = [3] }`` or ``{ profile = ["explore"] }``. It never
changes what matches (the pin does that, in every run); it only keeps an entry whose tests
held in a run without those settings from being reported as unmatched, which would tell
the user to remove an entry the run could not have exercised.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import functools
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checks.bug_references import REFERENCES, bug_reference, reference  # noqa: F401 - entries name them
from . import results
from .document import Report, TestRecord, as_report, freeze

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

APPLIED, EXPIRED, UNMATCHED, NOT_SELECTED, OTHER_STACK = "applied", "expired", "unmatched", "not selected", "other stack"
NOT_REACHED = "not reached"
_KEYS = {"claim", "tests", "exception", "message", "max_error", "reason", "expires", "framework", "version",
         "versions", "device", "script", "occurs_with", "reference", "modes"}
_OCCURS_WITH = {"profile": str, "replicas": int}  # run settings (report environment "settings") an entry can name
_FRAMEWORKS = {"tensorflow": "tensorflow", "tf": "tensorflow", "torch": "torch", "pytorch": "torch"}
_DEVICES = ("cpu", "gpu", "multi-gpu")
_SHORT = {"tf": ("tensorflow",), "torch": ("torch",), "tf+torch": ("tensorflow", "torch")}


class DivergenceError(ValueError):
    """A known-divergences file that cannot be used; the message is one line."""




@dataclass(frozen=True)
class Failure:
    """What a violated test showed: exception type names (with their bases), the message,
    the observed errors of the checks that failed (the largest of each check's failing
    observations), each failing part as (types, message) (``parts``: group members, remote
    errors, a multi-entry check's entries; empty means the one exception above), and the
    worst margin of the observation against each bug reference the test recorded."""

    types: tuple[str, ...] = ()
    message: str = ""
    errors: tuple[float, ...] = ()
    parts: tuple[tuple[tuple[str, ...], str], ...] = ()
    references: tuple[tuple[str, float], ...] = ()

    def members(self) -> tuple[tuple[tuple[str, ...], str], ...]:
        """Every failing part, each to be matched on its own."""
        return self.parts or (((self.types, self.message),) if self.types else ())

    def describe(self) -> str:
        parts = []
        if self.types:
            first = self.message.strip().splitlines()[0][:300] if self.message.strip() else ""
            parts.append(f"{self.types[0]}: {first}" if first else self.types[0])
        if self.errors:
            parts.append("failing check(s) observed " + ", ".join(f"{e:.3g}" for e in self.errors))
        return "; ".join(parts) or "no symptom recorded"


@dataclass(frozen=True)
class Divergence:
    claim: str
    reason: str
    expires: dt.date
    tests: tuple[str, ...] = ()
    exception: str | None = None
    message: str | None = None
    max_error: float | None = None
    framework: str | None = None
    version: str | None = None
    versions: tuple[tuple[str, str], ...] = ()
    device: str | None = None
    script: str | None = None  # its standalone reproduction in pytest_dlconform/report/findings/ (repro.py)
    occurs_with: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # (setting, values) the symptom needs
    reference: str | None = None  # a bug reference in REFERENCES the observation must equal
    # Documented modes of the claim that only the pinned test reaches: while it fails with the
    # symptom they are "behind a known divergence" in the modes ledger, not unchecked (modes.py).
    modes: tuple[str, ...] = ()
    index: int = 0  # 1-based position in its file
    where: str = ""  # "FILE, entry N", for messages

    @property
    def key(self) -> str:
        """How a matched test names its entry (stable across machines, unlike the path)."""
        return f"entry {self.index} ({self.claim})"

    def describe(self) -> str:
        stack = [p for p in (self.framework, self.version and f"version {self.version}", self.device) if p]
        stack += [f"{name} {glob}" for name, glob in self.versions]
        return f"{self.claim}" + (f" [{', '.join(stack)}]" if stack else "") + f" (expires {self.expires})"

    def symptom(self) -> str:
        parts = [self.exception + (f" matching /{self.message}/" if self.message else "")] if self.exception else []
        parts += [f"observed error <= {self.max_error:g}"] if self.max_error is not None else []
        parts += [f"the observation equal to bug reference {self.reference}"] if self.reference else []
        return " and ".join(parts)

    def other_stack(self, env: Mapping[str, Any]) -> str | None:
        """Why this entry is not for the run described by ``env``, or None if it is."""
        settings = env.get("settings") or {}
        found = env.get("frameworks") or {}
        if self.framework:
            if self.framework not in (settings.get("frameworks") or []):
                return f"{self.framework} did not run"
            version = str(found.get(self.framework, ""))
            if self.version and not fnmatch.fnmatchcase(version, self.version):
                return f"{self.framework} is {version}, the entry is for {self.version}"
        for name, glob in self.versions:
            version = str(found.get(name, "not installed"))
            if not fnmatch.fnmatchcase(version, glob):
                return f"{name} is {version}, the entry is for {glob}"
        if self.device and self.device not in (settings.get("selected_devices") or []):
            return f"device {self.device} did not run"
        return None

    def other_version(self, env: Mapping[str, Any]) -> str | None:
        """Why this entry is not for ``env`` when the version is the only reason (its framework
        ran, its device ran, a version glob does not match the installed version), else None:
        the run is on a version the entry was not seen on (:func:`match_elsewhere`)."""
        settings = env.get("settings") or {}
        found = env.get("frameworks") or {}
        if self.framework and self.framework not in (settings.get("frameworks") or []):
            return None
        if self.device and self.device not in (settings.get("selected_devices") or []):
            return None
        why = []
        if self.framework and self.version:
            version = str(found.get(self.framework, ""))
            if not fnmatch.fnmatchcase(version, self.version):
                if not version:
                    return None
                why.append(f"{self.framework} is {version}, the entry is for {self.version}")
        for name, glob in self.versions:
            installed = found.get(name)
            if installed is None or installed == "not installed":
                return None  # not installed: another stack, not another version
            if not fnmatch.fnmatchcase(str(installed), glob):
                why.append(f"{name} is {installed}, the entry is for {glob}")
        return "; ".join(why) or None

    def seen_on(self) -> str:
        """The versions the entry was seen on, for people: ``tensorflow 2.21``, ``keras 3.15``."""
        stack = [(self.framework, self.version)] if self.framework and self.version else []
        stack += list(self.versions)
        return ", ".join(f"{name} {re.sub(r'[.]?[*]$', '', glob)}" for name, glob in stack if name) or "another stack"

    def elsewhere_note(self) -> str:
        """What a failing test that shows this entry's symptom on another version says."""
        return (f"matches known divergence {self.index} ({self.reason}), seen on {self.seen_on()}; "
                "not yet confirmed on this version")

    def not_reached(self, env: Mapping[str, Any]) -> str | None:
        """Why the run described by ``env`` could not show the symptom (``occurs_with``), or None."""
        settings = env.get("settings") or {}
        for name, values in self.occurs_with:
            if settings.get(name) not in values:
                wanted = " or ".join(f"--dl-{name}={v}" for v in values)
                return f"the symptom occurs with {wanted}, and this run had --dl-{name}={settings.get(name)}"
        return None

    def selects(self, test: Mapping[str, Any]) -> bool:
        """Whether ``test`` (nodeid, claim, params) is one of the tests this entry pins."""
        params = test.get("params") or {}
        if not fnmatch.fnmatchcase(str(test.get("claim", "")), self.claim):
            return False
        if self.framework and self.framework not in _SHORT.get(str(params.get("framework")), ()):
            return False
        if self.device and params.get("device") != self.device:
            return False
        # The identity inside the package where the report has it: a node id depends on how
        # pytest was started (``--pyargs pkg.module::test`` gives no path at all).
        local = suite_relative(str(test.get("identity") or test.get("nodeid", "")))
        return any(_glob(pattern).fullmatch(local) for pattern in self.tests)

    def shows(self, failure: Failure) -> bool:
        """Whether the failure is the pinned symptom: every failing part shows every part of
        the symptom that the entry names (type, pattern, ceiling, bug reference)."""
        members = failure.members()
        if self.exception is not None:
            if not members:
                return False
            for types, message in members:
                if self.exception not in types:
                    return False
                if self.message is not None and re.search(self.message, message) is None:
                    return False
        if self.reference is not None:
            margin = dict(failure.references).get(self.reference)
            if margin is None or not margin <= 1:
                return False  # not recorded, or the observation is not the finding's computation
        if self.max_error is None:
            return True
        if not failure.errors:
            return False
        if any("AssertionError" not in types for types, _ in members):
            return False  # a crash is not an oracle's observed error
        return all(e <= self.max_error for e in failure.errors)


def suite_relative(nodeid: str) -> str:
    """The node id from the area folder on (``autodiff/test_x.py::test[p]``): a checkout run
    (``suites/...``) and an installed run (``.../pytest_dlconform/suites/...``) agree."""
    marker = "suites/"
    cut = nodeid.rfind(marker, 0, nodeid.find("::") if "::" in nodeid else len(nodeid))
    return nodeid[cut + len(marker):] if cut >= 0 else nodeid


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern[str]:
    """A node-id glob: ``*`` and ``?`` are wildcards, everything else (brackets too) is literal."""
    parts = [".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern]
    return re.compile("".join(parts), re.DOTALL)


# ------------------------------------------------------------------ the file


def load(path: str) -> list[Divergence]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise DivergenceError(f"known-divergences file {path}: no such file") from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DivergenceError(f"known-divergences file {path}: not valid TOML ({exc})") from None
    unknown = set(data) - {"divergence"}
    if unknown:
        raise DivergenceError(f"known-divergences file {path}: unknown tables {sorted(unknown)}; use [[divergence]] entries")
    entries = data.get("divergence", [])
    if not isinstance(entries, list):
        raise DivergenceError(f"known-divergences file {path}: 'divergence' must be an array of tables ([[divergence]])")
    return [_parse(entry, i, f"{path}, entry {i}") for i, entry in enumerate(entries, 1)]


def _parse(entry: Any, index: int, where: str) -> Divergence:
    if not isinstance(entry, dict):
        raise DivergenceError(f"{where}: not a table")
    unknown = set(entry) - _KEYS
    if unknown:
        raise DivergenceError(f"{where}: unknown keys {sorted(unknown)}; allowed: {', '.join(sorted(_KEYS))}")
    for key in ("claim", "reason", "expires"):
        if key not in entry or entry[key] in ("", None):
            raise DivergenceError(f"{where}: '{key}' is required (claim id or glob, reason, expiry date)")
    framework = entry.get("framework")
    if framework is not None and str(framework).lower() not in _FRAMEWORKS:
        raise DivergenceError(f"{where}: framework {framework!r} is not one of tensorflow, torch")
    if entry.get("version") and framework is None:
        raise DivergenceError(f"{where}: 'version' needs 'framework' (whose version is it?)")
    device = entry.get("device")
    if device is not None and device not in _DEVICES:
        raise DivergenceError(f"{where}: device {device!r} is not one of {', '.join(_DEVICES)}")
    script = entry.get("script")
    if script is not None and not (isinstance(script, str) and script.endswith(".py") and "/" not in script):
        raise DivergenceError(f"{where}: script {script!r} must be a file name in pytest_dlconform/report/findings/, "
                              "e.g. script = \"hardsigmoid_float64_backward.py\"")
    return Divergence(
        claim=str(entry["claim"]), reason=str(entry["reason"]).strip(), expires=_date(entry["expires"], where),
        tests=_tests(entry.get("tests"), where), **_symptom(entry, where),
        framework=_FRAMEWORKS[str(framework).lower()] if framework is not None else None,
        version=str(entry["version"]) if entry.get("version") else None,
        versions=_versions(entry, where), device=device, script=script, index=index, where=where,
        occurs_with=_occurs_with(entry.get("occurs_with"), where), reference=_reference(entry.get("reference"), where),
        modes=_modes(entry.get("modes"), where),
    )


def _modes(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not (isinstance(value, list) and value and all(isinstance(m, str) and m for m in value)):
        raise DivergenceError(f"{where}: modes {value!r} must be a non-empty list of the claim's documented modes, "
                              'e.g. modes = ["Nadam"]')
    return tuple(value)


def _reference(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in REFERENCES:
        raise DivergenceError(f"{where}: reference {value!r} is not a registered bug reference; use one of "
                              f"{', '.join(sorted(REFERENCES))} (divergences.REFERENCES)")
    return value


def _occurs_with(value: Any, where: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if value is None:
        return ()
    example = 'e.g. occurs_with = { replicas = [3] } or { profile = ["explore"] }'
    if not isinstance(value, dict) or not value:
        raise DivergenceError(f"{where}: occurs_with must be a table of run settings, {example}")
    out = []
    for name, values in value.items():
        kind = _OCCURS_WITH.get(name)
        if kind is None:
            raise DivergenceError(f"{where}: occurs_with names {name!r}; it can name {', '.join(_OCCURS_WITH)} ({example})")
        if not isinstance(values, list) or not values or not all(
                isinstance(v, kind) and not isinstance(v, bool) for v in values):
            raise DivergenceError(f"{where}: occurs_with {name} = {values!r} must be a list of {kind.__name__} ({example})")
        if name == "profile":
            from ..run.settings import PROFILE_CHOICES

            unknown = [v for v in values if v not in PROFILE_CHOICES]
            if unknown:
                raise DivergenceError(f"{where}: occurs_with profile {unknown[0]!r} is not a profile; use one of "
                                      f"{', '.join(PROFILE_CHOICES)}")
        out.append((str(name), tuple(values)))
    return tuple(out)


def _tests(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not value or not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise DivergenceError(f"{where}: 'tests' is required: a list of node-id globs relative to the suites folder, "
                              "e.g. tests = [\"autodiff/test_tape.py::test_watch*\"]")
    return tuple(value)


def _symptom(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    exception, message, ceiling = entry.get("exception"), entry.get("message"), entry.get("max_error")
    if exception is None and ceiling is None:
        raise DivergenceError(f"{where}: pin the symptom: 'exception' (a type name, with an optional 'message' "
                              "pattern), 'max_error' (a ceiling on the observed error), or both")
    if message is not None and exception is None:
        raise DivergenceError(f"{where}: 'message' needs 'exception' (the pattern is matched against its message)")
    if message is None and ceiling is None:
        raise DivergenceError(f"{where}: exception {exception!r} alone would match any failure of that type; pin it "
                              "with 'message' (a pattern of the exact symptom), 'max_error' (a ceiling), or both")
    if message is not None:
        try:
            re.compile(str(message))
        except re.error as exc:
            raise DivergenceError(f"{where}: message {message!r} is not a regular expression ({exc})") from None
    if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, (int, float)) or not ceiling > 0):
        raise DivergenceError(f"{where}: max_error {ceiling!r} must be a positive number, e.g. max_error = 1e-8")
    return {"exception": str(exception) if exception is not None else None,
            "message": str(message) if message is not None else None,
            "max_error": float(ceiling) if ceiling is not None else None}


def _versions(entry: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    table = entry.get("versions") or {}
    if not isinstance(table, dict) or not all(isinstance(v, str) and v for v in table.values()):
        raise DivergenceError(f"{where}: 'versions' must be a table of package = \"version glob\", e.g. "
                              "versions = { keras = \"3.15.*\" }")
    if not entry.get("version") and not table:
        raise DivergenceError(f"{where}: say which versions the entry is for: 'version' (with 'framework') or "
                              "'versions' = { package = \"glob\" }; an entry without one would apply to every release")
    return tuple(sorted((str(k), str(v)) for k, v in table.items()))


def _date(value: Any, where: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise DivergenceError(f"{where}: expires {value!r} is not a date; write e.g. expires = 2026-06-30") from None


# ------------------------------------------------------------------ in the test process


def pinning(entries: Sequence[Divergence], test: Mapping[str, Any], env: Mapping[str, Any],
            today: dt.date | None = None) -> list[Divergence]:
    """The live entries (not expired, for the stack ``env`` describes) whose pinned tests
    include ``test``, whatever its symptom, in file order."""
    today = today or dt.date.today()
    return [e for e in entries if e.expires >= today and e.other_stack(env) is None and e.selects(test)]


def match_failure(entries: Sequence[Divergence], test: Mapping[str, Any], failure: Failure,
                  env: Mapping[str, Any], today: dt.date | None = None) -> Divergence | None:
    """The live entry whose pinned tests include ``test`` and whose symptom ``failure`` shows."""
    return next((entry for entry in pinning(entries, test, env, today) if entry.shows(failure)), None)


def match_elsewhere(entries: Sequence[Divergence], test: Mapping[str, Any], failure: Failure,
                    env: Mapping[str, Any], today: dt.date | None = None) -> Divergence | None:
    """For a violated test that no entry matched: the live entry that would have matched it
    but for the version (same tests, same symptom; its framework and device ran, a version
    glob does not match). The test still fails: the finding is named, not assumed."""
    today = today or dt.date.today()
    for entry in entries:
        if (entry.expires >= today and entry.other_stack(env) is not None and entry.other_version(env)
                and entry.selects(test) and entry.shows(failure)):
            return entry
    return None


KNOWN_ELSEWHERE = "known_elsewhere"  # the test record's field (apply) naming the entry seen on another version


def elsewhere_record(entry: Divergence, env: Mapping[str, Any]) -> dict[str, Any]:
    """The ``known_elsewhere`` field of a violated test that shows ``entry``'s symptom on a
    version outside the entry's."""
    return {"key": entry.key, "entry": entry.index, "reason": entry.reason, "seen_on": entry.seen_on(),
            "why": entry.other_version(env) or "", "script": entry.script, "note": entry.elsewhere_note()}


def failure_of(test: Mapping[str, Any]) -> Failure:
    """The symptom a report's test recorded: its exception, else its failing checks."""
    evidence = test.get("evidence") or {}
    exc = evidence.get("exception") or {}
    parts = tuple((tuple(t), str(m)) for t, m in exc.get("parts") or ())
    return Failure(tuple(exc.get("types") or ()), str(exc.get("message") or ""), failing_errors(evidence), parts,
                   reference_margins(evidence))


def failing_errors(evidence: Mapping[str, Any] | None) -> tuple[float, ...]:
    """The observed errors of the checks that failed in a test's evidence: per check whose
    worst margin is above 1, the largest error of its failing observations (``max_error``,
    kept by evidence.check beside the worst-margin observation; ``observed`` where absent)."""
    errors = []
    for check in ((evidence or {}).get("checks") or {}).values():
        try:
            if not float(check.get("margin")) <= 1:
                errors.append(float(check.get("max_error", check.get("observed"))))
        except (AttributeError, TypeError, ValueError):
            continue
    return tuple(errors)


def reference_margins(evidence: Mapping[str, Any] | None) -> tuple[tuple[str, float], ...]:
    """(name, worst margin) of each bug reference the test compared its observation with."""
    out = []
    for name, ref in ((evidence or {}).get("references") or {}).items():
        try:
            out.append((str(name), float(ref.get("margin"))))
        except (AttributeError, TypeError, ValueError):
            out.append((str(name), math.inf))
    return tuple(out)


# ------------------------------------------------------------------ after the run (controller)


@dataclass
class Status:
    entry: Divergence
    status: str
    tests: list[str] = field(default_factory=list)  # the tests it applied to (or would have, expired)
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        e = self.entry
        return {
            "claim": e.claim, "reason": e.reason, "expires": e.expires.isoformat(), "framework": e.framework,
            "version": e.version, "versions": dict(e.versions), "device": e.device, "tests_pinned": list(e.tests),
            "symptom": e.symptom(), "where": e.where, "key": e.key, "status": self.status, "tests": self.tests,
            "why": self.why, "script": e.script, "occurs_with": {k: list(v) for k, v in e.occurs_with},
            "reference": e.reference, "modes": list(e.modes),
        }


def apply(report: Report | Mapping[str, Any], entries: list[Divergence], today: dt.date | None = None,
          *, rematch: bool = False) -> Report:
    """The report with each entry's status and the divergences it shows.

    Tests were matched where they ran (their ``expected`` field names the entry); a violated
    test without a match is matched here from what the report recorded, which is how a
    report from elsewhere is judged (``dlconform compare --known-divergences``; ``rematch``
    first forgets the matches the report came with, so only ``entries`` decide).
    A claim is expected when every violated test of it is. A pure function: the statuses
    land in the new report's ``divergences`` and its counts are recomputed.
    """
    today = today or dt.date.today()
    report = as_report(report)
    env = report.environment

    def matched(test: TestRecord) -> TestRecord:
        if rematch:
            test = dataclasses.replace(test, expected=None, divergence=None)
        if KNOWN_ELSEWHERE in test.extra:  # judged again below, by these entries
            test = dataclasses.replace(test, extra=freeze({k: v for k, v in test.extra.items() if k != KNOWN_ELSEWHERE}))
        if test.verdict == results.VIOLATED and not test.divergence:
            failure = failure_of(test)
            hit = match_failure(entries, test, failure, env, today)
            if hit is not None:
                test = dataclasses.replace(test, divergence=hit.key, expected=hit.reason)
            else:
                near = match_elsewhere(entries, test, failure, env, today)
                if near is not None:  # still violated (no xfail): the finding is named
                    test = dataclasses.replace(test, extra=freeze({**test.extra,
                                                                   KNOWN_ELSEWHERE: elsewhere_record(near, env)}))
        return test

    report = report.map_tests(matched)
    tests = list(report.tests())
    statuses = [_status(entry, tests, env, today).as_dict() for entry in entries]
    claims = {}
    for cid, claim in report.claims.items():
        violated = [t for t in claim.tests if t.verdict == results.VIOLATED]
        expected = "; ".join(sorted({str(t.expected) for t in violated})) if violated and all(
            t.expected for t in violated) else None
        claims[cid] = dataclasses.replace(claim, expected=expected)
    return results.with_counts(report.replace(claims=claims, divergences=statuses))


def _status(entry: Divergence, tests: Sequence[Mapping[str, Any]], env: Mapping[str, Any], today: dt.date) -> Status:
    pinned = [t for t in tests if entry.selects(t)]
    if entry.expires < today:
        return Status(entry, EXPIRED, [t["nodeid"] for t in pinned if t["verdict"] == results.VIOLATED])
    elsewhere = entry.other_stack(env)
    if elsewhere:
        seen = [t["nodeid"] for t in pinned if t["verdict"] == results.VIOLATED
                and (t.get(KNOWN_ELSEWHERE) or {}).get("key") == entry.key]
        if seen:  # the symptom on a version the entry does not name: said in its status line
            elsewhere += (f"; but {len(seen)} violated test(s) of this run show its symptom (still failing): "
                          f"{entry.elsewhere_note()}")
        return Status(entry, OTHER_STACK, seen, why=elsewhere)
    if not pinned:
        return Status(entry, NOT_SELECTED, why="none of its tests ran in this run")
    hits = [t["nodeid"] for t in pinned if t.get("divergence") == entry.key]
    if hits:
        return Status(entry, APPLIED, hits)
    unreached = entry.not_reached(env)
    if unreached and all(t["verdict"] == results.HOLDS for t in pinned):
        return Status(entry, NOT_REACHED, why=f"its tests held; {unreached}")
    verdicts = sorted({t["verdict"] for t in pinned})
    return Status(entry, UNMATCHED, why=f"its {len(pinned)} test(s) ran: {', '.join(verdicts)}, none with {entry.symptom()}")


#: How :func:`summary_line` names each status that needs no action, in its order.
SUMMARY_WORDS = {
    APPLIED: "applied",
    NOT_REACHED: "not reached (their tests held without the settings the symptom needs)",
    NOT_SELECTED: "not selected (none of their tests ran)",
    OTHER_STACK: "for another stack",
}


def summary_counts(statuses: list[Mapping[str, Any]]) -> dict[str, int]:
    """How many entries have each status (:data:`SUMMARY_WORDS` order, then expired and
    unmatched), zero counts left out: for one-line summaries (terminal, compare, HTML)."""
    order = [*SUMMARY_WORDS, EXPIRED, UNMATCHED]
    counts = {status: sum(s["status"] == status for s in statuses) for status in order}
    return {status: n for status, n in counts.items() if n}


def summary_line(statuses: list[Mapping[str, Any]]) -> str:
    """One line counting the entries that need no action, e.g. "known divergences: 24
    applied, 3 not selected (none of their tests ran), 2 for another stack"; "" if none."""
    counts = summary_counts(statuses)
    parts = [f"{counts[status]} {words}" for status, words in SUMMARY_WORDS.items() if counts.get(status)]
    return f"known divergences: {', '.join(parts)}" if parts else ""


def status_lines(statuses: list[Mapping[str, Any]], verbose: bool = True) -> list[str]:
    """One line per entry (verbose); otherwise one line per entry that a person must act on
    (expired, unmatched) and :func:`summary_line` counting the others."""
    if not verbose:
        quiet = [s for s in statuses if s["status"] in (EXPIRED, UNMATCHED)]
        summary = summary_line(statuses)
        more = "; -v lists each entry" if len(quiet) < len(statuses) else ""
        return status_lines(quiet) + ([summary + more] if summary else [])
    lines = []
    for s in statuses:
        name = f"{s['claim']} ({s['where']})"
        if s["status"] == EXPIRED:
            still = f"; still violated by {len(s['tests'])} test(s)" if s["tests"] else ""
            lines.append(f"known divergence EXPIRED on {s['expires']}: {name}{still}: renew it with a reason or fix the cause")
        elif s["status"] == UNMATCHED:
            lines.append(f"known divergence UNMATCHED: {name}: {s.get('why')}: remove it if the claim holds now")
        elif s["status"] == NOT_REACHED:
            lines.append(f"known divergence not reached: {name}: {s.get('why')}")
        elif s["status"] == NOT_SELECTED:
            lines.append(f"known divergence not selected: {name}: {s.get('why')}")
        elif s["status"] == OTHER_STACK:
            lines.append(f"known divergence for another stack: {name}: {s.get('why')}")
        else:
            lines.append(f"known divergence applied: {name}: {len(s['tests'])} violated test(s) shown as xfailed: {s['reason']}")
    return lines


def problems(statuses: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for s in statuses if s["status"] in (EXPIRED, UNMATCHED)]
