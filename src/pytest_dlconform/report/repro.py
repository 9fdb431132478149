"""Standalone reproductions of violated tests: ``dlconform repro NODEID [--report R.json]``.

A violated test's reproduction is a Python script that imports only the framework and
numpy (no dlconform, hypothesis or pytest), carries the failing inputs inline, says what
the documentation promises, and exits 1 while the divergence is there, 0 once it is gone.
It comes from one of two places:

- **shipped**: the test's known-divergences entry names a reviewed script in
  ``pytest_dlconform/report/findings/`` (``script = "..."``, see known_divergences.toml). The
  entry is the one the run matched (the report's ``divergence`` key, or the packaged file's
  entry whose pin the report's test and symptom fall under).
- **generated**: a test on a generated program (its reproduction text holds the
  ``ProgramCase`` hypothesis shrank to): the program rendered as code by
  :meth:`Program.to_source`, its inputs inline, the float64 numpy reference and the
  error bound computed here, and a value check (and, for gradient claims, a check of the
  reverse-mode gradient along one fixed direction against central differences of the
  reference). Not reviewed: its header says so.
- **generated from the edge cases**: an ``autodiff.ops.edge-cases`` test whose failing
  entries (the evidence's exception message and parts: "OP MODE [PARAMS, DTYPE]: value at
  x=X is GOT, documented WANT (allowed error TOL)") name an elementwise op: the op
  rendered as code, each wrong input tiled over a vector as the suite feeds it, and each
  documented value with the allowed error: it prints observed vs expected.

Anything else has no script: :class:`Missing` says what is missing, in one line with the
pytest command that reproduces the test. :func:`attach` puts the result in a report
document as each violated test's ``script`` field (for the HTML page and the JSON report);
the session calls it after the known divergences are applied.

:func:`issue` (``dlconform repro NODEID --report R.json --issue``) writes a ready-to-file
upstream report for any violated test: title, versions and CPU (the report's
environment), the script (or why there is none, and the pytest line), the expected
behaviour with the claim's statement and documentation quoted, and what was observed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np

from . import divergences, results
from .document import Report, TestRecord, freeze

EXIT_OK, EXIT_MISSING = 0, 2
SHIPPED, GENERATED, MISSING = "shipped", "generated", "missing"
_FRAMEWORKS = {"tf": ("tensorflow",), "torch": ("torch",), "tf+torch": ("tensorflow", "torch")}
# The claims whose property a generated script checks (a value against the reference and
# the reverse-mode gradient against differences of it). Another claim on a generated program
# (forward mode, eager vs graph, compile) would get a script that passes with the bug there:
# none is generated for it.
GENERATED_CLAIMS = ("autodiff.gradient.finite-differences", "autodiff.gradient.float64-backward",
                    "autodiff.cross-framework")


class Missing(Exception):
    """No standalone script for a test; the message is one line saying what is missing."""


def _rerun(test: Mapping[str, Any]) -> str:
    """The pytest line that reproduces the test (its report's ``repro``), for a Missing message."""
    lines = str(test.get("repro") or "").strip().splitlines()
    return f"; reproduce it with: {lines[0].split('  # ')[0]}" if lines else ""


# ------------------------------------------------------------------ shipped scripts


def shipped_text(name: str) -> str:
    """The text of a shipped script (``findings/NAME``); Missing if it is not there."""
    path = resources.files("pytest_dlconform.report") / "findings" / name
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, OSError):
        raise Missing(f"the known divergence names script {name!r}, which is not in pytest_dlconform/report/findings/") from None


def packaged_entries() -> list[divergences.Divergence]:
    return divergences.load(str(resources.files("pytest_dlconform.report") / "known_divergences.toml"))


def script_name(test: Mapping[str, Any], doc: Mapping[str, Any] | None,
                entries: Sequence[divergences.Divergence] | None = None) -> str | None:
    """The shipped script of the test's known divergence: the entry the run matched (by its
    key in the report), else an entry of ``entries`` whose tests and symptom the test shows
    (whatever the stack and expiry: the script says whether the stack still has the bug)."""
    key = test.get("divergence")
    for status in (doc or {}).get("divergences") or []:
        if key and status.get("key") == key and status.get("script"):
            return str(status["script"])
    failure = divergences.failure_of(test)
    for entry in entries or ():
        if entry.script and entry.selects(test) and entry.shows(failure):
            return entry.script
    return None


# ------------------------------------------------------------------ one test


def script_for(test: Mapping[str, Any], doc: Mapping[str, Any] | None = None,
               entries: Sequence[divergences.Divergence] | None = None) -> tuple[str, str, str]:
    """``(kind, name, text)`` of the test's standalone script: shipped or generated; Missing
    (one line) when there is none."""
    if test.get("verdict") != results.VIOLATED:
        raise Missing(f"{test.get('nodeid')} is {test.get('verdict')!r}, not violated: there is nothing to reproduce")
    name = script_name(test, doc, entries)
    if name:
        return SHIPPED, name, shipped_text(name)
    claim = ((doc or {}).get("claims") or {}).get(str(test.get("claim")), {}).get("claim") or {}
    return GENERATED, "", generate(test, claim)


def attach(report: Report, entries: Sequence[divergences.Divergence] | None = None) -> Report:
    """The report with each violated test's ``script`` field: ``{"kind": "shipped", "name"}``,
    ``{"kind": "generated", "text"}`` or ``{"kind": "missing", "why"}``. ``entries`` default
    to the packaged known divergences (a test the run's own file did not match may still
    be a shipped finding)."""
    if entries is None:
        try:
            entries = packaged_entries()
        except divergences.DivergenceError:
            entries = []
    found = list(entries)

    def with_script(test: TestRecord) -> TestRecord:
        if test.verdict != results.VIOLATED:
            return test
        try:
            kind, name, text = script_for(test, report, found)
            script = {"kind": kind, "name": name} if kind == SHIPPED else {"kind": kind, "text": text}
        except Missing as exc:
            script = {"kind": MISSING, "why": str(exc)}
        except Exception as exc:
            script = {"kind": MISSING, "why": f"generating the script failed: {type(exc).__name__}: {exc}"}
        return dataclasses.replace(test, script=freeze(script))

    return report.map_tests(with_script)


# ------------------------------------------------------------------ generated programs


def program_case(text: str) -> Any:
    """The ProgramCase written in a reproduction text (hypothesis's falsifying example), or None."""
    from .. import programs

    start = text.find("ProgramCase")
    if start < 0:
        return None
    depth, end = 0, -1
    for i in range(text.index("(", start), len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            end = i + 1
            break
    if end < 0:
        return None
    names = {"ProgramCase": programs.ProgramCase, "Program": programs.Program, "Op": programs.Op,
             "InputRecipe": programs.InputRecipe, "np": np, "array": np.array}
    try:  # our own repr (ProgramCase.__repr__), evaluated with nothing but these names
        return eval(text[start:end], {"__builtins__": {}}, names)
    except Exception:
        return None


def generate(test: Mapping[str, Any], claim: Mapping[str, Any]) -> str:
    """A standalone script for a violated test on a generated program; Missing otherwise."""
    nodeid, repro_text = str(test.get("nodeid")), str(test.get("repro") or "")
    frameworks = _FRAMEWORKS.get(str((test.get("params") or {}).get("framework")), ())
    if test.get("claim") == EDGE_CLAIM:
        return generate_edges(test, claim)
    case = program_case(repro_text)
    if case is None:
        what = ("its falsifying example names no ProgramCase" if "Falsifying example" in repro_text
                else "the report holds no input it failed on")
        raise Missing(f"no standalone script for {nodeid}: no shipped one, and {what}{_rerun(test)}")
    if not frameworks:
        raise Missing(f"no standalone script for {nodeid}: its params name no framework (tf, torch){_rerun(test)}")
    if test.get("claim") not in GENERATED_CLAIMS:
        raise Missing(f"no standalone script for {nodeid}: a generated script checks value and gradient only, "
                      f"not {test.get('claim')}{_rerun(test)}")
    return _render(test, claim, case, frameworks, gradient=True)


# ------------------------------------------------------------------ edge cases (autodiff.ops.edge-cases)

EDGE_CLAIM = "autodiff.ops.edge-cases"
# programs.edges.judge's message of one wrong value (one line of an EdgeMismatch)
_EDGE_VALUE = re.compile(r"^(?P<op>[A-Za-z_]\w*) (?P<mode>\w+) \[(?P<params>.*), (?P<dtype>b?float\d+)\]: "
                         r"value at x=(?P<x>\S+|\[[^]]*\]) is (?P<got>\S+), documented (?P<want>\S+) "
                         r"\(allowed error (?P<tol>[^)]+)\)")
_FW_NAMES = {"tensorflow": "tensorflow", "torch": "torch"}


@dataclasses.dataclass(frozen=True)
class EdgeCase:
    """One wrong value of an edge-case test, as its failing entry states it."""

    op: str
    mode: str
    params: tuple[tuple[str, Any], ...]
    dtype: str
    xs: tuple[float, ...]  # one value per input of the op
    got: float
    want: float
    tol: float


def _floats(text: str) -> tuple[float, ...]:
    body = text.strip()
    if body.startswith("["):
        body = body[1:-1]
    return tuple(float(v) for v in body.split(",") if v.strip())


def _params(label: str) -> tuple[tuple[str, Any], ...]:
    import ast

    if label == "default":
        return ()
    out = []
    for name, value in re.findall(r"(\w+)=([^,]+)", label):
        out.append((name, ast.literal_eval(value.strip())))
    return tuple(out)


def edge_cases(test: Mapping[str, Any]) -> list[EdgeCase]:
    """The wrong values an edge-case test recorded (its exception's message and parts)."""
    exc = (test.get("evidence") or {}).get("exception") or {}
    texts = [str(exc.get("message") or "")] + [str(m) for _, m in exc.get("parts") or ()]
    cases: dict[tuple[str, tuple[float, ...]], EdgeCase] = {}
    for text in texts:
        for line in text.splitlines():
            found = _EDGE_VALUE.match(line.strip())
            if not found:
                continue
            try:
                case = EdgeCase(found["op"], found["mode"], _params(found["params"]), found["dtype"],
                                _floats(found["x"]), float(found["got"]), float(found["want"]), float(found["tol"]))
            except (ValueError, SyntaxError):
                continue
            cases.setdefault((case.dtype, case.xs), case)
    return list(cases.values())


def _lit(value: float) -> str:
    return repr(value) if math.isfinite(value) else f"float({str(value)!r})"


def generate_edges(test: Mapping[str, Any], claim: Mapping[str, Any]) -> str:
    """A standalone script for an edge-case test's wrong values; Missing where it has none
    the evidence can rebuild (a wrong gradient, a vector op's entry)."""
    from ..programs import OPS, Op, Program
    from ..programs.edges import LSE_OPS, VECTOR_LENGTH

    nodeid = str(test.get("nodeid"))
    frameworks = _FRAMEWORKS.get(str((test.get("params") or {}).get("framework")), ())
    cases = edge_cases(test)
    if len(frameworks) != 1:
        raise Missing(f"no standalone script for {nodeid}: its params name no single framework (tf, torch){_rerun(test)}")
    if not cases:
        raise Missing(f"no standalone script for {nodeid}: its evidence states no wrong value (a wrong gradient only, "
                      f"or no message kept){_rerun(test)}")
    ops = {c.op for c in cases}
    if len(ops) != 1 or next(iter(ops)) in LSE_OPS or next(iter(ops)) not in OPS:
        raise Missing(f"no standalone script for {nodeid}: {', '.join(sorted(ops))} is not one elementwise op whose "
                      f"input the wrong entry names{_rerun(test)}")
    fw = frameworks[0]
    first = cases[0]
    n = len(first.xs)
    program = Program(tuple((VECTOR_LENGTH,) for _ in range(n)), (Op(first.op, first.params, tuple(range(n)) if n > 1 else ()),))
    dtypes = sorted({c.dtype for c in cases})
    head = (f"{first.op} {first.mode} [{', '.join(f'{k}={v!r}' for k, v in first.params) or 'default'}]")
    lines = [
        f'"""Generated by `dlconform repro` from a report (not reviewed): {nodeid}',
        "",
        f"Claim (dlconform {test.get('claim')}): {claim.get('statement', '?')}",
        f"Documentation: {claim.get('source', '?')}",
        f"Failure the suite saw: {str(test.get('reason') or '?').splitlines()[0][:400]}",
        f"Checked here: {head} at each input the suite found wrong, tiled over {VECTOR_LENGTH} entries as the suite",
        "feeds it (vectorised kernels), every entry against the documented value within the allowed error.",
        "Exit 1 while the divergence is there, 0 once it is gone, 2 if the framework cannot be imported.",
        '"""',
        "",
        "import math",
        "import sys",
        "",
        "import numpy as np",
        "",
        f"OP = {head!r}",
        f"N = {VECTOR_LENGTH}",
        "CASES = [  # (dtype, one value per input, documented value, allowed absolute error)",
        *(f"    ({c.dtype!r}, [{', '.join(_lit(x) for x in c.xs)}], {_lit(c.want)}, {c.tol!r}),"
          for c in cases),
        "]",
    ]
    for dtype in dtypes:
        body = program.to_source(fw, dtype).replace("\n", "\n    ").rstrip()
        lines += ["", "", f"def _{dtype}():", "    " + body, "", *_edge_call(fw), "    return call"]
    lines += ["", "", f"BUILD = {{{', '.join(f'{d!r}: _{d}' for d in dtypes)}}}", "", "", _EDGE_JUDGE]
    return "\n".join(line.rstrip() for line in "\n".join(lines).splitlines()) + "\n"


def _edge_call(fw: str) -> list[str]:
    if fw == "torch":
        return ["    def call(xs):", "        y = program([torch.full((N,), x, dtype=DTYPE) for x in xs])",
                "        return [float(v) for v in y.detach().to(torch.float64).reshape(-1)]"]
    return ["    def call(xs):", "        y = program([tf.fill([N], tf.constant(x, dtype=DTYPE)) for x in xs])",
            "        return [float(v) for v in tf.reshape(tf.cast(y, tf.float64), [-1]).numpy()]"]


_EDGE_JUDGE = '''def observed():
    return [BUILD[dtype]()(xs) for dtype, xs, _, _ in CASES]


def matches(got, want, tol):
    if math.isnan(want):
        return math.isnan(got)
    if math.isinf(want):
        return got == want
    return abs(got - want) <= tol


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    parts, holds = [], True
    for (dtype, xs, want, tol), values in zip(CASES, got):
        wrong = [v for v in values if not matches(v, want, tol)]
        holds &= not wrong
        seen = wrong[0] if wrong else values[0]
        parts.append(f"{OP} in {dtype} at x={', '.join(map(repr, xs))}: observed {seen!r}"
                     + (f" ({len(wrong)} of {len(values)} entries)" if wrong else "")
                     + f", expected {want!r} (documented; allowed error {tol:.3g})")
    print(("FIXED: " if holds else "BUG PRESENT: ") + "; ".join(parts))
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())'''


def _direction(case: Any, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """A fixed output weighting w and input direction u (as the gradient oracle draws them)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(case.program.output_shape)
    return w, [rng.standard_normal(np.shape(x)) for x in case.inputs]


def _reference_slope(case: Any, w: np.ndarray, u: list[np.ndarray]) -> tuple[float, float]:
    """d/dt <w, f(x + t u)> at 0 by central differences of the numpy reference, Richardson
    extrapolated, and an estimate of its error (two step sizes). Steps stay below the
    programs' kink margin (1/8), so a piecewise op keeps one piece."""
    def g(t: float) -> float:
        return float(np.sum(w * case.program.numpy([x + t * d for x, d in zip(case.inputs, u)])))

    def richardson(h: float) -> float:
        d1, d2 = (g(h) - g(-h)) / (2 * h), (g(h / 2) - g(-h / 2)) / h
        return (4 * d2 - d1) / 3

    h = 2.0 ** -7 / max(1.0, max(float(np.max(np.abs(d))) for d in u))
    a, b = richardson(h), richardson(h / 2)
    return b, abs(a - b) + 1e-13 * (abs(b) + 1)


def _render(test: Mapping[str, Any], claim: Mapping[str, Any], case: Any, frameworks: Sequence[str],
            gradient: bool) -> str:
    program = case.program
    # The test's own seed argument (a line "    seed=7,"), not the InputRecipe's seed=.
    found = re.findall(r"^\s*seed=(\d+),?\s*(?:#.*)?$", str(test.get("repro") or ""), re.MULTILINE)
    seed = int(found[-1]) if found else 0
    expected = program.numpy(case.inputs)
    lines = [
        f'"""Generated by `dlconform repro` from a report (not reviewed): {test.get("nodeid")}',
        "",
        f"Claim (dlconform {test.get('claim')}): {claim.get('statement', '?')}",
        f"Documentation: {claim.get('source', '?')}",
        f"Failure the suite saw: {str(test.get('reason') or '?').splitlines()[0][:400]}",
        f"Program (the shrunk example): {program!r}",
        "Checked here, in float64: the program's value against its float64 numpy reference (computed when",
        "this script was generated) within the program's forward error bound"
        + (", and <w, gradient> . u by reverse mode against central differences of the reference."
           if gradient else "."),
        "Exit 1 while the divergence is there, 0 once it is gone, 2 if the framework cannot be imported.",
        '"""',
        "",
        "import sys",
        "",
        "import numpy as np",
        "",
        f"INPUTS = [{', '.join(f'np.array({x.tolist()!r})' for x in case.inputs)}]",
        f"EXPECTED = np.array({expected.tolist()!r})",
        f"VALUE_BOUND = {program.error_bound(case.inputs):.17g}  # forward error bound of the program in float64",
    ]
    if gradient:
        w, u = _direction(case, seed)
        slope, fd_err = _reference_slope(case, w, u)
        bound = program.derivative_error_bound(case.inputs) * float(np.sum(np.abs(w))) * max(
            float(np.max(np.abs(d))) for d in u)
        lines += [f"W = np.array({w.tolist()!r})", f"U = [{', '.join(f'np.array({d.tolist()!r})' for d in u)}]",
                  f"SLOPE = {slope!r}  # d/dt <W, f(x + t U)> of the numpy reference",
                  f"SLOPE_BOUND = {bound + 4 * fd_err:.17g}  # derivative error bound + 4 x the difference error"]
    lines += ["", "", "def observed():", "    out = {}"]
    for fw in frameworks:
        lines += [f"    out[{fw!r}] = _{fw}()"]
    lines += ["    return out", ""]
    for fw in frameworks:
        body = program.to_source(fw).replace("\n", "\n    ").rstrip()
        lines += ["", f"def _{fw}():", "    " + body, "", *_run_lines(fw, gradient)]
    lines += ["", "", _JUDGE.replace("{gradient}", repr(gradient))]
    return "\n".join(line.rstrip() for line in "\n".join(lines).splitlines()) + "\n"


def _run_lines(fw: str, gradient: bool) -> list[str]:
    if fw == "torch":
        out = ["    xs = [torch.tensor(x, dtype=DTYPE, requires_grad=True) for x in INPUTS]",
               "    y = program(xs)", "    result = {'value': y.detach().numpy()}"]
        if gradient:
            out += ["    gs = torch.autograd.grad(y, xs, grad_outputs=torch.tensor(W, dtype=DTYPE), allow_unused=True)",
                    "    result['slope'] = sum(float(np.sum(g.numpy() * d)) for g, d in zip(gs, U) if g is not None)"]
        return [*out, "    return result"]
    out = ["    xs = [tf.constant(x, dtype=DTYPE) for x in INPUTS]", "    with tf.GradientTape() as tape:",
           "        tape.watch(xs)", "        y = program(xs)", "    result = {'value': y.numpy()}"]
    if gradient:
        out += ["    gs = tape.gradient(y, xs, output_gradients=tf.constant(W, dtype=DTYPE))",
                "    result['slope'] = sum(float(np.sum(g.numpy() * d)) for g, d in zip(gs, U) if g is not None)"]
    return [*out, "    return result"]


_JUDGE = '''def expected():
    return {"value": EXPECTED, **({"slope": SLOPE} if {gradient} else {})}


def judge(got, want):
    parts, holds = [], True
    for fw, res in got.items():
        err = float(np.max(np.abs(np.asarray(res["value"], dtype=np.float64) - want["value"]), initial=0.0))
        holds &= err <= VALUE_BOUND
        parts.append(f"{fw}: value error {err:.3g} (bound {VALUE_BOUND:.3g})")
        if "slope" in want:
            serr = abs(res["slope"] - want["slope"])
            holds &= serr <= SLOPE_BOUND
            parts.append(f"{fw}: <w, grad> . u = {res['slope']!r}, reference {want['slope']!r}, error {serr:.3g} "
                         f"(bound {SLOPE_BOUND:.3g})")
    return holds, "; ".join(parts)


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    holds, line = judge(got, expected())
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())'''


# ------------------------------------------------------------------ a ready-to-file report

_PACKAGES = {"tf": ("tensorflow", "keras"), "torch": ("torch",), "tf+torch": ("tensorflow", "torch")}
ISSUE_SECTIONS = ("## Environment", "## Reproduction", "## Expected behaviour", "## Observed", "## Found by")


def _claim_entry(test: Mapping[str, Any], doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The claim's registry entry (statement, source): the report's, else this package's."""
    cid = str(test.get("claim"))
    entry = ((doc.get("claims") or {}).get(cid) or {}).get("claim") or {}
    if entry.get("statement"):
        return entry
    from ..core import claims as registry

    found = registry.registry().get(cid)
    return found.as_dict() if found is not None else {}


def _known(test: Mapping[str, Any], doc: Mapping[str, Any],
           entries: Sequence[divergences.Divergence]) -> tuple[str, str]:
    """(reason, how it relates to this run) of the test's known divergence, or ("", "")."""
    key = test.get("divergence")
    for status in doc.get("divergences") or []:
        if key and status.get("key") == key:
            return str(status.get("reason") or test.get("expected") or ""), f"known divergence {key}, matched in this run"
    near = test.get(divergences.KNOWN_ELSEWHERE)
    if isinstance(near, Mapping):
        return str(near.get("reason") or ""), str(near.get("note") or "")
    failure = divergences.failure_of(test)
    for entry in entries:
        if entry.selects(test) and entry.shows(failure):
            return entry.reason, f"known divergence {entry.key} ({entry.describe()}), by its pinned tests and symptom"
    return "", ""


def _environment_lines(test: Mapping[str, Any], env: Mapping[str, Any]) -> list[str]:
    found = env.get("frameworks") or {}
    names = _PACKAGES.get(str((test.get("params") or {}).get("framework")), ("tensorflow", "torch"))
    shown = [n for n in (*names, "numpy") if found.get(n) and found.get(n) != "not installed"]
    lines = [f"- {', '.join(f'{n} {found[n]}' for n in shown) or 'framework versions not recorded'}",
             f"- Python {env.get('python', '?')} ({env.get('implementation', '?')}), "
             f"{env.get('platform') or env.get('os') or '?'}",
             f"- CPU: {env.get('devices') or env.get('processor') or 'not recorded'}"]
    gpus = ", ".join(str(g.get("name", "?")) for g in env.get("gpus") or [])
    if gpus:
        lines.append(f"- GPU: {gpus} (CUDA {env.get('cuda') or '?'}, driver {env.get('driver') or '?'})")
    return lines


def _observed_lines(test: Mapping[str, Any]) -> list[str]:
    evidence = test.get("evidence") or {}
    exc = evidence.get("exception") or {}
    text = str(exc.get("message") or test.get("reason") or test.get("observed") or "(no message recorded)")
    kind = (exc.get("types") or ["failure"])[0]
    lines = [f"`{kind}`:", "", "```", text.strip()[:4000], "```"]
    failing = [(name, c) for name, c in sorted((evidence.get("checks") or {}).items())
               if isinstance(c, Mapping) and c.get("margin") not in (None,) and not _within(c.get("margin"))]
    if failing:
        lines += ["", "Checks that failed (observed error against the allowed error):"]
        lines += [f"- {name}: observed {c.get('max_error', c.get('observed'))}, allowed {c.get('tolerance')}"
                  for name, c in failing[:10]]
    return lines


def _within(margin: Any) -> bool:
    try:
        return float(margin) <= 1
    except (TypeError, ValueError):
        return False


def _title(test: Mapping[str, Any], env: Mapping[str, Any], reason: str) -> str:
    found = env.get("frameworks") or {}
    names = _PACKAGES.get(str((test.get("params") or {}).get("framework")), ())
    stack = " ".join(f"{n} {found[n]}" for n in names[:1] if found.get(n))
    cases = edge_cases(test) if test.get("claim") == EDGE_CLAIM else []
    if cases:
        c = cases[0]
        what = (f"{c.op} in {c.dtype} at x={', '.join(repr(x) for x in c.xs)} is {c.got!r}, "
                f"documented {c.want!r}")
    elif reason:
        what = reason.split(": ")[0] if len(reason) > 140 else reason
    else:
        first = (str(test.get("observed") or test.get("reason") or "").strip().splitlines() or ["violated"])[0]
        what = f"{test.get('claim')}: {first}"
    what = what if len(what) <= 160 else what[:157] + "..."
    return f"{stack}: {what}" if stack else what


def issue(test: Mapping[str, Any], doc: Mapping[str, Any],
          entries: Sequence[divergences.Divergence] | None = None) -> str:
    """A ready-to-file upstream report (Markdown) of a violated test: title, environment,
    the standalone script (or why there is none and the pytest line), the expected
    behaviour quoted from the claim, what was observed, and how it was found."""
    if test.get("verdict") != results.VIOLATED:
        raise Missing(f"{test.get('nodeid')} is {test.get('verdict')!r}, not violated: there is nothing to report")
    entries = list(entries or ())
    env = doc.get("environment") or {}
    claim = _claim_entry(test, doc)
    reason, relation = _known(test, doc, entries)
    out = [f"# {_title(test, env, reason)}", "", "## Environment", "", *_environment_lines(test, env), "",
           "## Reproduction", ""]
    try:
        kind, name, text = script_for(test, doc, entries)
        what = (f"the reviewed script `pytest_dlconform/report/findings/{name}`" if kind == SHIPPED
                else "a script generated from the failing example (not reviewed)")
        out += [f"Standalone ({what}): it imports only the framework and numpy, prints `BUG PRESENT: ...` "
                "(observed vs expected) and exits 1 while the behaviour is there, exits 0 once it is fixed.", "",
                "```python", text.rstrip("\n"), "```"]
    except Missing as exc:
        why = str(exc).split("; reproduce it with:")[0].replace(f"no standalone script for {test.get('nodeid')}: ", "")
        out += [f"No standalone script: {why}.", "",
                "Reproduce with the conformance suite (pytest-dlconform):", "", "```",
                (str(test.get("repro") or "").strip().splitlines() or ["(no command recorded)"])[0], "```"]
    statement = str(claim.get("statement") or "(the claim's statement is not in the report)")
    out += ["", "## Expected behaviour", "", f"Documentation: {claim.get('source') or '(not recorded)'}", "",
            *(f"> {line}" if line else ">" for line in statement.splitlines()), "", "## Observed", "",
            *_observed_lines(test)]
    if reason:
        out += ["", f"Cause as far as known: {reason}"]
    out += ["", "## Found by", "",
            f"pytest-dlconform claim `{test.get('claim')}`, test `{test.get('nodeid')}`"
            + (f" (test seed {test.get('seed')})" if test.get("seed") is not None else "") + "."]
    if relation:
        out.append(f"Status here: {relation}.")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ the command


def find_test(doc: Mapping[str, Any], nodeid: str) -> dict[str, Any]:
    """The report's test with this node id (exact, or the one whose id ends with it)."""
    tests = [t for c in doc.get("claims", {}).values() for t in c.get("tests", [])]
    exact = [t for t in tests if t.get("nodeid") == nodeid]
    if exact:
        return exact[0]
    local = divergences.suite_relative(nodeid)
    hits = [t for t in tests if divergences.suite_relative(str(t.get("nodeid"))) == local]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise Missing(f"{nodeid} matches {len(hits)} tests of the report; give the full node id")
    raise Missing(f"{nodeid} is not a test of the report; `dlconform repro` takes a node id from its claims' tests")


def _pinned_script(nodeid: str) -> str:
    """Without a report: the script of the packaged entry whose node-id globs pin ``nodeid``."""
    local = divergences.suite_relative(nodeid)
    names = sorted({e.script for e in packaged_entries() if e.script
                    and any(divergences._glob(p).fullmatch(local) for p in e.tests)})
    if len(names) == 1:
        return names[0]
    if names:
        raise Missing(f"{nodeid} is pinned by several known divergences ({', '.join(names)}); pass --report R.json")
    raise Missing(f"no shipped script pins {nodeid}: pass --report R.json (a run where it was violated) to generate one")


def main(argv: Sequence[str]) -> int:
    """``dlconform repro NODEID [--report R.json] [--out FILE]``: print (or write) the script."""
    import argparse

    from . import compare

    parser = argparse.ArgumentParser(prog="dlconform repro",
                                     description="print the standalone reproduction of a violated test (exit 2: none)")
    parser.add_argument("nodeid", help="the test's node id, as in the report")
    parser.add_argument("--report", metavar="R.json",
                        help="the JSON report (--dl-report) of the run; without it, only a shipped script whose "
                             "known divergence pins NODEID can be printed")
    parser.add_argument("--out", metavar="FILE", help="write the script (or the report) to FILE instead of printing it")
    parser.add_argument("--issue", action="store_true",
                        help="print a ready-to-file upstream report instead (title, versions, CPU, the script, "
                             "expected behaviour with its documentation, observed result); needs --report")
    args = parser.parse_args(list(argv))
    try:
        if args.issue and not args.report:
            raise Missing("--issue needs --report R.json: the versions, CPU and observed result come from the report")
        if args.report:
            doc = compare.load(args.report, "report")
            test = find_test(doc, args.nodeid)
            if args.issue:
                text = issue(test, doc, packaged_entries())
            else:
                _, _, text = script_for(test, doc, packaged_entries())
        else:
            text = shipped_text(_pinned_script(args.nodeid))
    except (compare.UnusableReport, Missing, divergences.DivergenceError) as exc:
        sys.stderr.write(f"dlconform repro: {exc}\n")
        return EXIT_MISSING
    if args.out:
        try:
            results.write_atomic(args.out, text)
        except OSError as exc:
            sys.stderr.write(f"dlconform repro: cannot write {args.out}: {exc}\n")
            return EXIT_MISSING
        run_it = "" if args.issue else f"; run it with: {sys.executable} {args.out}"
        sys.stderr.write(f"dlconform repro: wrote {args.out}{run_it}\n")
        return EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK


def describe(test: Mapping[str, Any]) -> str:
    """One line for a test's script field (the terminal, the HTML summary)."""
    script = test.get("script") or {}
    if script.get("kind") == SHIPPED:
        return f"standalone reproduction: python -m pytest_dlconform.report.findings.{script['name'][:-3]}"
    if script.get("kind") == GENERATED:
        return f"standalone reproduction (generated): dlconform repro {json.dumps(test.get('nodeid'))}"
    return f"no standalone reproduction: {script.get('why', '?')}"
