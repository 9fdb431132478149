"""Compiled backward: gradients of torch.compile (aot_eager, inductor), TorchScript
(torch.jit.trace) and tf.function (with and without jit_compile=True, the tape inside the
function so the backward is compiled too) against eager gradients and, in float64, against
finite differences, for every registered sample of every op of the library: each parameter
class and each input regime (``programs.samples``), in every run.

Compiles are batched: one compiled function holds one one-op program per parameter class of
every op of a chunk (each on its own inputs), and one backward call returns every gradient.
The batch is compiled once and run once per sample index: a class's other samples reuse its
program on inputs of their own regime (same shapes, so nothing recompiles; the counting
backend shows the compiled graph ran), so a mode costs one compile per chunk and example.
Each op gets its own test id, which reports that op's outcome from the batch that covered it
(:func:`_outcome`; :data:`CHUNKS`, runs of consecutive ops balanced by class count, each
compiled once per run and shared by the xdist workers; a run that selects some ops compiles
those only). Each test records the
samples it checked in the coverage ledger (modes ``compiled/<mode>``, per dtype), and the
checks of its own op (each op's checks are recorded apart while the batch is judged).

Bounds (``docs/tolerances.md``, "Low-precision gradients"): inputs and cotangents are
values of the dtype; the compiled and the eager gradient each differ from the exact one by
at most ``B * ||w||_1 + floor`` per entry (``gradient_error_bound``), so from each other by
twice that; forward values likewise with ``low_precision_error_bound``. In float64 the
compiled backward also goes through :func:`check_vjp` (central differences of the eager
float64 function, with the batch's cotangent, so the batch's one backward serves it); an
inconclusive point is counted and reported, the other checks of that sample still run, and
an op most of whose finite-difference checks are inconclusive is a harness error.

A batch that raises is split per op, and a single op's per parameter class, so the op and
class that raise fail with the compiler's words and everything else is still checked.
Parameter classes with a known compiler error (:data:`INDUCTOR_APART`, each pinned to its
finding) are compiled apart, under test ids of their own: the pin covers that class only,
and the rest of the batch is not recompiled op by op in every run.

The quick profile (``--dl-profile=quick``) compiles a stratified sample instead
(:mod:`._compiled_selection`): in every mode one op of every op family, rotated by ``--dl-seed``,
each mode's sample as one chunk; the rest is deselected, and the coverage ledger expects
exactly that subset of a quick report.

An op XLA cannot compile is "not applicable" for that op, with the op and XLA's words
(tf.function documents InvalidArgumentError for a function XLA cannot compile); the batch
is compiled again without it (its op's other classes are probed in a small batch of their
own, so the large batch recompiles once per unsupported op, not once per class).
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import (
    HarnessError,
    InconclusiveCheck,
    ToleranceExceeded,
    adapter,
    budget,
    check_vjp,
    evidence,
    not_applicable,
)
from pytest_dlconform.api.harness import SharedResults, run_directory
from pytest_dlconform.api.programs import (
    COMPILED_MODES,
    ProgramCase,
    Sample,
    class_cases,
    coverage_key,
    gradient_error_bound,
    low_precision_error_bound,
    op_names,
    samples,
)
from pytest_dlconform.api.tracing import CountingBackend, assert_within

from . import _compiled_selection

OPS = op_names()
TORCH_MODES = ("aot_eager", "torchscript")
TF_MODES = ("function", "xla")
#: An op's samples as one draw: (sample, case) per registered sample, per op.
Draws = dict[str, list[tuple[Sample, ProgramCase]]]
#: A sample checked in a dtype, as plain strings (outcomes are pickled between workers).
Key = tuple[str, str, str]  # parameter class label, regime, dtype


def _key(sample: Sample, dtype: str) -> Key:
    return (sample.params.label, sample.regime, dtype)


def _framework(mode: str) -> str:
    return "tensorflow" if mode in TF_MODES else "torch"


def _dtypes(mode: str) -> tuple[str, ...]:
    """The dtypes a mode checks, as the coverage registry lists them (inductor: float32)."""
    return COMPILED_MODES[_framework(mode)][f"compiled/{mode}"]


@dataclass
class Outcome:
    """What a mode's batches found, per op: its failures, why (some of) its samples are not
    applicable, the samples checked per dtype, finite differences run and inconclusive, and
    the checks recorded while its samples were judged (replayed into its own test)."""

    failures: dict[str, list[str]] = field(default_factory=dict)
    raised: set[str] = field(default_factory=set)  # ops a failure of which is a raising compile or run
    not_applicable: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, Counter[Key]] = field(default_factory=dict)
    visits: dict[str, Counter[Key]] = field(default_factory=dict)
    inconclusive: dict[str, Counter[Key]] = field(default_factory=dict)
    fd_checks: Counter[str] = field(default_factory=Counter)
    checks: dict[str, evidence.Recorder] = field(default_factory=dict)
    examples: int = 0
    compile_s: float = 0.0

    def fail(self, name: str, message: str) -> None:
        self.failures.setdefault(name, []).append(message)

    def count(self, table: dict[str, Counter[Key]], name: str, sample: Sample, dtype: str) -> None:
        table.setdefault(name, Counter())[_key(sample, dtype)] += 1


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
                for op in {self.names[k] for k in found}:
                    # The op's other programs (its other parameter classes) in a small batch
                    # of their own: this batch recompiles once per unsupported op, not per class.
                    rest = [k for k, n in enumerate(self.names) if n == op and k not in self.dropped]
                    if rest:
                        probe = TfBatch(tf, mode, [cases[k] for k in rest], [op] * len(rest), dtype, device,
                                        [inputs[k] for k in rest])
                        self.dropped.update({rest[j]: why for j, why in probe.dropped.items()})
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


def _programs(draws: Draws) -> tuple[list[ProgramCase], list[str], dict[tuple[str, Any], int]]:
    """One program per parameter class of each op (its first sample's case), the op of each,
    and each (op, class)'s index in the batch."""
    cases: list[ProgramCase] = []
    owners: list[str] = []
    where: dict[tuple[str, Any], int] = {}
    for name, pairs in draws.items():
        for sample, case in pairs:
            if (name, sample.params) not in where:
                where[(name, sample.params)] = len(cases)
                cases.append(case)
                owners.append(name)
    return cases, owners, where


def _split(draws: Draws) -> list[Draws]:
    """A raising batch's parts: one per op, and a single op's one per parameter class."""
    if len(draws) > 1:
        return [{name: pairs} for name, pairs in draws.items()]
    ((name, pairs),) = draws.items()
    classes = list(dict.fromkeys(s.params for s, _ in pairs))
    return [{name: [(s, c) for s, c in pairs if s.params == cls]} for cls in classes] if len(classes) > 1 else []


def _check_example(fw: Any, mode: str, device: str, draws: Draws, dtype: str, seed: int, outcome: Outcome,
                   build: Callable[..., Any]) -> None:
    """Compile the batch for ``draws`` in ``dtype``, run it once per sample index and record
    each op's failures.

    A compiled batch that raises (the compiler or the compiled code: a violation, the
    documentation says the programs compile) is split (:func:`_split`) and each part checked
    on its own, so the op and class that raise are named and fail, and the others are still
    checked (explore seed 20261201: one op's inductor backward error failed all 49 of its half)."""
    cases, owners, where = _programs(draws)
    base = [[_rounded(fw, x, dtype, device) for x in c.inputs] for c in cases]
    rng = np.random.default_rng(seed)
    runs = []
    try:
        batch = build(mode, cases, owners, dtype, device, base)
        outcome.compile_s += batch.compile_s
        for j in range(max(len(pairs) for pairs in draws.values())):
            inputs, ws = list(base), [np.zeros(c.program.output_shape) for c in cases]
            checked = []
            for name, pairs in draws.items():
                if j < len(pairs):
                    sample, case = pairs[j]
                    k = where[(name, sample.params)]
                    inputs[k] = [_rounded(fw, x, dtype, device) for x in case.inputs]
                    ws[k] = _rounded(fw, rng.standard_normal(case.program.output_shape), dtype, device)
                    checked.append((name, sample, case, k))
            outs, grads = batch.run([x for xs in inputs for x in xs], ws)
            runs.append((checked, inputs, ws, outs, grads))
    except HarnessError:
        raise
    except Exception as exc:
        parts = _split(draws)
        for part in parts:
            _check_example(fw, mode, device, part, dtype, seed, outcome, build)
        if not parts:
            ((name, pairs),) = draws.items()
            for sample, _ in pairs:  # checked: it does not compile and run, as documented
                outcome.count(outcome.visits, name, sample, dtype)
            message = " ".join(line.strip() for line in str(exc).splitlines()[:3] if line.strip())
            outcome.raised.add(name)
            outcome.fail(name, f"{fw.name} {mode} {name} ({dtype}): the compiled forward and backward raised "
                               f"{type(exc).__name__}: {message}\nReproduce: {pairs[0][1]!r} ({dtype}, class "
                               f"{pairs[0][0].params.label})")
        return
    dropped = getattr(batch, "dropped", {})
    for k, why in dropped.items():
        outcome.not_applicable.setdefault(owners[k], f"XLA cannot compile {owners[k]} (tf.function(jit_compile=True)): {why}")
    for checked, inputs, ws, outs, flat_grads in runs:
        for name, sample, case, k in checked:
            if k in dropped:
                outcome.count(outcome.skipped, name, sample, dtype)
                continue
            lo, hi = batch.slices[k]
            outcome.count(outcome.visits, name, sample, dtype)
            with evidence.recording(into=outcome.checks.setdefault(name, evidence.Recorder())):
                try:
                    _check_op(fw, mode, device, sample, case, inputs[k], ws[k], dtype, seed, outs[k],
                              flat_grads[lo:hi], outcome, name)
                except AssertionError as exc:
                    outcome.fail(name, f"{exc}\nReproduce: {case!r} ({dtype}, class {sample.params.label}, regime "
                                       f"{sample.regime}, cotangent seed {seed})")


def _check_op(fw: Any, mode: str, device: str, sample: Sample, case: ProgramCase, xs: list[np.ndarray], w: np.ndarray,
              dtype: str, seed: int, out: np.ndarray, grads: Sequence[np.ndarray], outcome: Outcome, name: str) -> None:
    """One sample of the batch: forward and gradient vs eager; in float64, vs finite differences."""
    program = case.program
    what = f"{fw.name} {mode} {name} ({dtype})"
    fn = program.build(fw.name, dtype)
    eager_out = fw.call(fn, xs, dtype, device)
    eager = fw.vjp(fn, xs, w, dtype, device)
    forward = low_precision_error_bound(program, xs, dtype)
    assert_within(out, eager_out, 2 * forward, what=f"{what}: compiled forward vs eager")
    b, floor = gradient_error_bound(program, xs, dtype)
    allowed = 2 * (b * float(np.sum(np.abs(w))) + floor)
    for i, (g, e) in enumerate(zip(grads, eager)):
        assert_within(g, e, allowed, what=f"{what}: compiled gradient of input {i} vs eager")
    if dtype != "float64":
        return
    f64 = program.build(fw.name, "float64")
    outcome.fd_checks[name] += 1
    try:
        # The batch's own backward, for the batch's cotangent w (check_vjp uses that w).
        result = check_vjp(lambda v: fw.call(f64, v, "float64", device), xs, lambda xs_, w_: list(grads), seed=seed,
                           directions=4, f_error=program.error_bound(xs), cotangent=w)
    except InconclusiveCheck:
        outcome.count(outcome.inconclusive, name, sample, dtype)
        return
    evidence.check(f"{fw.name} {mode} compiled backward vs finite differences", observed=result.max_error_ratio,
                   tolerance=1.0)


# ------------------------------------------------------------------ the batch, once per worker


#: The chunks of ops compiled as one batch, per mode: one compile each per run, shared by the
#: xdist workers (:class:`SharedResults`: a worker waiting for a chunk compiles another first).
#: A cold inductor compile of a quarter of the library's classes takes 10-30 s here.
CHUNKS = {mode: _compiled_selection.parts(OPS, 4 if mode == "inductor" else 6) for mode in (*TORCH_MODES, "inductor", *TF_MODES)}
#: Parameter classes with a known inductor divergence, each compiled in a batch of its own
#: under its own test id (id -> op, text of the class label), so that its pin covers that
#: class only and never the op's other classes; the class stays in the op's registered
#: samples. conv2d_full-replicate: inductor raises in the backward (finding 27; a raising
#: batch is split, which would recompile the rest of its chunk op by op in every run).
#: avg_pool2d_pad-ceil: the backward divides ceil_mode's overhanging windows by the whole
#: kernel (finding 28).
INDUCTOR_APART = {
    "conv2d_full-replicate": ("conv2d_full", "padding_mode='replicate'"),
    "avg_pool2d_pad-ceil": ("avg_pool2d_pad", "padding=0,ceil_mode=True,count_include_pad=True,divisor_override=None"),
}


def _apart(op: str, sample: Sample) -> str | None:
    return next((key for key, (o, text) in INDUCTOR_APART.items() if o == op and text in sample.params.label), None)


#: Whether this process collects a quick-profile run (set while the module collects): the quick
#: profile compiles its sample of each mode as one chunk (:func:`_chunks`).
_QUICK_RUN = [False]


def _chunks(mode: str, quick: bool) -> tuple[tuple[str, ...], ...]:
    """The chunks of ``mode``: :data:`CHUNKS`, or in the quick profile one chunk of every op
    (of which its sample is selected), so a mode costs one compile per run."""
    return (tuple(OPS),) if quick else CHUNKS[mode]


def _chunk_index(mode: str, op: str, quick: bool) -> int:
    return next(i for i, c in enumerate(_chunks(mode, quick)) if op in c)


def _shard_group(params: dict[str, Any]) -> str | None:
    """A test's chunk: --dl-shard keeps a chunk's tests in one shard, because a chunk compiles
    the ops the run selected and each op's examples are drawn after those of the chunk's ops
    before it: split, each part would compile again and draw other examples."""
    if "op" not in params:
        return None  # a class compiled apart: a batch of its own
    mode = params.get("mode", "inductor")
    return f"{mode}-{params.get('dl_device')}-{_chunk_index(mode, params['op'], _QUICK_RUN[0])}"


pytestmark = pytest.mark.dl_shard_group(by=_shard_group)


def _test_mode_op(item: Any) -> tuple[str, str] | None:
    """(compiled mode, op) a test of this module checks (an apart class: inductor, its op)."""
    if getattr(item, "module", None) is not sys.modules[__name__] or not hasattr(item, "callspec"):
        return None
    params = item.callspec.params
    if "apart" in params:
        return "inductor", INDUCTOR_APART[params["apart"]][0]
    return params.get("mode", "inductor"), params["op"]


#: The quick profile's selection of this module's tests (:mod:`._compiled_selection`): in every mode
#: with each of its dtypes one op of every op family; an apart class's test runs when its op is
#: in inductor's sample.
QUICK_SAMPLE = "dlconform-compiled-backward-quick-sample"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    _QUICK_RUN[0] = _compiled_selection.register(metafunc, QUICK_SAMPLE, (*TORCH_MODES, "inductor", *TF_MODES), _test_mode_op)


def _compute(framework: str, mode: str, device: str, dtypes: Sequence[str], build: Callable[..., Any],
             ci_examples: int, chunk: Sequence[str], select: Callable[[str, Sample], bool]) -> Outcome:
    """The outcome of the batches of ``chunk`` (the samples ``select`` keeps), every example."""
    fw = adapter(framework)
    outcome = Outcome()

    @budget(ci_examples)
    @given(data=st.data(), seed=st.integers(0, 2**16))
    def prop(data: Any, seed: int) -> None:
        draws = {name: [(s, c) for s, c in data.draw(class_cases(name), label=name) if select(name, s)] for name in chunk}
        outcome.examples += 1
        for dtype in dtypes:
            _check_example(fw, mode, device, {n: p for n, p in draws.items() if p}, dtype, seed, outcome, build)

    prop()
    return outcome


@dataclass
class Batches:
    """The run's shared chunk outcomes, and which (mode, op or apart id) tests the run selected."""

    shared: SharedResults
    selected: set[tuple[str, str]]
    registered: set[str] = field(default_factory=set)  # frameworks whose families are registered
    quick: bool = False  # the quick profile: one chunk per mode (_chunks)


def _selected(items: Sequence[Any]) -> set[tuple[str, str]]:
    """(mode, op) of this module's selected tests; ("apart", id) for an apart class's test."""
    out = set()
    for item in items:
        if getattr(item, "module", None) is not sys.modules[__name__] or not hasattr(item, "callspec"):
            continue
        params, name = item.callspec.params, item.originalname
        if name == "test_torch_inductor_backward_matches_eager":
            out.add(("inductor", params["op"]))
        elif name == "test_torch_inductor_backward_of_a_class_compiled_apart":
            out.add(("apart", params["apart"]))
        else:
            out.add((params["mode"], params["op"]))
    return out


def _register(batches: Batches, framework: str, device: str, build: Callable[..., Any]) -> None:
    """Every family of ``framework`` (a mode's chunks with a selected test, each compiling its
    selected ops only; inductor's apart classes), so that a worker waiting for one part
    computes any other the run needs."""
    if framework in batches.registered:
        return
    batches.registered.add(framework)
    shared, selected = batches.shared, batches.selected
    for mode in (*TORCH_MODES, "inductor") if framework == "torch" else TF_MODES:
        dtypes = _dtypes(mode)
        chunks = [tuple(op for op in chunk if (mode, op) in selected) for chunk in _chunks(mode, batches.quick)]
        select = (lambda o, s: _apart(o, s) is None) if mode == "inductor" else (lambda o, s: True)
        parts = [str(i) for i, chunk in enumerate(chunks) if chunk]
        shared.register(f"{framework}-{mode}-{device}", parts,
                        lambda part, mode=mode, dtypes=dtypes, chunks=chunks, select=select: _compute(
                            framework, mode, device, dtypes, build, 1, chunks[int(part)], select))
    if framework == "torch":
        shared.register(f"torch-inductor-apart-{device}", sorted(k for k in INDUCTOR_APART if ("apart", k) in selected),
                        lambda key: _compute("torch", "inductor", device, _dtypes("inductor"), build, 1,
                                             (INDUCTOR_APART[key][0],), lambda o, s: _apart(o, s) == key))


def _outcome(batches: Batches, framework: str, mode: str, device: str, build: Callable[..., Any], op: str) -> Outcome:
    """The outcome of the chunk of ``mode`` that holds ``op`` (inductor: its classes that are
    not compiled apart)."""
    _register(batches, framework, device, build)
    index = _chunk_index(mode, op, batches.quick)
    return batches.shared.get(f"{framework}-{mode}-{device}", str(index))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def shared(request: Any, tmp_path_factory: Any) -> Batches:
    """Chunk outcomes computed once per run, shared by the run's xdist workers."""
    root = run_directory(request.config, tmp_path_factory.getbasetemp(), "dlconform-compiled-backward")
    quick = request.config.pluginmanager.has_plugin(QUICK_SAMPLE)
    return Batches(SharedResults(root), _selected(request.session.items), quick=quick)


#: The claims' modes per compile mode (execution.toml).
MODE_NAMES = {"aot_eager": "backend=aot_eager", "inductor": "backend=inductor", "torchscript": "torch.jit.trace",
              "function": "jit_compile=None", "xla": "jit_compile=True"}


def _report(outcome: Outcome, op: str, mode: str) -> None:
    """The op's test: its coverage rows, its checks, then its verdict (failures first; not
    applicable when XLA compiled none of its samples; a harness error when finite
    differences could judge fewer than half of its float64 samples)."""
    framework, dtypes = _framework(mode), _dtypes(mode)
    visits, skipped = outcome.visits.get(op, Counter()), outcome.skipped.get(op, Counter())
    noisy = outcome.inconclusive.get(op, Counter())
    keys = [(s, d, _key(s, d)) for s in samples(op) for d in dtypes]
    rows = [{**coverage_key(framework, f"compiled/{mode}", s, dtype=d), "count": visits[k], "inconclusive": noisy[k],
             **({"not_applicable": skipped[k]} if skipped[k] else {})} for s, d, k in keys if visits[k] or skipped[k]]
    inconclusive, checks = sum(noisy.values()), outcome.fd_checks[op]
    evidence.note(examples=outcome.examples, batch_compile_s=round(outcome.compile_s, 2), coverage=rows,
                  fd_checks=checks, fd_inconclusive=inconclusive, samples_checked=sum(visits.values()))
    kept = outcome.checks.get(op)
    for what, entry in (kept.checks if kept else {}).items():
        evidence.check(what, observed=entry["observed"], tolerance=entry["tolerance"])
    if op in outcome.failures:
        found = outcome.failures[op]
        more = f"\n\n... and {len(found) - 3} more failures of {op}" if len(found) > 3 else ""
        if op in outcome.raised:  # the compiler or the compiled code raised
            pytest.fail("\n\n".join(found[:3]) + more, pytrace=False)
        __tracebackhide__ = True
        # An oracle's verdict (its checks, with their observed errors, are in this test's evidence).
        raise ToleranceExceeded("\n\n".join(found[:3]) + more)
    if op in outcome.not_applicable and not visits:
        not_applicable(outcome.not_applicable[op])
    if op in outcome.not_applicable:
        evidence.note(not_applicable_samples=outcome.not_applicable[op])
    if not visits:
        raise HarnessError(f"no sample of {op} was checked in {mode}")
    if checks and 2 * inconclusive > checks:
        raise HarnessError(f"finite differences were inconclusive in {inconclusive} of {checks} float64 checks of {op} "
                           f"under {mode}: its samples do not let finite differences judge the compiled gradient")
    evidence.covers(MODE_NAMES[mode], *(f"dtype={d}" for d in dtypes))
    if checks > inconclusive:
        evidence.covers("vs-finite-differences")


def _torch_build(torch: Any) -> Callable[..., Any]:
    return lambda mode, cases, names, dtype, device, inputs: TorchBatch(torch, mode, cases, dtype, device, inputs)


def _tf_build(tf: Any) -> Callable[..., Any]:
    return lambda mode, cases, names, dtype, device, inputs: TfBatch(tf, mode, cases, names, dtype, device, inputs)


@pytest.mark.claim("execution.compile.backward")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", TORCH_MODES)
def test_torch_compiled_backward_matches_eager_and_finite_differences(torch, dl_device, shared, mode, op):
    _report(_outcome(shared, "torch", mode, dl_device, _torch_build(torch), op), op, mode)


@pytest.mark.claim("execution.compile.backward")
@pytest.mark.parametrize("op", OPS)
def test_torch_inductor_backward_matches_eager(torch, dl_device, shared, op):
    # float32, where inductor generates its own kernels.
    _report(_outcome(shared, "torch", "inductor", dl_device, _torch_build(torch), op), op, "inductor")


@pytest.mark.claim("execution.compile.backward")
@pytest.mark.parametrize("apart", sorted(INDUCTOR_APART))
def test_torch_inductor_backward_of_a_class_compiled_apart(torch, dl_device, shared, apart):
    # The classes of INDUCTOR_APART, each in a batch of its own (float32, as above).
    _register(shared, "torch", dl_device, _torch_build(torch))
    outcome = shared.shared.get(f"torch-inductor-apart-{dl_device}", apart)
    _report(outcome, INDUCTOR_APART[apart][0], "inductor")


@pytest.mark.claim("execution.function.backward")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", TF_MODES)
def test_tf_function_backward_matches_eager_and_finite_differences(tf, dl_device, shared, mode, op):
    _report(_outcome(shared, "tensorflow", mode, dl_device, _tf_build(tf), op), op, mode)
