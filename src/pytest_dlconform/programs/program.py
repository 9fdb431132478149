"""A generated program: registers, ops, and what can be done with one.

:class:`Program` validates itself against the op table where it is written, evaluates the
float64 numpy reference, bounds a conforming run's error (:mod:`.errors`) and renders and
builds itself in torch or TensorFlow (:mod:`.render`). :class:`ProgramCase` pairs a
program with its inputs; both ``repr`` as reproductions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from . import errors, render
from .core import Array, InputRecipe, Op, Shape, _out_shape, _weight
from .inputs import make_inputs
from .ops import OPS


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
    """A straight-line program; see the package docstring for the register convention."""

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
        """Bound on ``max|f_dtype(xs) - f(xs)|`` for a conforming run in ``dtype``: the
        first-order forward error model of :func:`.errors.error_bound`."""
        return errors.error_bound(self, xs, dtype)

    def derivative_error_bound(self, xs: Sequence[Any], dtype: str = "float64") -> float:
        """Bound ``B`` with ``|computed v.(J u) - v.(J u)| <= B * ||v||_1 * ||u||_inf`` for a
        derivative computed by automatic differentiation in ``dtype``, forward or reverse
        mode: the model of :func:`.errors.derivative_error_bound`."""
        return errors.derivative_error_bound(self, xs, dtype)

    # ------------------------------------------------------------------ frameworks

    def to_source(self, framework: str = "torch", dtype: str = "float64", layout: str = "contiguous") -> str:
        """A standalone script (numpy + the framework) defining ``program(xs)`` as built."""
        return render.to_source(self, framework, dtype, layout)

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
        return render.build(self, framework, dtype, layout)


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
