"""First and second derivatives of the public-surface records (tf.math, tf.nn, torch.nn.functional).

The value suites (test_tf_math.py, test_tf_nn.py, test_torch_functional.py) check what each
function returns. This suite checks its derivatives, in eager float64 on the CPU, for every
record whose function is differentiable in a floating input (the table in
``_surface_derivatives``: each record's call as a function of float64 inputs, the inputs and why
they were chosen, kinks and domain edges kept away; the integer/boolean/piecewise-constant ones,
those without a float64 kernel and those that are already ops of the op library are listed there
with their reason and not checked here). Per record, one test per check:

* ``grad``: the reverse-mode gradient (tf.GradientTape / torch.autograd.grad, a vector-Jacobian
  product with a seeded random cotangent) against central finite differences (``check_vjp``);
* ``hvp-rr``: the Hessian-vector product by reverse over reverse (nested tapes / autograd.grad
  with create_graph=True) against finite differences of the framework's gradient (``check_hvp``);
* ``hvp-fr`` (torch only): forward over reverse (torch.func.jvp of torch.func.vjp). TensorFlow's
  ForwardAccumulator costs ~0.35 s a record here, so TensorFlow's records are checked in reverse
  over reverse only.

A linear or piecewise-linear record's H v must be exactly 0 (its second derivative is zero away
from its kinks). A framework that refuses a derivative with its documented error (torch's
"derivative for ... is not implemented", TensorFlow's "No gradient defined for operation") makes
that check not applicable with the message; anything else that raises is a violation.
TensorFlow's ``LookupError: gradient registry has no entry for: <Op>Grad`` (a differentiable
function's backward op has no gradient registered) is such a violation, as in
suites/autodiff/test_second_order.py.

Error model (``_surface_derivatives.Bounds``): f's absolute rounding ``ops * terms * eps *
max(1, max|f|)`` and the reverse pass's ``ops * terms * eps * max(1, max|g|)`` per record (its
chain of rounded operations and its longest sum), given to the finite-difference oracles, which
add their own truncation and rounding bounds.

The combinations ledger registers each record's checks (family = the namespace) and records each
once it held. Cost: one small input per record (TensorFlow's eager calls cost ~1 ms each); the
quick profile checks a rotating sample (``--dl-seed``) of one smooth and one zero-Hessian record
per namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import HarnessError, InconclusiveCheck, adapter, evidence, not_applicable, of_run

from . import _surface_derivatives as sd

DTYPE = "float64"
CLAIMS = {"tensorflow": "modules.surface-derivatives.tensorflow", "torch": "modules.surface-derivatives.torch"}
MODE = {"grad": "grad", "hvp-rr": "hvp-reverse-over-reverse", "hvp-fr": "hvp-forward-over-reverse"}


def _cases(ns: str, profile: str, seed: int) -> list[Any]:
    names = sd.quick_sample(ns, seed) if profile == "quick" else [s.name for s in sd.TABLES[ns] if s.differentiable]
    return [pytest.param(ns, n, c, id=f"{ns}.{n}-{c}") for n in names for c in sd.checks_of(ns)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    profile, seed = of_run(metafunc.config)
    fw = "torch" if "torch" in metafunc.fixturenames else "tensorflow"
    cases = [c for ns in sd.TABLES if sd.FRAMEWORK[ns] == fw for c in _cases(ns, profile, seed)]
    metafunc.parametrize(("case", "name", "check"), cases)


# --------------------------------------------------------------------------- second-order callables


def _torch_hvp(fn: Callable[[list[Any]], Any], mode: str) -> sd.HVP:
    a = adapter("torch")
    torch = a.module

    def ror(xs: list[np.ndarray], w: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        inputs = [a.tensor(x, DTYPE, "cpu", requires_grad=True) for x in xs]  # type: ignore[call-arg]
        gs = torch.autograd.grad(fn(inputs), inputs, grad_outputs=a.tensor(w, DTYPE, "cpu"), create_graph=True,
                                 allow_unused=True, materialize_grads=True)
        # a gradient that does not require grad does not depend on the inputs (a linear function)
        pairs = [(g, a.tensor(v, DTYPE, "cpu")) for g, v in zip(gs, vs) if g.requires_grad]
        if not pairs:
            return [np.zeros_like(x) for x in xs]
        hv = torch.autograd.grad([g for g, _ in pairs], inputs, grad_outputs=[v for _, v in pairs], allow_unused=True,
                                 materialize_grads=True)
        return [h.detach().cpu().numpy(force=True) for h in hv]

    def fwd(xs: list[np.ndarray], w: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        wt = a.tensor(w, DTYPE, "cpu")

        def gradient(*p: Any) -> Any:
            _, pull = torch.func.vjp(lambda *q: fn(list(q)), *p)
            return pull(wt)

        primals = tuple(a.tensor(x, DTYPE, "cpu") for x in xs)
        _, hv = torch.func.jvp(gradient, primals, tuple(a.tensor(v, DTYPE, "cpu") for v in vs))
        return [h.detach().cpu().numpy(force=True) for h in hv]

    return ror if mode == "hvp-rr" else fwd


def _tf_hvp(fn: Callable[[list[Any]], Any]) -> sd.HVP:
    a = adapter("tensorflow")
    tf = a.module
    zero = tf.UnconnectedGradients.ZERO

    def ror(xs: list[np.ndarray], w: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        with tf.device("/CPU:0"):
            inputs = [a.tensor(x, DTYPE, "cpu") for x in xs]
            with tf.GradientTape() as outer:
                outer.watch(inputs)
                with tf.GradientTape() as inner:
                    inner.watch(inputs)
                    out = fn(inputs)
                gs = [tf.convert_to_tensor(g) for g in inner.gradient(out, inputs, output_gradients=a.tensor(w, DTYPE, "cpu"),
                                                                       unconnected_gradients=zero)]
            hv = outer.gradient(gs, inputs, output_gradients=[a.tensor(v, DTYPE, "cpu") for v in vs],
                                unconnected_gradients=zero)
        return [a.numpy(tf.convert_to_tensor(h)) for h in hv]

    return ror


# --------------------------------------------------------------------------- one check


def _run(framework: str, module: Any, ns: str, name: str, check: str) -> None:
    spec = sd.spec(ns, name)
    assert spec.fn is not None and spec.inputs is not None
    family, labels = ns, list(sd.checks_of(ns))
    evidence.registers(family, name, labels, own=check)
    a = adapter(framework)
    fn: Callable[[list[Any]], Any] = lambda ts: spec.fn(module, ts)  # type: ignore[misc]
    xs = [np.asarray(x, dtype=np.float64) for x in spec.inputs()]
    f = lambda v: a.call(fn, v, DTYPE, "cpu")
    vjp = lambda v, w: a.vjp(fn, v, w, DTYPE, "cpu")
    try:
        fx = f(xs)
        bounds = sd.Bounds.of(spec, fx, vjp(xs, np.ones(fx.shape)))
        if check == "grad":
            ratio = sd.check_first_order(spec, f, vjp, xs, bounds)
            evidence.check(f"{ns}.{name} reverse mode vs finite differences", observed=ratio, tolerance=1.0)
        else:
            hvp = _torch_hvp(fn, check) if framework == "torch" else _tf_hvp(fn)
            res = sd.check_second_order(spec, vjp, hvp, xs, tuple(fx.shape), bounds, MODE[check])
            evidence.check(f"{ns}.{name} {MODE[check]} H v vs finite differences of the gradient",
                           observed=res.max_error_ratio, tolerance=1.0)
            if spec.kind in sd.ZERO_HESSIAN:
                evidence.check(f"{ns}.{name} {MODE[check]} H v is zero", observed=res.max_abs_hvp, tolerance=0.0)
                evidence.covers("hessian-zero")
    except InconclusiveCheck as e:
        raise HarnessError(f"{ns}.{name} {check}: finite differences cannot judge at the table's inputs ({e}); "
                           "the inputs must be changed (a harness problem, not a pass)") from e
    except (RuntimeError, NotImplementedError, LookupError) as e:
        if sd.is_refusal(framework, e, spec.own_ops):
            first = str(e).strip().splitlines()[0]
            not_applicable(f"{framework} refuses the {MODE[check]} derivative of {ns}.{name}: {first}",
                           cause=f"{framework} does not implement this derivative", subject=f"{ns}.{name}")
        raise
    evidence.note(kind=spec.kind, inputs=spec.why, f_error=bounds.f_error, derivative_error=bounds.derivative_error)
    evidence.covers(MODE[check])
    evidence.visits(family, name, check)


@pytest.mark.claim("modules.surface-derivatives.tensorflow")
def test_tensorflow_record_derivative(tf: Any, case: str, name: str, check: str) -> None:
    _run("tensorflow", tf, case, name, check)


@pytest.mark.claim("modules.surface-derivatives.torch")
def test_torch_record_derivative(torch: Any, case: str, name: str, check: str) -> None:
    _run("torch", torch, case, name, check)


# --------------------------------------------------------------------------- the table


def _value_records(ns: str) -> list[str]:
    if ns == sd.TF_MATH:
        from . import test_tf_math as m
        return sorted(m.RECORDS)
    if ns == sd.TF_NN:
        from . import test_tf_nn as n
        return sorted(n.RECORDS)
    from . import test_torch_functional as t
    return sorted(set(t.RECORD_IDS))


def _table(ns: str) -> None:
    table = sd.TABLES[ns]
    bad = sd.validate(table)
    assert not bad, f"the derivative table of {ns} is inconsistent: {bad}"
    names = {s.name for s in table}
    records = set(_value_records(ns))
    missing, stale = sorted(records - names), sorted(names - records)
    assert not missing, f"{ns} records of the value suite without a derivative entry: {missing}"
    assert not stale, f"{ns} derivative entries naming no record of the value suite: {stale}"
    counts = {k: sorted(s.name for s in table if s.kind == k) for k in sd.KINDS}
    evidence.note(records=len(table), **{f"{k.replace('-', '_')}_count": len(v) for k, v in counts.items()},
                  op_library=counts["op-library"], not_differentiable={s.name: s.why for s in table
                                                                       if s.kind == "not-differentiable"},
                  no_float64={s.name: s.why for s in table if s.kind == "no-float64"})
    evidence.covers("table-complete")


@pytest.mark.claim("modules.surface-derivatives.tensorflow")
@pytest.mark.parametrize("ns", [sd.TF_MATH, sd.TF_NN])
def test_tensorflow_table_names_every_record(tf: Any, ns: str) -> None:
    """Every record of the value suite is in the derivative table (checked, or listed with its reason)."""
    _table(ns)
    for s in sd.TABLES[ns]:
        assert callable(getattr(getattr(tf, ns.split(".")[1]), s.name, None)), f"{ns}.{s.name} is not public"


@pytest.mark.claim("modules.surface-derivatives.torch")
def test_torch_table_names_every_record(torch: Any) -> None:
    _table(sd.TORCH_F)
    import torch.nn.functional as F

    absent = [s.name for s in sd.TABLES[sd.TORCH_F] if not hasattr(F, s.name)]
    assert not absent, f"torch.nn.functional lacks {absent}"
