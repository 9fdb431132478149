"""modules.torch.module-contract: generic properties of every public torch.nn module class.

Inputs (ModuleInfo style, after the idea of torch/testing/_internal/common_modules.py): the records of
``_torch_module_records`` name each class with one to three documented constructor variants, the
inputs its docstring's Shape section accepts and the output shape(s) that section states. One test
per record runs every property below in float64 on CPU and fails naming the property:

- shape: the forward's outputs have the documented shapes (and floating outputs are float64); a
  Lazy* module is uninitialised before its first forward, then becomes its documented non-lazy class
  (``cls_to_become``, e.g. LazyLinear -> Linear) with materialised parameters (lazy-materialize);
- train-eval: a module without randomness or running statistics gives bitwise the same output in
  train() and eval() (both are ``train(mode)``, which only sets ``.training``); for the Dropout family,
  RReLU, recurrent/Transformer layers with dropout and modules with running statistics, eval() output
  is deterministic: two eval calls under different torch seeds are bitwise equal and leave every
  buffer unchanged (FractionalMaxPool samples its windows in eval too: there the two calls use one seed);
- state_dict-roundtrip: a module built under another seed (a Lazy* one still uninitialised), after
  ``load_state_dict(m.state_dict(), strict=True)``, has the same keys and gives bitwise the same eval
  output under the same seed; deepcopy, pickle: ``copy.deepcopy`` and a pickle round trip likewise;
- to-float32, to-float64: ``Module.float()`` / ``Module.to(torch.float64)`` cast every floating
  parameter and buffer (documented for Module.to: "only floating point ... will be cast"; integer
  buffers keep their dtype); the widening is exact (bitwise equal values); the float32 forward on the
  float32-rounded inputs agrees with the float64 forward within the float32 error model below;
- zero_grad: after a backward pass, ``zero_grad()`` leaves every parameter's ``.grad`` None
  (``set_to_none=True`` is the documented default);
- gradcheck-input, gradcheck-params: the reverse-mode gradient with respect to the float inputs and
  every parameter against central finite differences of the forward (``check_vjp``, its error model
  in checks/gradients), in train mode with a fixed seed before every evaluation (so a random module's
  mask is one fixed function). Where the docs define the gradient differently from the forward's
  derivative, the oracle follows the docs: Embedding's ``padding_idx`` row "does not contribute to
  the gradient" (the finite differences hold that row constant) and ``scale_grad_by_freq`` scales a
  row's gradient "by the inverse of frequency of the words in the mini-batch" (the claimed gradient
  is multiplied back by the count);
- hvp: for the twice-differentiable records (smooth activations, affine maps, convolutions,
  normalisation, attention, recurrent cells), Hessian-vector products (double backward) against central
  differences of the gradient (``check_hvp``);
- table-complete: the table names every public torch.nn Module class except the losses (another
  claim) and a short list of out-of-scope names, each with its reason.

Error model (float32 against float64, and the float64 forward's own rounding ``f_error`` that the
finite differences allow for). Each record states ``ops``, the length of its longest chain of
rounded operations (counting the rounding of the inputs and parameters to float32 as two more;
recurrent layers: about 12 per step and layer, times T = 5 steps and the layers; attention stacks:
about 40 per layer with one attention, 60 with two), ``fan``, its longest single reduction, and
``gain``, a bound on how much the module amplifies a relative perturbation of its intermediates (1
for affine maps and activations with |f'| <= 1; 4 for normalisation, which divides by a standard
deviation of at least 1/4 at the records' inputs; 2 for recurrent layers, whose saturating gates
contract; 8 for attention stacks: softmax and LayerNorm twice). An output entry computed from a
reduction is a sum of at most ``fan`` terms each bounded by ``W X`` (W the largest |parameter| or
1 if none, X the largest |input|), so its rounding is at most ``(4 ops + fan) u`` times
``M = gain (max|y| + fan W X)`` (Higham ch. 3, through
``tolerance(dtype, ops, reduction=fan, magnitude=M)``: rtol relative to the result plus that
absolute floor). The same bound with ``u(float64)`` is ``check_vjp``'s ``f_error``, and
``rtol64 gain fan max(1,W) max(1,X)`` its ``derivative_error`` (the backward pass's per-term
rounding). At the records' inputs the bound stays below 1/200 of the output (largest for the
Transformer stacks), so zeros, sign flips and a 1% scaling all fail (``assert_close`` records a bound
that would accept one of them as inconclusive, never as held).

Gradients: the inputs are distinct grid values (``input_values``: no ties for max pooling, at least
0.02 from every kink the record names), so the finite differences are conclusive; a module with more
than MAX_SEPARATE_PARAMETERS parameter tensors has them checked as one flattened vector (one probe
direction per checked array). Left out, one line each: Embedding(max_norm) gradients (the forward
renormalises the weight in place, as documented, so the point moves under finite differences);
FractionalMaxPool's float32 values (it draws its pooling windows in the input's dtype, so float32 and
float64 pool different windows; dtypes are still checked); second order for TransformerDecoderLayer
with dropout=0 (its CPU attention kernel has no double backward, and the docs do not promise one);
sparse=True Embedding gradients (sparse tensors, not this oracle's dense arrays).
"""

from __future__ import annotations

import copy
import inspect
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import Tolerance, assert_close, assert_equal, check_hvp, check_vjp, evidence, tolerance

from . import _torch_module_records as records

CLAIM = "modules.torch.module-contract"
FAMILY = "torch.nn modules"  # the combinations ledger's family of these records
RECORDS = records.RECORDS
SEED, OTHER_SEED, MASK_SEED = 0, 12345, 7


class PropertyFailed(AssertionError):
    pass


class _Property:
    """Context: a failure (an oracle's AssertionError or an exception from torch) names the property."""

    def __init__(self, rec: records.Rec, name: str) -> None:
        self.rec, self.name = rec, name

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, PropertyFailed):
            return False
        from pytest_dlconform.api import HarnessError, InconclusiveCheck

        if isinstance(exc, (HarnessError, InconclusiveCheck, ImportError, NameError)):
            return False
        raise PropertyFailed(f"{self.rec.id}: property {self.name}: {type(exc).__name__}: {exc}") from exc


# ----------------------------------------------------------------------------- building and calling


def construct(torch: Any, rec: records.Rec, seed: int) -> Any:
    """The record's module in float64 (factory kwarg ``dtype`` where the class takes one)."""
    torch.manual_seed(seed)
    if rec.build is not None:
        return rec.build(torch).to(torch.float64)
    cls = getattr(torch.nn, rec.name)
    kwargs = dict(rec.kwargs)
    if "dtype" in inspect.signature(cls.__init__).parameters:
        return cls(*rec.args, **kwargs, dtype=torch.float64)
    return cls(*rec.args, **kwargs).to(torch.float64)


def make_inputs(torch: Any, rec: records.Rec, dtype: Any = None) -> tuple[list[Any], list[bool]]:
    """The forward's positional inputs and which of them are differentiable float inputs."""
    dtype = dtype or torch.float64
    ins: list[Any] = []
    diff: list[bool] = []
    for k, spec in enumerate(rec.inputs):
        if spec.kind == "F":
            ins.append(torch.tensor(records.input_values(spec.shape, 100 + k, rec.kinks), dtype=dtype))
            diff.append(True)
        elif spec.kind == "I":
            ins.append(torch.tensor(np.random.default_rng(200 + k).integers(0, spec.high, spec.shape)))
            diff.append(False)
        elif spec.kind == "C":
            ins.append(torch.tensor(spec.value))
            diff.append(False)
        else:  # "U": MaxUnpool's (values, indices) from max pooling a float input
            x = torch.tensor(records.input_values(spec.shape, 100 + k), dtype=dtype)
            pool = getattr(torch.nn.functional, f"max_pool{len(spec.shape) - 2}d")
            values, indices = pool(x, spec.high, return_indices=True)
            ins += [values.detach(), indices]
            diff += [True, False]
    return ins, diff


def flat_tensors(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat_tensors(o)]
    return [] if out is None else [out]


def forward(torch: Any, rec: records.Rec, module: Any, ins: Sequence[Any], seed: int = MASK_SEED) -> list[Any]:
    """Outputs (flattened) of one call; inputs are cloned (inplace modules write into them)."""
    torch.manual_seed(seed)
    args = [x.clone() if x.is_floating_point() else x for x in ins]
    out = rec.call(module, *args, **rec.call_kwargs) if rec.call else module(*args, **rec.call_kwargs)
    return flat_tensors(out)


def host(ts: Sequence[Any]) -> list[np.ndarray]:
    return [t.detach().cpu().numpy() for t in ts]


def _same(rec: records.Rec, what: str, a: Sequence[Any], b: Sequence[Any]) -> None:
    assert len(a) == len(b), f"{rec.id}: {what}: {len(a)} outputs against {len(b)}"
    for i, (x, y) in enumerate(zip(host(a), host(b))):
        assert_equal(x, y, what=f"{rec.id}: {what} (output {i})")


def _floating(torch: Any, module: Any) -> list[tuple[str, Any]]:
    return [(n, t) for n, t in [*module.named_parameters(), *module.named_buffers()] if t.is_floating_point()]


# ----------------------------------------------------------------------------- the error model


def magnitude(rec: records.Rec, module: Any, ins: Sequence[Any], outs: Sequence[Any]) -> tuple[float, float, float]:
    """(M, W, X) of the module docstring's error model, from the float64 module and its inputs."""
    params = [p for p in module.parameters() if p.numel()]
    w = max((float(p.detach().abs().max()) for p in params), default=1.0)
    floats = [x for x in ins if x.is_floating_point() and x.numel()]
    x = max((float(t.abs().max()) for t in floats), default=1.0)
    y = max((float(t.detach().abs().max()) for t in outs if t.is_floating_point() and t.numel()), default=0.0)
    return rec.gain * (y + rec.fan * w * x), w, x


def model_tolerance(rec: records.Rec, dtype: str, mag: float) -> Tolerance:
    tol = tolerance(dtype, ops=rec.ops + 2, reduction=rec.fan, magnitude=mag)
    return Tolerance(tol.rtol, f"{rec.id}: {tol.why} (module docstring: ops, fan, gain={rec.gain:g})", tol.atol,
                     tol.dtype)


def check_float32(rec: records.Rec, got32: Sequence[np.ndarray], want64: Sequence[np.ndarray], mag: float) -> float:
    """Each float32 output against the float64 one within the float32 error model; the worst
    error relative to rtol."""
    __tracebackhide__ = True
    tol = model_tolerance(rec, "float32", mag)
    worst = 0.0
    assert len(got32) == len(want64), f"{rec.id}: float32 module gives {len(got32)} outputs, float64 {len(want64)}"
    for i, (a, e) in enumerate(zip(got32, want64)):
        if np.asarray(e).dtype.kind != "f":
            continue
        assert np.asarray(a).dtype == np.float32, f"{rec.id}: float32 output {i} has dtype {np.asarray(a).dtype}"
        rel = assert_close(np.asarray(a, dtype=np.float64), e, tol, what=f"{rec.id}: float32 output {i} vs float64",
                           name="float32 vs float64 module output")
        worst = max(worst, rel / tol.rtol)
    return worst


def check_shapes(rec: records.Rec, shapes: Sequence[tuple[int, ...]]) -> None:
    __tracebackhide__ = True
    got = [tuple(s) for s in shapes]
    want = [tuple(s) for s in rec.out]
    assert got == want, f"{rec.id}: output shapes {got}, but the docstring's Shape section gives {want}"


# ----------------------------------------------------------------------------- gradients


class _Call:
    """A module whose forward is the record's call, so torch.func.functional_call can substitute
    the parameters of the wrapped module (ModuleList/ParameterList have no forward)."""

    def __new__(cls, torch: Any, rec: records.Rec, module: Any) -> Any:
        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = module

            def forward(self, *args: Any) -> Any:
                return rec.call(self.inner, *args, **rec.call_kwargs) if rec.call else self.inner(*args,
                                                                                                  **rec.call_kwargs)
        return Wrapped()


#: Modules with more parameter tensors than this have them checked as one flattened vector: check_vjp
#: probes one direction per input (its own gradient's), so a Transformer's 30 tensors would cost 120
#: forward calls; the flattened vector's own-gradient direction still shows a uniformly scaled
#: gradient, and the random directions a wrong part of it.
MAX_SEPARATE_PARAMETERS = 4


def grad_problem(torch: Any, rec: records.Rec, module: Any, ins: Sequence[Any], diff: Sequence[bool]) -> dict[str, Any]:
    """f, vjp, grad, hvp closures over numpy arrays: the differentiable inputs then the parameters
    (each, or all flattened into one vector where there are more than MAX_SEPARATE_PARAMETERS)."""
    wrapped = _Call(torch, rec, module)
    named = dict(module.named_parameters())
    names = [n for n, p in named.items() if p.requires_grad]
    packed = len(names) > MAX_SEPARATE_PARAMETERS
    shapes = [tuple(named[n].shape) for n in names]
    x_idx = [i for i, d in enumerate(diff) if d]
    xs0 = [ins[i].detach().cpu().numpy().copy() for i in x_idx]
    ps0 = [named[n].detach().cpu().numpy().copy() for n in names]
    if packed:
        ps0 = [np.concatenate([p.reshape(-1) for p in ps0])]
    frozen = _frozen_rows(rec)
    counts = _row_counts(rec, ins)

    def tensors(xs: Sequence[np.ndarray], grad: bool) -> tuple[list[Any], list[Any], dict[str, Any]]:
        ts = [torch.tensor(np.asarray(a), dtype=torch.float64, requires_grad=grad) for a in xs]
        args = list(ins)
        for j, i in enumerate(x_idx):
            args[i] = ts[j]
        ptensors = ts[len(x_idx):]
        if packed:
            sizes = [int(np.prod(sh)) for sh in shapes]
            ptensors = [v.reshape(sh) for v, sh in zip(torch.split(ptensors[0], sizes), shapes)]
        return ts, args, dict(zip(names, ptensors))

    def run(args: Sequence[Any], params: dict[str, Any], hold: bool) -> Any:
        if hold:
            for name, row in frozen:  # documented: this row does not contribute to the gradient
                keep = torch.tensor(named[name].detach().cpu().numpy()[row])
                p = params[name].clone()
                p[row] = keep
                params[name] = p
        torch.manual_seed(MASK_SEED)
        outs = flat_tensors(torch.func.functional_call(wrapped, {f"inner.{k}": v for k, v in params.items()},
                                                       tuple(a.clone() if a.is_floating_point() else a for a in args)))
        return torch.cat([o.reshape(-1) for o in outs if o.is_floating_point()])

    def f(xs: Sequence[np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            _, args, params = tensors(xs, False)
            return run(args, params, hold=True).detach().cpu().numpy()

    def grads(xs: Sequence[np.ndarray], w: np.ndarray, create: bool = False) -> tuple[list[Any], list[Any]]:
        ts, args, params = tensors(xs, True)
        y = run(args, params, hold=False)  # the framework's own gradient: no row held constant
        gs = torch.autograd.grad(y, ts, torch.tensor(w), allow_unused=True, create_graph=create)
        return ts, [torch.zeros_like(t) if g is None else g for g, t in zip(gs, ts)]

    def vjp(xs: Sequence[np.ndarray], w: np.ndarray) -> list[np.ndarray]:
        _, gs = grads(xs, w)
        out = [g.detach().cpu().numpy() for g in gs]
        for name, cnt in counts.items():  # documented scale_grad_by_freq: undo the 1/count
            j = len(x_idx) + names.index(name)
            out[j] = out[j] * np.maximum(cnt, 1)[:, None]
        return out

    def hvp(xs: Sequence[np.ndarray], w: np.ndarray, vs: Sequence[np.ndarray]) -> list[np.ndarray]:
        ts, gs = grads(xs, w, create=True)
        dot = sum((g * torch.tensor(v)).sum() for g, v in zip(gs, vs) if g.requires_grad)
        if not isinstance(dot, torch.Tensor):
            return [np.zeros_like(np.asarray(v)) for v in vs]
        hs = torch.autograd.grad(dot, ts, allow_unused=True)
        return [np.zeros_like(np.asarray(v)) if h is None else h.detach().cpu().numpy() for h, v in zip(hs, vs)]

    labels = [f"input {i}" for i in x_idx]
    labels += [f"all {len(names)} parameters, flattened"] if packed else [f"parameter {n}" for n in names]
    return {"f": f, "vjp": vjp, "hvp": hvp, "grad": lambda xs, w: [g.detach().cpu().numpy() for g in grads(xs, w)[1]],
            "xs": xs0 + ps0, "names": labels, "n_inputs": len(x_idx), "n_params": len(names)}


def _frozen_rows(rec: records.Rec) -> list[tuple[str, int]]:
    pad = rec.kwargs.get("padding_idx")
    return [("weight", pad)] if rec.name == "Embedding" and pad is not None else []


def _row_counts(rec: records.Rec, ins: Sequence[Any]) -> dict[str, np.ndarray]:
    if rec.name == "Embedding" and rec.kwargs.get("scale_grad_by_freq"):
        idx = ins[0].cpu().numpy().reshape(-1)
        return {"weight": np.bincount(idx, minlength=rec.kwargs["num_embeddings"])}
    return {}


# ----------------------------------------------------------------------------- the properties


def check_record(torch: Any, rec: records.Rec) -> dict[str, Any]:
    """Every property of the module docstring for one record; returns evidence values."""
    __tracebackhide__ = True
    ins, diff = make_inputs(torch, rec)
    m = construct(torch, rec, SEED)
    notes: dict[str, Any] = {}

    with _Property(rec, "shape"):
        if rec.lazy:
            assert any(torch.nn.parameter.is_lazy(p) for p in m.parameters()), (
                f"{rec.id}: a Lazy module has no uninitialised parameter before its first forward")
        outs = forward(torch, rec, m, ins)
        check_shapes(rec, [o.shape for o in outs])
        for i, o in enumerate(outs):
            assert not o.is_floating_point() or o.dtype == torch.float64, (
                f"{rec.id}: output {i} has dtype {o.dtype}, the float64 module and inputs give float64")
        evidence.covers("shape")
        if rec.lazy:
            assert not any(torch.nn.parameter.is_lazy(p) for p in m.parameters()), (
                f"{rec.id}: parameters still uninitialised after the first forward")
            assert type(m).__name__ == rec.name[len("Lazy"):], (
                f"{rec.id}: after the first forward the module is a {type(m).__name__}, documented to become "
                f"{rec.name[len('Lazy'):]}")
            evidence.covers("lazy-materialize")

    with _Property(rec, "train-eval"):
        if not rec.random and not rec.batch_stats:
            y_train = forward(torch, rec, m.train(), ins)
            y_eval = forward(torch, rec, m.eval(), ins)
            _same(rec, "train() and eval() outputs (no randomness, no running statistics)", y_train, y_eval)
        else:
            forward(torch, rec, m.train(), ins)
            m.eval()
            before = {n: b.clone() for n, b in m.named_buffers()}
            seeds = (MASK_SEED, MASK_SEED) if rec.random_in_eval else (MASK_SEED, MASK_SEED + 1)
            a = forward(torch, rec, m, ins, seeds[0])
            b = forward(torch, rec, m, ins, seeds[1])
            _same(rec, f"two eval() calls (seeds {seeds})", a, b)
            for n, buf in m.named_buffers():
                assert_equal(buf.cpu().numpy(), before[n].cpu().numpy(), what=f"{rec.id}: buffer {n} after eval calls")
        evidence.covers("train-eval")

    m.eval()
    y64 = forward(torch, rec, m, ins)

    with _Property(rec, "state_dict-roundtrip"):
        fresh = construct(torch, rec, OTHER_SEED)
        sd = m.state_dict()
        fresh.load_state_dict(sd, strict=True)
        fresh.eval()
        assert list(fresh.state_dict()) == list(sd), f"{rec.id}: state_dict keys differ after load_state_dict"
        _same(rec, "eval output after load_state_dict(strict=True) into a fresh module", forward(torch, rec, fresh, ins),
              y64)
        evidence.covers("state_dict-roundtrip")

    with _Property(rec, "deepcopy"):
        _same(rec, "eval output of copy.deepcopy", forward(torch, rec, copy.deepcopy(m), ins), y64)
        evidence.covers("deepcopy")

    with _Property(rec, "pickle"):
        _same(rec, "eval output after a pickle round trip", forward(torch, rec, pickle.loads(pickle.dumps(m)), ins), y64)
        evidence.covers("pickle")

    with _Property(rec, "to-float32"):
        mag, w, x = magnitude(rec, m, ins, y64)
        m32 = copy.deepcopy(m).float()
        for n, t in _floating(torch, m32):
            assert t.dtype == torch.float32, f"{rec.id}: after .float() {n} has dtype {t.dtype}"
        ints = {n: b.dtype for n, b in m.named_buffers() if not b.is_floating_point()}
        for n, b in m32.named_buffers():
            assert n not in ints or b.dtype == ints[n], f"{rec.id}: .float() changed integer buffer {n} to {b.dtype}"
        ins32 = [t.float() if t.is_floating_point() else t for t in ins]
        y32 = forward(torch, rec, m32, ins32)
        if not rec.random_in_eval:  # FractionalMaxPool draws its windows in the input's dtype
            notes["float32_worst_in_rtol"] = check_float32(rec, host(y32), host(y64), mag)
        evidence.covers("to-float32")

    with _Property(rec, "to-float64"):
        back = copy.deepcopy(m32).to(torch.float64)
        src = dict(_floating(torch, m32))
        for n, t in _floating(torch, back):
            assert t.dtype == torch.float64, f"{rec.id}: after .to(torch.float64) {n} has dtype {t.dtype}"
            assert_equal(t.detach().cpu().numpy(), src[n].detach().cpu().numpy().astype(np.float64),
                         what=f"{rec.id}: {n} widened to float64")
        evidence.covers("to-float64")

    params = [p for p in m.parameters() if p.requires_grad]
    if params:
        with _Property(rec, "zero_grad"):
            m.train()
            outs = [o for o in forward(torch, rec, m, ins) if o.is_floating_point()]
            sum(o.sum() for o in outs).backward()
            assert any(p.grad is not None for p in params), f"{rec.id}: no parameter received a gradient"
            m.zero_grad()
            stale = [n for n, p in m.named_parameters() if p.grad is not None]
            assert not stale, f"{rec.id}: zero_grad() left .grad set on {stale} (documented default set_to_none=True)"
            evidence.covers("zero_grad")

    if rec.grad:
        m.train()
        prob = grad_problem(torch, rec, m, ins, diff)
        y = prob["f"](prob["xs"])
        mag64, _, _ = magnitude(rec, m, ins, [torch.tensor(y)])
        t64 = model_tolerance(rec, "float64", mag64)
        b = t64.rtol * rec.gain * rec.fan * max(1.0, w) * max(1.0, x)
        with _Property(rec, "gradcheck"):
            res = check_vjp(prob["f"], prob["xs"], prob["vjp"], directions=len(prob["xs"]) + 1, seed=SEED,
                            names=prob["names"], f_error=t64.atol, derivative_error=b)
            evidence.check("vjp vs finite differences", observed=res.max_error_ratio, tolerance=1.0)
            notes["vjp_worst_ratio"] = res.max_error_ratio
            if prob["n_inputs"]:
                evidence.covers("gradcheck-input")
            if prob["n_params"]:
                evidence.covers("gradcheck-params")
            evidence.visits(FAMILY, rec.id, "gradcheck")
        if rec.hvp:
            with _Property(rec, "hvp"):
                res2 = check_hvp(prob["grad"], prob["hvp"], prob["xs"], (y.size,), seed=SEED, names=prob["names"],
                                 derivative_error=b)
                evidence.check("hvp vs finite differences of the gradient", observed=res2.max_error_ratio,
                               tolerance=1.0)
                notes["hvp_worst_ratio"] = res2.max_error_ratio
                evidence.covers("hvp")
                evidence.visits(FAMILY, rec.id, "hvp")
    return notes


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("rec", RECORDS, ids=[r.id for r in RECORDS])
def test_torch_module_contract(torch, rec):
    # the combinations ledger (report/combinations.py): first and second order, where the record has them
    evidence.registers(FAMILY, rec.id, ["gradcheck"] * bool(rec.grad) + ["hvp"] * bool(rec.grad and rec.hvp))
    with torch.device("cpu"):
        notes = check_record(torch, rec)
    evidence.note(module=rec.name, variant=rec.variant, **notes)


@pytest.mark.claim(CLAIM)
def test_records_name_every_public_torch_nn_module(torch):
    names = records.public_module_classes(torch.nn)
    missing, stale = records.table_gaps(names, RECORDS, records.OUT_OF_SCOPE)
    assert not missing, f"public torch.nn Module classes with no record (and not listed out of scope): {missing}"
    assert not stale, f"records or out-of-scope entries naming no public torch.nn Module class: {stale}"
    evidence.note(classes=len(names), recorded=len({r.name for r in RECORDS}), records=len(RECORDS),
                  out_of_scope=len(records.OUT_OF_SCOPE), losses=sum(records.is_loss(n) for n in names))
    evidence.covers("table-complete")

