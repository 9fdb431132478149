"""The error model: how far a conforming run in a given dtype may be from the reference.

:func:`error_bound` bounds the forward error of a program's output, and
:func:`derivative_error_bound` the rounding error of a derivative computed by automatic
differentiation; both are first-order analyses on the float64 reference values, explained
in their docstrings (:meth:`Program.error_bound <.program.Program.error_bound>` and
:meth:`Program.derivative_error_bound <.program.Program.derivative_error_bound>` call them).
Each op contributes through its row of the table: ``OpSpec.lip`` (Lipschitz constants and
rounding work) or, for elementwise ops, the numerical derivative of its reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from ..checks.numerics import SMALLEST_NORMAL, UNIT_ROUNDOFF
from .core import Array, OpSpec, Params, _amax
from .ops import OPS

if TYPE_CHECKING:
    from .program import Program


ULPS: Final = 4.0  # rounding allowance of one op, in units of round-off per unit of work


def error_bound(program: Program, xs: Sequence[Any], dtype: str = "float64") -> float:
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
    regs = program.trace(xs)
    rounded = dtype != "float64"
    errs = [(_amax(x) if rounded else 0.0) + floor for x in regs[: program.n_inputs]]
    for k, op in enumerate(program.ops):
        idx = program.arg_indices(k)
        args, arg_errs = [regs[i] for i in idx], [errs[i] for i in idx]
        out = regs[program.n_inputs + k]
        errs.append(_op_error(OPS[op.name], args, arg_errs, out, op.kwargs, program.weights(k)) + ULPS * floor)
    return u * errs[-1]


def derivative_error_bound(program: Program, xs: Sequence[Any], dtype: str = "float64") -> float:
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
    infinity-norm Lipschitz constants, as in :func:`error_bound`). Each op adds the error
    of a backward-stable tangent rule, ``ULPS * W * (T_y + sum_i L_i T_i)`` with ``W`` the
    op's rounding work, and propagates the errors it receives, ``sum_i L_i E_i``;
    an elementwise op also evaluates ``f'`` at a primal value carrying a few ulps of
    ``|x|`` (plus its own cancellation scale, ``abs_scale``), which moves ``f'`` by
    ``ULPS * |f''| * (|x| + abs_scale)``. Componentwise, both modes' errors are then at
    most ``u * E_out`` times ``|v|^T |J_m| ... |J_1| |u| <= ||v||_1 * T-chain * ||u||_inf``,
    so ``B = u * E_out``. Returns ``B``.
    """
    u = UNIT_ROUNDOFF[dtype]
    regs = program.trace(xs)
    tangents = [1.0] * program.n_inputs
    errs = [0.0] * program.n_inputs
    for k, op in enumerate(program.ops):
        idx = program.arg_indices(k)
        args = [regs[i] for i in idx]
        out = regs[program.n_inputs + k]
        lips, work, local = _tangent_rule(OPS[op.name], args, out, op.kwargs, program.weights(k))
        t_in = [tangents[i] for i in idx]
        t_out = sum(L * t for L, t in zip(lips, t_in))
        received = sum(L * errs[i] for L, i in zip(lips, idx))
        errs.append(received + ULPS * work * (t_out + sum(L * t for L, t in zip(lips, t_in))) + local * max(t_in))
        tangents.append(t_out)
    return u * errs[-1]


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
