"""Second order for every op: Hessian-vector products against finite differences of the gradient.

For each op of :mod:`pytest_dlconform.programs`, per framework, in float64 and eager, two
second-order modes compute ``H v``, the Hessian of ``L(x) = <w, f(x)>`` times a tangent ``v``:

* ``reverse-over-reverse``: the gradient of ``<grad L, v>`` (torch: ``torch.autograd.grad``
  with ``create_graph=True``, twice; TensorFlow: nested ``tf.GradientTape``);
* ``forward-over-reverse``: the forward-mode derivative of the gradient along ``v`` (torch:
  ``torch.func.jvp`` of a ``torch.func.vjp``; TensorFlow: ``tf.autodiff.ForwardAccumulator``
  around a ``GradientTape``, the guide's Hessian-vector product).

The oracle (:func:`check_hvp`) compares ``H v`` with central differences of the framework's
own first-order reverse-mode gradient along ``v`` (Richardson-extrapolated, with a bound on
their rounding and truncation; the first-order gradient is checked against finite differences
of f by test_ops.py). Every registered sample of the op (each parameter class and input
regime, both sides of every kink) runs in every hypothesis example: the samples keep inputs
``KINK_MARGIN`` away from kinks, where each piece is smooth, so the second derivative exists
there. Piecewise-linear ops (relu, leaky_relu, hardtanh, relu6, hardsigmoid, abs) and linear
ops (``LINEAR_OPS``) have a second derivative of zero away from their kinks: their ``H v``
must be exactly 0.

Cost: one hypothesis example per test in ci (each runs the op's samples; every tangent costs
four gradients and one H v). TensorFlow's forward-over-reverse checks every parameter class
once in the ci profile (:func:`_samples`), every sample in thorough; the quick profile checks
one sample per op and mode, rotated by ``--dl-seed`` over the ci profile's samples.

A framework that refuses a second-order derivative with its documented "not implemented"
error (torch's ``derivative for ... is not implemented``, TensorFlow's ``No gradient defined
for operation``) makes that sample not applicable, with the framework's message; anything else
that raises is a violation. TensorFlow's ``LookupError: gradient registry has no entry for:
SoftsignGrad`` is a violation, not a refusal: tf.GradientTape's docstring documents nested
tapes for higher-order derivatives (and ForwardAccumulator over a tape for Hessian-vector
products), and softsign's first derivative, a differentiable op, simply has no gradient
registered (the cause of docs/findings.md finding 2). Finite differences that cannot judge (inconclusive) are counted;
a test where most are is a harness error.
"""

from __future__ import annotations

import re
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
    budget,
    check_hvp,
    evidence,
    not_applicable,
    quick_selection,
    scaled,
)
from pytest_dlconform.api.programs import LINEAR_OPS, PIECEWISE_LINEAR, ProgramCase, coverage_key, ops_for, sample_cases, samples

EXAMPLES = 1  # hypothesis examples per test in the ci profile; each runs every sample of the op
TANGENTS = 1  # random tangents v per sample (each: 4 gradients and one H v)
PROJECTIONS = 1  # random projections of H v per tangent, beside each input's own and the error's
DTYPE = "float64"
EPS = float(np.finfo(np.float64).eps)
TERMS_ULPS = 4.0  # see _gradient_floor
TORCH = "torch"
TF = "tensorflow"
ROR = "reverse-over-reverse"
FOR = "forward-over-reverse"
#: Ops whose second derivative is documented zero away from their kinks (piecewise linear).
ZERO_HESSIAN = PIECEWISE_LINEAR | LINEAR_OPS
#: Regimes where finite differences of the gradient mostly cannot judge (see _samples).
NOISY_REGIMES = frozenset({"tiny", "large"})
#: The quick profile's last resorts (see _samples): also "mixed" (8 % inconclusive in a ci run).
QUICK_NOISY = NOISY_REGIMES | {"mixed"}
QUICK_JUDGED = 1  # judged samples per op and mode in the quick profile
#: The frameworks' documented refusals of a derivative they do not implement.
REFUSALS = {
    TORCH: re.compile(r"derivative for .* is not implemented|not implemented for .*(double backward|forward AD)|"
                      r"does not support (it|forward AD)|Trying to use forward AD", re.S),
    # Not "gradient registry has no entry for": that LookupError is raised where the backward op
    # of a differentiable op has no gradient registered (SoftsignGrad), a violation (see above).
    TF: re.compile(r"No gradient defined for operation", re.S),
}

HVPFn = Callable[[list[np.ndarray], np.ndarray, list[np.ndarray]], list[np.ndarray]]


# --------------------------------------------------------------------------- second-order modes


def _torch_hvp(fn: Callable, mode: str, device: str) -> HVPFn:
    a = adapter(TORCH)
    torch = a.module

    def ror(xs: list[np.ndarray], w: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        inputs = [a.tensor(x, DTYPE, device, requires_grad=True) for x in xs]
        gs = torch.autograd.grad(fn(inputs), inputs, grad_outputs=a.tensor(w, DTYPE, device), create_graph=True,
                                 allow_unused=True, materialize_grads=True)
        # A gradient that does not require grad does not depend on the inputs (a linear op):
        # its derivative is zero, and autograd.grad refuses to differentiate it.
        pairs = [(g, a.tensor(v, DTYPE, device)) for g, v in zip(gs, vs) if g.requires_grad]
        if not pairs:
            return [np.zeros_like(x) for x in xs]
        hv = torch.autograd.grad([g for g, _ in pairs], inputs, grad_outputs=[v for _, v in pairs],
                                 allow_unused=True, materialize_grads=True)
        return [_values(h) for h in hv]

    def fwd(xs: list[np.ndarray], w: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        wt = a.tensor(w, DTYPE, device)

        def gradient(*p: Any) -> Any:
            _, pull = torch.func.vjp(lambda *q: fn(list(q)), *p)
            return pull(wt)

        primals = tuple(a.tensor(x, DTYPE, device) for x in xs)
        _, hv = torch.func.jvp(gradient, primals, tuple(a.tensor(v, DTYPE, device) for v in vs))
        return [_values(h) for h in hv]

    return ror if mode == ROR else fwd


def _values(t: Any) -> np.ndarray:
    """A torch result's values. ``force=True``: abs's double backward returns an internal
    ZeroTensor, which ``Tensor.numpy()`` refuses ("Cannot convert a ZeroTensor to numpy"); the
    values are what this claim checks (the refusal is a finding of its own)."""
    return np.asarray(t.detach().cpu().numpy(force=True))


def _tf_hvp(fn: Callable, mode: str, device: str) -> HVPFn:
    a = adapter(TF)
    tf = a.module
    zero = tf.UnconnectedGradients.ZERO

    def gradient(inputs: list[Any], wt: Any) -> list[Any]:
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = fn(inputs)
        # A gather's gradient is a tf.IndexedSlices: densify it (inside the outer recorder).
        return [tf.convert_to_tensor(g) for g in tape.gradient(out, inputs, output_gradients=wt,
                                                                unconnected_gradients=zero)]

    def hvp(xs: list[np.ndarray], w: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        with tf.device(a.device(device)):
            inputs = [a.tensor(x, DTYPE, device) for x in xs]
            wt, vts = a.tensor(w, DTYPE, device), [a.tensor(v, DTYPE, device) for v in vs]
            if mode == ROR:
                with tf.GradientTape() as outer:
                    outer.watch(inputs)
                    gs = gradient(inputs, wt)
                hv = outer.gradient(gs, inputs, output_gradients=vts, unconnected_gradients=zero)
            else:
                with tf.autodiff.ForwardAccumulator(inputs, vts) as acc:
                    gs = gradient(inputs, wt)
                hv = [acc.jvp(g, unconnected_gradients=zero) for g in gs]
        return [a.numpy(tf.convert_to_tensor(h)) for h in hv]

    return hvp


# --------------------------------------------------------------------------- one sample


class Refused(Exception):
    """The framework refused the second-order derivative with its documented error."""


def _check(framework: str, mode: str, device: str, case: ProgramCase, seed: int, op: str) -> tuple[bool, float]:
    """(inconclusive, max |s * H v|) for one sample; raises Refused or a violation."""
    a = adapter(framework)
    fn = case.program.build(framework, DTYPE)
    make = _torch_hvp if framework == TORCH else _tf_hvp
    hvp = _refusing(make(fn, mode, device), framework)
    grad = lambda xs, w: a.vjp(fn, xs, w, DTYPE, device)
    try:
        result = check_hvp(grad, hvp, case.inputs, case.program.output_shape, seed=seed, tangents=TANGENTS,
                           projections=PROJECTIONS, derivative_error=_gradient_floor(case),
                           mode=f"{framework} {mode}")
    except InconclusiveCheck:
        return True, float("nan")
    evidence.check(f"{op} {mode} H v vs finite differences of the gradient", observed=result.max_error_ratio,
                   tolerance=1.0, projections=result.projections)
    if op in ZERO_HESSIAN:
        evidence.check(f"{op} {mode} H v is zero", observed=result.max_abs_hvp, tolerance=0.0)
        assert result.max_abs_hvp == 0.0, (
            f"{op}: max |H v|={result.max_abs_hvp:.3g} from {framework} {mode}, but should be 0: the op is "
            f"{'piecewise ' if op in PIECEWISE_LINEAR else ''}linear, so its second derivative is zero away from "
            f"its kinks (finite differences of the gradient: max {result.max_abs_fd:.3g})")
    return False, result.max_abs_hvp


def _gradient_floor(case: ProgramCase) -> float:
    """Absolute rounding of each gradient element per unit ``||w||_1``: the error model's
    ``derivative_error_bound`` plus ``TERMS_ULPS`` ulps of order-one terms. A saturated
    sigmoid's gradient ``y (1 - y)`` and tanh's ``1 - y**2`` are computed from an output
    ``y ~ 1`` carrying its own rounding (absolute ``eps``, relative ``eps / (1 - y)``): the first-order
    suite's rtol hides that, the gradient's finite differences (divided by the step) do not."""
    return case.program.derivative_error_bound(case.inputs) + TERMS_ULPS * EPS


def _refusing(hvp: HVPFn, framework: str) -> HVPFn:
    def call(xs: list[np.ndarray], w: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        try:
            return hvp(xs, w, vs)
        except (RuntimeError, NotImplementedError, LookupError) as e:
            if REFUSALS[framework].search(str(e)):
                raise Refused(str(e).strip().splitlines()[0]) from e
            raise

    return call


# --------------------------------------------------------------------------- one op


class Ledger:
    """What one test visited, how many checks were inconclusive and which samples refused."""

    def __init__(self, framework: str, mode: str) -> None:
        self.framework, self.mode = framework, mode
        self.visits: Counter[tuple[tuple[str, str], ...]] = Counter()
        self.noisy: Counter[tuple[tuple[str, str], ...]] = Counter()
        self.refused: dict[str, str] = {}
        self.classes: set[str] = set()

    def visit(self, sample: Any, inconclusive: bool) -> None:
        key = tuple(coverage_key(self.framework, self.mode, sample).items())
        self.visits[key] += 1
        self.noisy[key] += int(inconclusive)
        if not inconclusive:
            self.classes.add(f"{sample.params.label} [{sample.regime}]")

    def finish(self, op: str) -> None:
        rows = [{**dict(k), "count": n, "inconclusive": self.noisy[k]} for k, n in sorted(self.visits.items())]
        checks, noisy = sum(self.visits.values()), sum(self.noisy.values())
        evidence.note(coverage=rows, hvp_checks=checks, hvp_inconclusive=noisy, samples_checked=sorted(self.classes),
                      **({"samples_not_applicable": self.refused} if self.refused else {}))
        if self.refused and not self.visits:
            reason = next(iter(self.refused.values()))
            not_applicable(f"{self.framework} refuses the {self.mode} derivative of {op}: {reason}",
                           cause=f"{self.framework} does not implement this second-order derivative", subject=op)
        if checks == 0 or 2 * noisy > checks:
            raise HarnessError(f"finite differences of the gradient were inconclusive in {noisy} of {checks} samples "
                               f"of {op}: they cannot judge its second derivative (a harness problem, not a pass)")
        evidence.covers(self.mode)


def _draw(data: st.DataObject, sample: Any) -> ProgramCase:
    case = data.draw(sample_cases(sample), label=f"{sample.op} {sample.params.label} {sample.regime}")
    note(f"{sample.op} [{sample.params.label}, {sample.regime}]: {case!r}")
    return case


def _samples(framework: str, mode: str, op: str, profile: str = "ci", seed: int = 0) -> list[Any]:
    """The samples a run of ``profile`` checks (a fixed choice, never a random one).

    Every registered sample, except TensorFlow's forward-over-reverse in the ci profile:
    every parameter class once, each with its last registered sample outside the "tiny" and
    "large" regimes where it has one (the later regimes: mixed, dyadic with exact zeros and
    ties, both sides of kinks; at tiny inputs the gradient's change along v is below its
    rounding, and large ones saturate, so finite differences cannot judge there).
    ForwardAccumulator traces a JVP function per op and shape (~0.35 s a sample here, three
    times the nested tapes); the thorough profile runs every sample.

    The quick profile judges one sample per op and mode (:data:`QUICK_JUDGED`): it goes
    through the ci profile's samples in a rotated order, those outside the noisy regimes
    ("tiny", "large", "mixed": where finite differences of the gradient are most often
    inconclusive) first, starting at number ``(seed + k) % n`` of them, with ``k`` = 0 for
    reverse-over-reverse and ``n // 2`` for forward-over-reverse, and stops at the first
    one finite differences could judge. The two modes of one run take different samples,
    and ``n`` successive ``--dl-seed`` values start at every one."""
    every = samples(op)
    if scaled(EXAMPLES) > EXAMPLES:
        return every
    ci = every
    if framework == TF and mode == FOR:
        chosen: dict[Any, Any] = {}
        for s in every:
            if s.params not in chosen or s.regime not in NOISY_REGIMES:
                chosen[s.params] = s
        ci = list(chosen.values())
    if profile != "quick":
        return ci
    judged = [s for s in ci if s.regime not in QUICK_NOISY]
    n = len(judged) or 1
    start = (seed + (n // 2 if mode == FOR else 0)) % n
    return judged[start:] + judged[:start] + [s for s in ci if s.regime in QUICK_NOISY]


def _quota(profile: str) -> int | None:
    """How many judged samples end a test's example (None: every chosen sample)."""
    return QUICK_JUDGED if profile == "quick" else None


def _run(framework: str, device: str, op: str, mode: str, settings: Any, examples: int = EXAMPLES) -> None:
    ledger = Ledger(framework, mode)
    chosen = _samples(framework, mode, op, settings.profile, settings.seed)
    quota = _quota(settings.profile)
    evidence.note(samples_registered=len(samples(op)), samples_in_this_profile=quota or len(chosen))

    @budget(examples)
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        judged = 0
        for sample in chosen:
            if quota is not None and judged >= quota:
                break
            case = _draw(data, sample)
            seed = data.draw(st.integers(0, 2**16), label="seed")
            try:
                inconclusive, _ = _check(framework, mode, device, case, seed, op)
            except Refused as e:
                ledger.refused[f"{sample.params.label} [{sample.regime}]"] = str(e)
                continue
            ledger.visit(sample, inconclusive)
            judged += not inconclusive

    prop()
    ledger.finish(op)


# --------------------------------------------------------------------------- the tests


def _mode_op(item: Any) -> tuple[str, str] | None:
    """("framework/derivative mode", op) of a test of this module (its mode in the quick
    profile's sample): test_torch_op_hvp_reverse_over_reverse -> torch/reverse-over-reverse."""
    def mode(i: Any) -> str:
        framework = TORCH if i.originalname.startswith("test_torch") else TF
        return f"{framework}/{ROR if i.originalname.endswith('reverse_over_reverse') else FOR}"

    return quick_selection.callspec_pair(item, __name__, mode)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # The quick profile checks, per framework and mode, one op of every op family, rotated by
    # --dl-seed (profiles.quick_op_sample), one judged sample each (QUICK_JUDGED); ci every op.
    quick_selection.register_suite(metafunc, "second-order", _mode_op)


@pytest.mark.claim("autodiff.gradient.second-order")
@pytest.mark.parametrize("op", ops_for(TORCH, "reverse-fd"))
def test_torch_op_hvp_reverse_over_reverse(torch, dl_device, dl_settings, op):
    _run(TORCH, dl_device, op, ROR, dl_settings)


@pytest.mark.claim("autodiff.gradient.second-order")
@pytest.mark.parametrize("op", ops_for(TORCH, "reverse-fd"))
def test_torch_op_hvp_forward_over_reverse(torch, dl_device, dl_settings, op):
    _run(TORCH, dl_device, op, FOR, dl_settings)


@pytest.mark.claim("autodiff.gradient.second-order")
@pytest.mark.parametrize("op", ops_for(TF, "reverse-fd"))
def test_tensorflow_op_hvp_reverse_over_reverse(tf, dl_device, dl_settings, op):
    _run(TF, dl_device, op, ROR, dl_settings)


@pytest.mark.claim("autodiff.gradient.second-order")
@pytest.mark.parametrize("op", ops_for(TF, "reverse-fd"))
def test_tensorflow_op_hvp_forward_over_reverse(tf, dl_device, dl_settings, op):
    _run(TF, dl_device, op, FOR, dl_settings)
