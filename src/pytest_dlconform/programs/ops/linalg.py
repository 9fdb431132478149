"""Linear algebra on well-conditioned matrices built from the input.

Matrices are ``I + s*tanh(x)`` (strictly diagonally dominant) or ``tanh(x) tanh(x)^T + c I``
(positive definite), so det, inv, solve, cholesky and triangular solves stay bounded and
smooth on every generated input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, LipFn, OpSpec, Params, PlanFn, Shape, Template
from ..records import AUTOCAST_FLOAT32, Autocast, OpRecord, Pick, each, records
from .common import _choices, _jacobian_norm, _no_params, _rank_at_least, _square, linalg_dtypes


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


def _dominance(frac: float) -> Pick:
    """The perturbation's scale ``frac / n`` for the matrix side n of the program's input."""
    return Pick(f"{frac}/n", lambda s: _dd_scale(s[0][-1], frac))


def linalg_records() -> list[OpRecord]:
    """The matrix ops; diagonally dominant inputs at several strengths of the perturbation."""
    dominance = {"params": each(s=tuple(_dominance(f) for f in (0.5, 0.25, 0.75, 0.875)))}
    return records(_linalg_ops(), {
        "det_dd": {**dominance, "dtype_exclusions": linalg_dtypes("det")},
        "logdet_dd": {**dominance, "dtype_exclusions": linalg_dtypes("slogdet")},
        "inv_dd": {**dominance, "dtype_exclusions": linalg_dtypes("inv")},
        "solve_dd": {**dominance, "dtype_exclusions": linalg_dtypes("solve")},
        "cholesky_spd": {"params": each(c=(1.0, 0.5, 2.0)), "dtype_exclusions": linalg_dtypes("cholesky")},
        # its input is built by a Cholesky factorisation: the same page's sentence
        "trisolve": {"params": each(c=(1.0, 0.5, 2.0), adjoint=(False, True)),
                     "dtype_exclusions": linalg_dtypes("cholesky")},
        "diagonal": {"params": each(offset=(0, 1, -1)), "linear": True},
        "trace": {"linear": True, "autocast": Autocast(ac.method("trace", ac.M), cpu=AUTOCAST_FLOAT32)},
    })
