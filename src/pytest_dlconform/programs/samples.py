"""Sample inputs per op, a view over the op records: every op's parameter classes, input
regimes and the checks (modes) and layouts each op is registered for.

A *parameter class* is a set of fixed parameter values laid over the op's own plan (the
plan still draws whatever the class leaves free: axes, shapes, seeds). Each op's classes
(its record's ``params``) name every documented parameter at its default and at the
non-default values the op's plan draws (both sides of a branch where the parameter is a branch point: softplus's threshold,
hardtanh's bounds), and the operand classes of binary ops (same shape, either operand
broadcast). :func:`samples` pairs an op's classes with its regimes cyclically, so each class
and each regime is visited at least once, in every run, by construction; hypothesis draws the
values (shapes, free parameters, the input seed) inside each sample.

The regimes are :data:`~.inputs.REGIMES`, plus "branch" for piecewise ops: values on both
sides of each kink, between ``KINK_MARGIN`` and ``4 * KINK_MARGIN`` from it, so finite
differences stay valid while both branches of the formula are taken.

:func:`registered` lists the combinations (framework, mode, op, parameter class, regime,
dtype, layout) a run of the op suite must visit: :mod:`pytest_dlconform.report.coverage` compares a
report's ledger with it. Nothing here changes how :func:`~.generate.programs` draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from .core import INPUT_MAX, KINK_MARGIN, Array, Draw, InputRecipe, Op, Shape
from .inputs import REGIMES, make_inputs
from .ops import OPS, RECORDS
from .ops.convolution import _hint_channels
from .ops.hints import _draw_shape, _hint_image
from .program import Program, ProgramCase
from .records import ParamClass as ParamClass
from .records import Pick as Pick

#: The checks each op gets, per framework: forward vs the float64 numpy reference, reverse
#: mode vs finite differences, forward vs reverse mode, gradients under torch layouts.
MODES: Final = ("forward", "reverse-fd", "forward-reverse", "layout")
#: torch layouts of the layout mode ("channels_last" only for ops that take images).
OP_LAYOUTS: Final = ("transposed", "strided", "expanded", "channels_last")
DTYPE: Final = "float64"
BRANCH: Final = "branch"
MAX_SIZE: Final = 512  # elements per input: small, so each sample costs milliseconds
#: The compiled-backward suite's modes (suites/execution/test_compiled_backward.py), per
#: framework, with the dtypes each checks: every sample of every op, each mode and dtype.
COMPILED_MODES: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    "torch": {"compiled/aot_eager": ("float64", "float32"), "compiled/torchscript": ("float64", "float32"),
              "compiled/inductor": ("float32",)},
    "tensorflow": {"compiled/function": ("float64", "float32"), "compiled/xla": ("float64", "float32")},
}
#: The low-precision suite's mode (suites/autodiff/test_low_precision.py) and its dtypes: every
#: sample of every op in each, both frameworks, against float64 (a sample a framework's
#: documentation excludes in a dtype is visited as "not applicable").
LOW_PRECISION_MODE: Final = "low-precision"
LOW_PRECISION_DTYPES: Final = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Sample:
    """One registered sample of an op: a parameter class in a regime."""

    op: str
    params: ParamClass
    regime: str


def param_classes(op: str) -> list[ParamClass]:
    """The op's parameter classes (its record's), default first; "default" where it has none."""
    return list(RECORDS[op].params) or [ParamClass()]


def regimes(op: str) -> tuple[str, ...]:
    return (*REGIMES, BRANCH) if OPS[op].kinks is not None else tuple(REGIMES)


def samples(op: str) -> list[Sample]:
    """The op's registered samples: classes and regimes paired cyclically, each at least once."""
    classes, regs = param_classes(op), regimes(op)
    return [Sample(op, classes[i % len(classes)], regs[i % len(regs)]) for i in range(max(len(classes), len(regs)))]


def layouts(op: str) -> tuple[str, ...]:
    return OP_LAYOUTS if OPS[op].hint in (_hint_image, _hint_channels) else OP_LAYOUTS[:-1]


def layout_samples(op: str) -> list[tuple[str, Sample]]:
    """One sample per layout, classes and regimes cycled (``"unit"`` first)."""
    classes, regs = param_classes(op), regimes(op)
    return [(layout, Sample(op, classes[i % len(classes)], regs[i % len(regs)])) for i, layout in enumerate(layouts(op))]


def ops_for(framework: str, mode: str) -> list[str]:
    """The ops a mode checks in a framework: every op (a known framework bug of one op is
    pinned in known_divergences.toml, never left out here)."""
    if mode == "layout" and framework != "torch":
        return []  # TensorFlow has no user-visible memory layouts
    if mode in _edges().MODES:  # the edge-case suite's modes (kink, extreme, nonfinite)
        return _edges().ops_for(framework, mode)
    return list(OPS)


def coverage_key(framework: str, mode: str, sample: Sample, layout: str = "contiguous", dtype: str = DTYPE) -> dict[str, str]:
    """One ledger entry's combination, as the report stores it (plain JSON)."""
    return {"framework": framework, "mode": mode, "op": sample.op, "params": sample.params.label,
            "regime": sample.regime, "dtype": dtype, "layout": layout}


def registered() -> list[dict[str, str]]:
    """Every combination a complete run of the op suite visits."""
    out = []
    for framework in ("tensorflow", "torch"):
        for mode in MODES:
            for op in ops_for(framework, mode):
                if mode == "layout":
                    out += [coverage_key(framework, mode, s, layout) for layout, s in layout_samples(op)]
                else:
                    out += [coverage_key(framework, mode, s) for s in samples(op)]
    out += _edges().registered()  # suites/autodiff/test_op_edges.py
    out += [coverage_key(framework, mode, s, dtype=dtype) for framework, modes in COMPILED_MODES.items()
            for mode, dtypes in modes.items() for op in OPS for s in samples(op) for dtype in dtypes]
    out += [coverage_key(framework, LOW_PRECISION_MODE, s, dtype=dtype) for framework in ("tensorflow", "torch")
            for op in OPS for s in samples(op) for dtype in LOW_PRECISION_DTYPES]
    return out


def _edges() -> Any:
    from . import edges  # lazily: edges builds on the op table, not on the samples

    return edges


# --------------------------------------------------------------------------- drawing a case


def _broadcast_pair(draw: Draw, max_side: int) -> tuple[Shape, Shape]:
    """(full, small): ``small`` broadcasts to ``full`` along at least one dim of size > 1
    (a dim of size 1, and maybe fewer leading dims)."""
    full = draw(st.lists(st.integers(2, max_side), min_size=1, max_size=3))
    j = draw(st.integers(0, len(full) - 1))
    full[j] = max(full[j], 2)
    small = [1 if d == j else n for d, n in enumerate(full)]
    small = small[draw(st.integers(0, j)):]
    return tuple(full), tuple(small)


def _shapes(draw: Draw, op: str, operands: str | None, max_side: int) -> tuple[Shape, ...] | None:
    from .generate import _related_shape

    spec = OPS[op]
    if operands in ("broadcast_b", "broadcast_a"):
        full, small = _broadcast_pair(draw, max_side)
        return (full, small) if operands == "broadcast_b" else (small, full)
    first = spec.hint(draw, max_side) if spec.hint else _draw_shape(draw, max_side, min_rank=1)
    # Every side at least 2 (hypothesis's simplest example would otherwise be all ones):
    # reductions then reduce, transposes transpose, and each parameter class applies.
    first = tuple(max(n, 2) for n in first)
    if spec.arity == 1:
        return (first,)
    if operands == "same":
        return (first, first)
    second = _related_shape(draw, first, max_side)
    return (first, second) if spec.accepts([first, second]) else None


def _params(draw: Draw, op: str, cls: ParamClass, shapes: Sequence[Shape]) -> dict[str, Any] | None:
    plan = OPS[op].plan(draw, shapes, [INPUT_MAX] * len(shapes))
    if plan is None:
        return None
    fixed = {k: (v.value(shapes) if isinstance(v, Pick) else v) for k, v in cls.fixed}
    return {**plan, **fixed}


def branch_inputs(program: Program, seed: int) -> list[Array]:
    """Values on both sides of every kink of the op, ``KINK_MARGIN`` to ``4 KINK_MARGIN`` away."""
    rng = np.random.default_rng(seed)
    kinks = program.kinks()
    out = []
    for i, shape in enumerate(program.input_shapes):
        points = np.asarray(kinks.get(i, (0.0,)))
        at = rng.choice(points, size=shape)
        away = rng.choice([-1.0, 1.0], size=shape) * rng.uniform(KINK_MARGIN, 4 * KINK_MARGIN, size=shape)
        out.append(np.asarray(at + away, dtype=np.float64))
    return out


def _case(program: Program, regime: str, seed: int) -> ProgramCase:
    if regime == BRANCH:
        return ProgramCase(program, branch_inputs(program, seed))
    recipe = InputRecipe(seed, (regime,) * program.n_inputs)
    return ProgramCase(program, make_inputs(program, recipe), recipe)


def _finite_reference(case: ProgramCase) -> bool:
    """Whether the float64 reference of ``case`` is finite everywhere."""
    with np.errstate(all="ignore"):
        return bool(np.all(np.isfinite(case.program.numpy(case.inputs))))


@st.composite
def regime_cases(draw: Draw, program: Program, regime: str) -> ProgramCase:
    """Inputs of ``regime`` for a given ``program`` (its shapes and parameters kept), drawn
    again while the float64 reference is not finite."""
    for _ in range(50):
        case = _case(program, regime, draw(st.integers(0, 2**32 - 1)))
        if _finite_reference(case):
            return case
    raise ValueError(f"no finite inputs of regime {regime!r} for {program!r} in 50 draws")


@st.composite
def class_cases(draw: Draw, op: str, max_side: int = 4) -> list[tuple[Sample, ProgramCase]]:
    """Every registered sample of ``op`` on one program per parameter class: a class's first
    sample draws the program (:func:`sample_cases`), its other samples reuse that program on
    inputs of their own regime (:func:`regime_cases`), so a compiled function of the
    programs runs every sample without compiling again."""
    programs: dict[ParamClass, Program] = {}
    out = []
    for sample in samples(op):
        if sample.params in programs:
            case = draw(regime_cases(programs[sample.params], sample.regime))
        else:
            case = draw(sample_cases(sample, max_side))
            programs[sample.params] = case.program
        out.append((sample, case))
    return out


@st.composite
def sample_cases(draw: Draw, sample: Sample, max_side: int = 4) -> ProgramCase:
    """A one-op program of ``sample``'s class and inputs of its regime (hypothesis draws the
    rest); a draw that does not fit the class (shapes the op refuses) is drawn again."""
    for _ in range(50):
        shapes = _shapes(draw, sample.op, sample.params.operands, max_side)
        if shapes is None or any(int(np.prod(s)) > MAX_SIZE for s in shapes):
            continue
        params = _params(draw, sample.op, sample.params, shapes)
        if params is None:
            continue
        args = tuple(range(len(shapes))) if len(shapes) > 1 else ()
        try:
            program = Program(tuple(shapes), (Op(sample.op, tuple(params.items()), args),))
        except ValueError:
            continue
        if not np.prod(program.output_shape, dtype=int):
            continue  # an empty result checks nothing
        case = _case(program, sample.regime, draw(st.integers(0, 2**32 - 1)))
        if _finite_reference(case):
            return case
    raise ValueError(f"no valid case for {sample} in 50 draws: the sample table and the op's plan disagree")
