"""Helpers of test_compiled_second_order.py: Hessian-vector products computed INSIDE a compiled
function (many one-op programs batched in one function, each on its own inputs), the eager
reference, and the oracles that judge a compiled H v.

The oracles (:func:`compare_hvp`, :func:`judge_against_fd`, :func:`fd_tangents`) are numpy
only, so tests/unit/test_compiled_second_order_oracles.py feeds them wrong products without a
framework.

Error model of :func:`compare_hvp` (float64, ``docs/tolerances.md``, "Compiled second order"):
the compiled and the eager ``H v`` are the reverse-mode gradient of ``phi(x) = <g(x), v>``,
where ``g`` is itself a backward pass: a chain of about ``3 * ops`` rounded operations (the
op's forward, its backward, and the backward of that), each entry a sum of at most ``n`` terms
(``n`` the number of input entries). Each computation errs from the exact product by at most
``rounding_terms(3 * ops, n) * u * T`` per entry (:func:`pytest_dlconform.api.tolerance`),
``T`` the size of the terms that may cancel; so the two differ by at most twice that. ``T`` is
taken normwise, in element units (``s_i = |x_i|`` floored, as check_hvp measures), as the
largest of ``|s * H v|`` (compiled and eager) and of the gradient's finite differences along
``v`` (the same quantity seen without the second backward's cancellations), plus the gradient's
own absolute rounding per unit cotangent times ``||w||_1`` (a second derivative of a saturated
op is computed from rounded first-order values, as check_hvp's ``derivative_error``).
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

EPS = float(np.finfo(np.float64).eps)
U = EPS / 2  # unit roundoff of float64
OP_ROUNDING = 4.0  # ulps per elementary operation (docs/tolerances.md, "Fudge factors derived")
PASSES = 3  # forward, backward, backward of the backward
TERMS_ULPS = 4.0  # as test_second_order's _gradient_floor: order-one terms of the gradient
#: torch.compile's inductor is not among them: AOTAutograd refuses the double backward before any
#: backend kernel runs (CompiledFunctionBackward, the same for aot_eager and inductor; probed by
#: hand for inductor), and a cold inductor compile of one op per family cost 71 s here.
TORCH_MODES = ("torchscript", "aot_eager")
AOT_MODES = frozenset({"aot_eager", "inductor"})  # torch.compile's AOTAutograd backends
TF_MODES = ("function", "xla")
#: The claim's documented modes per compile mode (execution.second-order.toml).
#: torch.compile's backends are none: their double backward is refused (AOT_REFUSAL), so the claim
#: does not list them as modes it checks; their rows are in the combinations ledger.
MODE_NAMES: dict[str, str | None] = {"torchscript": "torch.jit.trace", "aot_eager": None, "inductor": None,
                                     "function": "jit_compile=None", "xla": "jit_compile=True"}
#: torch.compile's refusal of a double backward through an AOTAutograd-compiled graph (raised by
#: CompiledFunctionBackward.backward, torch/_functorch/_aot_autograd/runtime_wrappers.py; added
#: deliberately by pytorch/pytorch#92348 after pytorch/pytorch#91469 "torch.compile silently
#: incorrect on double backwards").
AOT_REFUSAL = re.compile(r"torch\.compile with aot_autograd does not currently support double backward")
#: Regimes where finite differences of the gradient mostly cannot judge (test_second_order.py).
NOISY_REGIMES = frozenset({"tiny", "large"})


class HvpMismatch(AssertionError):
    """A compiled Hessian-vector product differs from the eager one beyond the error model."""


# ------------------------------------------------------------------ oracles (numpy only)


SCALE_FLOOR = 2.0**-10  # element scales: |x_i|, floored at this fraction of the input's rms


def element_scales(x: np.ndarray) -> np.ndarray:
    """Per-element magnitude ``|x_i|``, floored so that zeros still count (check_hvp's units)."""
    rms = float(np.sqrt(np.mean(np.square(x)))) if x.size else 0.0
    return np.maximum(np.abs(x), SCALE_FLOOR * rms if rms > 0 else 1.0)


@dataclass(frozen=True)
class Bound:
    allowed: float
    why: str


def hvp_bound(ops: int, entries: int, scales: Sequence[np.ndarray], hvps: Sequence[Sequence[np.ndarray]],
              fd_scale: float, grad_floor: float, w: np.ndarray) -> Bound:
    """The error model above, in element units: ``2 * rounding_terms(3 ops, n) * u * T``."""
    terms = OP_ROUNDING * max(1, PASSES * ops) + max(1, entries)
    mags = [float(np.max(np.abs(s * h), initial=0.0)) for hs in hvps for s, h in zip(scales, hs)
            if np.all(np.isfinite(h))]
    t = max([*mags, fd_scale, 0.0])
    absolute = grad_floor * float(np.sum(np.abs(w))) * max((float(np.max(s, initial=0.0)) for s in scales), default=1.0)
    allowed = 2 * (terms * U * t + absolute)
    return Bound(allowed, f"2 x ({terms:g} u x T={t:.3g} + floor {absolute:.3g}) ({PASSES * ops} ops, {entries} terms)")


def compare_hvp(claimed: Sequence[np.ndarray], eager: Sequence[np.ndarray], scales: Sequence[np.ndarray],
                bound: Bound, what: str) -> float:
    """``max_i |s_i (claimed - eager)_i| <= bound.allowed`` over every input; the observed ratio.

    Raises :class:`HvpMismatch` naming the input, the index, both values and the bound (a
    non-finite compiled value fails at once: the samples are where f is smooth)."""
    __tracebackhide__ = True
    worst, where = 0.0, None
    for j, (c, e, s) in enumerate(zip(claimed, eager, scales)):
        c, e = np.asarray(c, dtype=np.float64), np.asarray(e, dtype=np.float64)
        if c.shape != e.shape:
            raise HvpMismatch(f"{what}: H v for input {j} has shape {c.shape}, but the eager one has {e.shape}")
        bad = np.argwhere(~np.isfinite(c))
        if bad.size:
            i = tuple(int(k) for k in bad[0])
            raise HvpMismatch(f"{what}: H v for input {j} is {c[i]} at index {i}, but eager gives {e[i]:.9g} "
                              f"(finite: the samples keep f smooth)")
        d = np.abs(s * (c - e))
        if d.size and float(d.max()) > worst:
            worst = float(d.max())
            k = tuple(int(q) for q in np.unravel_index(int(np.argmax(d)), d.shape))
            where = (j, k, float(c[k]), float(e[k]))
    ratio = worst / bound.allowed if bound.allowed > 0 else (math.inf if worst > 0 else 0.0)
    if ratio > 1.0:
        assert where is not None
        j, k, cv, ev = where
        sign = (" (opposite sign)" if cv * ev < 0 else " (zero where eager is not)" if cv == 0 and ev != 0 else "")
        raise HvpMismatch(f"{what}: H v for input {j} at index {k} is {cv:.9g}, but eager gives {ev:.9g}{sign}: "
                          f"|s (compiled - eager)| = {worst:.3g} is {ratio:.3g}x the allowed {bound.allowed:.3g} "
                          f"[{bound.why}]")
    return ratio


def fd_tangents(check_hvp: Callable[..., Any], xs: Sequence[np.ndarray], out_shape: Sequence[int], w: np.ndarray,
                seed: int) -> list[np.ndarray]:
    """The tangents ``v`` check_hvp draws for ``seed`` (one tangent): it calls hvp before any
    gradient, so a capturing hvp gets them at the cost of the random draws."""

    class Captured(Exception):
        pass

    box: list[list[np.ndarray]] = []

    def capture(xs_: list[np.ndarray], w_: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        box.append([np.array(v, dtype=np.float64) for v in vs])
        raise Captured

    try:
        check_hvp(lambda xs_, w_: [np.zeros_like(x) for x in xs_], capture, list(xs), out_shape, seed=seed,
                  tangents=1, projections=1, cotangent=w)
    except Captured:
        return box[0]
    raise RuntimeError("check_hvp did not ask for a Hessian-vector product")  # pragma: no cover


def replay(hvps: Sequence[np.ndarray], vs: Sequence[np.ndarray]) -> Callable[..., list[np.ndarray]]:
    """An hvp for check_hvp that returns the compiled batch's products, computed for ``vs``."""

    def hvp(xs: list[np.ndarray], w: np.ndarray, got: list[np.ndarray]) -> list[np.ndarray]:
        if len(got) != len(vs) or any(not np.array_equal(a, b) for a, b in zip(got, vs)):
            raise RuntimeError("check_hvp asked for another tangent than the compiled batch computed (harness)")
        return [np.asarray(h, dtype=np.float64) for h in hvps]

    return hvp


def judge_against_fd(check_hvp: Callable[..., Any], grad: Callable[..., Any], hvps: Sequence[np.ndarray],
                     vs: Sequence[np.ndarray], xs: Sequence[np.ndarray], out_shape: Sequence[int], w: np.ndarray,
                     seed: int, derivative_error: float, mode: str) -> Any:
    """check_hvp of the compiled products (the same seed and cotangent as :func:`fd_tangents`)."""
    __tracebackhide__ = True
    return check_hvp(grad, replay(hvps, vs), list(xs), out_shape, seed=seed, tangents=1, projections=1,
                     cotangent=w, derivative_error=derivative_error, mode=mode)


# ------------------------------------------------------------------ compiled batches


def _slices(inputs: Sequence[Sequence[np.ndarray]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for xs in inputs:
        lo = out[-1][1] if out else 0
        out.append((lo, lo + len(xs)))
    return out


class Refused(Exception):
    """The compiled function's double backward raised torch.compile's refusal (AOT_REFUSAL)."""


class TorchHvpBatch:
    """One-op programs in one function of flat tensors (torch.jit.trace or torch.compile); one
    double backward (``autograd.grad`` with ``create_graph=True`` on the compiled outputs, then
    the gradient of ``<grad L, v>``) returns every program's H v (inputs are disjoint)."""

    def __init__(self, torch: Any, mode: str, cases: Sequence[Any], inputs: Sequence[Sequence[np.ndarray]],
                 counting: Callable[..., Any]) -> None:
        self.torch, self.mode = torch, mode
        self.fns = [c.program.build("torch", "float64") for c in cases]
        self.slices = _slices(inputs)
        self.shapes = [c.program.output_shape for c in cases]
        flat = [x for xs in inputs for x in xs]
        started = time.perf_counter()
        self.counter: Any = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript's deprecation and tracer warnings
            if mode == "torchscript":
                self.compiled = torch.jit.trace(self._batch, tuple(self._leaves(flat)), check_trace=False)
            else:
                torch._dynamo.reset()  # fresh caches (see test_compiled_backward.TorchBatch)
                self.counter = counting(torch, mode)
                self.compiled = torch.compile(self._batch, backend=self.counter)
        self.compile_s = time.perf_counter() - started

    def _batch(self, *flat: Any) -> tuple[Any, ...]:
        return tuple(fn(list(flat[lo:hi])) for fn, (lo, hi) in zip(self.fns, self.slices))

    def _leaves(self, xs: Sequence[np.ndarray]) -> list[Any]:
        t = self.torch
        return [t.tensor(x, dtype=t.float64, requires_grad=True) for x in xs]

    def hvp(self, flat_x: Sequence[np.ndarray], ws: Sequence[np.ndarray], vs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """H v per flat input; TorchScript runs three times (its profiling executor optimises and
        differentiates from the second run), the last run's products count."""
        t = self.torch
        leaves = self._leaves(flat_x)
        vts = [t.tensor(v, dtype=t.float64) for v in vs]
        hv: Sequence[Any] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(1 if self.counter else 3):
                runs = self.counter.runs if self.counter else 0
                outs = self.compiled(*leaves)
                if self.counter and self.counter.runs == runs:
                    raise AssertionError(f"torch.compile(backend={self.mode!r}) ran no compiled graph (eager fallback)")
                cot = [t.tensor(w, dtype=t.float64) for w in ws]
                gs = t.autograd.grad(outs, leaves, cot, create_graph=True, allow_unused=True, materialize_grads=True)
                pairs = [(g, v) for g, v in zip(gs, vts) if g.requires_grad]
                if not pairs:
                    return [np.zeros_like(x) for x in flat_x]
                try:
                    hv = t.autograd.grad([g for g, _ in pairs], leaves, [v for _, v in pairs], allow_unused=True,
                                         materialize_grads=True)
                except RuntimeError as exc:
                    if AOT_REFUSAL.search(str(exc)):
                        raise Refused(str(exc).strip().splitlines()[0]) from exc
                    raise
        return [h.detach().numpy(force=True).astype(np.float64) for h in hv]


def xla_unsupported(message: str) -> dict[int, str]:
    """Program index -> XLA's words, from 'Detected unsupported operations ... {{node .../op<k>/...}}'
    (the second derivative's ops are named under the tapes' scopes, then op<k>)."""
    if "unsupported operations" not in message:
        return {}
    words = re.search(r"on XLA_\w+: ([^\n]*?)\{\{node", message)
    return {int(k): words.group(1).strip() if words else message.splitlines()[0]
            for k in re.findall(r"\{\{node (?:[\w.\-]+/)*?op(\d+)/", message)}


class TfHvpBatch:
    """One-op programs in one tf.function with the nested GradientTapes inside (jit_compile per
    ``mode``); programs XLA cannot compile are dropped one by one, each with XLA's words."""

    def __init__(self, tf: Any, mode: str, cases: Sequence[Any], names: Sequence[str],
                 inputs: Sequence[Sequence[np.ndarray]], device: str) -> None:
        self.tf, self.mode, self.names, self.device = tf, mode, list(names), device
        self.fns = [c.program.build("tensorflow", "float64") for c in cases]
        self.slices = _slices(inputs)
        self.shapes = [c.program.output_shape for c in cases]
        self.dropped: dict[int, str] = {}
        flat = [x for xs in inputs for x in xs]
        started = time.perf_counter()
        for _ in range(len(cases) + 1):
            self.fn = tf.function(self._batch, jit_compile=(mode == "xla"))
            try:
                self.hvp(flat, [np.zeros(s) for s in self.shapes], [np.zeros_like(x) for x in flat])
                break
            except tf.errors.InvalidArgumentError as exc:
                found = xla_unsupported(str(exc))
                if mode != "xla" or not found or set(found) <= set(self.dropped):
                    raise
                self.dropped.update(found)
        self.compile_s = time.perf_counter() - started

    def _batch(self, flat: list[Any], ws: list[Any], vs: list[Any]) -> list[Any]:
        tf = self.tf
        zero = tf.UnconnectedGradients.ZERO
        with tf.GradientTape() as outer:
            outer.watch(flat)
            with tf.GradientTape() as inner:
                inner.watch(flat)
                outs = []
                for k, (fn, (lo, hi)) in enumerate(zip(self.fns, self.slices)):
                    with tf.name_scope(f"op{k}"):  # XLA names the node .../op<k>/<kernel>
                        outs.append(tf.zeros((), dtype=tf.float64) if k in self.dropped else fn(flat[lo:hi]))
            # A gather's gradient is a tf.IndexedSlices: densify it inside the outer recorder.
            gs = [tf.convert_to_tensor(g) for g in inner.gradient(outs, flat, output_gradients=ws,
                                                                   unconnected_gradients=zero)]
        hv = outer.gradient(gs, flat, output_gradients=vs, unconnected_gradients=zero)
        return [tf.convert_to_tensor(h) for h in hv]

    def hvp(self, flat_x: Sequence[np.ndarray], ws: Sequence[np.ndarray], vs: Sequence[np.ndarray]) -> list[np.ndarray]:
        tf = self.tf
        with tf.device(self.device):
            xs = [tf.constant(x, dtype=tf.float64) for x in flat_x]
            cot = [tf.zeros((), dtype=tf.float64) if k in self.dropped else tf.constant(w, dtype=tf.float64)
                   for k, w in enumerate(ws)]
            tan = [tf.constant(v, dtype=tf.float64) for v in vs]
            hv = self.fn(xs, cot, tan)
        return [np.asarray(h.numpy(), dtype=np.float64) for h in hv]


# ------------------------------------------------------------------ eager reference


def eager_hvp(framework: str, a: Any, fn: Callable[..., Any], xs: Sequence[np.ndarray], w: np.ndarray,
              vs: Sequence[np.ndarray], device: str) -> list[np.ndarray]:
    """Reverse-over-reverse H v in eager mode (test_second_order.py's reference mode)."""
    if framework == "torch":
        torch = a.module
        inputs = [a.tensor(x, "float64", device, requires_grad=True) for x in xs]
        gs = torch.autograd.grad(fn(inputs), inputs, grad_outputs=a.tensor(w, "float64", device), create_graph=True,
                                 allow_unused=True, materialize_grads=True)
        pairs = [(g, a.tensor(v, "float64", device)) for g, v in zip(gs, vs) if g.requires_grad]
        if not pairs:
            return [np.zeros_like(x) for x in xs]
        hv = torch.autograd.grad([g for g, _ in pairs], inputs, grad_outputs=[v for _, v in pairs],
                                 allow_unused=True, materialize_grads=True)
        return [np.asarray(h.detach().cpu().numpy(force=True), dtype=np.float64) for h in hv]
    tf = a.module
    zero = tf.UnconnectedGradients.ZERO
    with tf.device(a.device(device)):
        inputs = [a.tensor(x, "float64", device) for x in xs]
        with tf.GradientTape() as outer:
            outer.watch(inputs)
            with tf.GradientTape() as inner:
                inner.watch(inputs)
                out = fn(inputs)
            gs = [tf.convert_to_tensor(g) for g in inner.gradient(out, inputs, output_gradients=a.tensor(w, "float64", device),
                                                                  unconnected_gradients=zero)]
        hv = outer.gradient(gs, inputs, output_gradients=[a.tensor(v, "float64", device) for v in vs],
                            unconnected_gradients=zero)
    return [np.asarray(a.numpy(tf.convert_to_tensor(h)), dtype=np.float64) for h in hv]


# ------------------------------------------------------------------ outcomes (pickled between workers)


@dataclass
class OpOutcome:
    """What a chunk found for one op: failures, a refusal (not applicable), the classes checked,
    finite-difference checks and inconclusive ones, and the checks to replay into its test."""

    failures: list[str] = field(default_factory=list)
    raised: bool = False
    not_applicable: str | None = None
    classes: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    fd_checks: int = 0
    inconclusive: int = 0
    checks: dict[str, tuple[float, float]] = field(default_factory=dict)
    eager_ratio: float = 0.0  # compiled vs eager H v over its bound (evidence)
    eager_differs: list[str] = field(default_factory=list)

    def check(self, name: str, observed: float, tolerance: float) -> None:
        old = self.checks.get(name)
        if old is None or observed / tolerance > old[0] / old[1]:
            self.checks[name] = (observed, tolerance)


@dataclass
class ChunkOutcome:
    ops: dict[str, OpOutcome] = field(default_factory=dict)
    compile_s: float = 0.0
    run_s: float = 0.0

    def of(self, op: str) -> OpOutcome:
        return self.ops.setdefault(op, OpOutcome())
