"""Generated differentiable programs that run in torch, TensorFlow and numpy.

A :class:`Program` is a straight-line program over numbered registers: registers
``0 .. n-1`` hold the inputs, op ``k`` writes register ``n + k``, and the last register is
the output (one tensor, not necessarily a scalar). An :class:`Op` names its operation, its
parameters, and the registers it reads (``args=()`` means "the register just written").
Constant weights are stored as seeds, so a program is hashable and its ``repr`` is a
reproduction that hypothesis prints on failure.

Each operation is a row of :data:`OPS`: a torch expression, a TensorFlow expression (both
public API only, written as source templates, so :meth:`Program.to_source` prints exactly
what :meth:`Program.build` runs), and an independent float64 numpy reference.

Smoothness. Every op is smooth on the domain the strategies generate, so finite
differences are valid. Ops with kinks (relu, elu, hardtanh, torch's softplus threshold,
...) only ever read input registers, and :func:`make_inputs` keeps those inputs at least
:data:`KINK_MARGIN` away from each kink point: a finite-difference step must stay below
``KINK_MARGIN / INPUT_MAX`` relative to the input (about 2e-3).

Range. Inputs lie in ``[-INPUT_MAX, INPUT_MAX]`` and the generator tracks an a-priori bound
on every register, refusing ops that could exceed :data:`MAX_BOUND`, so the same programs
stay finite in float32 (exp only appears as ``exp(k * tanh(x))``, matrices are built to be
diagonally dominant or positive definite, see the individual ops).

Accuracy. :meth:`Program.error_bound` gives a first-order forward-error bound for a
conforming implementation, from the reference values at the given inputs; see there.

Frameworks' differing defaults are noted next to the ops (leaky_relu's slope, var's
correction, layer norm's epsilon, softplus's threshold, pooling's stride). Ops whose
check fails for a known framework reason carry it in ``OpSpec.limits``
(:data:`KNOWN_LIMITS`); :func:`op_names` leaves them out of a suite's programs.

Entry points: :func:`programs` and :func:`program_cases` (hypothesis search strategies),
:meth:`Program.build`, :meth:`Program.numpy`, :meth:`Program.error_bound`,
:meth:`Program.to_source`, and :func:`to_layout` for torch memory layouts.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import math
import sys
import types
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import product
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from hypothesis import strategies as st

from .checks.numerics import SMALLEST_NORMAL, UNIT_ROUNDOFF

if TYPE_CHECKING:
    import torch

__all__ = [
    "FRAMEWORKS",
    "INPUT_MAX",
    "KINK_MARGIN",
    "KNOWN_LIMITS",
    "LAYOUTS",
    "MAX_BOUND",
    "OPS",
    "REGIMES",
    "TF_FORWARD_MODE",
    "TORCH_FLOAT64_GRADIENT",
    "TORCH_FORWARD_MODE",
    "InputRecipe",
    "Op",
    "OpSpec",
    "Program",
    "ProgramCase",
    "input_recipes",
    "make_inputs",
    "op_names",
    "program_cases",
    "programs",
    "to_layout",
]

Shape = tuple[int, ...]
Params = Mapping[str, Any]
Array = np.ndarray
Draw = Callable[[st.SearchStrategy[Any]], Any]
Template = str | Callable[[Params, Sequence[Shape]], str]
RefFn = Callable[[Sequence[Array], Params, Sequence[Array]], Array]
PlanFn = Callable[[Draw, Sequence[Shape], Sequence[float]], "dict[str, Any] | None"]
BoundFn = Callable[[Sequence[float], Sequence[Shape], Params], float]
# (Lipschitz constant per argument, rounding work[, extra absolute scale of inner values])
LipFn = Callable[[Sequence[Array], Array, Params, Sequence[Array]], "tuple[Sequence[float], float] | tuple[Sequence[float], float, float]"]

FRAMEWORKS: Final = ("torch", "tensorflow")
LAYOUTS: Final = ("contiguous", "transposed", "strided", "channels_last")
INPUT_MAX: Final = 64.0  # large enough that tanh and sigmoid saturate in float64 (|x| > 37)
MAX_BOUND: Final = 2.0**18  # no register may exceed this in magnitude: float32-safe with room
KINK_MARGIN: Final = 1.0 / 8  # inputs of piecewise ops keep this far from every kink
ULPS: Final = 4.0  # rounding allowance of one op, in units of round-off per unit of work
_LETTERS: Final = "abcdefghij"


# ============================================================================ data types


@dataclass(frozen=True)
class Op:
    """One node: ``name`` is a key of :data:`OPS`; ``args=()`` reads the previous register."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()
    args: tuple[int, ...] = ()

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.params)

    def __repr__(self) -> str:
        parts = [repr(self.name)]
        if self.params:
            parts.append(f"params={self.params!r}")
        if self.args:
            parts.append(f"args={self.args!r}")
        return f"Op({', '.join(parts)})"


@dataclass(frozen=True)
class OpSpec:
    """How one operation is generated, run in each framework, and referenced in numpy.

    Templates are Python expressions formatted with ``a``/``b`` (argument variables),
    ``w``/``w1`` (weights), each parameter's ``repr`` and the strings from ``extras``; a
    template may also be a function ``(params, arg_shapes) -> template``.
    ``lip is None`` marks an elementwise unary op, whose error propagation uses the
    numerical derivative of ``ref``; otherwise ``lip`` returns the infinity-norm Lipschitz
    constant per argument and the amount of rounding work (see Program.error_bound).
    """

    name: str
    category: str
    arity: int
    torch: Template
    tf: Template
    ref: RefFn
    accepts: Callable[[Sequence[Shape]], bool]
    plan: PlanFn
    bound: BoundFn
    lip: LipFn | None = None
    extras: Callable[[Params, Sequence[Shape]], dict[str, str]] | None = None
    kinks: Callable[[Params], tuple[float, ...]] | None = None
    weights: Callable[[Sequence[Shape], Params], tuple[Shape, ...]] | None = None
    abs_scale: Callable[[Array, Params], Array] | None = None
    #: A composed op's tangent rule sums terms of these sizes per unit tangent (tanhshrink:
    #: u - sech^2(x) u, terms 1 and sech^2 that cancel to tanh^2 near 0): the rule's own
    #: rounding, which |f''| does not see where f' and f'' both vanish.
    deriv_scale: Callable[[Array, Params], Array] | None = None
    hint: Callable[[Draw, int], Shape] | None = field(default=None, compare=False)
    #: Known, documented framework limits: check name -> what goes wrong (see KNOWN_LIMITS).
    limits: Mapping[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class InputRecipe:
    """How :func:`make_inputs` draws a program's inputs: a seed and one regime per input."""

    seed: int
    regimes: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class ProgramCase:
    """A program and float64 inputs for it; ``repr`` is a reproduction."""

    program: Program
    inputs: list[Array]
    recipe: InputRecipe | None = None

    @classmethod
    def from_recipe(cls, program: Program, recipe: InputRecipe) -> ProgramCase:
        return cls(program, make_inputs(program, recipe), recipe)

    def __repr__(self) -> str:
        if self.recipe is not None:
            return f"ProgramCase.from_recipe({self.program!r}, {self.recipe!r})"
        arrays = ", ".join(f"np.array({x.tolist()!r})" for x in self.inputs)
        return f"ProgramCase({self.program!r}, [{arrays}])"


@dataclass(frozen=True)
class Program:
    """A straight-line program; see the module docstring for the register convention."""

    input_shapes: tuple[Shape, ...]
    ops: tuple[Op, ...]

    def __post_init__(self) -> None:
        _ = self.shapes  # validate where the program is written, not where it first runs

    @property
    def n_inputs(self) -> int:
        return len(self.input_shapes)

    @property
    def output_shape(self) -> Shape:
        return self.shapes[-1]

    def arg_indices(self, k: int) -> tuple[int, ...]:
        return self.ops[k].args or (self.n_inputs + k - 1,)

    @cached_property
    def shapes(self) -> tuple[Shape, ...]:
        """Shape of every register, inputs first; raises ValueError for an invalid program."""
        if not self.input_shapes or not self.ops:
            raise ValueError("a program needs at least one input and one op")
        shapes = [tuple(s) for s in self.input_shapes]
        for k, op in enumerate(self.ops):
            shapes.append(_checked_out_shape(self, k, op, shapes))
        return tuple(shapes)

    def weights(self, k: int) -> list[Array]:
        """The constant weights of op ``k`` (exact dyadic values, see :func:`_weight`)."""
        op = self.ops[k]
        spec = OPS[op.name]
        if spec.weights is None:
            return []
        arg_shapes = [self.shapes[i] for i in self.arg_indices(k)]
        seed = op.kwargs["seed"]
        return [_weight(seed + j, s) for j, s in enumerate(spec.weights(arg_shapes, op.kwargs))]

    def kinks(self) -> dict[int, tuple[float, ...]]:
        """Input index -> kink points its values must keep :data:`KINK_MARGIN` away from."""
        out: dict[int, set[float]] = {}
        for k, op in enumerate(self.ops):
            spec = OPS[op.name]
            if spec.kinks is not None:
                for i in self.arg_indices(k):
                    out.setdefault(i, set()).update(spec.kinks(op.kwargs))
        return {i: tuple(sorted(p)) for i, p in out.items()}

    # ------------------------------------------------------------------ numpy reference

    def trace(self, xs: Sequence[Any]) -> list[Array]:
        """All register values of the float64 numpy reference, inputs first."""
        if len(xs) != self.n_inputs:
            raise TypeError(f"the program takes {self.n_inputs} inputs, got {len(xs)}")
        regs = [np.asarray(x, dtype=np.float64) for x in xs]
        for k, op in enumerate(self.ops):
            args = [regs[i] for i in self.arg_indices(k)]
            regs.append(np.asarray(OPS[op.name].ref(args, op.kwargs, self.weights(k)), dtype=np.float64))
        return regs

    def numpy(self, xs: Sequence[Any]) -> Array:
        """The float64 numpy reference implementation (independent of both frameworks)."""
        return self.trace(xs)[-1]

    def error_bound(self, xs: Sequence[Any], dtype: str = "float64") -> float:
        """Bound on ``max|f_dtype(xs) - f(xs)|`` for a conforming run in ``dtype``.

        First-order forward error analysis in the infinity norm, on the reference values at
        ``xs``. Each register carries an absolute error ``E`` (in units of the round-off
        ``u`` of ``dtype``); inputs start at ``max|x|`` when rounded to a narrower dtype and
        at 0 in float64. Op ``k`` with arguments ``x_i`` and output ``y`` gives::

            E_y = sum_i L_i E_i + ULPS * W * (max|y| + sum_i L_i max|x_i|) + ULPS * tiny/u

        with ``L_i`` the op's Lipschitz constant in argument ``i`` (elementwise ops: the
        largest ``|f'|`` at the actual values, by central differences) and ``W`` the
        op's rounding work (1 for elementwise, the number of terms for a reduction or a
        contraction, ``n**3`` for an n-by-n factorisation, 0 for pure data movement).
        The middle term allows each op the error of a backward-stable implementation: a
        few ulps of its output plus the effect of a few ulps on its inputs (so ``sin`` of a
        large argument may lose what range reduction loses); an op whose implementation
        cancels (gelu for x << 0, log(x**2 + c), the matrices built as I + s*tanh(x))
        adds the absolute error of that cancellation. ``tiny`` (the smallest normal
        number) allows flushing subnormals to zero. Returns ``u * E_output``.
        """
        u = UNIT_ROUNDOFF[dtype]
        floor = SMALLEST_NORMAL[dtype] / u
        regs = self.trace(xs)
        rounded = dtype != "float64"
        errs = [(_amax(x) if rounded else 0.0) + floor for x in regs[: self.n_inputs]]
        for k, op in enumerate(self.ops):
            idx = self.arg_indices(k)
            args, arg_errs = [regs[i] for i in idx], [errs[i] for i in idx]
            out = regs[self.n_inputs + k]
            errs.append(_op_error(OPS[op.name], args, arg_errs, out, op.kwargs, self.weights(k)) + ULPS * floor)
        return u * errs[-1]

    def derivative_error_bound(self, xs: Sequence[Any], dtype: str = "float64") -> float:
        """Bound ``B`` on the rounding error of a derivative computed by automatic
        differentiation in ``dtype``: ``|computed v.(J u) - v.(J u)| <= B * ||v||_1 * ||u||_inf``
        for forward mode (``v . jvp(u)``) and reverse mode (``vjp(v) . u``) alike; for one
        gradient entry (``u = e_j``) that is ``B * ||v||_1``.

        Why a bound of its own: the derivative can be exactly zero, or cancel, while the
        quantities it is computed from are not small (softmax summed over its axis is
        identically 1; its derivative is ``s_j - s_j`` per entry, computed from terms of size
        ``s``), so a bound relative to the derivative collapses. This one is made of the
        magnitude of the intermediate tangents instead.

        Model (first order, the linearised program): forward mode runs every op's tangent
        rule, reverse mode its transpose, on tangents whose size is bounded, with no
        cancellation, by ``T_y = sum_i L_i T_i`` (``T = 1`` at the inputs, ``L_i`` the op's
        infinity-norm Lipschitz constants, as in :meth:`error_bound`). Each op adds the error
        of a backward-stable tangent rule, ``ULPS * W * (T_y + sum_i L_i T_i)`` with ``W`` the
        op's rounding work, and propagates the errors it receives, ``sum_i L_i E_i``;
        an elementwise op also evaluates ``f'`` at a primal value carrying a few ulps of
        ``|x|`` (plus its own cancellation scale, ``abs_scale``), which moves ``f'`` by
        ``ULPS * |f''| * (|x| + abs_scale)``. Componentwise, both modes' errors are then at
        most ``u * E_out`` times ``|v|^T |J_m| ... |J_1| |u| <= ||v||_1 * T-chain * ||u||_inf``,
        so ``B = u * E_out``. Returns ``B``.
        """
        u = UNIT_ROUNDOFF[dtype]
        regs = self.trace(xs)
        tangents = [1.0] * self.n_inputs
        errs = [0.0] * self.n_inputs
        for k, op in enumerate(self.ops):
            idx = self.arg_indices(k)
            args = [regs[i] for i in idx]
            out = regs[self.n_inputs + k]
            lips, work, local = _tangent_rule(OPS[op.name], args, out, op.kwargs, self.weights(k))
            t_in = [tangents[i] for i in idx]
            t_out = sum(L * t for L, t in zip(lips, t_in))
            received = sum(L * errs[i] for L, i in zip(lips, idx))
            errs.append(received + ULPS * work * (t_out + sum(L * t for L, t in zip(lips, t_in))) + local * max(t_in))
            tangents.append(t_out)
        return u * errs[-1]

    # ------------------------------------------------------------------ frameworks

    def to_source(self, framework: str = "torch", dtype: str = "float64", layout: str = "contiguous") -> str:
        """A standalone script (numpy + the framework) defining ``program(xs)`` as built."""
        _check_target(framework, dtype, layout)
        return "\n".join(_source_lines(self, framework, dtype, layout)) + "\n"

    def build(self, framework: str, dtype: str = "float64", layout: str = "contiguous") -> Callable[[Sequence[Any]], Any]:
        """``f(xs) -> tensor`` in ``framework`` ("torch" or "tensorflow").

        Inputs may be numpy arrays (converted to ``dtype``) or tensors of ``dtype`` (used as
        they are, so gradients flow to them; another dtype is a TypeError). For torch,
        ``layout`` re-stores every input with :func:`to_layout` inside the function, so the
        ops see non-contiguous tensors and gradients still reach the caller's tensors.
        TensorFlow has no user-visible layouts: only "contiguous" is accepted there.
        The function is traceable by ``tf.function`` and ``torch.compile``; its source is
        in ``f.source`` and tracebacks show its lines.
        """
        source = self.to_source(framework, dtype, layout)
        program = _compile_program(source, framework)
        convert = _input_converter(framework, dtype)
        n = self.n_inputs

        def run(xs: Sequence[Any]) -> Any:
            if len(xs) != n:
                raise TypeError(f"the program takes {n} inputs, got {len(xs)}")
            return program([convert(i, x) for i, x in enumerate(xs)])

        run.source = source  # type: ignore[attr-defined]
        return run


def _checked_out_shape(program: Program, k: int, op: Op, shapes: list[Shape]) -> Shape:
    where = f"op {k} {op!r}"
    spec = OPS.get(op.name)
    if spec is None:
        raise ValueError(f"{where}: unknown op; choose one of {sorted(OPS)}")
    idx = op.args or (program.n_inputs + k - 1,)
    if len(idx) != spec.arity or not all(0 <= i < len(shapes) for i in idx):
        raise ValueError(f"{where}: needs {spec.arity} argument(s) among registers 0..{len(shapes) - 1}")
    if spec.kinks is not None and any(i >= program.n_inputs for i in idx):
        raise ValueError(f"{where}: a piecewise op may only read inputs (their values avoid its kinks)")
    arg_shapes = [shapes[i] for i in idx]
    if not spec.accepts(arg_shapes):
        raise ValueError(f"{where}: does not accept argument shapes {arg_shapes}")
    try:
        return _out_shape(spec, arg_shapes, op.kwargs)
    except (ValueError, KeyError, IndexError, TypeError, np.linalg.LinAlgError) as exc:
        raise ValueError(f"{where}: {exc}") from exc


def _out_shape(spec: OpSpec, arg_shapes: Sequence[Shape], p: Params) -> Shape:
    zeros = [np.zeros(s) for s in arg_shapes]
    ws = [np.zeros(s) for s in spec.weights(arg_shapes, p)] if spec.weights else []
    return tuple(np.shape(spec.ref(zeros, p, ws)))


def _weight(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """Constant weights: multiples of 1/8 in [-2, 2], exact in every float format."""
    return np.random.default_rng(seed).integers(-16, 17, size=shape) / 8.0


def _amax(x: Array) -> float:
    return float(np.max(np.abs(x))) if np.size(x) else 0.0


# ============================================================================ error model


def _op_error(spec: OpSpec, xs: Sequence[Array], errs: Sequence[float], out: Array, p: Params, ws: Sequence[Array]) -> float:
    if spec.lip is None:
        return _elementwise_error(spec, xs[0], errs[0], out, p)
    lips, work, *inner = spec.lip(xs, out, p, ws)
    sens = sum(L * e for L, e in zip(lips, errs))
    scale = _amax(out) + sum(L * _amax(x) for L, x in zip(lips, xs)) + sum(inner)
    return sens + ULPS * work * scale


def _elementwise_error(spec: OpSpec, x: Array, err: float, out: Array, p: Params) -> float:
    if x.size == 0:
        return 0.0
    h = 2.0**-20 * np.maximum(1.0, np.abs(x))
    d = (spec.ref([x + h], p, []) - spec.ref([x - h], p, [])) / (2 * h)
    extra = spec.abs_scale(x, p) if spec.abs_scale else 0.0
    scale = float(np.max(np.abs(out) + np.abs(d * x) + extra))
    return 1.25 * float(np.max(np.abs(d))) * err + ULPS * scale


def _tangent_rule(spec: OpSpec, xs: Sequence[Array], out: Array, p: Params,
                  ws: Sequence[Array]) -> tuple[Sequence[float], float, float]:
    """(Lipschitz constants, rounding work, error of evaluating f' itself) of one op's tangent
    rule, in units of u per unit input tangent (see Program.derivative_error_bound)."""
    if spec.lip is not None:
        lips, work, *_ = spec.lip(xs, out, p, ws)
        return lips, float(work), 0.0
    x = xs[0]
    if x.size == 0:
        return (0.0,), 1.0, 0.0
    h = 2.0**-20 * np.maximum(1.0, np.abs(x))
    fp, f0, fm = (spec.ref([x + h], p, []), spec.ref([x], p, []), spec.ref([x - h], p, []))
    d = (fp - fm) / (2 * h)
    # An upper estimate of |f''| (the difference's own rounding only makes it larger).
    d2 = np.abs(fp - 2 * f0 + fm) / (h * h)
    extra = spec.abs_scale(x, p) if spec.abs_scale else 0.0
    terms = spec.deriv_scale(x, p) if spec.deriv_scale else 0.0
    local = ULPS * float(np.max(d2 * (np.abs(x) + extra) + terms))
    return (1.25 * float(np.max(np.abs(d))),), 1.0, local


def _jacobian_norm(fn: Callable[[Array], Array], x: Array, event_ndim: int) -> float:
    """Largest row sum of |J| for fn acting independently on the trailing event_ndim dims.

    One batched central difference per event entry (the same entry of every batch member
    moves at once), so the cost is the event size, not the input size.
    """
    out = fn(x)
    rows = np.zeros(out.shape)
    for idx in product(*(range(n) for n in x.shape[x.ndim - event_ndim :])):
        sl: tuple[Any, ...] = (Ellipsis, *idx)
        h = 2.0**-20 * max(1.0, _amax(x[sl]))
        xp, xm = x.copy(), x.copy()
        xp[sl] += h
        xm[sl] -= h
        rows += np.abs(fn(xp) - fn(xm)) / (2 * h)
    return 1.25 * _amax(rows)


# ============================================================================ torch layouts


def to_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values as ``t`` in another memory layout, differentiably.

    "contiguous": row-major; "transposed": column-major (all dims reversed; rank < 2 stays
    contiguous); "strided": every stride doubled and storage offset 1 (a view into a
    buffer twice as large); "channels_last": torch.channels_last for 4-D and
    channels_last_3d for 5-D tensors, contiguous otherwise.
    """
    import torch

    if layout == "contiguous":
        return t.contiguous()
    if layout == "transposed":
        if t.dim() < 2:
            return t.contiguous()
        rev = tuple(range(t.dim() - 1, -1, -1))
        return t.permute(rev).contiguous().permute(rev)
    if layout == "strided":
        return torch.stack((torch.zeros_like(t), t), dim=-1).select(-1, 1)
    if layout == "channels_last":
        if t.dim() in (4, 5):
            fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
            return t.contiguous(memory_format=fmt)
        return t.contiguous()
    raise ValueError(f"unknown layout {layout!r}; choose contiguous, transposed, strided or channels_last")


# ============================================================================ source generation

_HEADERS: Final = {
    "torch": ("import numpy as np", "import torch", "import torch.nn.functional as F"),
    "tensorflow": ("import numpy as np", "import tensorflow as tf"),
}
_MODULE: Final = {"torch": "torch", "tensorflow": "tf"}


def _check_target(framework: str, dtype: str, layout: str) -> None:
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; choose one of {FRAMEWORKS}")
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {tuple(UNIT_ROUNDOFF)}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")
    if framework == "tensorflow" and layout != "contiguous":
        raise ValueError(f"TensorFlow has no memory layouts: use layout='contiguous', not {layout!r}")


def _source_lines(program: Program, framework: str, dtype: str, layout: str) -> list[str]:
    lines = [f"# {program!r}", f"# {framework}, {dtype}, layout {layout!r}", *_HEADERS[framework], ""]
    lines.append(f"DTYPE = {_MODULE[framework]}.{dtype}")
    consts = _weight_lines(program, framework)
    if consts:
        lines += ["", "", *inspect.getsource(_weight).splitlines(), "", "", *consts]
    if layout != "contiguous":
        lines += ["", "", *inspect.getsource(to_layout).splitlines()]
    lines += ["", "", "def program(xs):", *("    " + s for s in _body_lines(program, framework, layout))]
    return lines


def _weight_lines(program: Program, framework: str) -> list[str]:
    make = "torch.as_tensor({}, dtype=DTYPE)" if framework == "torch" else "tf.constant({}, dtype=DTYPE)"
    lines = []
    for k, op in enumerate(program.ops):
        for j, w in enumerate(program.weights(k)):
            lines.append(f"W{k}_{j} = " + make.format(f"_weight({op.kwargs['seed'] + j}, {w.shape})"))
    return lines


def _body_lines(program: Program, framework: str, layout: str) -> list[str]:
    n = program.n_inputs
    names = ", ".join(f"v{i}" for i in range(n))
    lines = [f"({names},) = xs" if n == 1 else f"{names} = xs"]
    if layout != "contiguous":
        lines += [f"v{i} = to_layout(v{i}, {layout!r})" for i in range(n)]
    for k, op in enumerate(program.ops):
        wnames = [f"W{k}_{j}" for j in range(len(program.weights(k)))]
        if framework == "torch" and wnames:
            lines += [f"{w.lower()} = {w}.to(v0.device)" for w in wnames]
            wnames = [w.lower() for w in wnames]
        lines.append(f"v{n + k} = {_render(program, k, framework, wnames)}")
    lines.append(f"return v{n + len(program.ops) - 1}")
    return lines


def _render(program: Program, k: int, framework: str, wnames: list[str]) -> str:
    op = program.ops[k]
    spec = OPS[op.name]
    idx = program.arg_indices(k)
    shapes = [program.shapes[i] for i in idx]
    p = op.kwargs
    mapping = {key: repr(v) for key, v in p.items()}
    mapping.update(zip(("a", "b"), (f"v{i}" for i in idx)))
    mapping.update(zip(("w", "w1"), wnames))
    if spec.extras is not None:
        mapping.update(spec.extras(p, shapes))
    template = spec.torch if framework == "torch" else spec.tf
    if callable(template):
        template = template(p, shapes)
    return template.format(**mapping)


def _compile_program(source: str, framework: str) -> Callable[[list[Any]], Any]:
    """Run the source as a module registered in sys.modules (one per distinct source)."""
    name = f"dlconform_program_{hashlib.sha1(source.encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is None:
        filename = f"<{name} ({framework})>"
        # In linecache, tracebacks (and AutoGraph) read the generated code's lines; in
        # sys.modules, torch.compile can import the function's module (it does). No
        # __file__: AutoGraph would evict the linecache entry of a module file it cannot
        # read from disk (tensorflow/python/autograph/pyct/inspect_utils.py).
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module = types.ModuleType(name)
        exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102  (our own generated source)
        sys.modules[name] = module
    return module.program  # type: ignore[no-any-return]


def _input_converter(framework: str, dtype: str) -> Callable[[int, Any], Any]:
    if framework == "torch":
        import torch

        tdt = getattr(torch, dtype)

        def to_torch(i: int, x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                return _same_dtype(i, x, tdt)
            return torch.as_tensor(np.asarray(x), dtype=tdt)

        return to_torch
    import tensorflow as tf

    fdt = tf.as_dtype(dtype)

    def to_tf(i: int, x: Any) -> Any:
        if tf.is_tensor(x):
            return _same_dtype(i, x, fdt)
        return tf.constant(np.asarray(x), dtype=fdt)

    return to_tf


def _same_dtype(i: int, x: Any, want: Any) -> Any:
    if x.dtype != want:
        raise TypeError(f"input {i} has dtype {x.dtype}, but the program was built for {want}: cast it or rebuild")
    return x


# ============================================================================ op helpers


def _any(shapes: Sequence[Shape]) -> bool:
    return True


def _rank_at_least(r: int) -> Callable[[Sequence[Shape]], bool]:
    return lambda shapes: len(shapes[0]) >= r


def _square(shapes: Sequence[Shape]) -> bool:
    s = shapes[0]
    return len(s) >= 2 and s[-1] == s[-2]


def _broadcastable(shapes: Sequence[Shape]) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def _no_params(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {}


def _choices(**options: Sequence[Any]) -> PlanFn:
    """Plan drawing each parameter from its options; the first option is the default."""

    def plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
        return {k: draw(st.sampled_from(v)) for k, v in options.items()}

    return plan


def _norm_axis(axis: int, rank: int) -> int:
    return axis % rank


def _draw_axis(draw: Draw, rank: int) -> int:
    axis = draw(st.integers(0, rank - 1))
    return axis - rank if draw(st.booleans()) else axis


def _draw_dims(draw: Draw, rank: int) -> tuple[int, ...]:
    dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return tuple(d - rank if draw(st.booleans()) else d for d in dims)


def _reduced_size(shape: Shape, dims: Sequence[int]) -> int:
    return math.prod(shape[_norm_axis(d, len(shape))] for d in dims)


def _lst(values: Sequence[Any]) -> str:
    return repr(list(values))


def _sigmoid(x: Array) -> Array:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _unary(f: Callable[[Array, Params], Array]) -> RefFn:
    return lambda xs, p, ws: f(xs[0], p)


def _elementwise(name: str, ref: Callable[[Array, Params], Array], torch: Template, tf: Template,
                 bound: Callable[[float, Params], float], *, category: str = "elementwise",
                 plan: PlanFn = _no_params, kinks: Callable[[Params], tuple[float, ...]] | None = None,
                 abs_scale: Callable[[Array, Params], Array] | None = None,
                 extras: Callable[[Params, Sequence[Shape]], dict[str, str]] | None = None,
                 deriv_scale: Callable[[Array, Params], Array] | None = None) -> OpSpec:
    return OpSpec(name, category, 1, torch, tf, _unary(ref), _any, plan, lambda bs, ss, p: bound(bs[0], p),
                  extras=extras, kinks=kinks, abs_scale=abs_scale, deriv_scale=deriv_scale)


def _piecewise(name: str, ref: Callable[[Array, Params], Array], torch: Template, tf: Template,
               bound: Callable[[float, Params], float], kinks: Callable[[Params], tuple[float, ...]],
               plan: PlanFn = _no_params, abs_scale: Callable[[Array, Params], Array] | None = None) -> OpSpec:
    return _elementwise(name, ref, torch, tf, bound, category="piecewise", plan=plan, kinks=kinks, abs_scale=abs_scale)


def _at_most(limit: float) -> Callable[[float, Params], float]:
    """Bounded output, but only for arguments up to INPUT_MAX (keeps oscillation tame)."""
    return lambda b, p: limit if b <= INPUT_MAX else math.inf


def _abs_x(x: Array, p: Params) -> Array:
    return np.abs(x)


# ============================================================================ elementwise ops


def _gelu_ref(x: Array, p: Params) -> Array:
    if p["approximate"] == "tanh":
        z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        return x * _sigmoid(2 * z)  # 0.5 * (1 + tanh(z)) == sigmoid(2z), without cancellation
    return 0.5 * x * _erfc(-x / math.sqrt(2))


def _gelu_tf(p: Params, shapes: Sequence[Shape]) -> str:
    if p["approximate"] == "tanh":
        return "0.5 * {a} * (1.0 + tf.math.tanh(0.7978845608028654 * ({a} + 0.044715 * tf.math.pow({a}, 3.0))))"
    return "0.5 * {a} * tf.math.erfc(-0.7071067811865476 * {a})"


def _smooth_ops() -> list[OpSpec]:
    c_opts = (1.0, 0.25, 0.0625, 4.0)
    return [
        _elementwise("tanh", lambda x, p: np.tanh(x), "torch.tanh({a})", "tf.math.tanh({a})", lambda b, p: 1.0),
        _elementwise("sigmoid", lambda x, p: _sigmoid(x), "torch.sigmoid({a})", "tf.math.sigmoid({a})", lambda b, p: 1.0),
        _elementwise("sin", lambda x, p: np.sin(x), "torch.sin({a})", "tf.math.sin({a})", _at_most(1.0)),
        _elementwise("cos", lambda x, p: np.cos(x), "torch.cos({a})", "tf.math.cos({a})", _at_most(1.0)),
        _elementwise("atan", lambda x, p: np.arctan(x), "torch.atan({a})", "tf.math.atan({a})", lambda b, p: 2.0),
        _elementwise("asinh", lambda x, p: np.arcsinh(x), "torch.asinh({a})", "tf.math.asinh({a})",
                     lambda b, p: math.log(2 * b + 1) + 1),
        _elementwise("erf", lambda x, p: _erf(x), "torch.erf({a})", "tf.math.erf({a})", lambda b, p: 1.0),
        _elementwise("logsigmoid", lambda x, p: -np.logaddexp(0.0, -x), "F.logsigmoid({a})",
                     "tf.math.log_sigmoid({a})", lambda b, p: b + 1),
        # Same default in both: the exact erf form (torch approximate='none', TF False).
        # tf.nn.gelu is not used: in TF 2.21 it builds its constants with
        # math_ops.cast(0.7071067811865476, dtype), which goes through float32, so float64
        # gelu is only float32-accurate (relative error ~3e-8). Composed from tf.math.
        # x * (1 + erf(..)) / 2 cancels for x << 0: abs_scale allows it.
        _elementwise("gelu", _gelu_ref, "F.gelu({a}, approximate={approximate})", _gelu_tf, lambda b, p: b,
                     plan=_choices(approximate=("none", "tanh")), abs_scale=_abs_x),
        _elementwise("silu", lambda x, p: x * _sigmoid(x), "F.silu({a})", "tf.nn.silu({a})", lambda b, p: 1.1 * b + 1),
        # tf.nn has no mish (keras.activations.mish does): composed from public tf.math ops.
        _elementwise("mish", lambda x, p: x * np.tanh(np.logaddexp(0.0, x)), "F.mish({a})",
                     "{a} * tf.math.tanh(tf.math.softplus({a}))", lambda b, p: b + 1),
        # Both frameworks compose it (torch: input - input.tanh()), so its tangent rule is
        # u - sech^2(x) u: terms of size 1 that cancel to tanh^2(x) u near 0.
        _elementwise("tanhshrink", lambda x, p: x - np.tanh(x), "F.tanhshrink({a})", "{a} - tf.math.tanh({a})",
                     lambda b, p: b + 1, abs_scale=_abs_x, deriv_scale=lambda x, p: 1.0 + 1.0 / np.cosh(x) ** 2),
        _elementwise("square", lambda x, p: np.square(x), "torch.square({a})", "tf.math.square({a})", lambda b, p: b * b),
        _elementwise("cube", lambda x, p: x * x * x, "torch.pow({a}, 3)", "tf.math.pow({a}, 3.0)", lambda b, p: b**3),
        _elementwise("sqrt_c", lambda x, p: np.sqrt(x * x + p["c"]), "torch.sqrt(torch.square({a}) + {c})",
                     "tf.math.sqrt(tf.math.square({a}) + {c})", lambda b, p: math.sqrt(b * b + p["c"]),
                     plan=_choices(c=c_opts)),
        # log(t) with t = x^2 + c rounded: an absolute error of u, whatever x.
        _elementwise("log_c", lambda x, p: np.log(x * x + p["c"]), "torch.log(torch.square({a}) + {c})",
                     "tf.math.log(tf.math.square({a}) + {c})",
                     lambda b, p: max(abs(math.log(p["c"])), math.log(b * b + p["c"])),
                     plan=_choices(c=c_opts), abs_scale=lambda x, p: np.ones_like(x)),
        _elementwise("rsqrt_c", lambda x, p: 1 / np.sqrt(x * x + p["c"]), "torch.rsqrt(torch.square({a}) + {c})",
                     "tf.math.rsqrt(tf.math.square({a}) + {c})", lambda b, p: p["c"] ** -0.5, plan=_choices(c=c_opts)),
        _elementwise("log1p_sq", lambda x, p: np.log1p(x * x), "torch.log1p(torch.square({a}))",
                     "tf.math.log1p(tf.math.square({a}))", lambda b, p: math.log1p(b * b)),
        _elementwise("pow_c", lambda x, p: (x * x + p["c"]) ** p["p"], "torch.pow(torch.square({a}) + {c}, {p})",
                     "tf.math.pow(tf.math.square({a}) + {c}, {p})",
                     lambda b, p: (b * b + p["c"]) ** p["p"] if p["p"] > 0 else p["c"] ** p["p"],
                     plan=_choices(c=c_opts, p=(0.5, -0.5, 1.5, -1.5, 0.25)),
                     abs_scale=lambda x, p: abs(p["p"]) * (x * x + p["c"]) ** p["p"]),
        # exp only of a bounded argument, so it never overflows (float32 included).
        _elementwise("exp_tanh", lambda x, p: np.exp(p["k"] * np.tanh(x)), "torch.exp({k} * torch.tanh({a}))",
                     "tf.math.exp({k} * tf.math.tanh({a}))", lambda b, p: math.exp(p["k"]),
                     plan=_choices(k=(1.0, 0.5, 2.0, 4.0)),
                     abs_scale=lambda x, p: p["k"] * np.exp(p["k"] * np.tanh(x))),
    ]


# ------------------------------------------------------------------ piecewise (inputs only)

_SELU_ALPHA: Final = 1.6732632423543772848170429916717
_SELU_SCALE: Final = 1.0507009873554804934193349852946


def _elu_ref(x: Array, alpha: float) -> Array:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _softplus_ref(x: Array, p: Params) -> Array:
    bx = p["beta"] * x
    return np.where(bx > p["threshold"], x, np.logaddexp(0.0, bx) / p["beta"])


def _hardsigmoid_ref(x: Array) -> Array:
    return np.clip(x / 6 + 0.5, 0.0, 1.0)


def _elu_tf(p: Params, shapes: Sequence[Shape]) -> str:
    # tf.nn.elu has no alpha (it is 1): other alphas are composed from public ops.
    if p["alpha"] == 1.0:
        return "tf.nn.elu({a})"
    return "tf.where({a} > 0, {a}, {alpha} * tf.math.expm1(tf.minimum({a}, 0.0)))"


def _piecewise_ops() -> list[OpSpec]:
    zero = lambda p: (0.0,)
    neg = lambda x, p: np.where(x < 0, 1.0, 0.0)  # exp(x) - 1 may cancel for x < 0
    return [
        _piecewise("relu", lambda x, p: np.maximum(x, 0.0), "torch.relu({a})", "tf.nn.relu({a})", lambda b, p: b, zero),
        # Defaults differ: torch negative_slope=0.01, tf.nn.leaky_relu alpha=0.2. TF's LeakyRelu
        # keeps alpha in a float32 attribute, so in float64 its slope is float32(alpha): only
        # slopes exact in float32 are drawn here (0.01 and 0.2 would differ by ~2e-10).
        _piecewise("leaky_relu", lambda x, p: np.where(x > 0, x, p["negative_slope"] * x),
                   "F.leaky_relu({a}, negative_slope={negative_slope})", "tf.nn.leaky_relu({a}, alpha={negative_slope})",
                   lambda b, p: b, zero, plan=_choices(negative_slope=(0.125, 0.25, 0.5, 0.0625))),
        # elu with alpha != 1 has a kink at 0 (slopes alpha and 1); alpha == 1 is C1 only.
        _piecewise("elu", lambda x, p: _elu_ref(x, p["alpha"]), "F.elu({a}, alpha={alpha})", _elu_tf,
                   lambda b, p: max(b, p["alpha"]), zero, plan=_choices(alpha=(1.0, 0.5, 1.5)),
                   abs_scale=lambda x, p: p["alpha"] * neg(x, p)),
        _piecewise("selu", lambda x, p: _SELU_SCALE * _elu_ref(x, _SELU_ALPHA), "F.selu({a})", "tf.nn.selu({a})",
                   lambda b, p: 1.06 * max(b, 1.7), zero, abs_scale=lambda x, p: 2 * neg(x, p)),
        _piecewise("celu", lambda x, p: np.where(x > 0, x, p["alpha"] * np.expm1(np.minimum(x, 0.0) / p["alpha"])),
                   "F.celu({a}, alpha={alpha})",
                   "tf.where({a} > 0, {a}, {alpha} * tf.math.expm1(tf.minimum({a}, 0.0) / {alpha}))",
                   lambda b, p: max(b, p["alpha"]), zero, plan=_choices(alpha=(1.0, 0.5, 2.0)),
                   abs_scale=lambda x, p: p["alpha"] * neg(x, p)),
        # torch's softplus returns x where beta*x > threshold: a jump of log1p(exp(-threshold))/beta,
        # hence piecewise. TF's softplus has neither beta nor threshold: composed with tf.where.
        _piecewise("softplus", _softplus_ref, "F.softplus({a}, beta={beta}, threshold={threshold})",
                   "tf.where({beta} * {a} > {threshold}, {a}, tf.math.softplus({beta} * {a}) / {beta})",
                   lambda b, p: b + 1 / p["beta"], lambda p: (p["threshold"] / p["beta"],),
                   plan=_choices(beta=(1.0, 0.5, 2.0), threshold=(20.0, 1.0, 5.0))),
        _piecewise("softsign", lambda x, p: x / (1 + np.abs(x)), "F.softsign({a})", "tf.nn.softsign({a})",
                   lambda b, p: 1.0, zero),
        _piecewise("hardtanh", lambda x, p: np.clip(x, p["min_val"], p["max_val"]),
                   "F.hardtanh({a}, min_val={min_val}, max_val={max_val})",
                   "tf.clip_by_value({a}, {min_val}, {max_val})", lambda b, p: 2.0,
                   lambda p: (p["min_val"], p["max_val"]),
                   plan=_choices(min_val=(-1.0, -2.0, -0.5), max_val=(1.0, 0.5, 2.0))),
        _piecewise("relu6", lambda x, p: np.clip(x, 0.0, 6.0), "F.relu6({a})", "tf.nn.relu6({a})",
                   lambda b, p: 6.0, lambda p: (0.0, 6.0)),
        # torch: relu6(x + 3) / 6. Keras 2's hard_sigmoid was 0.2 x + 0.5: composed here instead.
        _piecewise("hardsigmoid", lambda x, p: _hardsigmoid_ref(x), "F.hardsigmoid({a})",
                   "tf.nn.relu6({a} + 3.0) / 6.0", lambda b, p: 1.0, lambda p: (-3.0, 3.0)),
        _piecewise("hardswish", lambda x, p: x * _hardsigmoid_ref(x), "F.hardswish({a})",
                   "{a} * tf.nn.relu6({a} + 3.0) / 6.0", lambda b, p: b, lambda p: (-3.0, 3.0)),
        _piecewise("abs", lambda x, p: np.abs(x), "torch.abs({a})", "tf.math.abs({a})", lambda b, p: b, zero),
    ]


# ------------------------------------------------------------------ binary elementwise


def _binary(name: str, ref: Callable[[Array, Array, Params], Array], torch: Template, tf: Template,
            bound: Callable[[float, float, Params], float], lip: Callable[[Array, Array, Params], tuple[float, float]],
            plan: PlanFn = _no_params, extras: Callable[[Params, Sequence[Shape]], dict[str, str]] | None = None) -> OpSpec:
    return OpSpec(
        name, "binary", 2, torch, tf, lambda xs, p, ws: ref(xs[0], xs[1], p), _broadcastable, plan,
        lambda bs, ss, p: bound(bs[0], bs[1], p), lambda xs, out, p, ws: (lip(xs[0], xs[1], p), 1.0), extras=extras,
    )


def _binary_ops() -> list[OpSpec]:
    ones = lambda a, b, p: (1.0, 1.0)
    # max over t of 2|t|/(t^2+c)^2 is (9 / (8 sqrt 3)) c^-1.5
    div_lip = lambda a, b, p: (1 / p["c"], _amax(a) * 0.65 * p["c"] ** -1.5)
    bshape = lambda p, s: {"shape": _lst(np.broadcast_shapes(*s))}
    return [
        _binary("add", lambda a, b, p: a + b, "torch.add({a}, {b})", "tf.math.add({a}, {b})",
                lambda x, y, p: x + y, ones),
        _binary("sub", lambda a, b, p: a - b, "torch.sub({a}, {b})", "tf.math.subtract({a}, {b})",
                lambda x, y, p: x + y, ones),
        _binary("mul", lambda a, b, p: a * b, "torch.mul({a}, {b})", "tf.math.multiply({a}, {b})",
                lambda x, y, p: x * y, lambda a, b, p: (_amax(b), _amax(a))),
        _binary("div_c", lambda a, b, p: a / (b * b + p["c"]), "torch.div({a}, torch.square({b}) + {c})",
                "tf.math.divide({a}, tf.math.square({b}) + {c})", lambda x, y, p: x / p["c"], div_lip,
                plan=_choices(c=(1.0, 0.25, 4.0))),
        # TF has no broadcasting logaddexp outside tf.experimental.numpy: logsumexp of a stack.
        _binary("logaddexp", lambda a, b, p: np.logaddexp(a, b), "torch.logaddexp({a}, {b})",
                "tf.math.reduce_logsumexp(tf.stack([tf.broadcast_to({a}, {shape}), tf.broadcast_to({b}, {shape})]), axis=0)",
                lambda x, y, p: max(x, y) + 1, ones, extras=bshape),
    ]


# ============================================================================ reductions


def _dims_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"dims": _draw_dims(draw, len(shapes[0])), "keepdims": draw(st.booleans())}


def _axes_extra(p: Params, s: Sequence[Shape]) -> dict[str, str]:
    return {"axes": _lst(p["dims"])}


def _reduction(name: str, ref: Callable[[Array, tuple[int, ...], bool], Array], torch_fn: str, tf_fn: str,
               bound: Callable[[float, int], float], lip: Callable[[int], float]) -> OpSpec:
    """Reductions over a tuple of dims, with keepdims, the same in both frameworks."""

    def n_of(s: Sequence[Shape], p: Params) -> int:
        return _reduced_size(s[0], p["dims"])

    return OpSpec(
        name, "reduction", 1, f"{torch_fn}({{a}}, dim={{dims}}, keepdim={{keepdims}})",
        f"{tf_fn}({{a}}, axis={{axes}}, keepdims={{keepdims}})",
        lambda xs, p, ws: np.asarray(ref(xs[0], p["dims"], p["keepdims"])), _rank_at_least(1), _dims_plan,
        lambda bs, ss, p: bound(bs[0], n_of(ss, p)),
        lambda xs, out, p, ws: ((lip(_reduced_size(xs[0].shape, p["dims"])),), _reduced_size(xs[0].shape, p["dims"])),
        extras=_axes_extra,
    )


def _logsumexp_ref(x: Array, dims: tuple[int, ...], keepdims: bool) -> Array:
    m = np.max(x, axis=dims, keepdims=True)
    out = m + np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=dims)


def _var_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    p = _dims_plan(draw, shapes, bounds)
    n = _reduced_size(shapes[0], p["dims"])
    return {**p, "correction": draw(st.sampled_from((1, 0))) if n > 1 else 0}


def _var_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    n = _reduced_size(xs[0].shape, p["dims"])
    return (4 * n * _amax(xs[0]) / (n - p["correction"]),), n


def _axis_plan(max_len: int = 1 << 30) -> PlanFn:
    def plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
        ok = [a for a, n in enumerate(shapes[0]) if n <= max_len]
        if not ok:
            return None
        axis = draw(st.sampled_from(ok))
        return {"axis": axis - len(shapes[0]) if draw(st.booleans()) else axis, "keepdims": draw(st.booleans())}

    return plan


def _axis_len(xs: Sequence[Array], p: Params) -> int:
    return int(xs[0].shape[p["axis"]])


def _norm_ref(x: Array, p: Params) -> Array:
    ax = _norm_axis(p["axis"], x.ndim)
    pads = [(0, 1) if d == ax else (0, 0) for d in range(x.ndim)]
    xp = np.abs(np.pad(x, pads, constant_values=p["pad"]))
    return np.sum(xp ** p["ord"], axis=ax, keepdims=p["keepdims"]) ** (1.0 / p["ord"])


def _norm_extras(p: Params, s: Sequence[Shape]) -> dict[str, str]:
    r = len(s[0])
    ax = _norm_axis(p["axis"], r)
    torch_pad = [0, 0] * (r - 1 - ax) + [0, 1]  # F.pad counts from the last dim backwards
    tf_pad = [[0, 1] if d == ax else [0, 0] for d in range(r)]
    return {"torch_pad": repr(tuple(torch_pad)), "tf_pad": repr(tf_pad)}


def _softmax_ref(x: Array, axis: int) -> Array:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax_ref(x: Array, axis: int) -> Array:
    z = x - np.max(x, axis=axis, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def _cumsum_ref(x: Array, p: Params) -> Array:
    ax = p["axis"]
    y = np.flip(x, ax) if p["reverse"] else x
    c = np.cumsum(y, axis=ax)
    if p["exclusive"]:
        head = np.zeros_like(np.take(c, [0], axis=ax))
        c = np.concatenate([head, np.take(c, range(c.shape[ax] - 1), axis=ax)], axis=ax)
    return np.flip(c, ax) if p["reverse"] else c


def _cumsum_torch(p: Params, s: Sequence[Shape]) -> str:
    # torch.cumsum has neither TF's exclusive nor reverse: flips and a subtraction.
    base = "torch.cumsum({a}, dim={axis})"
    if p["reverse"]:
        base = "torch.flip(torch.cumsum(torch.flip({a}, dims=({axis},)), dim={axis}), dims=({axis},))"
    return f"({base} - {{a}})" if p["exclusive"] else base


def _logcumsumexp_ref(x: Array, p: Params) -> Array:
    ax = p["axis"]
    y = np.flip(x, ax) if p["reverse"] else x
    c = np.logaddexp.accumulate(y, axis=ax)
    return np.flip(c, ax) if p["reverse"] else c


def _logcumsumexp_torch(p: Params, s: Sequence[Shape]) -> str:
    if p["reverse"]:
        return "torch.flip(torch.logcumsumexp(torch.flip({a}, dims=({axis},)), dim={axis}), dims=({axis},))"
    return "torch.logcumsumexp({a}, dim={axis})"


def _axis_op(name: str, ref: Callable[[Array, Params], Array], torch: Template, tf: Template,
             bound: Callable[[float, int], float], lip: Callable[[int], float], **flags: Sequence[Any]) -> OpSpec:
    """Ops along one axis (softmax, cumulative sums): same shape out."""

    def plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
        return {"axis": _draw_axis(draw, len(shapes[0])), **{k: draw(st.sampled_from(v)) for k, v in flags.items()}}

    return OpSpec(
        name, "reduction", 1, torch, tf, _unary(ref), _rank_at_least(1), plan,
        lambda bs, ss, p: bound(bs[0], ss[0][p["axis"]]),
        lambda xs, out, p, ws: ((lip(_axis_len(xs, p)),), _axis_len(xs, p)),
    )


def _reduction_ops() -> list[OpSpec]:
    return [
        _reduction("sum", lambda x, d, k: np.sum(x, axis=d, keepdims=k), "torch.sum", "tf.math.reduce_sum",
                   lambda b, n: n * b, lambda n: n),
        _reduction("mean", lambda x, d, k: np.mean(x, axis=d, keepdims=k), "torch.mean", "tf.math.reduce_mean",
                   lambda b, n: b, lambda n: 1.0),
        _reduction("logsumexp", _logsumexp_ref, "torch.logsumexp", "tf.math.reduce_logsumexp",
                   lambda b, n: b + math.log(n), lambda n: 1.0),
        # Defaults differ: torch.var corrects by 1 (unbiased), tf.math.reduce_variance does not.
        OpSpec("var", "reduction", 1, "torch.var({a}, dim={dims}, correction={correction}, keepdim={keepdims})",
               "tf.math.reduce_variance({a}, axis={axes}, keepdims={keepdims}) * {factor}",
               lambda xs, p, ws: np.asarray(np.var(xs[0], axis=p["dims"], ddof=p["correction"], keepdims=p["keepdims"])),
               _rank_at_least(1), _var_plan, lambda bs, ss, p: 2 * bs[0] ** 2 * _reduced_size(ss[0], p["dims"]),
               _var_lip,
               extras=lambda p, s: {**_axes_extra(p, s), "factor": _var_factor(s[0], p)}),
        # prod only over short axes of bounded values: the generator checks b**n.
        OpSpec("prod", "reduction", 1, "torch.prod({a}, dim={axis}, keepdim={keepdims})",
               "tf.math.reduce_prod({a}, axis={axis}, keepdims={keepdims})",
               lambda xs, p, ws: np.asarray(np.prod(xs[0], axis=p["axis"], keepdims=p["keepdims"])), _rank_at_least(1),
               _axis_plan(max_len=4), lambda bs, ss, p: bs[0] ** ss[0][p["axis"]],
               lambda xs, out, p, ws: ((_axis_len(xs, p) * max(1.0, _amax(xs[0])) ** (_axis_len(xs, p) - 1),),
                                       _axis_len(xs, p))),
        # ||concat(x, pad)||_ord: the norm API itself, kept away from 0 (where it has a kink).
        OpSpec("norm_c", "reduction", 1,
               "torch.linalg.vector_norm(F.pad({a}, {torch_pad}, value={pad}), ord={ord}, dim={axis}, keepdim={keepdims})",
               "tf.norm(tf.pad({a}, {tf_pad}, constant_values={pad}), ord={ord}, axis={axis}, keepdims={keepdims})",
               _unary(_norm_ref), _rank_at_least(1), _norm_plan,
               lambda bs, ss, p: (ss[0][p["axis"]] + 1) * max(bs[0], p["pad"]),
               lambda xs, out, p, ws: ((float(_axis_len(xs, p)),), _axis_len(xs, p) + 1), extras=_norm_extras),
        _axis_op("softmax", lambda x, p: _softmax_ref(x, p["axis"]), "F.softmax({a}, dim={axis})",
                 "tf.nn.softmax({a}, axis={axis})", lambda b, n: 1.0, lambda n: 1.0),
        _axis_op("log_softmax", lambda x, p: _log_softmax_ref(x, p["axis"]), "F.log_softmax({a}, dim={axis})",
                 "tf.nn.log_softmax({a}, axis={axis})", lambda b, n: 2 * b + math.log(n), lambda n: 2.0),
        _axis_op("cumsum", _cumsum_ref, _cumsum_torch,
                 "tf.math.cumsum({a}, axis={axis}, exclusive={exclusive}, reverse={reverse})",
                 lambda b, n: n * b, lambda n: n, exclusive=(False, True), reverse=(False, True)),
        # TF's exclusive logcumsumexp starts at -inf: left out.
        _axis_op("logcumsumexp", _logcumsumexp_ref, _logcumsumexp_torch,
                 "tf.math.cumulative_logsumexp({a}, axis={axis}, reverse={reverse})",
                 lambda b, n: b + math.log(n), lambda n: 1.0, reverse=(False, True)),
    ]


def _var_factor(shape: Shape, p: Params) -> str:
    n = _reduced_size(shape, p["dims"])
    return f"({n} / {n - p['correction']})"


def _norm_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"axis": _draw_axis(draw, len(shapes[0])), "ord": draw(st.sampled_from((2, 4))),
            "pad": draw(st.sampled_from((1.0, 0.25, 0.5, 2.0))), "keepdims": draw(st.booleans())}


# ============================================================================ shape ops


def _move(name: str, ref: Callable[[Array, Params], Array], torch: Template, tf: Template,
          accepts: Callable[[Sequence[Shape]], bool], plan: PlanFn,
          extras: Callable[[Params, Sequence[Shape]], dict[str, str]] | None = None) -> OpSpec:
    """Pure data movement: exact, 1-Lipschitz, bound preserved."""
    return OpSpec(name, "shape", 1, torch, tf, _unary(ref), accepts, plan, lambda bs, ss, p: bs[0],
                  lambda xs, out, p, ws: ((1.0,), 0.0), extras=extras)


def _permute_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"perm": tuple(draw(st.permutations(range(len(shapes[0])))))}


def _prime_factors(n: int) -> list[int]:
    out, f = [], 2
    while n > 1:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 1
    return out


def _reshape_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    factors = draw(st.permutations(_prime_factors(math.prod(shapes[0]))))
    dims: list[int] = []
    for f in factors:
        if dims and draw(st.booleans()):
            dims[-1] *= f
        else:
            dims.append(f)
    if draw(st.booleans()):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    if dims and draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1  # let the framework infer one dim
    return {"shape": tuple(dims)}


def _flip_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"dims": _draw_dims(draw, len(shapes[0]))}


def _roll_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    dims = _draw_dims(draw, len(shapes[0]))
    n = [shapes[0][d] for d in dims]
    return {"shifts": tuple(draw(st.integers(-2 * k, 2 * k)) for k in n), "dims": dims}


def _slice_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
    axis = draw(st.integers(0, len(shapes[0]) - 1))
    n = shapes[0][axis]
    start = draw(st.none() | st.integers(-n, n - 1))
    stop = draw(st.none() | st.integers(-n, n))
    step = draw(st.integers(1, 3))
    if not range(n)[slice(start, stop, step)]:
        return None
    return {"axis": axis, "start": start, "stop": stop, "step": step}


def _slice_index(p: Params) -> tuple[Any, ...]:
    return (slice(None),) * p["axis"] + (slice(p["start"], p["stop"], p["step"]),)


def _slice_extras(p: Params, s: Sequence[Shape]) -> dict[str, str]:
    part = ":".join("" if v is None else str(v) for v in (p["start"], p["stop"], p["step"]))
    return {"index": ", ".join([":"] * p["axis"] + [part])}


def _gather_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    axis = _draw_axis(draw, len(shapes[0]))
    n = shapes[0][axis]
    return {"axis": axis, "indices": tuple(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n + 2)))}


def _broadcast_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    target = tuple(lead) + tuple(draw(st.integers(1, 3)) if n == 1 else n for n in shapes[0])
    return {"shape": target} if math.prod(target) <= 4096 else None


def _shape_ops() -> list[OpSpec]:
    return [
        _move("permute", lambda x, p: np.transpose(x, p["perm"]), "torch.permute({a}, {perm})",
              "tf.transpose({a}, perm={tf_perm})", _rank_at_least(2), _permute_plan,
              extras=lambda p, s: {"tf_perm": _lst(p["perm"])}),
        _move("reshape", lambda x, p: np.reshape(x, p["shape"]), "torch.reshape({a}, {shape})",
              "tf.reshape({a}, {tf_shape})", _any, _reshape_plan, extras=lambda p, s: {"tf_shape": _lst(p["shape"])}),
        _move("flip", lambda x, p: np.flip(x, p["dims"]), "torch.flip({a}, dims={dims})",
              "tf.reverse({a}, axis={axes})", _rank_at_least(1), _flip_plan, extras=_axes_extra),
        _move("roll", lambda x, p: np.roll(x, p["shifts"], p["dims"]), "torch.roll({a}, shifts={shifts}, dims={dims})",
              "tf.roll({a}, shift={tf_shifts}, axis={axes})", _rank_at_least(1), _roll_plan,
              extras=lambda p, s: {"tf_shifts": _lst(p["shifts"]), **_axes_extra(p, s)}),
        # Basic slicing with a positive step (torch has no negative steps).
        _move("slice", lambda x, p: x[_slice_index(p)], "{a}[{index}]", "{a}[{index}]", _rank_at_least(1),
              _slice_plan, extras=_slice_extras),
        # Repeated indices: the gradient must accumulate (scatter-add).
        _move("gather", lambda x, p: np.take(x, p["indices"], axis=p["axis"]),
              "torch.index_select({a}, {axis}, torch.tensor({indices}, device={a}.device))",
              "tf.gather({a}, {tf_indices}, axis={axis})", _rank_at_least(1), _gather_plan,
              extras=lambda p, s: {"tf_indices": _lst(p["indices"])}),
        _move("broadcast_to", lambda x, p: np.broadcast_to(x, p["shape"]).copy(), "torch.broadcast_to({a}, {shape})",
              "tf.broadcast_to({a}, {tf_shape})", _any, _broadcast_plan,
              extras=lambda p, s: {"tf_shape": _lst(p["shape"])}),
        OpSpec("concat", "shape", 2, "torch.cat([{a}, {b}], dim={axis})", "tf.concat([{a}, {b}], axis={axis})",
               lambda xs, p, ws: np.concatenate(xs, axis=p["axis"]), _concatenable, _concat_plan,
               lambda bs, ss, p: max(bs), lambda xs, out, p, ws: ((1.0, 1.0), 0.0)),
        OpSpec("stack", "shape", 2, "torch.stack([{a}, {b}], dim={axis})", "tf.stack([{a}, {b}], axis={axis})",
               lambda xs, p, ws: np.stack(xs, axis=p["axis"]), lambda s: s[0] == s[1],
               lambda draw, s, b: {"axis": draw(st.integers(-len(s[0]) - 1, len(s[0])))},
               lambda bs, ss, p: max(bs), lambda xs, out, p, ws: ((1.0, 1.0), 0.0)),
    ]


def _concatenable(shapes: Sequence[Shape]) -> bool:
    a, b = shapes
    return len(a) == len(b) >= 1 and sum(x != y for x, y in zip(a, b)) <= 1


def _concat_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    a, b = shapes
    differ = [d for d, (x, y) in enumerate(zip(a, b)) if x != y]
    axis = differ[0] if differ else draw(st.integers(0, len(a) - 1))
    return {"axis": axis - len(a) if draw(st.booleans()) else axis}


# ============================================================================ linear algebra


def _dd_scale(n: int, frac: float) -> float:
    """A dyadic s < 1/n: I + s*tanh(x) is then strictly diagonally dominant."""
    return frac * 2.0 ** -math.ceil(math.log2(n)) if n > 1 else frac


def _dd_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"s": _dd_scale(shapes[0][-1], draw(st.sampled_from((0.5, 0.25, 0.75, 0.875))))}


def _dd(x: Array, p: Params) -> Array:
    return np.eye(x.shape[-1]) + p["s"] * np.tanh(x)


def _spd(x: Array, p: Params) -> Array:
    t = np.tanh(x)
    return t @ np.swapaxes(t, -1, -2) + p["c"] * np.eye(x.shape[-2])


def _trisolve(m: Array, x: Array, p: Params) -> Array:
    lower = np.linalg.cholesky(m)
    return np.linalg.solve(np.swapaxes(lower, -1, -2) if p["adjoint"] else lower, np.tanh(x))


def _matrix_lip(build: Callable[[Array, Params], Array], apply: Callable[[Array, Array, Params], Array],
                terms: Callable[[Shape, Params], float]) -> LipFn:
    """Lipschitz constant in x, plus the rounding of the built matrix M: its entries are
    sums of terms up to ``terms`` in size (1 + s*tanh(x) may cancel to 1/8), rounded with
    an absolute error whatever the size of x, which gives ``L_M * terms``."""

    def lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float, float]:
        x = xs[0]
        lx = _jacobian_norm(lambda v: apply(build(v, p), v, p), x, 2)
        lm = _jacobian_norm(lambda v: apply(v, x, p), build(x, p), 2)
        return (lx,), float(max(x.shape[-2:]) ** 3), lm * terms(x.shape, p)

    return lip


def _matrix_op(name: str, build: Callable[[Array, Params], Array], apply: Callable[[Array, Array, Params], Array],
               torch: Template, tf: Template, bound: Callable[[float, Shape, Params], float],
               accepts: Callable[[Sequence[Shape]], bool], plan: PlanFn) -> OpSpec:
    """out = apply(M, x) with M = build(x), a well-conditioned matrix made from the input."""
    terms = _dd_terms if build is _dd else _spd_terms
    return OpSpec(name, "linalg", 1, torch, tf, lambda xs, p, ws: apply(build(xs[0], p), xs[0], p), accepts, plan,
                  lambda bs, ss, p: bound(bs[0], ss[0], p), _matrix_lip(build, apply, terms),
                  extras=lambda p, s: {"n": str(s[0][-2])})


def _dd_terms(shape: Shape, p: Params) -> float:
    return 1.0 + p["s"]


def _spd_terms(shape: Shape, p: Params) -> float:
    return shape[-1] + p["c"]


_DD_TORCH: Final = "(torch.eye({n}, dtype={a}.dtype, device={a}.device) + {s} * torch.tanh({a}))"
_DD_TF: Final = "(tf.eye({n}, dtype={a}.dtype) + {s} * tf.math.tanh({a}))"
_SPD_TORCH: Final = ("torch.linalg.cholesky(torch.tanh({a}) @ torch.tanh({a}).mT"
                     " + {c} * torch.eye({n}, dtype={a}.dtype, device={a}.device))")
_SPD_TF: Final = ("tf.linalg.cholesky(tf.linalg.matmul(tf.math.tanh({a}), tf.math.tanh({a}), transpose_b=True)"
                  " + {c} * tf.eye({n}, dtype={a}.dtype))")


def _trisolve_torch(p: Params, s: Sequence[Shape]) -> str:
    factor = _SPD_TORCH + (".mT" if p["adjoint"] else "")
    return f"torch.linalg.solve_triangular({factor}, torch.tanh({{a}}), upper={p['adjoint']})"


def _linalg_ops() -> list[OpSpec]:
    spd_plan = _choices(c=(1.0, 0.5, 2.0))
    matrix = _rank_at_least(2)
    return [
        _matrix_op("det_dd", _dd, lambda m, x, p: np.linalg.det(m), f"torch.linalg.det({_DD_TORCH})",
                   f"tf.linalg.det({_DD_TF})", lambda b, s, p: 2.0 ** s[-1], _square, _dd_plan),
        _matrix_op("logdet_dd", _dd, lambda m, x, p: np.linalg.slogdet(m)[1],
                   f"torch.linalg.slogdet({_DD_TORCH}).logabsdet", f"tf.linalg.slogdet({_DD_TF})[1]",
                   lambda b, s, p: 3.0 * s[-1], _square, _dd_plan),
        _matrix_op("inv_dd", _dd, lambda m, x, p: np.linalg.inv(m), f"torch.linalg.inv({_DD_TORCH})",
                   f"tf.linalg.inv({_DD_TF})", lambda b, s, p: 8.0, _square, _dd_plan),
        # The right-hand side is x itself: the solution depends on x through both A and b.
        _matrix_op("solve_dd", _dd, lambda m, x, p: np.linalg.solve(m, x),
                   f"torch.linalg.solve({_DD_TORCH}, {{a}})", f"tf.linalg.solve({_DD_TF}, {{a}})",
                   lambda b, s, p: 8.0 * b, _square, _dd_plan),
        # cholesky(t t^T + c I), t = tanh(x): positive definite with condition <= 1 + k/c.
        _matrix_op("cholesky_spd", _spd, lambda m, x, p: np.linalg.cholesky(m), _SPD_TORCH, _SPD_TF,
                   lambda b, s, p: math.sqrt(s[-1] + p["c"]), matrix, spd_plan),
        # Solves L y = tanh(x) (or L^T y with adjoint) for that Cholesky factor L.
        _matrix_op("trisolve", _spd, _trisolve, _trisolve_torch,
                   f"tf.linalg.triangular_solve({_SPD_TF}, tf.math.tanh({{a}}), lower=True, adjoint={{adjoint}})",
                   lambda b, s, p: math.sqrt(s[-2] / p["c"]), matrix, _choices(c=(1.0, 0.5, 2.0), adjoint=(False, True))),
        OpSpec("trace", "linalg", 1,
               lambda p, s: "torch.trace({a})" if len(s[0]) == 2 else "torch.diagonal({a}, dim1=-2, dim2=-1).sum(-1)",
               "tf.linalg.trace({a})", lambda xs, p, ws: np.trace(xs[0], axis1=-2, axis2=-1), matrix, _no_params,
               lambda bs, ss, p: min(ss[0][-2:]) * bs[0],
               lambda xs, out, p, ws: ((float(min(xs[0].shape[-2:])),), min(xs[0].shape[-2:]))),
        OpSpec("diagonal", "linalg", 1, "torch.diagonal({a}, offset={offset}, dim1=-2, dim2=-1)",
               "tf.linalg.diag_part({a}, k={offset})",
               lambda xs, p, ws: np.diagonal(xs[0], p["offset"], axis1=-2, axis2=-1).copy(), matrix,
               lambda draw, s, b: {"offset": draw(st.integers(1 - s[0][-2], s[0][-1] - 1))},
               lambda bs, ss, p: bs[0], lambda xs, out, p, ws: ((1.0,), 0.0)),
    ]


# ============================================================================ contractions


def _matmul_options(a: Shape, b: Shape) -> list[tuple[bool, bool]]:
    if len(a) < 2 or len(b) < 2 or not _broadcastable([a[:-2], b[:-2]]):
        return []
    return [(ta, tb) for ta in (False, True) for tb in (False, True)
            if (a[-2] if ta else a[-1]) == (b[-1] if tb else b[-2])]


def _matmul_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    a = np.swapaxes(xs[0], -1, -2) if p["transpose_a"] else xs[0]
    b = np.swapaxes(xs[1], -1, -2) if p["transpose_b"] else xs[1]
    return np.matmul(a, b)


def _matmul_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    ta, tb = draw(st.sampled_from(_matmul_options(*shapes)))
    return {"transpose_a": ta, "transpose_b": tb}


def _inner(shape: Shape, p: Params) -> int:
    return shape[-2] if p["transpose_a"] else shape[-1]


def _matmul_torch(p: Params, s: Sequence[Shape]) -> str:
    a = "{a}.mT" if p["transpose_a"] else "{a}"
    b = "{b}.mT" if p["transpose_b"] else "{b}"
    return f"torch.matmul({a}, {b})"


def _einsum_letters(eq: str) -> tuple[list[str], str]:
    ins, out = eq.split("->")
    return ins.split(","), out


def _einsum_sum_size(eq: str, shapes: Sequence[Shape]) -> int:
    ins, out = _einsum_letters(eq)
    sizes = {c: n for sub, s in zip(ins, shapes) for c, n in zip(sub, s)}
    return math.prod(n for c, n in sizes.items() if c not in out)


def _einsum1_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    shape = shapes[0]
    subs = list(_LETTERS[: len(shape)])
    pairs = [(i, j) for i in range(len(shape)) for j in range(i + 1, len(shape)) if shape[i] == shape[j]]
    if pairs and draw(st.booleans()):
        i, j = draw(st.sampled_from(pairs))
        subs[j] = subs[i]  # a repeated letter: a diagonal
    letters = sorted(set(subs))
    out = draw(st.lists(st.sampled_from(letters), unique=True, max_size=len(letters)))
    return {"equation": "".join(subs) + "->" + "".join(out)}


def _einsum2_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    a, b = shapes
    sub_a = _LETTERS[: len(a)]
    fresh = iter(_LETTERS[len(a):])
    sub_b = ""
    for n in b:
        shared = [c for c, m in zip(sub_a, a) if m == n and c not in sub_b]
        sub_b += draw(st.sampled_from(shared)) if shared and draw(st.booleans()) else next(fresh)
    letters = sorted(set(sub_a + sub_b))
    out = draw(st.lists(st.sampled_from(letters), unique=True, max_size=len(letters)))
    sizes = dict(zip(sub_a + sub_b, a + b))
    while math.prod(sizes[c] for c in out) > 4096:  # an outer product of two big inputs
        out.pop()
    return {"equation": f"{sub_a},{sub_b}->{''.join(out)}"}


def _einsum_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    n = _einsum_sum_size(p["equation"], [x.shape for x in xs])
    if len(xs) == 1:
        return (float(n),), n
    return (n * _amax(xs[1]), n * _amax(xs[0])), n


def _einsum_bound(bs: Sequence[float], ss: Sequence[Shape], p: Params) -> float:
    return _einsum_sum_size(p["equation"], ss) * math.prod(bs)


def _tensordot_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"axis": draw(st.integers(0, len(shapes[0]) - 1)), "k": draw(st.integers(1, 4)),
            "seed": draw(st.integers(0, 2**16))}


def _weight_lip(axis: int) -> LipFn:
    """Lipschitz constant of a contraction with a constant weight over its ``axis``."""

    def lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
        w = ws[0]  # a bias (ws[1]) shifts the output and changes no Lipschitz constant
        return (float(np.max(np.sum(np.abs(w), axis=axis))),), w.shape[axis]

    return lip


def _linear_tf(p: Params, s: Sequence[Shape]) -> str:
    # tf.linalg.matmul needs rank >= 2; F.linear also takes vectors.
    core = "tf.linalg.matmul({a}, {w}, transpose_b=True)" if len(s[0]) >= 2 else "tf.linalg.matvec({w}, {a})"
    return core + (" + {w1}" if p["bias"] else "")


def _linear_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    out = np.tensordot(xs[0], ws[0], axes=([-1], [1]))
    return out + ws[1] if p["bias"] else out


def _contraction_ops() -> list[OpSpec]:
    return [
        OpSpec("matmul", "contraction", 2, _matmul_torch,
               "tf.linalg.matmul({a}, {b}, transpose_a={transpose_a}, transpose_b={transpose_b})", _matmul_ref,
               lambda s: bool(_matmul_options(*s)), _matmul_plan,
               lambda bs, ss, p: _inner(ss[0], p) * bs[0] * bs[1],
               lambda xs, out, p, ws: ((_inner(xs[0].shape, p) * _amax(xs[1]), _inner(xs[0].shape, p) * _amax(xs[0])),
                                       _inner(xs[0].shape, p))),
        OpSpec("einsum", "contraction", 1, "torch.einsum({equation}, {a})", "tf.einsum({equation}, {a})",
               lambda xs, p, ws: np.asarray(np.einsum(p["equation"], xs[0])), lambda s: 1 <= len(s[0]) <= 4,
               _einsum1_plan, _einsum_bound, _einsum_lip),
        OpSpec("einsum2", "contraction", 2, "torch.einsum({equation}, {a}, {b})", "tf.einsum({equation}, {a}, {b})",
               lambda xs, p, ws: np.asarray(np.einsum(p["equation"], xs[0], xs[1])),
               lambda s: 1 <= len(s[0]) and 1 <= len(s[1]) and len(s[0]) + len(s[1]) <= 6,
               _einsum2_plan, _einsum_bound, _einsum_lip),
        OpSpec("tensordot", "contraction", 1, "torch.tensordot({a}, {w}, dims=([{axis}], [0]))",
               "tf.tensordot({a}, {w}, axes=[[{axis}], [0]])",
               lambda xs, p, ws: np.tensordot(xs[0], ws[0], axes=([p["axis"]], [0])), _rank_at_least(1),
               _tensordot_plan, lambda bs, ss, p: 2.0 * ss[0][p["axis"]] * bs[0], _weight_lip(0),
               weights=lambda ss, p: ((ss[0][p["axis"]], p["k"]),)),
        OpSpec("linear", "contraction", 1, lambda p, s: "F.linear({a}, {w}, {w1})" if p["bias"] else "F.linear({a}, {w})",
               _linear_tf, _linear_ref, _rank_at_least(1),
               lambda draw, s, b: {"k": draw(st.integers(1, 4)), "bias": draw(st.booleans()),
                                   "seed": draw(st.integers(0, 2**16))},
               lambda bs, ss, p: 2.0 * ss[0][-1] * bs[0] + 2.0, _weight_lip(1),
               weights=lambda ss, p: ((p["k"], ss[0][-1]),) + (((p["k"],),) if p["bias"] else ())),
    ]


# ============================================================================ nn ops


def _conv2d_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x, w = xs[0], ws[0]
    s, d = p["stride"], 1
    kh, kw = w.shape[-2:]
    ho = (x.shape[2] - d * (kh - 1) - 1) // s + 1
    wo = (x.shape[3] - d * (kw - 1) - 1) // s + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i, j in product(range(kh), range(kw)):
        patch = x[:, :, i * d : i * d + s * (ho - 1) + 1 : s, j * d : j * d + s * (wo - 1) + 1 : s]
        out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


def _conv2d_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    # No dilation: TF's CPU Conv2D runs dilations > 1 forward, but its gradient
    # (Conv2DBackpropInput) refuses them: "Current CPU implementations do not yet support
    # dilation rates larger than 1".
    h, w = shapes[0][2:]
    kernel = (draw(st.integers(1, min(3, h))), draw(st.integers(1, min(3, w))))
    return {"out_channels": draw(st.integers(1, 3)), "kernel": kernel, "stride": draw(st.integers(1, 2)),
            "seed": draw(st.integers(0, 2**16))}


def _avg_pool_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    (kh, kw), s = p["kernel"], p["stride"]
    ho, wo = (x.shape[2] - kh) // s + 1, (x.shape[3] - kw) // s + 1
    out = np.zeros(x.shape[:2] + (ho, wo))
    for i, j in product(range(kh), range(kw)):
        out += x[:, :, i : i + s * (ho - 1) + 1 : s, j : j + s * (wo - 1) + 1 : s]
    return out / (kh * kw)


def _avg_pool_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    h, w = shapes[0][2:]
    return {"kernel": (draw(st.integers(1, min(3, h))), draw(st.integers(1, min(3, w)))),
            "stride": draw(st.integers(1, 2))}


def _nchw_tf(core: str) -> str:
    """TF convolutions and pools are NHWC on CPU: transpose in and out of torch's NCHW."""
    return f"tf.transpose({core.format(x='tf.transpose({a}, (0, 2, 3, 1))')}, (0, 3, 1, 2))"


def _layer_norm_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    axes = tuple(range(x.ndim - p["k"], x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + p["eps"])


def _layer_norm_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    norm = _jacobian_norm(lambda x: _layer_norm_ref([x], p, ws), xs[0], p["k"])
    return (norm,), math.prod(xs[0].shape[-p["k"]:])


def _image(shapes: Sequence[Shape]) -> bool:
    return len(shapes[0]) == 4


def _nn_ops() -> list[OpSpec]:
    kernel = lambda ss, p: ((p["out_channels"], ss[0][1], *p["kernel"]),)
    return [
        OpSpec("conv2d", "nn", 1, "F.conv2d({a}, {w}, stride={stride})",
               _nchw_tf("tf.nn.conv2d({x}, tf.transpose({{w}}, (2, 3, 1, 0)), strides={{stride}}, padding='VALID')"),
               _conv2d_ref, _image, _conv2d_plan, lambda bs, ss, p: 2.0 * ss[0][1] * math.prod(p["kernel"]) * bs[0],
               lambda xs, out, p, ws: ((float(np.max(np.sum(np.abs(ws[0]), axis=(1, 2, 3)))),),
                                       ws[0][0].size), weights=kernel),
        # torch's stride defaults to kernel_size; TF has no default: passed explicitly to both.
        OpSpec("avg_pool2d", "nn", 1, "F.avg_pool2d({a}, kernel_size={kernel}, stride={stride})",
               _nchw_tf("tf.nn.avg_pool2d({x}, ksize={{kernel}}, strides={{stride}}, padding='VALID')"),
               _avg_pool_ref, _image, _avg_pool_plan, lambda bs, ss, p: bs[0],
               lambda xs, out, p, ws: ((1.0,), math.prod(p["kernel"]))),
        # Default eps differs: torch 1e-5, keras.layers.LayerNormalization 1e-3.
        OpSpec("layer_norm", "nn", 1, "F.layer_norm({a}, {normalized_shape}, eps={eps})",
               "tf.nn.batch_normalization({a}, *tf.nn.moments({a}, axes={axes}, keepdims=True), offset=None, "
               "scale=None, variance_epsilon={eps})",
               _layer_norm_ref, _rank_at_least(1),
               lambda draw, s, b: {"k": draw(st.integers(1, min(3, len(s[0])))),
                                   "eps": draw(st.sampled_from((1e-5, 1e-3, 0.25)))},
               lambda bs, ss, p: math.sqrt(math.prod(ss[0][-p["k"]:])), _layer_norm_lip,
               extras=lambda p, s: {"normalized_shape": repr(s[0][len(s[0]) - p["k"]:]),
                                    "axes": _lst(range(len(s[0]) - p["k"], len(s[0])))}),
    ]


# ============================================================================ registry


def _with_hints(specs: list[OpSpec]) -> list[OpSpec]:
    """Attach the input-shape hints that make each op applicable to the first input."""
    hints: dict[str, Callable[[Draw, int], Shape]] = {
        "linalg": _hint_matrix, "conv2d": _hint_image, "avg_pool2d": _hint_image, "matmul": _hint_matrix,
        "permute": _hint_matrix, "reduction": _hint_tensor, "shape": _hint_tensor, "contraction": _hint_tensor,
        "layer_norm": _hint_tensor,
    }
    hints.update(dict.fromkeys(("det_dd", "logdet_dd", "inv_dd", "solve_dd"), _hint_square))
    return [replace(s, hint=hints.get(s.name, hints.get(s.category))) for s in specs]


def _hint_tensor(draw: Draw, max_side: int) -> Shape:
    return _draw_shape(draw, max_side, min_rank=1)


def _hint_square(draw: Draw, max_side: int) -> Shape:
    n = draw(st.integers(1, max_side))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    return (*batch, n, n)


def _hint_matrix(draw: Draw, max_side: int) -> Shape:
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    return (*batch, draw(st.integers(1, max_side)), draw(st.integers(1, max_side)))


def _hint_image(draw: Draw, max_side: int) -> Shape:
    side = st.integers(min(3, max_side), max_side)
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(side), draw(side))


#: Checks that some ops cannot pass for a framework reason, found by running them; each op
#: lists the reason in OpSpec.limits. Suites leave those ops out with op_names(without=...)
#: and check the limit itself as a claim, instead of failing at random.
TF_FORWARD_MODE: Final = "tf-forward-mode"  # tf.autodiff.ForwardAccumulator over the op
TORCH_FLOAT64_GRADIENT: Final = "torch-float64-gradient"  # torch's backward is float64-accurate
TORCH_FORWARD_MODE: Final = "torch-forward-mode"  # torch.func.jvp / forward AD over the op
KNOWN_LIMITS: Final[dict[str, dict[str, str]]] = {
    "softsign": {TF_FORWARD_MODE: "ForwardAccumulator raises LookupError: gradient registry has no entry for: "
                                  "SoftsignGrad (TF 2.21)"},
    "hardsigmoid": {TORCH_FLOAT64_GRADIENT: "F.hardsigmoid's backward returns float32(1/6) = 0.1666666716 in "
                                            "float64, a relative error of 3e-8 (torch 2.13)"},
    # Found by the soak (issue 17, seed 312022087): logcumsumexp_jvp normalises every prefix by
    # the global maximum, so a prefix far below it loses its tangent (pytorch/pytorch#196705).
    "logcumsumexp": {TORCH_FORWARD_MODE: "torch.logcumsumexp's JVP drops the tangent of a prefix far below "
                                         "the axis maximum: d y_0/d x_0 = 1e-13 instead of 1 at x = [-59.8, 0] "
                                         "(torch 2.13, pytorch#196705)"},
}


def _with_limits(specs: list[OpSpec]) -> list[OpSpec]:
    return [replace(s, limits=KNOWN_LIMITS.get(s.name, {})) for s in specs]


def op_names(*, without: Collection[str] = (), categories: Collection[str] | None = None) -> list[str]:
    """Names of the ops that have none of the limits in ``without`` (e.g. TF_FORWARD_MODE),
    optionally only those in ``categories``; pass the result as ``programs(ops=...)``."""
    return [name for name, s in OPS.items()
            if not set(without) & set(s.limits) and (categories is None or s.category in categories)]


#: Every operation, in the order hypothesis shrinks towards (simplest first).
OPS: dict[str, OpSpec] = {
    s.name: s
    for s in _with_limits(_with_hints(
        _smooth_ops() + _binary_ops() + _reduction_ops() + _shape_ops() + _contraction_ops() + _linalg_ops()
        + _nn_ops() + _piecewise_ops()
    ))
}


# ============================================================================ program strategy


@dataclass
class _Builder:
    """Registers (shape, magnitude bound) as the generator appends ops."""

    n_inputs: int
    shapes: list[Shape]
    bounds: list[float]
    ops: list[Op] = field(default_factory=list)
    used: set[int] = field(default_factory=set)

    def primaries(self) -> list[int]:
        """Registers the next op may read first: the last one, then unused inputs, then any."""
        if not self.ops:
            return list(range(self.n_inputs))
        last = len(self.shapes) - 1
        unused = [i for i in range(self.n_inputs) if i not in self.used]
        rest = [i for i in range(last) if i not in unused]
        return [last, *unused, *reversed(rest)]

    def push(self, name: str, params: dict[str, Any], args: tuple[int, ...], force: bool = False) -> bool:
        spec = OPS[name]
        arg_shapes = [self.shapes[i] for i in args]
        bound = spec.bound([self.bounds[i] for i in args], arg_shapes, params)
        if not (bound <= MAX_BOUND or force):
            return False
        shape = _out_shape(spec, arg_shapes, params)
        if math.prod(shape) > 4096 and not force:
            return False
        chained = args == (len(self.shapes) - 1,)
        self.ops.append(Op(name, tuple(params.items()), () if chained else args))
        self.shapes.append(shape)
        self.bounds.append(bound)
        self.used.update(args)
        return True


def _partners(b: _Builder, spec: OpSpec, primary: int) -> list[int]:
    """Second arguments for a binary op: unused inputs first, then the latest registers."""
    order = [i for i in range(b.n_inputs) if i not in b.used] + list(range(len(b.shapes) - 1, -1, -1))
    seen: list[int] = []
    for i in order:
        if i not in seen and spec.accepts([b.shapes[primary], b.shapes[i]]):
            seen.append(i)
    return seen


def _applicable(b: _Builder, spec: OpSpec, primary: int) -> bool:
    if spec.kinks is not None and primary >= b.n_inputs:
        return False
    if spec.arity == 2:
        return bool(_partners(b, spec, primary))
    return spec.accepts([b.shapes[primary]])


def _add_random_op(draw: Draw, b: _Builder, specs: Sequence[OpSpec], first: OpSpec | None = None) -> None:
    """Append one op reading a drawn register; ``first`` is preferred when it applies."""
    primary = draw(st.sampled_from(b.primaries()))
    options = [s for s in specs if _applicable(b, s, primary)]
    if not options:
        return
    spec = first if first in options else draw(st.sampled_from(options))
    args = (primary,) if spec.arity == 1 else (primary, draw(st.sampled_from(_partners(b, spec, primary))))
    params = spec.plan(draw, [b.shapes[i] for i in args], [b.bounds[i] for i in args])
    if params is not None:
        b.push(spec.name, params, args)


def _connect_unused(b: _Builder) -> None:
    """Every input and every op's result reaches the output: every gradient is defined and
    every op's backward is exercised. Connectors skip the bound check."""
    if not b.ops:  # nothing was applicable: a program has at least one op
        b.push("tanh", {}, (b.n_inputs - 1,), force=True)
    for i in [i for i in range(len(b.shapes) - 1) if i not in b.used]:
        out = len(b.shapes) - 1
        if _broadcastable([b.shapes[out], b.shapes[i]]) and math.prod(np.broadcast_shapes(b.shapes[out], b.shapes[i])) <= 4096:
            b.push("add", {}, (out, i), force=True)
            continue
        b.push("mean", {"dims": tuple(range(len(b.shapes[i]))), "keepdims": False}, (i,), force=True)
        b.push("add", {}, (out, out + 1), force=True)


def _draw_shape(draw: Draw, max_side: int, min_rank: int = 0) -> Shape:
    rank = draw(st.integers(min_rank, 4))
    shape = draw(st.lists(st.integers(1, max_side), min_size=rank, max_size=rank))
    if rank >= 2 and draw(st.booleans()):
        shape[-1] = shape[-2]  # square matrices are common enough for the matrix ops
    return tuple(shape)


def _related_shape(draw: Draw, first: Shape, max_side: int) -> Shape:
    kind = draw(st.sampled_from(("same", "broadcast", "matmul", "free")))
    if kind == "same":
        return first
    if kind == "broadcast":
        kept = first[draw(st.integers(0, len(first))):]
        return tuple(1 if draw(st.booleans()) else n for n in kept)
    if kind == "matmul" and len(first) >= 2:
        return (*first[:-2], first[-1], draw(st.integers(1, max_side)))
    return _draw_shape(draw, max_side)


def _input_range(n_inputs: int | tuple[int, int]) -> tuple[int, int]:
    lo, hi = (n_inputs, n_inputs) if isinstance(n_inputs, int) else n_inputs
    if not 1 <= lo <= hi:
        raise ValueError(f"n_inputs must be a positive int or a (low, high) pair with low <= high, not {n_inputs!r}")
    return lo, hi


def _allowed(ops: Collection[str] | None) -> list[OpSpec]:
    if ops is None:
        return list(OPS.values())
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        raise ValueError(f"unknown ops {unknown}; choose among {sorted(OPS)}")
    return [s for s in OPS.values() if s.name in ops]


@st.composite
def programs(draw: Draw, max_ops: int = 5, n_inputs: int | tuple[int, int] = (1, 2), max_side: int = 6,
             ops: Collection[str] | None = None) -> Program:
    """Hypothesis search strategy for :class:`Program` (not a distribution strategy).

    ``ops`` restricts the randomly chosen operations to those names (the connectors "add"
    and "mean", which route unused inputs and results to the output, and a fallback "tanh"
    may still appear). The first input's shape is drawn to suit a random allowed op (square
    matrices for det, 4-D for conv2d, ...) and that op comes first where it applies; the
    second input's shape is related to the first (equal, broadcastable, matmul-compatible)
    or free.
    """
    lo, hi = _input_range(n_inputs)
    specs = _allowed(ops)
    target = draw(st.sampled_from(specs))
    first = target.hint(draw, max_side) if target.hint else _draw_shape(draw, max_side)
    shapes = [first] + [_related_shape(draw, first, max_side) for _ in range(draw(st.integers(lo, hi)) - 1)]
    b = _Builder(len(shapes), list(shapes), [INPUT_MAX] * len(shapes))
    for step in range(draw(st.integers(1, max(1, max_ops)))):
        # The first op is the drawn target, so every op gets its share of the examples.
        _add_random_op(draw, b, specs, target if step == 0 else None)
    _connect_unused(b)
    return Program(tuple(shapes), tuple(b.ops))


# ============================================================================ inputs

#: How input values are drawn: each regime stresses a different region of the ops.
REGIMES: Final = ("unit", "wide", "large", "tiny", "mixed", "dyadic")


def _regime_values(rng: np.random.Generator, regime: str, shape: Shape) -> Array:
    sign = rng.choice([-1.0, 1.0], size=shape)
    if regime == "unit":
        return rng.standard_normal(shape)
    if regime == "wide":
        return 8.0 * rng.standard_normal(shape)
    if regime == "large":  # tanh and sigmoid saturate (float64 included)
        return sign * rng.uniform(16.0, INPUT_MAX, size=shape)
    if regime == "tiny":
        return sign * 10.0 ** rng.uniform(-20.0, -4.0, size=shape)
    if regime == "dyadic":  # exact in every float format, with exact zeros
        return rng.integers(-16, 17, size=shape) / 8.0
    if regime == "mixed":
        parts = [_regime_values(rng, r, shape) for r in ("unit", "large", "tiny")] + [np.zeros(shape)]
        return np.choose(rng.integers(0, 4, size=shape), parts)
    raise ValueError(f"unknown regime {regime!r}; choose one of {REGIMES}")


def _avoid(x: Array, kinks: Sequence[float]) -> Array:
    for k in kinks:
        d = x - k
        x = np.where(np.abs(d) < KINK_MARGIN, k + np.where(d >= 0, KINK_MARGIN, -KINK_MARGIN), x)
    return x


def make_inputs(program: Program, recipe: InputRecipe) -> list[Array]:
    """The inputs a recipe describes: float64, within INPUT_MAX, away from kinks."""
    if len(recipe.regimes) != program.n_inputs:
        raise ValueError(f"the recipe has {len(recipe.regimes)} regimes for {program.n_inputs} inputs")
    rng = np.random.default_rng(recipe.seed)
    kinks = program.kinks()
    out = []
    for i, (shape, regime) in enumerate(zip(program.input_shapes, recipe.regimes)):
        x = np.clip(np.asarray(_regime_values(rng, regime, shape), dtype=np.float64), -INPUT_MAX, INPUT_MAX)
        out.append(np.asarray(_avoid(x, kinks.get(i, ())), dtype=np.float64))  # 0-d stays an array
    return out


def input_recipes(n_inputs: int) -> st.SearchStrategy[InputRecipe]:
    """Hypothesis search strategy for an :class:`InputRecipe` of ``n_inputs`` inputs."""
    regimes = st.lists(st.sampled_from(REGIMES), min_size=n_inputs, max_size=n_inputs).map(tuple)
    return st.builds(InputRecipe, st.integers(0, 2**32 - 1), regimes)


@st.composite
def program_cases(draw: Draw, max_ops: int = 5, n_inputs: int | tuple[int, int] = (1, 2), max_side: int = 6,
                  ops: Collection[str] | None = None) -> ProgramCase:
    """Hypothesis search strategy for a :class:`ProgramCase`: a program and its inputs."""
    program = draw(programs(max_ops, n_inputs, max_side, ops))
    return ProgramCase.from_recipe(program, draw(input_recipes(program.n_inputs)))
