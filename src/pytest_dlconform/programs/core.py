"""The data types of generated programs: what an op is and what a program node is.

:class:`OpSpec` is one row of the op table (``ops/``): how the op is generated, rendered in
each framework and referenced in numpy. :class:`Op` is one node of a :class:`~.program.Program`
and :class:`InputRecipe` says how a program's inputs are drawn. The constants bound every
generated value (see the package docstring); ``_out_shape`` is the shape check every op
goes through, ``_weight`` the constant weights both frameworks rebuild from a seed.

Nothing here reads the op records: they are built from these types, and :mod:`.program`
puts the two together. :class:`ProgramLike` is the face of a program that the error model,
the renderer and the input drawer read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np
from hypothesis import strategies as st

Shape = tuple[int, ...]
Params = Mapping[str, Any]
Array = np.ndarray
Draw = Callable[[st.SearchStrategy[Any]], Any]
Template = str | Callable[[Params, Sequence[Shape]], str]
RefFn = Callable[[Sequence[Array], Params, Sequence[Array]], Array]
PlanFn = Callable[[Draw, Sequence[Shape], Sequence[float]], "dict[str, Any] | None"]
BoundFn = Callable[[Sequence[float], Sequence[Shape], Params], float]
# (Lipschitz constant per argument, rounding work[, extra absolute scale of inner values])
LipFn = Callable[
    [Sequence[Array], Array, Params, Sequence[Array]],
    "tuple[Sequence[float], float] | tuple[Sequence[float], float, float]",
]


INPUT_MAX: Final = 64.0  # large enough that tanh and sigmoid saturate in float64 (|x| > 37)
MAX_BOUND: Final = 2.0**18  # no register may exceed this in magnitude: float32-safe with room
KINK_MARGIN: Final = 1.0 / 8  # inputs of piecewise ops keep this far from every kink
ULPS: Final = 4.0  # rounding allowance of one op, in units of round-off per unit of work


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
    #: False for ops checked one at a time only (the per-op, low-precision and compiled
    #: suites): composed programs never draw them unless named in ``programs(ops=...)``, so
    #: adding such an op changes no composed program any seed draws.
    composable: bool = field(default=True, compare=False)


class ProgramLike(Protocol):
    """What the error model, the renderer and the input drawer read of a
    :class:`~.program.Program` (they take one; :mod:`.program` calls them, so they name this
    protocol rather than import the class)."""

    @property
    def input_shapes(self) -> tuple[Shape, ...]: ...
    @property
    def ops(self) -> tuple[Op, ...]: ...
    @property
    def n_inputs(self) -> int: ...
    @property
    def shapes(self) -> tuple[Shape, ...]: ...
    def arg_indices(self, k: int) -> tuple[int, ...]: ...
    def weights(self, k: int) -> list[Array]: ...
    def kinks(self) -> dict[int, tuple[float, ...]]: ...
    def trace(self, xs: Sequence[Any]) -> list[Array]: ...


@dataclass(frozen=True)
class InputRecipe:
    """How :func:`make_inputs` draws a program's inputs: a seed and one regime per input."""

    seed: int
    regimes: tuple[str, ...]


def _out_shape(spec: OpSpec, arg_shapes: Sequence[Shape], p: Params) -> Shape:
    zeros = [np.zeros(s) for s in arg_shapes]
    ws = [np.zeros(s) for s in spec.weights(arg_shapes, p)] if spec.weights else []
    return tuple(np.shape(spec.ref(zeros, p, ws)))


def _weight(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """Constant weights: multiples of 1/8 in [-2, 2], exact in every float format."""
    return np.random.default_rng(seed).integers(-16, 17, size=shape) / 8.0


def _amax(x: Array) -> float:
    return float(np.max(np.abs(x))) if np.size(x) else 0.0
