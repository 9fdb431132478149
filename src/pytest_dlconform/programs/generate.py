"""Hypothesis search strategies: random programs, input recipes, and the two together.

:func:`programs` grows a program op by op from the table, tracking an a-priori bound on
every register (an op that could exceed :data:`~.core.MAX_BOUND` is refused) and routing
every unused input and result to the output. The op table's order is the order hypothesis
shrinks towards, so it fixes which programs a seed draws (see :mod:`.ops`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .core import INPUT_MAX, MAX_BOUND, Draw, InputRecipe, Op, OpSpec, Shape, _out_shape
from .inputs import REGIMES
from .ops import OPS
from .ops.common import _broadcastable
from .ops.hints import _draw_shape
from .program import Program, ProgramCase


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
        return [s for s in OPS.values() if s.composable]
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        raise ValueError(f"unknown ops {unknown}; choose among {sorted(OPS)}")
    return [s for s in OPS.values() if s.name in ops]


@st.composite
def programs(draw: Draw, max_ops: int = 5, n_inputs: int | tuple[int, int] = (1, 2), max_side: int = 6,
             ops: Collection[str] | None = None, start: str | None = None) -> Program:
    """Hypothesis search strategy for :class:`Program` (not a distribution strategy).

    ``ops`` restricts the randomly chosen operations to those names (the connectors "add"
    and "mean", which route unused inputs and results to the output, and a fallback "tanh"
    may still appear). The first input's shape is drawn to suit a random allowed op (square
    matrices for det, 4-D for conv2d, ...) and that op comes first where it applies; the
    second input's shape is related to the first (equal, broadcastable, matmul-compatible)
    or free. ``start`` names the op every program starts with (the others still drawn from
    ``ops``): a property can then give one op test ids of its own, composed with the rest.
    """
    lo, hi = _input_range(n_inputs)
    specs = _allowed(ops)
    target = _allowed([start])[0] if start is not None else draw(st.sampled_from(specs))
    first = target.hint(draw, max_side) if target.hint else _draw_shape(draw, max_side)
    shapes = [first] + [_related_shape(draw, first, max_side) for _ in range(draw(st.integers(lo, hi)) - 1)]
    b = _Builder(len(shapes), list(shapes), [INPUT_MAX] * len(shapes))
    for step in range(draw(st.integers(1, max(1, max_ops)))):
        # The first op is the drawn target, so every op gets its share of the examples.
        _add_random_op(draw, b, [*specs, target] if step == 0 and target not in specs else specs,
                       target if step == 0 else None)
    _connect_unused(b)
    return Program(tuple(shapes), tuple(b.ops))


def input_recipes(n_inputs: int) -> st.SearchStrategy[InputRecipe]:
    """Hypothesis search strategy for an :class:`InputRecipe` of ``n_inputs`` inputs."""
    regimes = st.lists(st.sampled_from(REGIMES), min_size=n_inputs, max_size=n_inputs).map(tuple)
    return st.builds(InputRecipe, st.integers(0, 2**32 - 1), regimes)


@st.composite
def program_cases(draw: Draw, max_ops: int = 5, n_inputs: int | tuple[int, int] = (1, 2), max_side: int = 6,
                  ops: Collection[str] | None = None, start: str | None = None) -> ProgramCase:
    """Hypothesis search strategy for a :class:`ProgramCase`: a program and its inputs."""
    program = draw(programs(max_ops, n_inputs, max_side, ops, start))
    return ProgramCase.from_recipe(program, draw(input_recipes(program.n_inputs)))
