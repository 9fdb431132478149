"""The API ledger document: covered / uncovered / out of scope per namespace, its HTML table,
and the diff between two ledgers (``dlconform coverage --api OLD.json NEW.json``).

Pure functions of plain JSON (no framework import), and the table of the ledger's namespaces
(:data:`NAMESPACES`): :mod:`pytest_dlconform.report.api_ledger` enumerates and records in the
processes that run tests; the controller calls :func:`build`.
Out-of-scope entries are data, ``api_out_of_scope.toml`` in this package: each names one API
and gives a one-line reason (deprecated, needs special hardware such as a TPU, no documented behaviour to
check); they show as "out of scope", never as "uncovered", unless a test calls them anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

SCHEMA = "dlconform-api-ledger/1"
COVERED, UNCOVERED, OUT_OF_SCOPE = "covered", "uncovered", "out of scope"
STATUSES = (COVERED, UNCOVERED, OUT_OF_SCOPE)
NOT_OBSERVED = ("calls made in other processes (distributed rank programs, clusters, fresh-interpreter round trips) "
                "or in threads other than the test's, and construction of classes implemented in C, are not seen")


# ------------------------------------------------------------------ the namespaces of the ledger

FUNCTION, CLASS, METHOD = "function", "class", "method"


@dataclass(frozen=True)
class Namespace:
    """One namespace of the ledger, as users spell it (``torch.nn.functional``)."""

    name: str
    framework: str  # the distribution whose version is recorded: tensorflow, keras, torch
    area: str  # the claim area it mostly serves (a label of the report, not a filter)
    path: str  # the import path of the object, ``module:attr.attr`` where it is an attribute
    kinds: tuple[str, ...] = (FUNCTION, CLASS)
    methods: bool = False  # entries are the public methods of the class at ``path``
    names_from: str = ""  # a module whose ``__all__`` lists the names (a subset of the namespace's)
    own_module: bool = False  # no ``__all__``: Python functions only where defined in the module itself
    # Names the module imports for its own use and does not document as its API.
    helpers: tuple[str, ...] = ()


NAMESPACES: tuple[Namespace, ...] = (
    Namespace("tf", "tensorflow", "execution", "tensorflow"),
    Namespace("tf.nn", "tensorflow", "modules", "tensorflow:nn"),
    Namespace("tf.math", "tensorflow", "modules", "tensorflow:math"),
    Namespace("tf.data", "tensorflow", "data", "tensorflow:data"),
    Namespace("tf.data.Dataset", "tensorflow", "data", "tensorflow:data.Dataset", kinds=(METHOD,), methods=True),
    Namespace("tf.distribute", "tensorflow", "distributed", "tensorflow:distribute"),
    Namespace("tf.saved_model", "tensorflow", "export", "tensorflow:saved_model"),
    Namespace("tf.lite", "tensorflow", "export", "tensorflow:lite"),
    Namespace("keras.layers", "keras", "modules", "keras.layers"),
    Namespace("keras.optimizers", "keras", "modules", "keras.optimizers"),
    Namespace("keras.losses", "keras", "modules", "keras.losses"),
    Namespace("keras.mixed_precision", "keras", "precision", "keras.mixed_precision"),
    Namespace("torch.nn", "torch", "modules", "torch.nn", kinds=(CLASS,)),
    Namespace("torch.nn.functional", "torch", "modules", "torch.nn.functional", kinds=(FUNCTION,), own_module=True,
              helpers=("handle_torch_function", "has_torch_function", "has_torch_function_unary",
                       "has_torch_function_variadic")),
    Namespace("torch.optim", "torch", "modules", "torch.optim"),
    Namespace("torch.optim.lr_scheduler", "torch", "modules", "torch.optim.lr_scheduler"),
    Namespace("torch.utils.data", "torch", "data", "torch.utils.data"),
    Namespace("torch.distributed", "torch", "distributed", "torch.distributed",
              names_from="torch.distributed.distributed_c10d"),  # the collectives and process groups
    Namespace("torch.amp", "torch", "precision", "torch.amp"),
    Namespace("torch.autograd", "torch", "autodiff", "torch.autograd"),
    Namespace("torch.func", "torch", "autodiff", "torch.func"),
    Namespace("torch.export", "torch", "export", "torch.export"),
    Namespace("torch.onnx", "torch", "export", "torch.onnx"),
    Namespace("torch.jit", "torch", "export", "torch.jit"),
)


def namespace_of(name: str) -> Namespace | None:
    """The namespace a fully qualified API name belongs to (the longest matching one)."""
    best = None
    for ns in NAMESPACES:
        inside = name.startswith(ns.name + ".") and "." not in name[len(ns.name) + 1:]
        if inside and (best is None or len(ns.name) > len(best.name)):
            best = ns
    return best


class LedgerError(ValueError):
    """An unusable out-of-scope file or ledger; the message is one line."""


def packaged_out_of_scope() -> str:
    return str(resources.files("pytest_dlconform.report") / "api_out_of_scope.toml")


def load_out_of_scope(path: str | None = None) -> dict[str, str]:
    """name -> reason, from the TOML file (``[[api]] name = ..., reason = ...``); syntax only
    (whether each name exists is checked against the catalog, :func:`validate`)."""
    path = path or packaged_out_of_scope()
    where = os.path.basename(path)
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LedgerError(f"{where}: cannot read: {exc}") from None
    out: dict[str, str] = {}
    for i, entry in enumerate(data.get("api", []), 1):
        name, reason = entry.get("name"), entry.get("reason")
        if not isinstance(name, str) or not name:
            raise LedgerError(f"{where}: entry {i} has no name; give name = \"torch.nn.functional.upsample\"")
        if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
            raise LedgerError(f"{where}: {name}: give reason = \"...\" on one line (deprecated, "
                              "needs special hardware such as a TPU, no documented behaviour to check)")
        if set(entry) - {"name", "reason"}:
            raise LedgerError(f"{where}: {name}: unknown key(s) {', '.join(sorted(set(entry) - {'name', 'reason'}))}; "
                              "an entry has only name and reason")
        if name in out:
            raise LedgerError(f"{where}: {name} is listed twice")
        if namespace_of(name) is None:
            raise LedgerError(f"{where}: {name} is in no ledger namespace; use one of: "
                              + ", ".join(ns.name for ns in NAMESPACES))
        out[name] = reason.strip()
    unknown = set(data) - {"api"}
    if unknown:
        raise LedgerError(f"{where}: unknown table(s) {', '.join(sorted(unknown))}; entries are [[api]] tables")
    return out


def validate(out_of_scope: Mapping[str, str], catalog: Mapping[str, Mapping[str, Any]]) -> None:
    """Every out-of-scope name of an enumerated namespace is a public API of the installed version."""
    for name in out_of_scope:
        ns = namespace_of(name)
        entry = catalog.get(ns.name) if ns is not None else None
        if entry is None or entry.get("missing"):
            continue  # a framework (or namespace) this run did not enumerate
        member = name[len(ns.name) + 1:] if ns is not None else name
        if member not in entry["entries"]:
            raise LedgerError(f"api_out_of_scope.toml: {name} is no public API of {entry['framework']} {entry['version']} "
                              f"(namespace {ns.name if ns else '?'}); fix the name or remove the entry")


def merge_catalogs(parts: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for name, ns in part.get("catalog", {}).items():
            if name not in out or (out[name].get("missing") and not ns.get("missing")):
                out[name] = dict(ns)
    return out


def build(parts: Sequence[Mapping[str, Any]], out_of_scope: Mapping[str, str]) -> dict[str, Any]:
    """The ledger from the recording processes' parts (catalog + per-test records)."""
    catalog = merge_catalogs(parts)
    validate(out_of_scope, catalog)
    tests: dict[str, dict[str, Any]] = {}
    for part in parts:
        tests.update(part.get("tests", {}))
    callers: dict[str, list[str]] = {}
    for node in sorted(tests):
        for api in tests[node]["apis"]:
            callers.setdefault(api, []).append(node)
    namespaces = {}
    for name in sorted(catalog):
        ns = catalog[name]
        apis = {}
        for member, kind in sorted(ns["entries"].items()):
            full = f"{name}.{member}"
            nodes = callers.get(full, [])
            row: dict[str, Any] = {"kind": kind, "status": COVERED if nodes else
                                   (OUT_OF_SCOPE if full in out_of_scope else UNCOVERED)}
            if nodes:
                row["tests"] = len(nodes)
                row["claims"] = sorted({tests[n]["claim"] for n in nodes})
            if full in out_of_scope:
                row["reason"] = out_of_scope[full]
            apis[member] = row
        counts = {s: sum(1 for r in apis.values() if r["status"] == s) for s in STATUSES}
        entry: dict[str, Any] = {k: ns[k] for k in ("framework", "area", "version") if k in ns}
        entry.update(apis=apis, counts=counts)
        if ns.get("missing"):
            entry["missing"] = ns["missing"]
        namespaces[name] = entry
    versions = {ns["framework"]: ns["version"] for ns in catalog.values()}
    return {"schema": SCHEMA, "versions": dict(sorted(versions.items())), "namespaces": namespaces,
            "totals": {s: sum(n["counts"][s] for n in namespaces.values()) for s in STATUSES},
            "tests": {node: tests[node] for node in sorted(tests)}, "not_observed": NOT_OBSERVED}


def in_scope(counts: Mapping[str, int]) -> int:
    return counts[COVERED] + counts[UNCOVERED]


def summary_rows(doc: Mapping[str, Any]) -> list[tuple[str, str, str, int, int, int]]:
    """(namespace, framework version, area, covered, in scope, out of scope) per namespace."""
    return [(name, f"{ns['framework']} {ns['version']}", ns["area"], ns["counts"][COVERED], in_scope(ns["counts"]),
             ns["counts"][OUT_OF_SCOPE]) for name, ns in doc["namespaces"].items()]


def summary_line(doc: Mapping[str, Any], path: str) -> str:
    t = doc["totals"]
    return (f"API ledger written to {path} (and {html_path(path)}): {t[COVERED]} of {in_scope(t)} in-scope public "
            f"callables called by {len(doc['tests'])} claim tests; {t[OUT_OF_SCOPE]} out of scope")


def to_text(doc: Mapping[str, Any], uncovered: bool = False) -> str:
    lines = [f"{'namespace':<26} {'version':<20} {'area':<12} {'covered':>13} {'out of scope':>13}"]
    for name, version, area, covered, scope, oos in summary_rows(doc):
        pct = f"{100 * covered / scope:.0f}%" if scope else "-"
        lines.append(f"{name:<26} {version:<20} {area:<12} {f'{covered}/{scope}':>8} {pct:>4} {oos:>13}")
    t = doc["totals"]
    lines.append(f"{'all':<60} {f'{t[COVERED]}/{in_scope(t)}':>8}      {t[OUT_OF_SCOPE]:>13}")
    if uncovered:
        for name, ns in doc["namespaces"].items():
            missing = [m for m, r in ns["apis"].items() if r["status"] == UNCOVERED]
            if missing:
                lines.append(f"uncovered in {name}: {', '.join(missing)}")
    lines.append(f"not observed: {doc.get('not_observed', NOT_OBSERVED)}")
    return "\n".join(lines) + "\n"


def html_path(path: str) -> str:
    root, ext = os.path.splitext(path)
    return (root if ext == ".json" else path) + ".html"


_STYLE = ("body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
          "padding:2px 8px;text-align:left}td.n{text-align:right}.covered{color:#1a7f37}.uncovered{color:#b35900}"
          ".oos{color:#777}details{margin:.3em 0}code{font-size:13px}")


def render_html(doc: Mapping[str, Any]) -> str:
    """A small self-contained page: the per-namespace table, then each namespace's APIs."""
    head = "".join(f"<th>{h}</th>" for h in ("namespace", "version", "area", "covered", "in scope", "%", "out of scope"))
    rows = []
    for name, version, area, covered, scope, oos in summary_rows(doc):
        pct = f"{100 * covered / scope:.0f}" if scope else "-"
        rows.append(f'<tr><td><a href="#{escape(name)}">{escape(name)}</a></td><td>{escape(version)}</td>'
                    f'<td>{escape(area)}</td><td class="n">{covered}</td><td class="n">{scope}</td>'
                    f'<td class="n">{pct}</td><td class="n">{oos}</td></tr>')
    blocks = []
    for name, ns in doc["namespaces"].items():
        items = []
        for member, row in ns["apis"].items():
            css = {COVERED: "covered", UNCOVERED: "uncovered", OUT_OF_SCOPE: "oos"}[row["status"]]
            note = (f" ({row['tests']} tests: {escape(', '.join(row['claims']))})" if row["status"] == COVERED
                    else f" ({escape(row['reason'])})" if row.get("reason") else "")
            items.append(f'<li class="{css}"><code>{escape(member)}</code> {escape(row["status"])}{note}</li>')
        blocks.append(f'<details id="{escape(name)}"><summary>{escape(name)}: {ns["counts"][COVERED]} of '
                      f'{in_scope(ns["counts"])} covered</summary><ul>{"".join(items)}</ul></details>')
    versions = ", ".join(f"{k} {v}" for k, v in doc["versions"].items())
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>dlconform API ledger</title>"
            f"<style>{_STYLE}</style></head><body><h1>API ledger</h1><p>{escape(versions)}; "
            f"{len(doc['tests'])} claim tests. Not observed: {escape(doc.get('not_observed', NOT_OBSERVED))}.</p>"
            f"<table><tr>{head}</tr>{''.join(rows)}</table>{''.join(blocks)}</body></html>\n")


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, list[str]]:
    """APIs of NEW that OLD did not have, split by NEW's status; and those NEW dropped."""
    def names(doc: Mapping[str, Any]) -> dict[str, str]:
        return {f"{ns}.{m}": r["status"] for ns, entry in doc["namespaces"].items() for m, r in entry["apis"].items()}

    before, after = names(old), names(new)
    added = sorted(set(after) - set(before))
    return {"new_unchecked": [n for n in added if after[n] == UNCOVERED],
            "new_covered": [n for n in added if after[n] == COVERED],
            "new_out_of_scope": [n for n in added if after[n] == OUT_OF_SCOPE],
            "removed": sorted(set(before) - set(after)),
            "no_longer_covered": sorted(n for n in after if before.get(n) == COVERED and after[n] != COVERED)}


def diff_text(result: Mapping[str, list[str]], old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    def versions(doc: Mapping[str, Any]) -> str:
        return ", ".join(f"{k} {v}" for k, v in doc["versions"].items())

    lines = [f"API ledger: {versions(old)} -> {versions(new)}"]
    labels = (("new_unchecked", "new and unchecked"), ("new_covered", "new and covered"),
              ("new_out_of_scope", "new, out of scope"), ("no_longer_covered", "covered before, not now"),
              ("removed", "removed"))
    for key, label in labels:
        lines.append(f"{label}: {len(result[key])}")
        lines += [f"  {name}" for name in result[key]]
    return "\n".join(lines) + "\n"


def load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise LedgerError(f"{path}: cannot read: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise LedgerError(f"{path}: not an API ledger ({SCHEMA}); write one with dlconform run --dl-api-ledger=PATH")
    return doc


def main(argv: Sequence[str]) -> int:
    """``dlconform coverage --api LEDGER.json [NEW.json]``: the table, or the diff."""
    parser = argparse.ArgumentParser(
        prog="dlconform coverage", description="The measured API ledger of a run (--dl-api-ledger): covered, uncovered "
        "and out-of-scope public callables per namespace; with two ledgers, the APIs new in the second that no test "
        "calls. Exit status: 0, 1 with --fail-on-new when a new API is unchecked, 2 unusable input.")
    parser.add_argument("--api", action="store_true", required=True, help="the API ledger (the only coverage here)")
    parser.add_argument("ledgers", nargs="+", metavar="LEDGER.json", help="one ledger, or OLD.json NEW.json")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--uncovered", action="store_true", help="with one ledger: list every uncovered API")
    parser.add_argument("--html", metavar="OUT.html", help="with one ledger: write its HTML table")
    parser.add_argument("--fail-on-new", action="store_true", help="exit 1 when NEW has an API OLD lacked that no "
                                                                   "test calls")
    args = parser.parse_args(argv)
    if len(args.ledgers) > 2:
        parser.error("give one ledger or two (OLD.json NEW.json)")
    try:
        docs = [load(p) for p in args.ledgers]
    except LedgerError as exc:
        sys.stderr.write(f"dlconform coverage: {exc}\n")
        return 2
    if len(docs) == 1:
        if args.html:
            from .results import write_atomic

            write_atomic(args.html, render_html(docs[0]))
        sys.stdout.write(json.dumps(docs[0]["namespaces"], indent=1) + "\n" if args.format == "json"
                         else to_text(docs[0], uncovered=args.uncovered))
        return 0
    result = diff(docs[0], docs[1])
    sys.stdout.write(json.dumps(result, indent=1) + "\n" if args.format == "json" else diff_text(result, *docs))
    return 1 if args.fail_on_new and result["new_unchecked"] else 0
