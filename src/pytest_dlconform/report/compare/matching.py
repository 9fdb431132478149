"""Which tests of two reports are the same test: the shared scope (frameworks, device kinds)
and each test's key (claim, framework, strategy, device, node id without the install path)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...core import fingerprint


@dataclass(frozen=True)
class Scope:
    frameworks: tuple[str, ...]
    devices: tuple[str, ...]  # () when compared across devices
    across_devices: bool
    notes: tuple[str, ...]


def _tests(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [t for entry in doc["claims"].values() for t in entry["tests"]]


def _values(doc: Mapping[str, Any], key: str) -> set[str]:
    return {str((t.get("params") or {}).get(key, "")) for t in _tests(doc)}


def scope_of(old: Mapping[str, Any], new: Mapping[str, Any]) -> Scope:
    notes: list[str] = []
    fws_old, fws_new = _values(old, "framework"), _values(new, "framework")
    frameworks = tuple(sorted(fws_old & fws_new))
    for side, only in (("old", fws_old - fws_new), ("new", fws_new - fws_old)):
        if only:
            notes.append(f"framework(s) {', '.join(sorted(f or '-' for f in only))} ran only in the {side} report: not compared")
    dev_old, dev_new = _values(old, "device"), _values(new, "device")
    devices = tuple(sorted(dev_old & dev_new))
    across = not devices
    if across:
        notes.append(
            f"the reports share no device kind (old: {', '.join(sorted(dev_old))}; new: {', '.join(sorted(dev_new))}): "
            "the same tests are compared across devices, on the claims both ran"
        )
    else:
        for side, only in (("old", dev_old - dev_new), ("new", dev_new - dev_old)):
            if only:
                notes.append(f"device kind(s) {', '.join(sorted(only))} ran only in the {side} report: not compared")
    notes += _environment_notes(old.get("environment", {}), new.get("environment", {}))
    for side, doc in (("old", old), ("new", new)):
        if doc.get("interrupted"):
            notes.append(f"the {side} run stopped early ({doc['interrupted']}): claims it did not reach are missing from it")
    return Scope(frameworks, devices, across, tuple(notes))


def _environment_notes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    notes = []
    for key in ("profile", "seed"):
        if old.get(key) != new.get(key):
            notes.append(f"{key} differs ({old.get(key)} vs {new.get(key)}): "
                         "different examples ran, so margins may drift by chance")
    fw_old, fw_new = old.get("frameworks") or {}, new.get("frameworks") or {}
    for lib in ("numpy", "hypothesis"):
        if fw_old.get(lib) != fw_new.get(lib):
            notes.append(f"{lib} differs ({fw_old.get(lib)} vs {fw_new.get(lib)}): a change may come from it, not the framework")
    return notes


def suite_warnings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line when the reports were judged by different claims and suites (fingerprint.py),
    or when a report does not say (written before reports recorded it)."""
    key = fingerprint.ENV_KEY
    a, b = old.get(key), new.get(key)
    missing = [side for side, value in (("old", a), ("new", b)) if not value]
    if missing:
        which = "neither report records" if len(missing) == 2 else f"the {missing[0]} report does not record"
        return [f"{which} which suites it ran (written by an older pytest-dlconform): "
                "cannot tell whether both were judged by the same claims and tests"]
    if a != b:
        return [f"the reports come from different suite versions (claims and suites {_short(a)} vs {_short(b)}): "
                "a changed verdict may come from a changed test, not from the framework"]
    return []


def _short(value: Any) -> str:
    text = str(value)
    return text[: text.index(":") + 13] if ":" in text else text[:12]


def normalized_nodeid(nodeid: str, device: str | None) -> str:
    """Node id without the folders above ``suites/`` and, if given, without the device id."""
    path, sep, rest = nodeid.partition("::")
    path = re.sub(r"^(?:.*/)?suites/", "", path.replace("\\", "/"))
    if device and "[" in rest:
        head, _, ids = rest.partition("[")
        ids = re.sub(rf"(?:(?<=\[)|(?<=-)){re.escape(device)}(?=-|\]|$)", "", "[" + ids)
        rest = head + re.sub(r"-{2,}", "-", ids).replace("[-", "[").replace("-]", "]").replace("[]", "")
    return path + sep + rest


def _test_key(test: Mapping[str, Any], scope: Scope) -> tuple[str, ...]:
    params = test.get("params") or {}
    device = str(params.get("device", ""))
    return (
        str(test["claim"]), str(params.get("framework", "")), str(params.get("strategy", "")),
        "*" if scope.across_devices else device,
        normalized_nodeid(str(test.get("identity") or test["nodeid"]), device if scope.across_devices else None),
    )


def _in_scope(test: Mapping[str, Any], scope: Scope) -> bool:
    params = test.get("params") or {}
    if str(params.get("framework", "")) not in scope.frameworks:
        return False
    return scope.across_devices or str(params.get("device", "")) in scope.devices


def _column(key: tuple[str, ...]) -> str:
    return "/".join(p for p in key[1:4] if p and p != "*") or "-"


Cell = tuple[str, str, str, str]  # claim, framework, strategy, device ("*" across devices)


def _cells(doc: Mapping[str, Any], scope: Scope) -> dict[Cell, list[dict[str, Any]]]:
    cells: dict[Cell, list[dict[str, Any]]] = {}
    for test in _tests(doc):
        if _in_scope(test, scope):
            key = _test_key(test, scope)
            cells.setdefault((key[0], key[1], key[2], key[3]), []).append(test)
    return cells
