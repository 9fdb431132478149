"""Known divergences: claims a stack is known to violate, each with a reason and an expiry.

A TOML file of ``[[divergence]]`` entries::

    [[divergence]]
    claim = "execution.function.eager-equivalence"   # a claim id or a glob
    reason = "oneDNN fuses MatMul+BiasAdd+Relu in graphs: float32 differs by ~2e-7"
    expires = 2026-06-30                              # last day the entry applies
    framework = "tensorflow"                          # optional: only tests on this framework
    version = "2.21.*"                                # optional, needs framework: glob on its version
    device = "gpu"                                    # optional: cpu, gpu or multi-gpu

A violated test that an entry matches is shown as *expected* (``exp`` in the matrix) and
is not counted as a regression by ``dlconform compare``. Nothing is silently ignored:
an expired entry no longer applies and is reported, an entry that matched no violated
test is reported as unmatched (the claim holds now, or did not run), and an entry for
another stack is listed as such.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import sys
from dataclasses import dataclass
from typing import Any, Mapping

from . import results

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

APPLIED, EXPIRED, UNMATCHED, OTHER_STACK = "applied", "expired", "unmatched", "other stack"
_KEYS = {"claim", "reason", "expires", "framework", "version", "device"}
_FRAMEWORKS = {"tensorflow": "tensorflow", "tf": "tensorflow", "torch": "torch", "pytorch": "torch"}
_DEVICES = ("cpu", "gpu", "multi-gpu")
_SHORT = {"tf": ("tensorflow",), "torch": ("torch",), "tf+torch": ("tensorflow", "torch")}


class DivergenceError(ValueError):
    """A known-divergences file that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Divergence:
    claim: str
    reason: str
    expires: dt.date
    framework: str | None = None
    version: str | None = None
    device: str | None = None
    where: str = ""  # "FILE, entry N", for messages

    def describe(self) -> str:
        stack = [p for p in (self.framework, self.version and f"version {self.version}", self.device) if p]
        return f"{self.claim}" + (f" [{', '.join(stack)}]" if stack else "") + f" (expires {self.expires})"

    def other_stack(self, env: Mapping[str, Any]) -> str | None:
        """Why this entry is not for the run described by ``env``, or None if it is."""
        settings = env.get("settings") or {}
        if self.framework:
            if self.framework not in (settings.get("frameworks") or []):
                return f"{self.framework} did not run"
            version = str((env.get("frameworks") or {}).get(self.framework, ""))
            if self.version and not fnmatch.fnmatchcase(version, self.version):
                return f"{self.framework} is {version}, the entry is for {self.version}"
        if self.device and self.device not in (settings.get("selected_devices") or []):
            return f"device {self.device} did not run"
        return None

    def matches(self, test: Mapping[str, Any]) -> bool:
        params = test.get("params") or {}
        if not fnmatch.fnmatchcase(str(test.get("claim", "")), self.claim):
            return False
        if self.framework and self.framework not in _SHORT.get(str(params.get("framework")), ()):
            return False
        return not (self.device and params.get("device") != self.device)


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
    return [_parse(entry, f"{path}, entry {i}") for i, entry in enumerate(entries, 1)]


def _parse(entry: Any, where: str) -> Divergence:
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
    return Divergence(
        claim=str(entry["claim"]), reason=str(entry["reason"]).strip(), expires=_date(entry["expires"], where),
        framework=_FRAMEWORKS[str(framework).lower()] if framework is not None else None,
        version=str(entry["version"]) if entry.get("version") else None,
        device=device, where=where,
    )


def _date(value: Any, where: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise DivergenceError(f"{where}: expires {value!r} is not a date; write e.g. expires = 2026-06-30") from None


def apply(doc: dict[str, Any], entries: list[Divergence], today: dt.date | None = None) -> list[dict[str, Any]]:
    """Mark violated tests that a live entry matches as expected; return every entry's status.

    The statuses are also stored in ``doc["divergences"]`` and the counts refreshed.
    """
    today = today or dt.date.today()
    env = doc.get("environment") or {}
    statuses = []
    for entry in entries:
        status: dict[str, Any] = {
            "claim": entry.claim, "reason": entry.reason, "expires": entry.expires.isoformat(),
            "framework": entry.framework, "version": entry.version, "device": entry.device,
            "where": entry.where, "tests": [],
        }
        elsewhere = entry.other_stack(env)
        hits = [] if elsewhere else [
            t for c in doc["claims"].values() for t in c["tests"]
            if t["verdict"] == results.VIOLATED and entry.matches(t)
        ]
        status["tests"] = [t["nodeid"] for t in hits]
        if entry.expires < today:
            status["status"] = EXPIRED
        elif elsewhere:
            status["status"], status["why"] = OTHER_STACK, elsewhere
        elif not hits:
            status["status"] = UNMATCHED
        else:
            status["status"] = APPLIED
            for test in hits:
                test["expected"] = test.get("expected") or entry.reason
        statuses.append(status)
    for claim in doc["claims"].values():
        violated = [t for t in claim["tests"] if t["verdict"] == results.VIOLATED]
        claim["expected"] = "; ".join(sorted({t["expected"] for t in violated})) if violated and all(
            t.get("expected") for t in violated) else None
    doc["divergences"] = statuses
    results.refresh_counts(doc)
    return statuses


def status_lines(statuses: list[Mapping[str, Any]]) -> list[str]:
    """One line per entry that a person must look at (everything but a live, matched entry)."""
    lines = []
    for s in statuses:
        name = f"{s['claim']} ({s['where']})"
        if s["status"] == EXPIRED:
            still = f"; still violated by {len(s['tests'])} test(s)" if s["tests"] else ""
            lines.append(f"known divergence EXPIRED on {s['expires']}: {name}{still}: renew it with a reason or fix the cause")
        elif s["status"] == UNMATCHED:
            lines.append(f"known divergence UNMATCHED: {name} matched no violated test in this run: remove it if the claim holds now")
        elif s["status"] == OTHER_STACK:
            lines.append(f"known divergence for another stack: {name}: {s.get('why')}")
        else:
            lines.append(f"known divergence applied: {name}: {len(s['tests'])} violated test(s) shown as expected: {s['reason']}")
    return lines


def problems(statuses: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for s in statuses if s["status"] in (EXPIRED, UNMATCHED)]
