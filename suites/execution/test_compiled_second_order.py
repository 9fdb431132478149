"""Compiled second order: Hessian-vector products computed inside compiled functions, against
finite differences of the gradient (:func:`check_hvp`, the oracle), for every op of the op
library; the compiled product's distance from the eager one is recorded as evidence.

Modes (float64):

* TensorFlow: the nested GradientTapes INSIDE ``tf.function`` (``jit_compile`` None and True,
  XLA): ``H v`` of ``L = <w, f(x)>`` is the outer tape's gradient of the inner tape's gradient.
  An op XLA cannot compile is not applicable for that op, with XLA's words (tf.function
  documents InvalidArgumentError for a function XLA cannot compile), as in
  test_compiled_backward.py; the batch is compiled again without it.
* torch: ``torch.autograd.grad(..., create_graph=True)`` on the output of a ``torch.jit.trace``'d
  function, then the gradient of ``<grad L, v>`` (run three times: the profiling executor
  optimises and differentiates from the second run). ``torch.compile`` (aot_eager; inductor
compiles about 70 s to reach the same refusal, so it is not a mode here):
  the same double backward on the compiled output. torch's documentation (torch.compile
  docstring; "torch.compile has different autograd semantics"; the compiler FAQ) neither
  promises nor excludes a double backward; AOTAutograd raises ``RuntimeError: torch.compile
  with aot_autograd does not currently support double backward`` on purpose
  (pytorch/pytorch#92348, which replaced the silently wrong result of pytorch/pytorch#91469).
  That refusal makes the op not applicable, with the exact error; a double backward that
  returns values is judged like the others (a silently wrong one, as #91469 or #181581, fails).

Cost: one compiled function per mode and chunk of ops (:data:`CHUNKS`), each op's programs
(one per parameter class: the class's last registered sample outside the "tiny" and "large"
regimes, where finite differences of the gradient can judge) on their own inputs; one call
returns every H v. The eager reference costs one eager H v and check_hvp's four eager
gradients per program. The quick profile keeps, per mode, one op of every op family (the
same rotation by ``--dl-seed`` as test_compiled_backward's, :mod:`._compiled_selection`) as one chunk.

Each (op, mode) test reports its op's outcome from the chunk that covered it, and registers
the mode's table of selected ops in the combinations ledger (family
``execution.compiled-second-order``, record = mode, row ``<op>/<mode>``): a row no test
visited fails ``dlconform modes --check``.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
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
    check_hvp,
    evidence,
    not_applicable,
)
from pytest_dlconform.api.harness import SharedResults, run_directory
from pytest_dlconform.api.programs import ProgramCase, Sample, op_names, sample_cases, samples
from pytest_dlconform.api.tracing import CountingBackend

from . import _compiled_hvp as ch
from . import _compiled_selection

OPS = op_names()
#: A framework's documented refusal of a second derivative ("derivative for aten::... is not
#: implemented", TensorFlow's "No gradient defined for operation"): not applicable for that
#: class, as in test_second_order.py. TensorFlow's "gradient registry has no entry for" is not a
#: refusal: a differentiable op's backward op simply has no gradient (a violation, finding 2).
REFUSALS = {
    "torch": re.compile(r"derivative for .* is not implemented|not implemented for .*double backward", re.S),
    "tensorflow": re.compile(r"No gradient defined for operation"),
}
FAMILY = "execution.compiled-second-order"
TORCH, TF = "torch", "tensorflow"
CLAIM = {TORCH: "execution.compile.second-order", TF: "execution.function.second-order"}


def _framework(mode: str) -> str:
    return TF if mode in ch.TF_MODES else TORCH


def chosen(op: str) -> list[Sample]:
    """One sample per parameter class: its last registered sample outside the noisy regimes
    (the later regimes: mixed, dyadic, both sides of kinks), else its first."""
    picked: dict[Any, Sample] = {}
    for s in samples(op):
        if s.params not in picked or s.regime not in ch.NOISY_REGIMES:
            picked[s.params] = s
    return list(picked.values())


#: Chunks per mode: torch.compile's modes in one chunk (AOTAutograd refuses the double backward
#: of the whole compiled graph, whatever it holds); the others in a few, so that the xdist
#: workers share the compiles.
CHUNKS = {"torchscript": _compiled_selection.parts(OPS, 2), "aot_eager": (tuple(OPS),), "inductor": (tuple(OPS),),
          "function": _compiled_selection.parts(OPS, 2), "xla": _compiled_selection.parts(OPS, 2)}
_QUICK_RUN = [False]


def _chunks(mode: str, quick: bool) -> tuple[tuple[str, ...], ...]:
    return (tuple(OPS),) if quick else CHUNKS[mode]


def _chunk_index(mode: str, op: str, quick: bool) -> int:
    return next(i for i, c in enumerate(_chunks(mode, quick)) if op in c)


def _shard_group(params: dict[str, Any]) -> str | None:
    if "op" not in params:
        return None
    return f"hvp-{params['mode']}-{params.get('dl_device')}-{_chunk_index(params['mode'], params['op'], _QUICK_RUN[0])}"


pytestmark = pytest.mark.dl_shard_group(by=_shard_group)


def _test_mode_op(item: Any) -> tuple[str, str] | None:
    if getattr(item, "module", None) is not sys.modules[__name__] or not hasattr(item, "callspec"):
        return None
    params = item.callspec.params
    return (params["mode"], params["op"]) if "mode" in params and "op" in params else None


#: The quick profile's selection of this module's tests (:mod:`._compiled_selection`).
QUICK_SAMPLE = "dlconform-compiled-second-order-quick-sample"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    _QUICK_RUN[0] = _compiled_selection.register(metafunc, QUICK_SAMPLE, (*ch.TORCH_MODES, *ch.TF_MODES), _test_mode_op)


# ------------------------------------------------------------------ one chunk


@dataclass
class Pick:
    op: str
    sample: Sample
    case: ProgramCase
    xs: list[np.ndarray]
    w: np.ndarray
    vs: list[np.ndarray]
    seed: int


def _prepare(op: str, sample: Sample, case: ProgramCase, rng: np.random.Generator) -> Pick:
    xs = [np.asarray(x, dtype=np.float64) for x in case.inputs]
    w = rng.standard_normal(case.program.output_shape)
    seed = int(rng.integers(0, 2**16))
    return Pick(op, sample, case, xs, w, ch.fd_tangents(check_hvp, xs, case.program.output_shape, w, seed), seed)


def _build(mode: str, picks: Sequence[Pick], device: str) -> Any:
    inputs = [p.xs for p in picks]
    cases = [p.case for p in picks]
    if _framework(mode) == TORCH:
        return ch.TorchHvpBatch(adapter(TORCH).module, mode, cases, inputs, CountingBackend)
    a = adapter(TF)
    return ch.TfHvpBatch(a.module, mode, cases, [p.op for p in picks], inputs, a.device(device))


def _split(picks: Sequence[Pick]) -> list[list[Pick]]:
    """A raising batch's parts: one per op, and a single op's one per parameter class."""
    ops = list(dict.fromkeys(p.op for p in picks))
    if len(ops) > 1:
        return [[p for p in picks if p.op == op] for op in ops]
    return [[p] for p in picks] if len(picks) > 1 else []


def _run_batch(mode: str, device: str, picks: Sequence[Pick], outcome: ch.ChunkOutcome) -> None:
    framework = _framework(mode)
    try:
        batch = _build(mode, picks, device)
        outcome.compile_s += batch.compile_s
        started = time.perf_counter()
        flat_hv = batch.hvp([x for p in picks for x in p.xs], [p.w for p in picks], [v for p in picks for v in p.vs])
        outcome.run_s += time.perf_counter() - started
    except HarnessError:
        raise
    except ch.Refused as exc:
        for p in picks:  # the compiled graph's double backward is refused, whatever it holds
            outcome.of(p.op).not_applicable = (
                f"torch.compile(backend={mode!r}) refuses the double backward of {p.op}: RuntimeError: {exc} "
                f"(AOTAutograd's explicit refusal, pytorch/pytorch#92348; the documentation does not promise a "
                f"double backward through torch.compile)")
        return
    except Exception as exc:
        parts = _split(picks)
        for part in parts:
            _run_batch(mode, device, part, outcome)
        if not parts:
            (p,) = picks
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            # the first line and the last (a StagingError ends with the error it wraps)
            message = " ... ".join(dict.fromkeys([*lines[:1], *lines[-1:]]))
            o = outcome.of(p.op)
            if REFUSALS[framework].search(str(exc)):  # the documented "not implemented" refusal, as in eager
                o.skipped[f"{p.sample.params.label} [{p.sample.regime}]"] = (
                    f"{framework} {mode} refuses the second derivative of {p.op}: {type(exc).__name__}: {message}")
                return
            o.raised = True
            o.failures.append(f"{framework} {mode} {p.op}: the compiled second order raised {type(exc).__name__}: "
                              f"{message}\nReproduce: {p.case!r} (float64, class {p.sample.params.label})")
        return
    dropped = getattr(batch, "dropped", {})
    for k, p in enumerate(picks):
        o = outcome.of(p.op)
        label = f"{p.sample.params.label} [{p.sample.regime}]"
        if k in dropped:
            o.skipped[label] = f"XLA cannot compile {p.op} (tf.function(jit_compile=True)): {dropped[k]}"
            continue
        lo, hi = batch.slices[k]
        try:
            _judge(framework, mode, device, p, flat_hv[lo:hi], o)
        except AssertionError as exc:
            o.failures.append(f"{exc}\nReproduce: {p.case!r} (float64, class {p.sample.params.label}, regime "
                              f"{p.sample.regime}, tangent seed {p.seed})")
        o.classes.append(label)


def _judge(framework: str, mode: str, device: str, p: Pick, hv: Sequence[np.ndarray], o: ch.OpOutcome) -> None:
    """One program: the compiled H v vs finite differences of the eager gradient, then vs eager."""
    __tracebackhide__ = True
    a = adapter(framework)
    program = p.case.program
    fn = program.build(framework, "float64")
    what = f"{framework} {mode} {p.op}"
    floor = program.derivative_error_bound(p.xs) + ch.TERMS_ULPS * ch.EPS
    o.fd_checks += 1
    fd_scale = 0.0
    try:
        result = ch.judge_against_fd(check_hvp, lambda xs, w: a.vjp(fn, xs, w, "float64", device), hv, p.vs, p.xs,
                                     program.output_shape, p.w, p.seed, floor, f"{what} (compiled H v)")
        fd_scale = result.max_abs_fd
        o.check(f"{mode} H v vs finite differences of the gradient", result.max_error_ratio, 1.0)
    except InconclusiveCheck:
        o.inconclusive += 1
    # Evidence, not a verdict: that a compiled H v equals the eager one beyond rounding is not
    # documented, and the bound's error model (the size of H v and of the gradient's finite
    # differences) misses cancellation in the intermediates: under XLA, exp_tanh at |x| near 15
    # (where 1 - tanh^2 ~ 1e-12 is computed from a rounded tanh) differs from eager by 75% of an
    # H v of 1e-12, which finite differences of the gradient accept. The oracle is check_hvp above.
    eager = ch.eager_hvp(framework, a, fn, p.xs, p.w, p.vs, device)
    scales = [ch.element_scales(x) for x in p.xs]
    bound = ch.hvp_bound(len(program.ops), sum(x.size for x in p.xs), scales, [hv, eager], fd_scale, floor, p.w)
    try:
        ratio = ch.compare_hvp(hv, eager, scales, bound, f"{what}: compiled H v vs eager H v")
    except ch.HvpMismatch as exc:
        o.eager_differs.append(str(exc).splitlines()[0][:300])
        ratio = float("inf")
    o.eager_ratio = max(o.eager_ratio, ratio)


def _refuses_double_backward(mode: str, device: str, picks: Sequence[Pick], outcome: ch.ChunkOutcome) -> bool:
    """torch.compile's AOTAutograd refuses the double backward of any compiled graph (its
    CompiledFunctionBackward raises whatever the graph holds), so one program probes it: on the
    refusal every op of the chunk is not applicable, with the error and the probe named, without
    compiling the whole chunk (about 40 s of aot_eager for the same error). A probe that computes
    sends the whole chunk to be compiled and judged, so a double backward that returns values is
    never taken on trust."""
    probe = ch.ChunkOutcome()
    _run_batch(mode, device, picks[:1], probe)
    refused = probe.ops.get(picks[0].op, ch.OpOutcome()).not_applicable
    if not refused:
        return False
    for p in picks:
        outcome.of(p.op).not_applicable = f"{refused} (probed on {picks[0].op}; the refusal does not depend on the graph)"
    outcome.compile_s += probe.compile_s
    return True


def _compute(mode: str, device: str, chunk: Sequence[str]) -> ch.ChunkOutcome:
    outcome = ch.ChunkOutcome()

    @budget(1)
    @given(data=st.data(), seed=st.integers(0, 2**16))
    def prop(data: Any, seed: int) -> None:
        rng = np.random.default_rng(seed)
        picks = [_prepare(op, s, data.draw(sample_cases(s), label=f"{op} {s.params.label} {s.regime}"), rng)
                 for op in chunk for s in chosen(op)]
        if mode in ch.AOT_MODES and len(picks) > 1 and _refuses_double_backward(mode, device, picks, outcome):
            return
        _run_batch(mode, device, picks, outcome)

    prop()
    return outcome


# ------------------------------------------------------------------ shared per run


@dataclass
class Batches:
    shared: SharedResults
    selected: set[tuple[str, str]]
    registered: set[str] = field(default_factory=set)
    quick: bool = False


def _register(batches: Batches, mode: str, device: str) -> None:
    if mode in batches.registered:
        return
    batches.registered.add(mode)
    chunks = [tuple(op for op in chunk if (mode, op) in batches.selected) for chunk in _chunks(mode, batches.quick)]
    batches.shared.register(f"hvp-{mode}-{device}", [str(i) for i, c in enumerate(chunks) if c],
                            lambda part: _compute(mode, device, chunks[int(part)]))


@pytest.fixture(scope="module")
def shared(request: Any, tmp_path_factory: Any) -> Batches:
    root = run_directory(request.config, tmp_path_factory.getbasetemp(), "dlconform-compiled-second-order")
    quick = request.config.pluginmanager.has_plugin(QUICK_SAMPLE)
    selected = {pair for item in request.session.items if (pair := _test_mode_op(item))}
    return Batches(SharedResults(root), selected, quick=quick)


def _report(batches: Batches, mode: str, op: str, device: str) -> None:
    _register(batches, mode, device)
    outcome: ch.ChunkOutcome = batches.shared.get(f"hvp-{mode}-{device}", str(_chunk_index(mode, op, batches.quick)))
    o = outcome.ops.get(op, ch.OpOutcome())
    row = f"{op}/{mode}"
    evidence.registers(FAMILY, mode, sorted(f"{o_}/{m}" for m, o_ in batches.selected if m == mode), own=row)
    evidence.note(batch_compile_s=round(outcome.compile_s, 2), batch_hvp_s=round(outcome.run_s, 3),
                  classes_checked=o.classes, fd_checks=o.fd_checks, fd_inconclusive=o.inconclusive,
                  compiled_vs_eager_bound_ratio=o.eager_ratio,
                  **({"compiled_vs_eager_beyond_bound": o.eager_differs} if o.eager_differs else {}),
                  **({"classes_not_applicable": o.skipped} if o.skipped else {}))
    for name, (observed, tol) in o.checks.items():
        evidence.check(name, observed=observed, tolerance=tol)
    if o.failures:
        more = f"\n\n... and {len(o.failures) - 3} more failures of {op}" if len(o.failures) > 3 else ""
        if o.raised:
            pytest.fail("\n\n".join(o.failures[:3]) + more, pytrace=False)
        __tracebackhide__ = True
        raise ToleranceExceeded("\n\n".join(o.failures[:3]) + more)
    if o.not_applicable:
        not_applicable(o.not_applicable, cause="torch.compile does not compute a double backward", subject=op)
    if o.skipped and not o.classes:
        not_applicable(next(iter(o.skipped.values())),
                       cause="XLA cannot compile this op" if mode == "xla" else "the framework refuses its second derivative",
                       subject=op)
    if not o.classes:
        raise HarnessError(f"no parameter class of {op} was checked under {mode}")
    if 2 * o.inconclusive > o.fd_checks:
        raise HarnessError(f"finite differences of the gradient were inconclusive in {o.inconclusive} of "
                           f"{o.fd_checks} checks of {op} under {mode}: they cannot judge its compiled H v")
    named = ch.MODE_NAMES[mode]  # torch.compile's modes are not modes of the claim (see the module docstring)
    evidence.covers(*([named] if named else []))
    if o.fd_checks > o.inconclusive:
        evidence.covers("vs-finite-differences")
    evidence.visits(FAMILY, mode, row)


@pytest.mark.claim("execution.compile.second-order")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", ch.TORCH_MODES)
def test_torch_compiled_hvp_matches_eager_and_finite_differences(torch: Any, dl_device: str, shared: Batches, mode: str,
                                                                op: str) -> None:
    _report(shared, mode, op, dl_device)


@pytest.mark.claim("execution.function.second-order")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", ch.TF_MODES)
def test_tf_function_hvp_matches_eager_and_finite_differences(tf: Any, dl_device: str, shared: Batches, mode: str,
                                                              op: str) -> None:
    _report(shared, mode, op, dl_device)

