"""Standalone reproductions of violated tests: ``dlconform repro NODEID [--report R.json]``.

A violated test's reproduction is a Python script that imports only the framework and
numpy (no dlconform, hypothesis or pytest), carries the failing inputs inline, says what
the documentation promises, and exits 1 while the divergence is there, 0 once it is gone.
It comes from one of two places:

- **shipped**: the test's known-divergences entry names a reviewed script in
  ``pytest_dlconform/findings/`` (``script = "..."``, see known_divergences.toml). The
  entry is the one the run matched (the report's ``divergence`` key, or the packaged file's
  entry whose pin the report's test and symptom fall under).
- **generated**: a test on a generated program (its reproduction text holds the
  ``ProgramCase`` hypothesis shrank to): the program rendered as code by
  :meth:`Program.to_source`, its inputs inline, the float64 numpy reference and the
  error bound computed here, and a value check (and, for gradient claims, a check of the
  reverse-mode gradient along one fixed direction against central differences of the
  reference). Not reviewed: its header says so.

Anything else has no script: :class:`Missing` says what is missing. :func:`attach` puts
the result in a report document as each violated test's ``script`` field (for the HTML
page and the JSON report); the session calls it after the known divergences are applied.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np

from . import divergences, results
from .report import Report, TestRecord, freeze

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


# ------------------------------------------------------------------ shipped scripts


def shipped_text(name: str) -> str:
    """The text of a shipped script (``findings/NAME``); Missing if it is not there."""
    path = resources.files("pytest_dlconform") / "findings" / name
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, OSError):
        raise Missing(f"the known divergence names script {name!r}, which is not in pytest_dlconform/findings/") from None


def packaged_entries() -> list[divergences.Divergence]:
    return divergences.load(str(resources.files("pytest_dlconform") / "known_divergences.toml"))


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
    from . import programs

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
    case = program_case(repro_text)
    if case is None:
        what = ("the falsifying example names no ProgramCase" if "Falsifying example" in repro_text
                else "the report has no falsifying example for it")
        raise Missing(f"no standalone script for {nodeid}: its known divergence (if any) names no script in "
                      f"pytest_dlconform/findings/, and it is not a generated-program test ({what}); write one there "
                      "and name it with script = \"...\" in its known-divergences entry")
    if not frameworks:
        raise Missing(f"no standalone script for {nodeid}: its params name no framework (tf, torch)")
    if test.get("claim") not in GENERATED_CLAIMS:
        raise Missing(f"no standalone script for {nodeid}: it is a generated-program test of {test.get('claim')}, and "
                      f"generated scripts check only {', '.join(GENERATED_CLAIMS)} (value and reverse-mode gradient); "
                      "write one in pytest_dlconform/findings/ and name it in its known-divergences entry")
    return _render(test, claim, case, frameworks, gradient=True)


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
    parser.add_argument("--out", metavar="FILE", help="write the script to FILE instead of printing it")
    args = parser.parse_args(list(argv))
    try:
        if args.report:
            doc = compare.load(args.report, "report")
            _, _, text = script_for(find_test(doc, args.nodeid), doc, packaged_entries())
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
        sys.stderr.write(f"dlconform repro: wrote {args.out}; run it with: {sys.executable} {args.out}\n")
        return EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK


def describe(test: Mapping[str, Any]) -> str:
    """One line for a test's script field (the terminal, the HTML summary)."""
    script = test.get("script") or {}
    if script.get("kind") == SHIPPED:
        return f"standalone reproduction: python -m pytest_dlconform.findings.{script['name'][:-3]}"
    if script.get("kind") == GENERATED:
        return f"standalone reproduction (generated): dlconform repro {json.dumps(test.get('nodeid'))}"
    return f"no standalone reproduction: {script.get('why', '?')}"
