"""torch autocast: the documented op lists as data, and the oracles that hold a build to them.

The lists are the "Autocast Op Reference" of torch's AMP documentation (docs/source/amp.rst),
per device type: the *documentation* is the oracle. An op of the op library carries its
line of the reference in its record (``OpRecord.autocast``: class per device type, aten
overload, composite devices); the torch functions the library has no op for are listed
here (:data:`OTHER_LISTS`, :data:`OTHER_ATEN`), and :data:`AUTOCAST_LISTS` joins the two.
The observations are the op's dtype under autocast and its bitwise equality with an
explicitly cast call (:func:`autocast_mismatches`); :func:`registration_mismatches` compares the lists with the
autocast kernels the build registers with its dispatcher.

Importing this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...programs import autocast as ac
from ...programs.autocast import B3, IMG1, IMG2, IMG3, Arrays, M, V, gen, normal, positive, prob, signs, spd
from ...programs.ops import RECORDS
from ...programs.records import AUTOCAST_ERROR as ERROR
from ...programs.records import AUTOCAST_FLOAT32 as FLOAT32
from ...programs.records import AUTOCAST_LOWER as LOWER
from ...programs.records import AUTOCAST_PROMOTE as PROMOTE
from ..numerics import difference, tolerance

UNLISTED = "unlisted"
CLASSES = (LOWER, FLOAT32, PROMOTE, ERROR)
DEVICE_TYPES = ("cpu", "cuda")


@dataclass(frozen=True)
class AutocastOp:
    name: str
    fn: Callable[[Any, list[Any]], Any]  # (torch, tensors) -> tensor
    inputs: Callable[[np.random.Generator, int], Arrays]  # float64 arrays are floating inputs
    differentiable: bool = True


def _other_ops() -> list[AutocastOp]:
    """The torch functions of the reference that the op library has no op for."""
    f = ac.functional
    return [
        # matmul / conv class
        AutocastOp("mm", lambda t, x: t.mm(*x), gen(M, M)),
        AutocastOp("bmm", lambda t, x: t.bmm(*x), gen(B3, B3)),
        AutocastOp("addmm", lambda t, x: t.addmm(*x), gen(M, M, M)),
        AutocastOp("baddbmm", lambda t, x: t.baddbmm(*x), gen(B3, B3, B3)),
        AutocastOp("addbmm", lambda t, x: t.addbmm(*x), gen(M, B3, B3)),
        AutocastOp("addmv", lambda t, x: t.addmv(*x), gen(V, M, V)),
        AutocastOp("addr", lambda t, x: t.addr(*x), gen(M, V, V)),
        AutocastOp("mv", lambda t, x: t.mv(*x), gen(M, V)),
        AutocastOp("dot", lambda t, x: t.dot(*x), gen(V, V)),
        AutocastOp("conv1d", lambda t, x: f("conv1d")(t)(*x), gen(IMG1, normal(3, 2, 2))),
        AutocastOp("conv3d", lambda t, x: f("conv3d")(t)(*x), gen(IMG3, normal(3, 2, 2, 2, 2))),
        AutocastOp("conv_transpose1d", lambda t, x: f("conv_transpose1d")(t)(*x), gen(IMG1, normal(2, 3, 2))),
        AutocastOp("conv_transpose3d", lambda t, x: f("conv_transpose3d")(t)(*x), gen(IMG3, normal(2, 3, 2, 2, 2))),
        AutocastOp("prelu", lambda t, x: f("prelu")(t)(*x), gen(M, normal(1))),
        AutocastOp("scaled_dot_product_attention", lambda t, x: f("scaled_dot_product_attention")(t)(*x),
                   gen(B3, B3, B3)),
        AutocastOp("linalg_vecdot", lambda t, x: t.linalg.vecdot(*x), gen(M, M)),
        # losses and numerically sensitive reductions
        AutocastOp("l1_loss", lambda t, x: f("l1_loss")(t)(*x), gen(M, M)),
        AutocastOp("binary_cross_entropy", lambda t, x: f("binary_cross_entropy")(t)(*x), gen(prob, prob)),
        AutocastOp("binary_cross_entropy_with_logits", lambda t, x: f("binary_cross_entropy_with_logits")(t)(*x),
                   gen(M, prob)),
        AutocastOp("kl_div", lambda t, x: f("kl_div")(t)(*x, reduction="batchmean"), gen(M, prob)),
        AutocastOp("soft_margin_loss", lambda t, x: f("soft_margin_loss")(t)(*x), gen(V, signs)),
        AutocastOp("margin_ranking_loss", lambda t, x: f("margin_ranking_loss")(t)(*x), gen(V, V, signs)),
        AutocastOp("hinge_embedding_loss", lambda t, x: f("hinge_embedding_loss")(t)(*x), gen(V, signs)),
        AutocastOp("poisson_nll_loss", lambda t, x: f("poisson_nll_loss")(t)(*x), gen(M, positive)),
        AutocastOp("cosine_embedding_loss", lambda t, x: f("cosine_embedding_loss")(t)(*x), gen(M, M, signs)),
        AutocastOp("cdist", lambda t, x: t.cdist(*x), gen(M, M)),
        AutocastOp("inverse", lambda t, x: t.inverse(*x), gen(spd)),
        AutocastOp("cholesky", lambda t, x: t.linalg.cholesky(*x), gen(spd)),
        AutocastOp("avg_pool3d", lambda t, x: f("avg_pool3d")(t)(x[0], 2), gen(IMG3)),
        AutocastOp("max_pool3d", lambda t, x: f("max_pool3d")(t)(x[0], 2), gen(IMG3)),
        AutocastOp("reflection_pad1d", lambda t, x: f("pad")(t)(x[0], (1, 1), mode="reflect"), gen(IMG1)),
        AutocastOp("replication_pad2d", lambda t, x: f("pad")(t)(x[0], (1, 1, 1, 1), mode="replicate"), gen(IMG2)),
        AutocastOp("quantile", lambda t, x: t.quantile(x[0], 0.3), gen(M)),
        # elementwise / reductions that CUDA lists as float32 and CPU leaves alone
        AutocastOp("exp", lambda t, x: t.exp(*x), gen(M)),
        AutocastOp("log", lambda t, x: t.log(*x), gen(positive)),
        AutocastOp("pow", lambda t, x: t.pow(x[0], 2.0), gen(M)),
        AutocastOp("norm", lambda t, x: t.norm(*x), gen(M)),
        AutocastOp("cosine_similarity", lambda t, x: f("cosine_similarity")(t)(*x), gen(M, M)),
        AutocastOp("reciprocal", lambda t, x: t.reciprocal(*x), gen(positive)),
        AutocastOp("rsqrt", lambda t, x: t.rsqrt(*x), gen(positive)),
        # promote to the widest input
        AutocastOp("cat", lambda t, x: t.cat(x), gen(M, M)),
        AutocastOp("index_copy", lambda t, x: x[0].index_copy(0, t.tensor([0], device=x[0].device), x[1][:1]), gen(M, M)),
        AutocastOp("addcmul", lambda t, x: t.addcmul(*x), gen(M, M, M)),
        AutocastOp("addcdiv", lambda t, x: t.addcdiv(*x), gen(M, M, positive)),
        AutocastOp("atan2", lambda t, x: t.atan2(*x), gen(M, M)),
    ]


#: The ops of the op library the autocast check calls, by their record: each has a line
#: of the reference there, with its call (``Autocast(call)`` where the reference lists it nowhere).
LIBRARY = {name: r.autocast for name, r in RECORDS.items() if r.autocast is not None}


def _ops() -> dict[str, AutocastOp]:
    """Every op the check calls: the op library's (their records' calls) and the others."""
    library = [AutocastOp(name, a.call.fn, a.call.inputs, a.call.differentiable) for name, a in LIBRARY.items()]
    return {op.name: op for op in [*_other_ops(), *library]}


OPS = _ops()

# The aten overload each torch function outside the op library dispatches to first (for
# the dispatcher-registration check), where it is not the function's own name.
OTHER_ATEN = {"conv_transpose3d": "conv_transpose3d.input", "cholesky": "linalg_cholesky",
              "quantile": "quantile.scalar", "pow": "pow.Tensor_Scalar", "norm": "norm.Scalar",
              "reflection_pad1d": "reflection_pad1d", "replication_pad2d": "replication_pad2d"}
ATEN = {**OTHER_ATEN, **{name: a.aten for name, a in LIBRARY.items() if a.aten}}
# Composite ops: no autocast kernel of their own on that device, their parts carry the policy.
COMPOSITE = {d: frozenset(name for name, a in LIBRARY.items() if d in a.composite) for d in DEVICE_TYPES}


def aten_name(op: str) -> str:
    return "aten::" + ATEN.get(op, op)

# The documented lists, per device type (torch 2.x "Autocast Op Reference"), of the torch
# functions in OPS that the op library has no op for. Ops not listed for a device run in
# their inputs' dtype there.
OTHER_LISTS: dict[str, dict[str, tuple[str, ...]]] = {
    "cpu": {
        LOWER: ("mm", "bmm", "baddbmm", "addbmm", "addmm", "conv1d", "conv3d", "conv_transpose1d",
                "conv_transpose3d", "prelu", "scaled_dot_product_attention", "linalg_vecdot"),
        FLOAT32: ("l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss",
                  "margin_ranking_loss", "hinge_embedding_loss", "poisson_nll_loss", "cosine_embedding_loss",
                  "cdist", "inverse", "cholesky", "avg_pool3d", "max_pool3d", "reflection_pad1d",
                  "replication_pad2d", "quantile"),
        PROMOTE: ("cat", "index_copy"),
        ERROR: (),
    },
    "cuda": {
        LOWER: ("mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "addr", "mv", "conv1d", "conv3d",
                "conv_transpose1d", "conv_transpose3d", "prelu", "scaled_dot_product_attention", "linalg_vecdot"),
        FLOAT32: ("l1_loss", "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss", "margin_ranking_loss",
                  "hinge_embedding_loss", "poisson_nll_loss", "cosine_embedding_loss", "cdist", "exp", "log", "pow",
                  "norm", "cosine_similarity", "reciprocal", "rsqrt"),
        PROMOTE: ("addcmul", "addcdiv", "atan2", "dot"),
        # "binary_cross_entropy ... raise an error in autocast-enabled regions" on CUDA.
        ERROR: ("binary_cross_entropy",),
    },
}


def _lists() -> dict[str, dict[str, tuple[str, ...]]]:
    """The reference's lists: the op library's records joined with :data:`OTHER_LISTS`."""
    return {d: {cls: OTHER_LISTS[d][cls] + tuple(name for name, a in LIBRARY.items() if a.listed(d) == cls)
                for cls in CLASSES}
            for d in DEVICE_TYPES}


AUTOCAST_LISTS: dict[str, dict[str, tuple[str, ...]]] = _lists()
# Ops that need a LAPACK/cuSOLVER path or inputs the low dtype cannot hold stay out of the
# all-low-input runs where torch has no low-precision kernel for them on that device.
NO_LOW_KERNEL = {"cpu": frozenset(), "cuda": frozenset({"inverse", "cholesky", "quantile", "trace", "cdist"})}


def op_class(device_type: str, name: str) -> str:
    for cls, names in AUTOCAST_LISTS[device_type].items():
        if name in names:
            return cls
    return UNLISTED


WIDTH = {"bfloat16": 1, "float16": 1, "float32": 2, "float64": 3}


def input_plans(cls: str, low: str, arity: int) -> list[tuple[str, ...]]:
    """The floating input dtypes to try for an op of this class, and for each the dtype
    autocast documents for the output is :func:`expected_dtype`."""
    uniform = [tuple([d] * arity) for d in ("float32", low, "float64")]
    mixed = [("float32",) + (low,) * (arity - 1)] if arity > 1 else []
    return uniform + (mixed if cls != UNLISTED else [])


def expected_dtype(cls: str, low: str, dtypes: tuple[str, ...]) -> str:
    """What the op's result dtype is under autocast, per the documentation.

    float64 (and non-floating) inputs are not eligible: the op runs as without autocast.
    Eligible ops: LOWER runs in the autocast dtype, FLOAT32 in float32, PROMOTE in the
    widest input dtype; unlisted ops run in their inputs' dtype.
    """
    if "float64" in dtypes:
        return max(dtypes, key=lambda d: WIDTH[d])
    if cls == LOWER:
        return low
    if cls == FLOAT32:
        return "float32"
    return max(dtypes, key=lambda d: WIDTH[d])


def device_of(dl_device: str) -> tuple[str, str]:
    """(torch device, autocast device type) for the test's device kind."""
    from ...frameworks import adapter

    device = adapter("torch").device(dl_device)
    return device, "cuda" if device.startswith("cuda") else "cpu"


def low_dtypes(torch: Any, device_type: str) -> list[str]:
    """The dtypes autocast takes on this device: CPU bfloat16 and float16 (both listed as
    supported by torch.autocast); CUDA float16, and bfloat16 where the GPU has it."""
    if device_type == "cpu":
        return ["bfloat16", "float16"]
    return ["float16"] + (["bfloat16"] if torch.cuda.is_bf16_supported() else [])


class AutocastMismatch(AssertionError):
    """An op under autocast did not run in the dtype the documentation lists it with."""


def autocast_mismatches(torch: Any, device: str, low: str, rng: np.random.Generator, n: int,
                        lists: dict[str, dict[str, tuple[str, ...]]] = AUTOCAST_LISTS,
                        ops: dict[str, AutocastOp] | None = None) -> tuple[list[str], dict[str, int]]:
    """Run every op under ``torch.autocast(device_type, dtype=low)`` with each input-dtype
    plan of its documented class and compare with the documentation and with the op called
    outside autocast on inputs cast to the documented dtype (bitwise: autocast only casts).
    For the lower-precision class, also the gradients of float32 leaves: float32 and
    bitwise equal to those of the explicitly cast computation. Returns the problems found
    and how many ops of each class were checked."""
    device_type = torch.device(device).type
    problems: list[str] = []
    counts: dict[str, int] = {}
    for name, op in (ops or OPS).items():
        cls = _class_in(lists, device_type, name)
        counts[cls] = counts.get(cls, 0) + 1
        arrays = op.inputs(rng, n)
        if cls == ERROR:
            problems += _expect_error(torch, device, device_type, low, op, arrays)
            continue
        arity = sum(a.dtype.kind == "f" for a in arrays)
        for plan in input_plans(cls, low, arity):
            if low in plan and cls == UNLISTED and name in NO_LOW_KERNEL[device_type]:
                continue
            problems += _check_plan(torch, device, device_type, low, op, cls, arrays, plan)
    return problems, counts


def _class_in(lists: dict[str, dict[str, tuple[str, ...]]], device_type: str, name: str) -> str:
    for cls, names in lists[device_type].items():
        if name in names:
            return cls
    return UNLISTED


def _tensors(torch: Any, arrays: Arrays, plan: tuple[str, ...], device: str, grad: bool = False) -> list[Any]:
    out, k = [], 0
    for a in arrays:
        if a.dtype.kind == "f":
            t = torch.tensor(a, dtype=getattr(torch, plan[k]), device=device)
            out.append(t.requires_grad_(grad))
            k += 1
        else:
            out.append(torch.tensor(a, device=device))
    return out


def _check_plan(torch: Any, device: str, device_type: str, low: str, op: AutocastOp, cls: str, arrays: Arrays,
                plan: tuple[str, ...]) -> list[str]:
    want = expected_dtype(cls, low, plan)
    grad = op.differentiable and cls == LOWER and set(plan) == {"float32"}
    inputs = _tensors(torch, arrays, plan, device, grad)
    with torch.autocast(device_type, dtype=getattr(torch, low)):
        out = op.fn(torch, inputs)
    where = f"{op.name} [{cls} on {device_type}, autocast {low}] inputs {'/'.join(plan)}"
    if str(out.dtype) != f"torch.{want}":
        return [f"{where}: result {out.dtype}, but should be torch.{want}"]
    cast = [t.detach().to(getattr(torch, want)).requires_grad_(grad) if t.is_floating_point() else t for t in inputs]
    expected = op.fn(torch, cast)
    size = max(a.size for a in arrays)
    problems = _same(torch, out, expected, f"{where}: result differs from {op.name} on inputs cast to {want}", size)
    if grad:
        leaves = [t for t in inputs if t.is_floating_point()]
        got = torch.autograd.grad(out.float().sum(), leaves)
        ref = torch.autograd.grad(expected.float().sum(), [t for t in cast if t.is_floating_point()])
        for i, (g, r) in enumerate(zip(got, ref)):
            if g.dtype != torch.float32:
                problems.append(f"{where}: gradient of float32 input {i} is {g.dtype}, but should be torch.float32")
            else:
                problems += _same(torch, g, r.float(), f"{where}: gradient of input {i} differs from the cast computation's",
                                  size)
    return problems


def _same(torch: Any, a: Any, b: Any, what: str, size: int) -> list[str]:
    """Bitwise on the CPU (autocast only casts, the kernels are deterministic); on a GPU
    within the result dtype's tolerance, since cuBLAS/cuDNN may pick another algorithm
    (and accumulate in another order) for the second call."""
    if a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.isnan(), b.isnan()) and bool(
            (a == b).logical_or(a.isnan()).all()):
        return []
    if a.shape != b.shape or a.dtype != b.dtype:
        return [f"{what} (shapes {tuple(a.shape)}/{tuple(b.shape)}, dtypes {a.dtype}/{b.dtype})"]
    d = difference(a.detach().double().cpu().numpy(), b.detach().double().cpu().numpy())
    if not d.nonfinite_match:
        return [f"{what} ({d.describe()}; non-finite values must match)"]
    diff, scale = d.error, d.scale
    if a.device.type != "cpu":
        tol = tolerance(str(a.dtype).removeprefix("torch."), ops=2, reduction=size)
        if diff <= tol.rtol * scale:
            return []
        return [f"{what} (max abs difference {diff:.3e} > {tol.rtol:.3e} * {scale:.3e} [{tol.why}])"]
    return [f"{what} (max abs difference {diff:.3e}, expected bitwise equality on the CPU)"]


def _expect_error(torch: Any, device: str, device_type: str, low: str, op: AutocastOp, arrays: Arrays) -> list[str]:
    inputs = _tensors(torch, arrays, ("float32",) * sum(a.dtype.kind == "f" for a in arrays), device)
    try:
        with torch.autocast(device_type, dtype=getattr(torch, low)):
            out = op.fn(torch, inputs)
    except RuntimeError:
        return []
    return [f"{op.name} [error on {device_type}]: ran under autocast (result {out.dtype}), but the documentation says it raises"]


DISPATCH_KEYS = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}


def registered_autocast_kernel(dump: str, key: str) -> bool:
    """Whether a ``torch._C._dispatch_dump`` text has a real (not fallthrough) kernel for ``key``."""
    for line in dump.splitlines():
        if line.startswith(key + ":"):
            return "fallthrough" not in line
    return False


def registration_mismatches(dump: Callable[[str], str], lists: dict[str, dict[str, tuple[str, ...]]] = AUTOCAST_LISTS,
                            ops: dict[str, AutocastOp] | None = None) -> list[str]:
    """Ops whose documented class disagrees with the build's autocast kernels: a listed op
    (not composite) must have one for its device's dispatch key, an unlisted op must not."""
    problems = []
    for device_type, key in DISPATCH_KEYS.items():
        for name in ops or OPS:
            cls = _class_in(lists, device_type, name)
            if name in COMPOSITE[device_type]:
                continue
            has = registered_autocast_kernel(dump(aten_name(name)), key)
            if has != (cls != UNLISTED):
                problems.append(f"{name} ({aten_name(name)}) is documented {cls} on {device_type}, but {key} "
                                f"{'has' if has else 'has no'} kernel for it")
    return problems
