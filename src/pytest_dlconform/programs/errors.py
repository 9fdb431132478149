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
from typing import Any, Final

import numpy as np

from ..core.floats import SMALLEST_NORMAL, UNIT_ROUNDOFF
from .core import ULPS as ULPS
from .core import Array, OpSpec, Params, ProgramLike, _amax
from .ops import OPS, RECORDS
from .ops.attention import _sdpa_weights, _weight_changes, sdpa_low_precision_gradient


def error_bound(program: ProgramLike, xs: Sequence[Any], dtype: str = "float64") -> float:
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
    adds the absolute error of that cancellation, as does an op whose rounding its
    Lipschitz constant does not see (:func:`_cancellation`: a cross-entropy whose loss
    ``lse - x_y`` is far smaller than ``|x|``). ``tiny`` (the smallest normal
    number) allows flushing subnormals to zero. Returns ``u * E_output``.
    """
    rounded = dtype != "float64"
    return UNIT_ROUNDOFF[dtype] * _forward_errors(program, xs, dtype, rounded_inputs=rounded)[-1]


def derivative_error_bound(program: ProgramLike, xs: Sequence[Any], dtype: str = "float64") -> float:
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
    op's rounding work, plus the rounding its Lipschitz constant does not see
    (:func:`_cancellation`: a saturated cross-entropy's Jacobian ``p - T`` is tiny, its
    terms are not), and propagates the errors it receives, ``sum_i L_i E_i``;
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
        local += _cancellation(op.name, args, op.kwargs, gradient=True)
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



#: Ops whose Jacobian does not depend on the primal values (linear ops and data movement):
#: a forward error in their inputs leaves their tangent rule unchanged.
LINEAR_OPS: Final = frozenset(name for name, r in RECORDS.items() if r.linear)


def low_precision_error_bound(program: ProgramLike, xs: Sequence[Any], dtype: str) -> float:
    """Bound on ``max|f_dtype(xs) - f(xs)|`` for inputs ``xs`` that are already values of
    ``dtype`` (rounded by the caller): :func:`error_bound` without the inputs' rounding,
    plus the cancellations a narrow dtype exposes (:func:`_cancellation`)."""
    return UNIT_ROUNDOFF[dtype] * _forward_errors(program, xs, dtype)[-1]


def gradient_error_bound(program: ProgramLike, xs: Sequence[Any], dtype: str) -> tuple[float, float]:
    """``(B, floor)``: a gradient computed by reverse mode in ``dtype`` at inputs ``xs``
    that are values of ``dtype``, with a cotangent ``w`` of ``dtype``, differs from the
    exact gradient at the same ``xs`` and ``w`` by at most ``B * ||w||_1 + floor`` per entry.

    First order in ``u`` (the products of two first-order terms are ``(ULPS u)**2``
    relative, at most 1.6% of one of them even in bfloat16, inside ``ULPS``'s margin):

    * the rounding of the tangent rules, as :func:`derivative_error_bound`: each op's
      backward rule backward-stable, ``f'`` evaluated at a primal carrying a few ulps;
    * ``f'`` computed from the rounded *output* (sigmoid's ``y (1 - y)``, tanh's
      ``1 - y**2``): ``y`` carries ``ULPS u |y|``, which moves ``f'`` by
      ``ULPS u |y| |f''| / |f'|`` (``df'/dy = f''/f'``); near 1, ``1 - y`` cancels;
    * reverse mode accumulates where forward mode does not: the transpose of a data
      movement that reads an entry ``m`` times (gather with repeated indices,
      broadcast_to) is a sum of ``m`` terms, and a register read by ``k`` ops receives
      the sum of ``k`` cotangents: both are counted as rounding work;
    * the forward error ``delta`` of a computed register an elementwise op reads moves
      its ``f'`` by ``max_t |f'(x + t delta) - f'(x)|`` (sampled at ``t = +-1/2, +-1``;
      no second derivative: in bfloat16 ``delta`` is not small against the curvature's
      scale). Only linear ops (:data:`LINEAR_OPS`) and elementwise ones may read a
      computed register; another op reading one raises ValueError (its Jacobian's
      dependence on a perturbed primal is not modelled). Per-op programs qualify.

    * in float16/bfloat16 an op of :data:`_GRADIENT_RULES` (sdpa) takes the smaller of its
      row's terms and its own backward analysis (not first order in the logits).

    ``floor`` allows flushing to zero: each op of the backward may flush values below the
    smallest normal number, propagated by the tangents' Lipschitz constants.
    """
    u = UNIT_ROUNDOFF[dtype]
    regs = program.trace(xs)
    forward = _forward_errors(program, xs, dtype)
    tangents = [1.0] * program.n_inputs
    errs = [0.0] * program.n_inputs
    for k, op in enumerate(program.ops):
        idx = program.arg_indices(k)
        spec = OPS[op.name]
        computed = [i for i in idx if i >= program.n_inputs]
        if computed and spec.lip is not None and op.name not in LINEAR_OPS:
            raise ValueError(f"op {k} {op!r} reads a computed register: its tangent rule's dependence on a "
                             "perturbed primal value is not modelled (use it on inputs only)")
        args = [regs[i] for i in idx]
        out = regs[program.n_inputs + k]
        lips, work, local = _tangent_rule(spec, args, out, op.kwargs, program.weights(k))
        work = max(work, _fan_in(spec, args, op.kwargs, program.weights(k)))
        if spec.lip is None:
            local += _output_based(spec, args[0], out, op.kwargs)
            if computed:
                local += _derivative_shift(spec, args[0], u * forward[idx[0]], op.kwargs) / u
        local += _cancellation(op.name, args, op.kwargs, gradient=True)
        if spec.category == "linalg":
            # The matrix is built from t = tanh(x), whose backward computes 1 - t**2 from the
            # rounded t: an absolute error of 2 ULPS u, times the cotangent reaching t, which
            # is at most L_M |dM/dt| <= 2 * (L_M * terms) (the third value of the op's lip:
            # terms = 1 + s for I + s t, n + c for t t^T + c I). Seen in the explore soak:
            # cholesky_spd float32 at saturated inputs, 1.5e-8 where the bound was 4e-13.
            res = spec.lip(args, out, op.kwargs, program.weights(k)) if spec.lip else ()
            if len(res) == 3:
                local += ULPS * 2.0 * float(res[2])
        t_in = [tangents[i] for i in idx]
        t_out = sum(L * t for L, t in zip(lips, t_in))
        received = sum(L * errs[i] for L, i in zip(lips, idx))
        own = ULPS * work * (t_out + sum(L * t for L, t in zip(lips, t_in))) + local * max(t_in)
        if op.name in _GRADIENT_RULES and dtype in _NARROW:
            # The op's own backward analysis (inputs only: a computed register raised above).
            own = min(own, _GRADIENT_RULES[op.name](args, op.kwargs, u) * max(t_in))
        errs.append(received + own)
        tangents.append(t_out)
    # A register read k times gets k cotangents summed: k - 1 roundings of terms bounded,
    # along every path through it, by the output's tangent bound.
    reads = [0] * len(regs)
    for k in range(len(program.ops)):
        for i in program.arg_indices(k):
            reads[i] += 1
    accumulated = ULPS * sum(max(0, r - 1) for r in reads) * tangents[-1]
    floor = ULPS * len(program.ops) * SMALLEST_NORMAL[dtype] * max(1.0, max(tangents))
    return u * (errs[-1] + accumulated), floor


def _forward_errors(program: ProgramLike, xs: Sequence[Any], dtype: str, rounded_inputs: bool = False) -> list[float]:
    """Each register's forward error bound in units of u (the model of :func:`error_bound`),
    inputs exact unless ``rounded_inputs`` (then each starts at ``max|x|``)."""
    u = UNIT_ROUNDOFF[dtype]
    floor = SMALLEST_NORMAL[dtype] / u
    regs = program.trace(xs)
    errs = [(_amax(x) if rounded_inputs else 0.0) + floor for x in regs[: program.n_inputs]]
    for k, op in enumerate(program.ops):
        idx = program.arg_indices(k)
        args, arg_errs = [regs[i] for i in idx], [errs[i] for i in idx]
        out = regs[program.n_inputs + k]
        err = _op_error(OPS[op.name], args, arg_errs, out, op.kwargs, program.weights(k))
        if op.name in _SOFTMAX_RULES and dtype in _NARROW:
            err = min(err, _SOFTMAX_RULES[op.name](args, arg_errs, op.kwargs, program.weights(k), u))
        errs.append(err + ULPS * _cancellation(op.name, args, op.kwargs) + ULPS * floor)
    return errs


#: Dtypes whose rounding can move attention logits by O(1) or more at the library's inputs.
_NARROW: Final = frozenset({"float16", "bfloat16"})


def _sdpa_error(xs: Sequence[Array], errs: Sequence[float], p: Params, ws: Sequence[Array], u: float) -> float:
    """Forward error of scaled dot-product attention in units of u, not first order in the
    logits (in bfloat16 at |q|, |k| ~ 50 their rounding is O(10), where a linearised
    softmax is off by e^10). The output o_i = sum_j P_ij v_j is a convex combination of
    V's rows, so its error is made of V's spread, not of the logits' size:

    * logit s_ij = q_i . k_j * scale (+ mask) as computed, exponent included, errs by at most
      D_ij = ULPS u ((E + 2) |q_i| . |k_j| |scale| + |mask_ij| + |s_ij| + |s_ij - m_i| + 1)
      (the dot product and the scaling of q, k or s; the mask's add; the max subtracted;
      exp's own rounding, relative, as an exponent shift);
    * then exactly (whatever D): P~_ij = P_ij e^{d_j} / sum_k P_ik e^{d_k} with |d_j| <= D_ij, so
      |P~_ij - P_ij| <= r_ij P_ij, r_ij = max(e^{D_ij} / Z-_i - 1, 1 - e^{-D_ij} / Z+_i),
      Z-+_i = sum_j P_ij e^{-+D_ij}; and since the weights' changes sum to 0,
      |sum_j (P~_ij - P_ij) v_je| = |sum_j (P~_ij - P_ij)(v_je - o_ie)| <= sum_j P_ij r_ij |v_je - o_ie|;
    * whatever the weights, a normalised non-negative combination stays in V's hull:
      at most max_j |v_je - o_ie| (unmasked j), the smaller of the two is taken;
    * the normalisation (sum of L terms, division) and the contraction with V round by
      ULPS u (L + 2) sum_j P~_ij |v_je| (that sum at most min(sum_j P_ij (1 + r_ij) |v_je|,
      max_j |v_je|)), the output by ULPS u |o_ie|.

    Propagated input errors add lip * E_x (the op's Lipschitz constant, as before). Where the
    logits' rounding exceeds O(1) the hull term remains: the bound is V's spread, which may
    admit a wrong answer (the low-precision suite then records the sample inconclusive).
    """
    x = xs[0]
    lips, *_ = OPS["sdpa"].lip(xs, np.empty(0), p, ws)  # type: ignore[misc]
    sens = float(lips[0]) * errs[0]
    total = _sdpa_weights(x, p, u)[5]
    return sens + float(np.max(total, initial=0.0)) / u


def _softmax_error(xs: Sequence[Array], errs: Sequence[float], p: Params, ws: Sequence[Array], u: float) -> float:
    """softmax along ``axis`` in units of u, the model of :func:`_sdpa_error` with V = I: the
    exponent x_j - m errs by D_j = ULPS u (|x_j - m| + 1) (the subtraction, exp's own
    rounding), so |P~_j - P_j| <= min(r_j P_j, max(P_j, 1 - P_j)) (a weight stays in [0, 1]),
    and the normalisation (L terms, a division) adds ULPS u (L + 2) min(P_j (1 + r_j), 1).
    P_j |x_j - m| <= 1/e: large logits no longer count, as ``L max|x|`` did."""
    x, axis = xs[0], p["axis"]
    lips, *_ = OPS["softmax"].lip(xs, np.empty(0), p, ws)  # type: ignore[misc]
    d = np.abs(x - np.max(x, axis=axis, keepdims=True))
    e = np.exp(-d)
    w = e / np.sum(e, axis=axis, keepdims=True)
    r = _weight_changes(ULPS * u * (d + 1.0), w, axis)
    total = np.minimum(r * w, np.maximum(w, 1.0 - w)) + ULPS * u * (x.shape[axis] + 2) * np.minimum(w * (1.0 + r), 1.0)
    return float(lips[0]) * errs[0] + float(np.max(total, initial=0.0)) / u


#: Ops with a bound of their own in float16/bfloat16, tighter than their row of the table
#: where the logits are large (docs/tolerances.md, "Vacuous bounds"); the smaller is used.
_SOFTMAX_RULES: Final = {"sdpa": _sdpa_error, "softmax": _softmax_error}


def _sdpa_gradient(xs: Sequence[Array], p: Params, u: float) -> float:
    return sdpa_low_precision_gradient(xs, p, u)


#: Ops whose reverse-mode rule has a bound of its own in float16/bfloat16, in units of u per
#: unit ``||w||_1`` (docs/tolerances.md, "Vacuous bounds"): :func:`gradient_error_bound` uses
#: the smaller of it and the table's row.
_GRADIENT_RULES: Final = {"sdpa": _sdpa_gradient}


def _cancellation(name: str, xs: Sequence[Array], p: Params, gradient: bool = False) -> float:
    """Absolute rounding inside an op that its Lipschitz constant does not see, in units of
    u (per unit tangent for ``gradient``): the op record's ``cancellation`` (normalisation,
    cross-entropy, attention, the softmax-weight ops, gelu, mish, silu; docs/tolerances.md)."""
    term = RECORDS[name].cancellation
    if term is None or any(x.size == 0 for x in xs):
        return 0.0
    return float(term(xs, p, gradient))




def _fan_in(spec: OpSpec, xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> float:
    """How many output entries read one input entry of a data movement (the number of
    terms its transpose sums); 0 for other ops, whose work already counts their terms."""
    if spec.category != "shape" or any(x.size == 0 for x in xs):
        return 0.0
    fan = 0
    for j in range(len(xs)):
        probe = [np.arange(1, x.size + 1, dtype=np.float64).reshape(x.shape) if i == j else np.zeros(x.shape)
                 for i, x in enumerate(xs)]
        out = np.asarray(spec.ref(probe, p, ws)).ravel()
        _, counts = np.unique(out[out > 0], return_counts=True)
        fan = max(fan, int(counts.max()) if counts.size else 0)
    return float(fan) if fan > 1 else 0.0


def _output_based(spec: OpSpec, x: Array, y: Array, p: Params) -> float:
    """``ULPS |y| R`` with ``R = |f''| / |f'|`` (units of u per unit tangent): f' computed
    from the rounded output (``y`` off by ``ULPS u |y|`` moves ``f'`` by that times
    ``df'/dy = f''/f'``). Where ``f'`` is below the noise of its own central difference
    (deep saturation: tanh'(13) = 2.6e-11), R is taken at the nearest point towards 0 where
    it is measurable, ``x 2**-j``: the library's functions saturate monotonically, so R
    there is what it tends to (tanh: 2, sigmoid: 1; explore soak, TensorFlow tanh at -12.9
    in bfloat16 returns 0 for 2.6e-11, an error of ``|f'|``, within ``ULPS u |y| R``)."""
    if x.size == 0:
        return 0.0
    x = np.asarray(x, dtype=np.float64).ravel()
    ratio = np.full(x.shape, np.nan)
    probe = x.copy()
    for _ in range(60):
        todo = np.isnan(ratio)
        if not todo.any():
            break
        v = probe[todo]
        # A wide step: f' and f'' only need to be estimated, and a step of 2**-20 loses
        # f'' in rounding where f is nearly flat (sigmoid at 15: f'' h**2 below one ulp).
        h = 2.0**-10 * np.maximum(1.0, np.abs(v))
        fp, f0, fm = (spec.ref([v + h], p, []), spec.ref([v], p, []), spec.ref([v - h], p, []))
        d = np.abs(fp - fm) / (2 * h)
        noise = 2.0**-52 * (np.abs(f0) + 1.0) / h
        d2 = np.maximum(np.abs(fp - 2 * f0 + fm), 4 * 2.0**-52 * (np.abs(f0) + 1.0)) / (h * h)  # upper estimate
        ok = d > 1e3 * noise
        ratio[np.flatnonzero(todo)[ok]] = d2[ok] / d[ok]
        probe[todo] = v * 0.5
    ratio = np.nan_to_num(ratio, nan=0.0)
    return ULPS * float(np.max(np.abs(np.asarray(y, dtype=np.float64).ravel()) * ratio))


def _derivative_shift(spec: OpSpec, x: Array, delta: float, p: Params) -> float:
    """max |f'(x + t delta) - f'(x)| over t in {+-1/2, +-1}, f' by central differences."""
    if x.size == 0 or delta == 0:
        return 0.0

    def deriv(v: Array) -> Array:
        h = 2.0**-20 * np.maximum(1.0, np.abs(v))
        return (spec.ref([v + h], p, []) - spec.ref([v - h], p, [])) / (2 * h)

    d0 = deriv(x)
    return 1.25 * max(float(np.max(np.abs(deriv(x + t * delta) - d0))) for t in (-1.0, -0.5, 0.5, 1.0))
