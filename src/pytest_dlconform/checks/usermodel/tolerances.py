"""The error model of a user's model and the comparisons built on it.

A user's network is unknown code, so its forward error is bounded like any chained
computation (``numerics.tolerance``, :func:`error_terms`): one rounding per leaf layer
(three for a layer with parameters: product, bias, activation) and reductions over the
largest fan-in of any parameter or the widest input feature dimension.
:func:`assert_close_tree` compares collections of outputs or gradients normwise over the
whole collection, :func:`assert_same_step` the weights after one training step.

Importing this module imports no framework.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..numerics import Tolerance, tolerance


def error_terms(model: Any, inputs: Sequence[np.ndarray], framework: str) -> tuple[int, int]:
    """(ops, reduction) of a user model's forward pass for :func:`numerics.tolerance`."""
    widest = max((int(np.prod(a.shape[1:])) if a.ndim > 1 else 1 for a in inputs), default=1)
    if framework == "torch":
        leaves = [m for m in model.modules() if not list(m.children())]
        with_params = [m for m in leaves if list(m.parameters(recurse=False))]
        fans = [int(np.prod(p.shape[1:])) for p in model.parameters() if p.ndim >= 2]
    else:
        leaves = _keras_leaves(model)
        with_params = [layer for layer in leaves if layer.weights]
        fans = [int(np.prod(v.shape[:-1])) for v in model.trainable_variables if len(v.shape) >= 2]
    ops = 3 * len(with_params) + (len(leaves) - len(with_params))
    return max(1, ops), max([widest, *fans])


def _keras_leaves(model: Any) -> list[Any]:
    out = []
    for layer in getattr(model, "layers", []):
        inner = getattr(layer, "layers", None)
        out += _keras_leaves(layer) if inner else [layer]
    return out


def forward_tolerance(model: Any, inputs: Sequence[np.ndarray], framework: str, dtype: str, *,
                      backward: bool = False, device: str = "cpu") -> Tolerance:
    """Two independent evaluations (e.g. eager and compiled) of the forward pass (and the backward
    pass, which repeats every operation about twice more) compared with each other: errors add."""
    ops, reduction = error_terms(model, inputs, framework)
    one = tolerance(dtype, ops=ops * (3 if backward else 1), reduction=reduction, device=device,
                    framework=framework, matmul=True)
    return Tolerance(2 * one.rtol, f"2 x ({one.why}) [{'forward and backward' if backward else 'forward'}, "
                     f"{ops} roundings from the model's layers]")


def float32_gradient_rtol(model: Any, inputs: Sequence[np.ndarray], framework: str) -> Tolerance:
    """check_vjp's rtol when the model cannot be cast to float64: the float32 backward pass's
    normwise error (forward and backward roundings, see :func:`forward_tolerance`)."""
    return forward_tolerance(model, inputs, framework, "float32", backward=True)


def f_error_float32(f_value: np.ndarray) -> float:
    """Absolute per-element rounding of one float32 forward pass beyond eps64 * |f|, for
    check_vjp's f_error: one operation's rounding (numerics.OP_ROUNDING units of float32
    round-off) at the scale of the largest output, the rounding of the last operation, which
    each probe of the finite differences adds independently. It is a model of the noise, not
    a worst case: the noise of the earlier roundings shows in the two differences' gap, which
    check_vjp measures and allows; the worst-case bound of forward_tolerance, which adds every
    rounding with one sign, would drown every finite difference taken at check_vjp's step."""
    from ..numerics import OP_ROUNDING, UNIT_ROUNDOFF

    top = float(np.max(np.abs(f_value))) if f_value.size else 0.0
    return OP_ROUNDING * UNIT_ROUNDOFF["float32"] * max(top, 1e-30)


def input_rounding_f_error(grads: Sequence[np.ndarray], xs: Sequence[np.ndarray], w: np.ndarray,
                           dtypes: Sequence[str | None]) -> float:
    """check_vjp's ``f_error`` for a float64 model that rounds some of its inputs to a narrower
    dtype (``KerasOps.narrowed_inputs``: a ``keras.Input(dtype="float32")`` of its own), when
    check_vjp uses the cotangent ``w``: ``grads``/``xs`` are those inputs' gradients
    (``vjp(xs, w)``) and values, ``dtypes`` the dtype each is rounded to (None: kept).

    The model evaluates f at x~ with x~_i = x_i (1 + d_i), |d_i| <= u (the unit roundoff of the
    narrow dtype), so L = <w, f> errs by <J^T w, x~ - x> = sum_i g_i x_i d_i to first order
    (the next term is u^2 |x|^2 times f's curvature), at most u sum_i |g_i| |x_i|. check_vjp
    probes at x + t s z with |t| <= STEP, |z| <= 1 and s_i = max(|x_i|, SCALE_FLOOR rms(x))
    (its element scales), where |x_i + t s_i z_i| <= (1 + STEP) s_i; the change of g over a
    step of relative size STEP is first order too and left out. The sum of these bounds over the
    rounded inputs bounds L's rounding per evaluation; check_vjp adds ``f_error * sum|w|`` to L's
    rounding per evaluation, hence the division by ||w||_1. The float32 noise this allows is
    then judged as every other rounding of L: by the gap of the two differences and their
    rounding bounds, so a wrong input gradient still fails (above that noise) and a direction
    the rounding drowns is inconclusive, never passed."""
    from ..gradients import SCALE_FLOOR, STEP

    bound = 0.0
    for g, x, dtype in zip(grads, xs, dtypes):
        if dtype is None or not np.size(x):
            continue
        x = np.asarray(x, np.float64)
        rms = float(np.sqrt(np.mean(np.square(x))))
        scale = np.maximum(np.abs(x), SCALE_FLOOR * rms if rms > 0 else 1.0)
        u = float(np.finfo(dtype).eps) / 2
        bound += u * (1 + STEP) * float(np.sum(np.abs(np.asarray(g, np.float64)) * scale))
    norm = float(np.sum(np.abs(w)))
    return bound / norm if norm > 0 else 0.0


def reference_diagnosis(sides: dict[str, dict[str, Any]], reference: dict[str, Any], tol: Tolerance, *,
                        uncopied: Sequence[str] = ()) -> str:
    """Which side of a failed bitwise comparison computed a wrong answer: each side's normwise
    error against a float64 forward of the same weights on the same inputs, in units of one
    float32 evaluation's bound (half of ``tol``, :func:`forward_tolerance`'s bound for two
    evaluations compared with each other). A side near or under 1 rounded as float32 does; a
    side far above it did not compute the model's function (the reference's own error is
    float64's, negligible here). Outputs are matched by name.

    ``uncopied``: the model's state the float64 rebuild could not be given (tensors outside the
    state it loads, ``hints.untracked_names``). The reference then computes another function
    than the original, and a side far from it proves nothing: the diagnosis says it cannot
    tell which side is wrong, and blames neither."""
    if uncopied:
        return ("cannot tell which side is wrong: the model has state the float64 rebuild could not copy "
                f"({', '.join(uncopied)}: outside the state it loads), so the float64 reference computes "
                "another function")
    one = tol.rtol / 2
    keys = sorted(reference)
    parts = []
    for label, outs in sides.items():
        if any(k not in outs or np.shape(outs[k]) != np.shape(reference[k]) for k in keys):
            parts.append(f"{label}: outputs {sorted(outs)} do not match the reference's {keys}")
            continue
        # normwise over the whole collection (one scale for every output), non-finite values inf
        rel = normwise(np.concatenate([np.ravel(outs[k]) for k in keys]),
                       np.concatenate([np.ravel(reference[k]) for k in keys])) if keys else 0.0
        parts.append(f"{label} {rel:.2e} ({rel / one:.3g} x the bound)" if one > 0 else f"{label} {rel:.2e}")
    return (f"against a float64 forward of the same weights, normwise relative error: {', '.join(parts)}; "
            f"one float32 evaluation's bound is {one:.2e} [half of {tol.why}]")


def largest_magnitude(tree: dict[str, Any]) -> float:
    """max|e| over every tensor of a collection (0 for an empty one): a normwise check's scale."""
    return max((float(np.max(np.abs(np.asarray(e, np.float64)))) for e in tree.values() if np.size(e)), default=0.0)


class TreeMismatch(AssertionError):
    """Compiled / low-precision outputs or gradients outside the derived tolerance."""


def assert_close_tree(actual: dict[str, Any], expected: dict[str, Any], tol: Tolerance, *, what: str,
                      name: str) -> float:
    """Normwise over the whole collection: ``max|a - e|`` of each tensor against ``rtol * max|e|``
    over all tensors, the error model of a backward pass (its rounding errors scale with the
    whole gradient, so a tensor whose exact gradient is zero, e.g. an attention key bias under
    softmax's shift invariance, carries noise of that scale, not of its own); the tensor with
    the worst error is named. Returns the worst relative error."""
    __tracebackhide__ = True
    from ...core import evidence

    if set(actual) != set(expected):
        raise TreeMismatch(f"{what}: tensors {sorted(actual)}, but should be {sorted(expected)}")
    scale = largest_magnitude(expected)
    worst, worst_key, worst_err = 0.0, "", 0.0
    for key in sorted(expected):
        a, e = np.asarray(actual[key], np.float64), np.asarray(expected[key], np.float64)
        if a.shape != e.shape:
            raise TreeMismatch(f"{what}: {key} has shape {a.shape}, but should be {e.shape}")
        err = float(np.max(np.abs(a - e))) if e.size else 0.0
        err = err if np.all(np.isfinite(a)) else math.inf
        rel = err / scale if scale > 0 else (0.0 if err == 0 else math.inf)
        if rel >= worst:
            worst, worst_key, worst_err = rel, key, err
    evidence.check(name, observed=worst, tolerance=tol.rtol, basis=tol.why, tensor=worst_key)
    if not worst <= tol.rtol:
        raise TreeMismatch(f"{what}: {worst_key}: max|actual - expected| = {worst_err:.3e} is {worst:.3e} of the "
                           f"largest expected magnitude {scale:.3e} over all {len(expected)} tensors, but should be "
                           f"<= {tol.rtol:.3e} [{tol.why}]")
    return worst


def assert_same_step(actual: dict[str, Any], expected: dict[str, Any], before: dict[str, Any], tol: Tolerance, *,
                     what: str, dtype: str = "float32") -> float:
    """Weights after a step against the oracle's, per tensor within ``rtol * U + 2 u |w|``.

    ``U`` is the largest update of any tensor in the oracle's step: the gradients' rounding
    errors scale with the whole backward pass (a parameter whose exact gradient is zero, such as
    an attention key bias under softmax, moves by noise of that scale, not of its own), and the
    learning rate carries them into the weights; ``2 u |w|`` is the rounding of ``w - lr g``
    itself in each run. A step that differs (a gradient not averaged, a batch mixed otherwise)
    moves a tensor by a fraction of U and fails. Returns the worst error / bound."""
    __tracebackhide__ = True
    from ...core import evidence
    from ..numerics import UNIT_ROUNDOFF
    from ..reductions import StepMismatch

    if set(actual) != set(expected):
        raise StepMismatch(f"{what}: parameters {sorted(actual)}, but the single-device run has {sorted(expected)}")
    u = UNIT_ROUNDOFF[dtype]
    update = max((float(np.max(np.abs(np.asarray(expected[k], np.float64) - np.asarray(before[k], np.float64))))
                  for k in expected if np.size(expected[k])), default=0.0)
    worst, worst_key, worst_err, worst_bound = 0.0, "", 0.0, 0.0
    for key in sorted(expected):
        a, e = np.asarray(actual[key], np.float64), np.asarray(expected[key], np.float64)
        if a.shape != e.shape:
            raise StepMismatch(f"{what}: {key} has shape {a.shape}, but should be {e.shape}")
        err = float(np.max(np.abs(a - e))) if e.size else 0.0
        err = err if np.all(np.isfinite(a)) else math.inf
        bound = tol.rtol * update + 2 * u * (float(np.max(np.abs(e))) if e.size else 0.0)
        ratio = err / bound if bound > 0 else (0.0 if err == 0 else math.inf)
        if ratio >= worst:
            worst, worst_key, worst_err, worst_bound = ratio, key, err, bound
    evidence.check(what, observed=worst, tolerance=1.0, basis=f"rtol {tol.rtol:.3g} x largest update {update:.3g} "
                   f"+ 2 u({dtype}) |w| [{tol.why}]", tensor=worst_key)
    if not worst <= 1.0:
        raise StepMismatch(f"{what}: {worst_key} max|distributed - single device| = {worst_err:.3e}, but should be <= "
                           f"{worst_bound:.3e} = {tol.rtol:.3e} x the largest update {update:.3e} + 2 u({dtype}) |w| "
                           f"[{tol.why}] ({worst:.3g}x the bound)")
    return worst


def normwise(actual: np.ndarray, expected: np.ndarray) -> float:
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    scale = float(np.max(np.abs(e))) if e.size else 0.0
    err = float(np.max(np.abs(a - e))) if e.size else 0.0
    if not np.all(np.isfinite(a)):
        return math.inf
    return err / scale if scale > 0 else (0.0 if err == 0 else math.inf)
