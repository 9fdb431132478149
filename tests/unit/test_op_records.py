"""Every op's facts live in its record (programs/ops/<family>.py), and the records are whole.

The samples, edge cases, derivatives and cancellation terms are views over
``programs.ops.RECORDS``, and so are the tables other suites read (documented dtypes,
autocast lines, graph names, own program ids, the TF.js converter's library ops). Two
checks keep it so:

- no second op table: outside the family modules, no literal (a dict's keys, a tuple, list
  or set, its entries' first strings and calls' first arguments) names three or more of the
  library's ops (activation identifiers aside), anywhere in src/ or suites/ (parsed with
  ``ast``, nothing imported but the records), unless it is in KNOWN_TABLES with the reason it
  is not a view yet; that list is empty and only shrinks;
- each record carries the fields the views that visit it read (the rules below say which).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_dlconform.programs import edges as E
from pytest_dlconform.programs import samples as S
from pytest_dlconform.programs.ops import OPS, RECORDS
from pytest_dlconform.programs.records import Autocast, DocumentedLimit, DtypeExclusion, GraphNames, OpRecord

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "pytest_dlconform"
#: The records' home: the family modules may name their own ops.
FAMILIES = SRC / "programs" / "ops"
MIN_NAMES = 3
#: Keras's and torch's activation identifiers: a list of them names the activations of a
#: model (roundtrip, cross-framework, distributed cases), not library ops, so they do not count.
ACTIVATIONS = frozenset({"linear", "relu", "tanh", "sigmoid", "gelu", "elu", "selu", "softplus", "leaky_relu"})

#: Literals that name library ops outside the records today, (file, enclosing name) -> why
#: (none: every former table is a view over the records).
KNOWN_TABLES: dict[tuple[str, str], str] = {}


def _files() -> Iterator[Path]:
    for base in (SRC, ROOT / "suites"):
        for path in sorted(base.rglob("*.py")):
            if FAMILIES not in path.parents:
                yield path


def _key(item: ast.expr | None) -> str | None:
    """The op name an entry of a literal stands for: a string, the first string of a tuple
    entry (``("det_dd", "det")``), or a call's first argument (``Recipe("softplus", ...)``;
    not a program's node ``Op("sin")``, which uses the op and states nothing about it)."""
    if isinstance(item, ast.Constant) and isinstance(item.value, str):
        return item.value
    if isinstance(item, ast.Tuple) and item.elts:
        return _key(item.elts[0]) if isinstance(item.elts[0], ast.Constant) else None
    if isinstance(item, ast.Call) and item.args and not (isinstance(item.func, ast.Name) and item.func.id == "Op"):
        return _key(item.args[0]) if isinstance(item.args[0], ast.Constant) else None
    return None


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Dict):
        items: list[ast.expr | None] = list(node.keys)
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = list(node.elts)
    else:
        return []
    return [k for k in map(_key, items) if k is not None]


def _owner(tree: ast.Module, target: ast.AST) -> str:
    """The module-level assignment or function a literal sits in."""
    for stmt in tree.body:
        if any(n is target for n in ast.walk(stmt)):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return stmt.name
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                first = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
                return ast.unparse(first)
            return f"line {stmt.lineno}"
    return "?"


def op_tables() -> dict[tuple[str, str], list[str]]:
    """(file, enclosing name) -> the op names of each literal that names MIN_NAMES or more."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in _files():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            names = [s for s in _strings(node) if s in OPS and s not in ACTIVATIONS]
            if len(set(names)) >= MIN_NAMES:
                key = (path.relative_to(ROOT).as_posix(), _owner(tree, node))
                found.setdefault(key, []).extend(names)
    return found


def test_no_second_op_table_outside_the_records() -> None:
    found = op_tables()
    new = {k: sorted(set(v)) for k, v in found.items() if k not in KNOWN_TABLES}
    assert not new, ("op facts belong in the op's record (programs/ops/<family>.py), with a view over "
                     f"programs.ops.RECORDS where a module needs a table: {new}")
    gone = sorted(set(KNOWN_TABLES) - set(found))
    assert not gone, f"KNOWN_TABLES lists tables the code no longer has; remove them: {gone}"


def test_the_check_finds_a_table() -> None:
    tree = ast.parse('PARAMS = {"tanh": 1, "sigmoid": 2, "softplus": 3}\n')
    node = tree.body[0].value  # type: ignore[attr-defined]
    assert [s for s in _strings(node) if s in OPS] == ["tanh", "sigmoid", "softplus"]
    assert _owner(tree, node) == "PARAMS"


@pytest.mark.parametrize(("source", "names"), [
    # pairs in a comprehension's source (the low-precision suite's former dtype table)
    ('T = {op: 1 for op, api in (("det_dd", "det"), ("svd", "svd"), ("qr", "qr"))}\n', ["det_dd", "svd", "qr"]),
    # call recipes (the autocast check's former calls of library ops)
    ('R = [Recipe("sum", f), Recipe("prod", g), Recipe("cumsum", h)]\n', ["sum", "prod", "cumsum"]),
    # a program's nodes use ops and say nothing about them
    ('P = (Op("sin"), Op("matmul"), Op("logsumexp"))\n', []),
])
def test_the_check_finds_nested_tables(source: str, names: list[str]) -> None:
    tree = ast.parse(source)
    found = max(([s for s in _strings(node) if s in OPS] for node in ast.walk(tree)), key=len)
    assert found == names


def test_autocast_reads_the_records() -> None:
    """The autocast check calls every library op with an autocast line through its record,
    and its own catalogue names no library op."""
    from pytest_dlconform.checks.precision import autocast as A

    others = {op.name for op in A._other_ops()}
    assert not others & set(RECORDS), sorted(others & set(RECORDS))
    assert {n for d in A.OTHER_LISTS.values() for names in d.values() for n in names} <= others
    for name, r in RECORDS.items():
        if r.autocast is not None:
            assert A.OPS[name].fn is r.autocast.call.fn
            for device_type in A.DEVICE_TYPES:
                assert A.op_class(device_type, name) == (r.autocast.listed(device_type) or A.UNLISTED)


def test_the_registry_is_the_records() -> None:
    assert list(OPS) == list(RECORDS)
    assert all(r.name == name and OPS[name] is r.spec for name, r in RECORDS.items())


def problems(r: OpRecord) -> list[str]:
    """What the record lacks for the modes that visit it (empty when whole)."""
    out: list[str] = []
    spec, name = r.spec, r.name
    elementwise = spec.category in ("elementwise", "piecewise") and spec.arity == 1 and spec.lip is None
    # the extreme-magnitude and non-finite edge cases compare gradients with the derivative
    if (r.derivative is not None) != elementwise:
        out.append(f"{name}: an elementwise op has an analytic derivative, other ops none")
    if (r.tiny_only or r.nonfinite is not None or r.extreme_source) and r.derivative is None:
        out.append(f"{name}: elementwise edge cases without a derivative")
    # kinks: the branch regime reads the kink points, the kink edge cases torch's rule and
    # the one-sided derivatives there
    if (r.kink_rule is None) != (r.one_sided is None):
        out.append(f"{name}: a kink rule without one-sided derivatives, or the reverse")
    if r.kink_rule is not None and spec.kinks is None:
        out.append(f"{name}: a kink rule but no kinks")
    if spec.kinks is not None and r.derivative is not None and r.kink_rule is None:
        out.append(f"{name}: kinks whose documented gradient is not recorded")
    # the log-sum-exp family: vector extreme cases (a reference, or pairs), the sentence, and
    # the softmax-weight cancellation of its backward
    if r.stable:
        if not r.stable_source:
            out.append(f"{name}: documented as stable without the sentence")
        if r.stable_ref is None and spec.arity != 2:
            out.append(f"{name}: no float64 reference on vectors")
        if r.cancellation is None:
            out.append(f"{name}: its backward's softmax weights have no cancellation term")
    if r.nonfinite_vectors and not r.stable:
        out.append(f"{name}: vector cases at +-inf outside the stable family")
    # the low-precision suite's "not applicable" quotes the documentation's sentence
    for e in r.dtype_exclusions:
        if e.framework not in ("torch", "tensorflow") or not e.dtypes or "'" not in e.source:
            out.append(f"{name}: a dtype exclusion without a framework, dtypes or a quoted sentence")
        if not set(e.dtypes) <= set(S.LOW_PRECISION_DTYPES):
            out.append(f"{name}: excludes {e.dtypes}, not low-precision dtypes the suite runs")
    # the autocast check: a class of the reference per device, composite only where listed
    if r.autocast is not None:
        a = r.autocast
        if not {a.cpu, a.cuda} <= {None, "lower", "float32", "promote", "error"}:
            out.append(f"{name}: an autocast class the reference does not have ({a.cpu}, {a.cuda})")
        if any(a.listed(d) is None for d in a.composite):
            out.append(f"{name}: composite on a device type where the reference does not list it")
    # the tracing suites render a graph-named elementwise op and run its derivative
    if r.graph is not None and spec.category == "elementwise" and (
            r.derivative is None or not isinstance(spec.tf, str) or not isinstance(spec.torch, str)):
        out.append(f"{name}: graph names without a parameter-free template or a derivative")
    # the generated-programs suite composes an op with ids of its own: it must be composable,
    # and the reason names the finding
    if r.own_program_ids and (not spec.composable or "docs/findings.md" not in r.own_program_ids):
        out.append(f"{name}: ids of its own without composed programs or a finding")
    # a runtime's documented limit names the runtime and quotes its documentation
    for limit in r.documented_limits:
        if limit.runtime not in ("tfjs",) or "'" not in limit.source:
            out.append(f"{name}: a documented limit without a known runtime or a quoted sentence")
    labels = [c.label for c in r.params]
    if len(labels) != len(set(labels)):
        out.append(f"{name}: a parameter class twice")
    if r.derivative is not None:
        for cls in S.param_classes(name):
            params = dict(cls.fixed)
            if r.magnitude_class(params) not in ("linear", "square", "cube", "pow"):
                out.append(f"{name}: unknown magnitude class {r.magnitude_class(params)!r}")
            elif not E.largest_magnitude(name, params, "float32") > 0:
                out.append(f"{name}: no extreme magnitude for {cls.label}")
    return out


@pytest.mark.parametrize("name", list(RECORDS))
def test_each_record_has_what_its_modes_need(name: str) -> None:
    assert problems(RECORDS[name]) == []


@pytest.mark.parametrize(("name", "change"), [
    ("tanh", {"derivative": None}),
    ("softplus", {"one_sided": None}),
    ("relu", {"kink_rule": None, "one_sided": None}),
    ("logsumexp", {"cancellation": None}),
    ("softmax", {"stable_source": ""}),
    ("sum", {"derivative": lambda x, p: x}),
    ("gelu", {"magnitude": "quadratic"}),
    ("svd", {"dtype_exclusions": (DtypeExclusion("torch", ("float16",), "torch.linalg.svd documentation"),)}),
    ("svd", {"dtype_exclusions": (DtypeExclusion("torch", ("int8",), "torch.linalg.svd: 'float'"),)}),
    ("cross_entropy", {"autocast": Autocast(RECORDS["sum"].autocast.call, cpu="float32", composite=("cuda",))}),
    ("prod", {"autocast": Autocast(RECORDS["sum"].autocast.call, cpu="float64")}),
    ("sin", {"derivative": None, "graph": GraphNames("Sin", "SinBackward0")}),
    ("softsign", {"own_program_ids": "a bug"}),
    ("einsum", {"documented_limits": (DocumentedLimit("tfjs", lambda p: True, "js.tensorflow.org: no quote"),)}),
])
def test_an_incomplete_record_is_found(name: str, change: dict[str, object]) -> None:
    assert problems(replace(RECORDS[name], **change))  # type: ignore[arg-type]


def test_every_compiled_and_low_precision_mode_has_its_dtypes() -> None:
    for framework, modes in S.COMPILED_MODES.items():
        for mode, dtypes in modes.items():
            assert dtypes, (framework, mode)
    assert S.LOW_PRECISION_DTYPES


@pytest.mark.parametrize(("equation", "limited"), [("aa->", True), ("abb->a", True), ("ab->ba", False), ("abc->", False)])
def test_tfjs_einsum_limit_applies_to_a_repeated_index_only(equation: str, limited: bool) -> None:
    """TF.js's tf.einsum documents duplicate axes in one operand as unsupported; nothing else."""
    from pytest_dlconform.programs.ops import documented_limit

    source = documented_limit("tfjs", "einsum", {"equation": equation})
    assert (source is not None) == limited, (equation, source)
    if limited:
        assert "Does not support duplicate axes" in source  # type: ignore[operator]
    assert documented_limit("tfjs", "einsum2", {"equation": "aa,b->"}) is None  # no record limit there
