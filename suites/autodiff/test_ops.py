"""Every op of the library, on its own, in every mode: coverage by construction (OpInfo-style).

Each op of :mod:`pytest_dlconform.programs` gets its own test ids per framework, so the
matrix and the report name the op that broke, in four modes:

* ``forward``: the float64 result against the float64 numpy reference, within the sum of
  both implementations' forward-error bounds (``Program.error_bound``, each a float64 run);
* ``reverse-fd``: reverse mode against central finite differences (``check_vjp``, with the
  derivative's rounding floor as below and the forward error bound as f's noise), with the
  forward value checked in the same example;
* ``forward-reverse``: ``v.(J u) == (J^T v).u`` (``check_jvp_vjp_consistency``) with the
  derivative's rounding floor (``Program.derivative_error_bound``);
* ``layout`` (torch): gradients and values with the inputs transposed (all dims reversed),
  strided (every stride doubled, offset 1), broadcast-expanded (a stride-0 dim: the op sees
  ``x.expand(...)`` and the gradient reaches the unexpanded leaf summed over that dim) and
  channels-last (ops that take images), against the contiguous run.

Inside each test, every registered sample of the op (:func:`samples`: each parameter class
and each input regime at least once) runs in every hypothesis example; hypothesis draws the
shapes, the free parameters and the input values. Each test records what it visited in its
evidence (``coverage``), which :mod:`pytest_dlconform.report.coverage` aggregates into the report's
ledger. A finite-difference check that is inconclusive (the derivative drowns in f's
rounding, e.g. tanh saturated) is counted and reported; a test where most are inconclusive
is a harness error, not a pass.

Ops with a known framework limit in a mode (``programs.KNOWN_LIMITS``) are left out of that
mode here and checked by test_known_limits.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from pytest_dlconform.api import (
    HarnessError,
    InconclusiveCheck,
    adapter,
    assert_close,
    budget,
    bug_reference,
    check_jvp_vjp_consistency,
    check_vjp,
    evidence,
    op_vjp_reference,
    relative_deviation,
    tolerance,
)
from pytest_dlconform.api.programs import ProgramCase, coverage_key, layout_samples, ops_for, sample_cases, samples
from pytest_dlconform.api.tracing import assert_within

try:
    from builtins import ExceptionGroup as _ExceptionGroup  # Python 3.11+
except ImportError:  # pragma: no cover - 3.10: the backport hypothesis depends on
    from exceptiongroup import ExceptionGroup as _ExceptionGroup

EXAMPLES = 2  # hypothesis examples per test in the ci profile; each runs all the op's samples
# Cheaper than the composed-program properties, per sample: one op has one or two inputs, so
# 4 directions (one along each input's own gradient, the rest random) and one random (u, v)
# pair judge it; the many samples per test make up the rest.
DIRECTIONS = 4
PAIRS = 1
# tf.autodiff.ForwardAccumulator costs ~50 ms a call here (measured, 2-core machine), 25x a
# GradientTape: TensorFlow's forward-vs-reverse tests run one example (all samples) in ci.
TF_FORWARD_EXAMPLES = 1


class Ledger:
    """What one test visited (the coverage ledger's rows) and how its FD checks went."""

    def __init__(self, framework: str, mode: str) -> None:
        self.framework, self.mode = framework, mode
        self.visits: Counter[tuple[tuple[str, str], ...]] = Counter()
        self.inconclusive: Counter[tuple[tuple[str, str], ...]] = Counter()
        self.checks = 0
        self.noisy = 0

    def visit(self, sample: Any, layout: str = "contiguous", inconclusive: bool = False) -> None:
        key = tuple(coverage_key(self.framework, self.mode, sample, layout).items())
        self.visits[key] += 1
        self.inconclusive[key] += int(inconclusive)

    def fd(self, inconclusive: bool) -> None:
        self.checks += 1
        self.noisy += int(inconclusive)

    def record(self) -> None:
        rows = [{**dict(k), "count": n, "inconclusive": self.inconclusive[k]} for k, n in sorted(self.visits.items())]
        evidence.note(coverage=rows)

    def finish(self) -> None:
        self.record()
        if self.mode == "reverse-fd":
            evidence.note(fd_checks=self.checks, fd_inconclusive=self.noisy)
            if self.checks == 0 or 2 * self.noisy > self.checks:
                raise HarnessError(
                    f"finite differences were inconclusive in {self.noisy} of {self.checks} checks: the op's samples "
                    "do not let finite differences judge its gradient (a harness problem, not a pass)")


def _funcs(framework: str, case: ProgramCase, device: str, layout: str = "contiguous") -> tuple[Callable, ...]:
    a = adapter(framework)
    fn = case.program.build(framework, "float64", layout)
    return (lambda xs: a.call(fn, xs, "float64", device), lambda xs, w: a.vjp(fn, xs, w, "float64", device),
            lambda xs, us: a.jvp(fn, xs, us, "float64", device))


def _forward(f: Callable, case: ProgramCase, what: str) -> None:
    # Two float64 implementations (the framework and the numpy reference) each within
    # Program.error_bound of the exact result: they may differ by twice that.
    bound = 2 * case.program.error_bound(case.inputs)
    assert_within(f(case.inputs), case.program.numpy(case.inputs), bound, what=what)


def _draw(data: st.DataObject, sample: Any) -> ProgramCase:
    case = data.draw(sample_cases(sample), label=f"{sample.op} {sample.params.label} {sample.regime}")
    note(f"{sample.op} [{sample.params.label}, {sample.regime}]: {case!r}")
    return case


def _run(framework: str, device: str, op: str, mode: str, examples: int = EXAMPLES) -> None:
    ledger = Ledger(framework, mode)

    @budget(examples)
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        if mode == "layout":
            for layout, sample in layout_samples(op):
                _layout_check(device, _draw(data, sample), layout, data.draw(st.integers(0, 2**16), label="seed"))
                ledger.visit(sample, layout)
            return
        failed: list[Exception] = []
        for sample in samples(op):
            case = _draw(data, sample)
            seed = data.draw(st.integers(0, 2**16), label="seed")
            try:
                inconclusive = _check_sample(framework, device, op, mode, case, seed, ledger)
            except Exception as exc:  # every sample is checked; all failures are reported
                failed.append(exc)
                ledger.visit(sample)  # checked, and failed: the verdict says so
                continue
            ledger.visit(sample, inconclusive=inconclusive)
        _raise_all(op, failed)

    try:
        prop()
    except BaseException:
        ledger.record()  # what the failing test checked before it failed stays in the ledger
        raise
    ledger.finish()


def _check_sample(framework: str, device: str, op: str, mode: str, case: ProgramCase, seed: int,
                  ledger: Ledger) -> bool:
    """One sample in one mode; True when finite differences could not judge it."""
    f, vjp, jvp = _funcs(framework, case, device)
    _forward(f, case, what=f"{op} forward vs float64 reference")
    if mode == "reverse-fd":
        _bug_vjp(framework, op, vjp, case, seed)
        inconclusive = _fd_check(f, vjp, case, seed, op)
        ledger.fd(inconclusive)
        return inconclusive
    if mode == "forward-reverse":
        floor = case.program.derivative_error_bound(case.inputs)
        result = check_jvp_vjp_consistency(jvp, vjp, case.inputs, case.program.output_shape, seed=seed,
                                           pairs=PAIRS, derivative_error=floor)
        evidence.check(f"{op} v.(Ju) vs (J^T v).u", observed=result.max_error_ratio, tolerance=1.0)
    return False


def _raise_all(op: str, failed: list[Exception]) -> None:
    """Every sample was checked: one failure is raised as it is, several as a group, so a
    known-divergence pin must match each of them (never only the first)."""
    if len(failed) == 1:
        raise failed[0]
    if failed:
        first = str(failed[0]).strip().splitlines()[0] if str(failed[0]).strip() else type(failed[0]).__name__
        raise _ExceptionGroup(f"{op}: {len(failed)} samples failed; the first: {first}", failed)


def _bug_vjp(framework: str, op: str, vjp: Callable, case: ProgramCase, seed: int) -> None:
    """Where a finding names what the framework computes for this op's gradient (a bug
    reference), record how far the gradient is from it: its known divergence matches only a
    gradient equal to the bug (two float64 roundings of each element), not any other failure
    that finite differences, which estimate the error to a few digits, would read alike."""
    name = op_vjp_reference(framework, op)
    if name is None:
        return
    w = np.random.default_rng(seed).standard_normal(case.program.output_shape)
    worst = relative_deviation(vjp(case.inputs, w), bug_reference(name)(case.inputs, w))
    evidence.reference(name, observed=worst, tolerance=UNIT_ROUNDOFF_64 * 2,
                       basis="elementwise relative error against the bug's gradient: 2 float64 roundings")


#: float64's unit roundoff, 2^-53.
UNIT_ROUNDOFF_64 = 2.0**-53


def _fd_check(f: Callable, vjp: Callable, case: ProgramCase, seed: int, op: str) -> bool:
    """True when finite differences could not judge (counted, never a pass on its own)."""
    try:
        result = check_vjp(f, case.inputs, vjp, seed=seed, directions=DIRECTIONS, f_error=case.program.error_bound(case.inputs),
                           derivative_error=case.program.derivative_error_bound(case.inputs))
    except InconclusiveCheck:
        return True
    evidence.check(f"{op} reverse mode vs finite differences", observed=result.max_error_ratio, tolerance=1.0,
                   directions=result.directions)
    return False


# --------------------------------------------------------------------------- layouts (torch)


def _expand_dim(shape: tuple[int, ...]) -> int | None:
    return next((d for d, n in enumerate(shape) if n >= 2), None)


def _layout_check(device: str, case: ProgramCase, layout: str, seed: int) -> None:
    """Values and gradients under ``layout`` against the contiguous run, within the float64
    bounds of two independently computed results (see test_generated_programs.py)."""
    program = case.program
    dims = [_expand_dim(s) for s in program.input_shapes] if layout == "expanded" else [None] * program.n_inputs
    if layout == "expanded":  # values repeated along the expanded dim, so both runs see the same input
        inputs = [x if d is None else np.broadcast_to(np.take(x, [0], axis=d), x.shape).copy()
                  for x, d in zip(case.inputs, dims)]
        case = ProgramCase(program, inputs)
    w = np.random.default_rng(seed).standard_normal(program.output_shape)
    _, vjp0, _ = _funcs("torch", case, device)
    want = vjp0(case.inputs, w)
    f, got = _layout_run(case, device, layout, dims, w)
    _forward(f, case, what=f"forward with layout {layout!r} vs float64 reference")
    size = max(int(np.prod(s)) if s else 1 for s in program.shapes)
    bound = program.derivative_error_bound(case.inputs)
    for i, (g, g0, d) in enumerate(zip(got, want, dims)):
        n = 1 if d is None else program.input_shapes[i][d]
        if d is not None:
            g0 = np.sum(g0, axis=d, keepdims=True)  # the leaf of an expanded input gets the sum
        why = f"2 runs x {n} summed entries x derivative_error_bound {bound:.3g} x ||w||_1"
        tol = tolerance("float64", ops=3, reduction=size * n).with_floor(2 * n * bound * float(np.sum(np.abs(w))), why)
        assert_close(g, g0, tol, what=f"gradient of input {i} with layout {layout!r} vs contiguous")


def _layout_run(case: ProgramCase, device: str, layout: str, dims: list[int | None], w: np.ndarray) -> tuple[Callable, list]:
    torch = adapter("torch")
    if layout != "expanded":
        f, vjp, _ = _funcs("torch", case, device, layout)
        return f, vjp(case.inputs, w)
    fn = case.program.build("torch", "float64")
    shapes = case.program.input_shapes
    expanded = lambda xs: fn([t if d is None else t.expand(s) for t, d, s in zip(xs, dims, shapes)])
    small = [x if d is None else np.take(x, [0], axis=d) for x, d in zip(case.inputs, dims)]
    f = lambda xs: torch.call(expanded, [x if d is None else np.take(x, [0], axis=d) for x, d in zip(xs, dims)],
                              "float64", device)
    return f, torch.vjp(expanded, small, w, "float64", device)


# --------------------------------------------------------------------------- the tests

TORCH = "torch"
TF = "tensorflow"


@pytest.mark.claim("autodiff.ops.forward-reference")
@pytest.mark.parametrize("op", ops_for(TORCH, "forward"))
def test_torch_op_forward(torch, dl_device, op):
    _run(TORCH, dl_device, op, "forward")


@pytest.mark.claim("autodiff.ops.forward-reference")
@pytest.mark.parametrize("op", ops_for(TF, "forward"))
def test_tensorflow_op_forward(tf, dl_device, op):
    _run(TF, dl_device, op, "forward")


@pytest.mark.claim("autodiff.gradient.finite-differences")
@pytest.mark.parametrize("op", ops_for(TORCH, "reverse-fd"))
def test_torch_op_reverse_mode_vs_finite_differences(torch, dl_device, op):
    _run(TORCH, dl_device, op, "reverse-fd")


@pytest.mark.claim("autodiff.gradient.finite-differences")
@pytest.mark.parametrize("op", ops_for(TF, "reverse-fd"))
def test_tensorflow_op_reverse_mode_vs_finite_differences(tf, dl_device, op):
    _run(TF, dl_device, op, "reverse-fd")


@pytest.mark.claim("autodiff.gradient.forward-reverse")
@pytest.mark.parametrize("op", ops_for(TORCH, "forward-reverse"))
def test_torch_op_forward_vs_reverse_mode(torch, dl_device, op):
    _run(TORCH, dl_device, op, "forward-reverse")


@pytest.mark.claim("autodiff.gradient.forward-reverse")
@pytest.mark.parametrize("op", ops_for(TF, "forward-reverse"))
def test_tensorflow_op_forward_vs_reverse_mode(tf, dl_device, op):
    _run(TF, dl_device, op, "forward-reverse", examples=TF_FORWARD_EXAMPLES)


@pytest.mark.claim("autodiff.gradient.finite-differences")
@pytest.mark.parametrize("op", ops_for(TORCH, "layout"))
def test_torch_op_gradients_in_every_layout(torch, dl_device, op):
    _run(TORCH, dl_device, op, "layout")
