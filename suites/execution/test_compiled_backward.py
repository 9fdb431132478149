"""Compiled backward: gradients of torch.compile (aot_eager, inductor), TorchScript
(torch.jit.trace) and tf.function (with and without jit_compile=True, the tape inside the
function so the backward is compiled too) against eager gradients and, in float64, against
finite differences, for every op of the library.

Compiles are batched: one compiled function runs a one-op program for every op of the
library (each on its own inputs) and one backward call returns every gradient, so a mode
costs one compile per example (a cold inductor compile of the batch takes ~12 s here). Each
op gets its own test id, which reports that op's outcome from the batch that covered it
(:func:`_outcome`, chunks of :data:`CHUNK` ops). Inductor gets per-op ids too, from two
larger chunks (:data:`INDUCTOR_CHUNK`, half the library each): a cold inductor compile costs
seconds, so each of the two workers compiles one half.

Bounds (``docs/tolerances.md``, "Low-precision gradients"): inputs and cotangents are
values of the dtype; the compiled and the eager gradient each differ from the exact one by
at most ``B * ||w||_1 + floor`` per entry (``gradient_error_bound``), so from each other by
twice that; forward values likewise with ``low_precision_error_bound``. In float64 the
compiled backward also goes through :func:`check_vjp` (central differences of the eager
float64 function); an inconclusive point is counted and reported, the other checks of that
example still run.

An op XLA cannot compile is "not applicable" for that op, with the op and XLA's words
(tf.function documents InvalidArgumentError for a function XLA cannot compile); the batch
is compiled again without it.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import HarnessError, InconclusiveCheck, adapter, budget, check_vjp, evidence, not_applicable
from pytest_dlconform.api.programs import (
    TORCH_FLOAT64_GRADIENT,
    ProgramCase,
    gradient_error_bound,
    low_precision_error_bound,
    op_names,
    program_cases,
)
from pytest_dlconform.api.tracing import CountingBackend, assert_within

OPS = op_names()
# torch's float64 hardsigmoid backward is float32-accurate (a known limit with its own
# claim): compiled vs eager still checks it, finite differences do not.
NO_FD = {"torch": set(OPS) - set(op_names(without=[TORCH_FLOAT64_GRADIENT])), "tensorflow": set()}
CASES = {name: program_cases(max_ops=1, n_inputs=(1, 2), max_side=4, ops=[name]).filter(
    lambda c, name=name: any(o.name == name for o in c.program.ops)) for name in OPS}
TORCH_MODES = ("aot_eager", "torchscript")
TF_MODES = ("function", "xla")
DTYPES = ("float64", "float32")
U32 = 2.0**-24


@dataclass
class Outcome:
    """What a mode's batch found, per op: the first failure, why it is not applicable,
    how many float64 examples were inconclusive for finite differences."""

    failures: dict[str, str] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)
    inconclusive: dict[str, int] = field(default_factory=dict)
    examples: int = 0
    compile_s: float = 0.0


# ------------------------------------------------------------------ compiled batches


def _rounded(fw: Any, x: np.ndarray, dtype: str, device: str) -> np.ndarray:
    return np.asarray(fw.numpy(fw.tensor(np.asarray(x, dtype=np.float64), dtype, device)), dtype=np.float64)


class TorchBatch:
    """All programs in one function of flat tensors, compiled by ``mode``."""

    def __init__(self, torch: Any, mode: str, cases: Sequence[ProgramCase], dtype: str, device: str,
                 inputs: Sequence[Sequence[np.ndarray]]) -> None:
        self.torch, self.dtype, self.device = torch, dtype, device
        self.fns = [c.program.build("torch", dtype) for c in cases]
        self.slices: list[tuple[int, int]] = []
        for xs in inputs:
            lo = sum(b - a for a, b in self.slices)
            self.slices.append((lo, lo + len(xs)))
        self.shapes = [c.program.output_shape for c in cases]
        flat = self._leaves([x for xs in inputs for x in xs])
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript's deprecation and tracer warnings
            self.counter: CountingBackend | None = None
            if mode == "torchscript":
                self.compiled = torch.jit.trace(self._batch, tuple(flat), check_trace=False)
            else:
                # Fresh caches: past recompile_limit entries of one code object dynamo would
                # run the batch eagerly, silently; the counter shows a compiled graph ran.
                torch._dynamo.reset()
                self.counter = CountingBackend(torch, mode)
                self.compiled = torch.compile(self._batch, backend=self.counter)
            self.run([x for xs in inputs for x in xs], [np.zeros(s) for s in self.shapes])
        self.compile_s = time.perf_counter() - started

    def _batch(self, *flat: Any) -> tuple[Any, ...]:
        return tuple(fn(list(flat[lo:hi])) for fn, (lo, hi) in zip(self.fns, self.slices))

    def _leaves(self, xs: Sequence[np.ndarray]) -> list[Any]:
        t = self.torch
        return [t.tensor(x, dtype=getattr(t, self.dtype), device=self.device, requires_grad=True) for x in xs]

    def run(self, flat_x: Sequence[np.ndarray], ws: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Outputs and gradients (flat, per input) for cotangents ``ws``; TorchScript runs
        three times (its profiling executor optimises, and differentiates, from the second run)."""
        t = self.torch
        leaves = self._leaves(flat_x)
        runs = self.counter.runs if self.counter else 0
        for _ in range(1 if self.counter else 3):
            outs = self.compiled(*leaves)
            if self.counter and self.counter.runs == runs:
                raise AssertionError(f"torch.compile(backend={self.counter.name!r}) ran no compiled graph (eager fallback)")
            cot = [t.tensor(w, dtype=o.dtype, device=o.device) for w, o in zip(ws, outs)]
            grads = t.autograd.grad(outs, leaves, cot, allow_unused=True, materialize_grads=True)
        return [o.detach().cpu().double().numpy() for o in outs], [g.detach().cpu().double().numpy() for g in grads]


class TfBatch:
    """All programs in one tf.function (tape inside), jit_compile per ``mode``; programs
    XLA cannot compile are dropped one by one, each recorded with XLA's words."""

    def __init__(self, tf: Any, mode: str, cases: Sequence[ProgramCase], names: Sequence[str], dtype: str,
                 device: str, inputs: Sequence[Sequence[np.ndarray]]) -> None:
        self.tf, self.dtype, self.device, self.names = tf, dtype, device, list(names)
        self.fns = [c.program.build("tensorflow", dtype) for c in cases]
        self.slices: list[tuple[int, int]] = []
        for xs in inputs:
            lo = sum(b - a for a, b in self.slices)
            self.slices.append((lo, lo + len(xs)))
        self.shapes = [c.program.output_shape for c in cases]
        self.dropped: dict[int, str] = {}
        flat = [x for xs in inputs for x in xs]
        started = time.perf_counter()
        for _ in range(len(cases) + 1):
            self.fn = tf.function(self._batch, jit_compile=(mode == "xla"))
            try:
                self.run(flat, [np.zeros(s) for s in self.shapes])
                break
            except tf.errors.InvalidArgumentError as exc:
                found = _xla_unsupported(str(exc))
                if mode != "xla" or not found or set(found) <= set(self.dropped):
                    raise
                self.dropped.update(found)
        self.compile_s = time.perf_counter() - started

    def _batch(self, flat: list[Any], ws: list[Any]) -> tuple[list[Any], list[Any]]:
        tf = self.tf
        with tf.GradientTape() as tape:
            tape.watch(flat)
            outs = []
            for k, (fn, (lo, hi)) in enumerate(zip(self.fns, self.slices)):
                with tf.name_scope(f"op{k}"):  # XLA names the node: op<k>/<kernel>
                    outs.append(tf.zeros(()) if k in self.dropped else fn(flat[lo:hi]))
        grads = tape.gradient(outs, flat, output_gradients=ws, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return outs, [tf.convert_to_tensor(g) for g in grads]  # a gather's gradient is IndexedSlices

    def run(self, flat_x: Sequence[np.ndarray], ws: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        tf = self.tf
        dt = getattr(tf, self.dtype)
        with tf.device(adapter("tensorflow").device(self.device)):
            xs = [tf.constant(x, dtype=dt) for x in flat_x]
            cot = [tf.zeros((), dtype=dt) if k in self.dropped else tf.constant(w, dtype=dt) for k, w in enumerate(ws)]
            outs, grads = self.fn(xs, cot)
        return [np.asarray(o.numpy(), dtype=np.float64) for o in outs], [np.asarray(g.numpy(), dtype=np.float64)
                                                                         for g in grads]


def _xla_unsupported(message: str) -> dict[int, str]:
    """Program index -> XLA's words, from 'Detected unsupported operations ... {{node op<k>/...}}'."""
    if "unsupported operations" not in message:
        return {}
    words = re.search(r"on XLA_\w+: ([^\n]*?)\{\{node", message)
    return {int(k): words.group(1).strip() if words else message.splitlines()[0]
            for k in re.findall(r"\{\{node op(\d+)/", message)}


# ------------------------------------------------------------------ checks of one example


def _check_example(fw: Any, mode: str, device: str, cases: dict[str, ProgramCase], dtype: str, seed: int,
                   outcome: Outcome, build: Callable[..., Any]) -> None:
    """Compile the batch for ``cases`` in ``dtype`` and record each op's first failure.

    A compiled batch that raises (the compiler or the compiled code: a violation, the
    documentation says the programs compile) is split: each op is compiled and checked on
    its own, so the op that raises is named and fails, and the others are still checked
    (explore seed 20261201: one op's inductor backward error failed all 49 of its half)."""
    names = list(cases)
    inputs = [[_rounded(fw, x, dtype, device) for x in cases[n].inputs] for n in names]
    rng = np.random.default_rng(seed)
    ws = [_rounded(fw, rng.standard_normal(cases[n].program.output_shape), dtype, device) for n in names]
    try:
        batch = build(mode, [cases[n] for n in names], names, dtype, device, inputs)
        outcome.compile_s += batch.compile_s
        outs, flat_grads = batch.run([x for xs in inputs for x in xs], ws)
    except HarnessError:
        raise
    except Exception as exc:
        if len(names) > 1:
            for name in names:
                if name not in outcome.failures:
                    _check_example(fw, mode, device, {name: cases[name]}, dtype, seed, outcome, build)
            return
        message = " ".join(line.strip() for line in str(exc).splitlines()[:3] if line.strip())
        outcome.failures[names[0]] = (f"{fw.name} {mode} {names[0]} ({dtype}): the compiled forward and backward raised "
                                      f"{type(exc).__name__}: {message}\nReproduce: {cases[names[0]]!r} ({dtype})")
        return
    for k, why in getattr(batch, "dropped", {}).items():
        outcome.not_applicable.setdefault(names[k], f"XLA cannot compile {names[k]} (tf.function(jit_compile=True)): {why}")
    for k, name in enumerate(names):
        if name in outcome.failures or k in getattr(batch, "dropped", {}):
            continue
        lo, hi = batch.slices[k]
        try:
            _check_op(fw, mode, device, cases[name], inputs, ws[k], dtype, seed, outs[k], flat_grads[lo:hi],
                      batch, k, outcome, name)
        except AssertionError as exc:
            outcome.failures[name] = f"{exc}\nReproduce: {cases[name]!r} ({dtype}, cotangent seed {seed})"


def _check_op(fw: Any, mode: str, device: str, case: ProgramCase, inputs: list[list[np.ndarray]], w: np.ndarray,
              dtype: str, seed: int, out: np.ndarray, grads: Sequence[np.ndarray], batch: Any, k: int,
              outcome: Outcome, name: str) -> None:
    """One op of the batch: forward and gradient vs eager; in float64, vs finite differences."""
    program = case.program
    xs = inputs[k]
    what = f"{fw.name} {mode} {name} ({dtype})"
    fn = program.build(fw.name, dtype)
    eager_out = fw.call(fn, xs, dtype, device)
    eager = fw.vjp(fn, xs, w, dtype, device)
    forward = low_precision_error_bound(program, xs, dtype)
    assert_within(out, eager_out, 2 * forward, what=f"{what}: compiled forward vs eager")
    b, floor = gradient_error_bound(program, xs, dtype)
    allowed = 2 * (b * float(np.sum(np.abs(w))) + floor)
    for i, (g, e) in enumerate(zip(grads, eager)):
        # torch's eager float64 hardsigmoid backward is float32-accurate (a known limit);
        # a compiled backward may use the exact 1/6 (TorchScript's symbolic gradient does).
        known = U32 * float(np.max(np.abs(e), initial=0.0)) if name in NO_FD[fw.name] and dtype == "float64" else 0.0
        assert_within(g, e, allowed + known, what=f"{what}: compiled gradient of input {i} vs eager")
    if dtype != "float64" or name in NO_FD[fw.name]:
        return
    f64 = program.build(fw.name, "float64")

    def compiled_vjp(xs_: list[np.ndarray], w_: np.ndarray) -> list[np.ndarray]:
        # The batch's backward with every other program's cotangent zero: op k's gradient alone.
        flat = [x for j, group in enumerate(inputs) for x in (xs_ if j == k else group)]
        ws_ = [np.zeros(s) for s in batch.shapes]
        ws_[k] = w_
        _, g = batch.run(flat, ws_)
        lo, hi = batch.slices[k]
        return g[lo:hi]

    try:
        result = check_vjp(lambda v: fw.call(f64, v, "float64", device), xs, compiled_vjp, seed=seed, directions=4,
                           f_error=program.error_bound(xs))
    except InconclusiveCheck:
        outcome.inconclusive[name] = outcome.inconclusive.get(name, 0) + 1
        return
    evidence.check(f"{fw.name} {mode} compiled backward vs finite differences", observed=result.max_error_ratio,
                   tolerance=1.0)


# ------------------------------------------------------------------ the batch, once per worker


#: Ops per compiled batch. A worker compiles the chunk of OPS starting at the first op it is
#: asked about that no batch of its own covered yet: the two xdist workers, which get runs
#: of consecutive tests, compile (nearly) disjoint chunks instead of both compiling all.
CHUNK = 18
INDUCTOR_CHUNK = (len(OPS) + 1) // 2
_DONE: dict[tuple[str, str, str], dict[str, Outcome]] = {}


def _outcome(framework: str, mode: str, device: str, dtypes: Sequence[str], build: Callable[..., Any],
             ci_examples: int, op: str | None = None, size: int = CHUNK, fixed: bool = False) -> Outcome:
    """The outcome of the batch that covers ``op`` (None: one batch of every op): the ``size``
    ops from ``op`` on, or with ``fixed`` the block of ``size`` that holds ``op`` (fixed
    boundaries: a worker never compiles a chunk that overlaps another of its own)."""
    done = _DONE.setdefault((framework, mode, device), {})
    if op in done:
        return done[op]
    if op is None:
        chunk = OPS
    else:
        start = OPS.index(op) // size * size if fixed else OPS.index(op)
        chunk = OPS[start: start + size]
    fw = adapter(framework)
    outcome = Outcome()

    @budget(ci_examples)
    @given(data=st.data(), seed=st.integers(0, 2**16))
    def prop(data: Any, seed: int) -> None:
        cases = {name: data.draw(CASES[name], label=name) for name in chunk}
        outcome.examples += 1
        for dtype in dtypes:
            _check_example(fw, mode, device, cases, dtype, seed, outcome, build)

    prop()
    for name in chunk:
        done.setdefault(name, outcome)
    return outcome


#: The claims' modes per compile mode (execution.toml).
MODE_NAMES = {"aot_eager": "backend=aot_eager", "inductor": "backend=inductor", "torchscript": "torch.jit.trace",
              "function": "jit_compile=None", "xla": "jit_compile=True"}


def _report(outcome: Outcome, op: str, mode: str, dtypes: Sequence[str] = DTYPES) -> None:
    evidence.note(examples=outcome.examples, batch_compile_s=round(outcome.compile_s, 2),
                  fd_inconclusive=outcome.inconclusive.get(op, 0))
    if op in outcome.not_applicable:
        not_applicable(outcome.not_applicable[op])
    if op in outcome.failures:
        pytest.fail(outcome.failures[op], pytrace=False)
    evidence.covers(MODE_NAMES[mode], *(f"dtype={d}" for d in dtypes))
    framework = "tensorflow" if mode in TF_MODES else "torch"
    if "float64" in dtypes and op not in NO_FD[framework] and outcome.inconclusive.get(op, 0) < outcome.examples:
        evidence.covers("vs-finite-differences")


def _torch_build(torch: Any) -> Callable[..., Any]:
    return lambda mode, cases, names, dtype, device, inputs: TorchBatch(torch, mode, cases, dtype, device, inputs)


def _tf_build(tf: Any) -> Callable[..., Any]:
    return lambda mode, cases, names, dtype, device, inputs: TfBatch(tf, mode, cases, names, dtype, device, inputs)


@pytest.mark.claim("execution.compile.backward")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", TORCH_MODES)
def test_torch_compiled_backward_matches_eager_and_finite_differences(torch, dl_device, mode, op):
    outcome = _outcome("torch", mode, dl_device, DTYPES, _torch_build(torch), ci_examples=1, op=op)
    _report(outcome, op, mode)


@pytest.mark.claim("execution.compile.backward")
@pytest.mark.parametrize("op", OPS)
def test_torch_inductor_backward_matches_eager(torch, dl_device, op):
    # float32, where inductor generates its own kernels; one compile per half of the library.
    outcome = _outcome("torch", "inductor", dl_device, ("float32",), _torch_build(torch), ci_examples=1, op=op,
                       size=INDUCTOR_CHUNK, fixed=True)
    _report(outcome, op, "inductor", ("float32",))


@pytest.mark.claim("execution.function.backward")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", TF_MODES)
def test_tf_function_backward_matches_eager_and_finite_differences(tf, dl_device, mode, op):
    outcome = _outcome("tensorflow", mode, dl_device, DTYPES, _tf_build(tf), ci_examples=1, op=op)
    _report(outcome, op, mode)
