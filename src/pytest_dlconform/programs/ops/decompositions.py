"""Decompositions whose gradients are documented: SVD, QR and the symmetric eigenproblem.

Both frameworks document where these gradients exist: torch.linalg.svd/eigh "gradients
computed using U or Vh [the eigenvectors] will only be finite when A does not have repeated
singular values [distinct eigenvalues]", and are numerically unstable when two are close;
torch.linalg.qr's backward "is only well-defined when the first min(m, n) columns are
linearly independent", mode='complete' "is differentiable for m <= n" and mode='r' "is never
differentiable"; TensorFlow's gradients raise NotImplementedError for a complete QR with
m > n and for ``svd(full_matrices=True)`` with ``|m - n| > 1`` (linalg_grad.py ``_QrGrad``,
``_SvdGrad``). Every sample lies inside that domain, by construction:

* the matrix is ``M = D + s T`` (SVD, QR) or ``D + s (T + T^T) / 2`` (eigh), ``T = tanh(x)``,
  ``D`` the (rectangular) diagonal ``2, 4, .., 2k`` and ``s = frac * 2**-ceil(log2 max(m, n))``
  with ``frac <= 1/2``; ``||s T||_2 <= s ||T||_F <= s max(m, n) <= frac``, so by Weyl's
  inequality every singular value (eigenvalue) lies within ``frac`` of its ``d_i``: they are
  separated by ``gap >= 2 - 2 frac >= 1`` and at least ``2 - frac >= 1.5`` (full rank);
* outputs are gauge invariant (decompositions are unique only up to the signs of singular
  vector pairs, eigenvectors, and Q's columns with R's rows): singular values, eigenvalues,
  the rank-one term ``u_k v_k^T`` of one singular pair, the projector ``v_k v_k^T`` on one
  eigenvector, and Q and R with R's diagonal made positive (``sign(diag R)`` has zero
  derivative where R_ii != 0, and ``|R_ii| >= sigma_min > 0``).

Error model: the factorisation's rounding work is ``n**3`` (n = max(m, n), as the other
factorisations) plus ``2 n kappa`` with ``kappa = ||M||_2 / gap``: a backward-stable SVD or
eigensolver returns singular vectors / eigenvectors whose angle to the exact ones is at most
``c n u ||M|| / gap`` (Wedin, Davis-Kahan), and the tangent rules use them twice
(``u_i^T dM v_i``, ``v v^T``); for QR, ``kappa`` is the condition number of the first k
columns, which bounds the sensitivity of Q and R (Sun's perturbation bound). ``gap`` is
taken at the actual matrix (the distance between distinct values and, for the singular
values of a rectangular matrix, to zero). The Lipschitz constants are measured by
``_jacobian_norm`` of the float64 references in M (in x: that times ``s max sech^2(x)``, the chain
rule in closed form, which saturated tanh does not hide); the third value is the rounding of M's
entries, sums of terms up to ``2k + s`` (as in :mod:`.linalg`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..core import Array, Draw, OpSpec, Params, Shape
from ..records import OpRecord, with_classes
from .common import _jacobian_norm, _rank_at_least, linalg_dtypes
from .linalg import _dd_scale

FRACS = (0.5, 0.25)


def _diag(m: int, n: int) -> Array:
    d = np.zeros((m, n))
    for i in range(min(m, n)):
        d[i, i] = 2.0 * (i + 1)
    return d


def scale(shape: Shape, p: Params) -> float:
    return _dd_scale(max(shape[-2:]), p["frac"])


def build(x: Array, p: Params) -> Array:
    """The well-separated matrix of the module docstring, from the input x."""
    t = np.tanh(x)
    if p.get("sym"):
        t = 0.5 * (t + np.swapaxes(t, -1, -2))
    return _diag(*x.shape[-2:]) + scale(x.shape, p) * t


def _render_matrix(p: Params, s: Sequence[Shape], framework: str) -> str:
    d = repr(_diag(*s[0][-2:]).tolist())
    c = repr(scale(s[0], p))
    if framework == "torch":
        t = "torch.tanh({a})"
        t = f"0.5 * ({t} + {t}.mT)" if p.get("sym") else t
        return f"(torch.tensor({d}, dtype={{a}}.dtype, device={{a}}.device) + {c} * {t})"
    t = "tf.math.tanh({a})"
    t = f"0.5 * ({t} + tf.linalg.matrix_transpose({t}))" if p.get("sym") else t
    return f"(tf.constant({d}, dtype={{a}}.dtype) + {c} * {t})"


def _index(p: Params, n: int, ascending: bool = False) -> int:
    """The position of the top (largest) or bottom value: singular values come in descending
    order, eigenvalues in ascending order (numpy, torch and TensorFlow alike)."""
    top = n - 1 if ascending else 0
    return top if p["pair"] == "top" else n - 1 - top


# --------------------------------------------------------------------------- references


def _svd_ref(m: Array, p: Params) -> Array:
    if p["out"] == "s":
        return np.linalg.svd(m, compute_uv=False)
    if p["full_matrices"] and abs(m.shape[-1] - m.shape[-2]) > 1:
        raise ValueError("TensorFlow's svd gradient is not implemented for |m - n| > 1 with full_matrices")
    u, _, vh = np.linalg.svd(m, full_matrices=p["full_matrices"])
    # The pair of the k-th largest singular value (descending order in all three).
    k = _index(p, min(m.shape[-2:]))
    return u[..., :, [k]] @ vh[..., [k], :]


def _qr_ref(m: Array, p: Params) -> Array:
    if p["mode"] == "complete" and m.shape[-2] > m.shape[-1]:
        raise ValueError("mode='complete' is differentiable for m <= n only (torch.linalg.qr documentation)")
    q, r = np.linalg.qr(m, mode=p["mode"])
    sign = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    return q * sign[..., None, :] if p["out"] == "q" else sign[..., :, None] * r


def _eigh_ref(m: Array, p: Params) -> Array:
    w, v = np.linalg.eigh(m)  # ascending, as torch and TensorFlow
    if p["out"] == "values":
        return w
    k = _index(p, m.shape[-1], ascending=True)
    return v[..., :, [k]] @ np.swapaxes(v[..., :, [k]], -1, -2)


# --------------------------------------------------------------------------- templates


def _svd_torch(p: Params, s: Sequence[Shape]) -> str:
    a = _render_matrix(p, s, "torch")
    if p["out"] == "s":
        return f"torch.linalg.svdvals({a})"
    k = _index(p, min(s[0][-2:]))
    return f"(lambda r: r.U[..., :, [{k}]] @ r.Vh[..., [{k}], :])(torch.linalg.svd({a}, full_matrices={{full_matrices}}))"


def _svd_tf(p: Params, s: Sequence[Shape]) -> str:
    a = _render_matrix(p, s, "tf")
    if p["out"] == "s":
        return f"tf.linalg.svd({a}, compute_uv=False)"
    k = _index(p, min(s[0][-2:]))
    return (f"(lambda r: tf.gather(r[1], [{k}], axis=-1) @ tf.linalg.adjoint(tf.gather(r[2], [{k}], axis=-1)))"
            f"(tf.linalg.svd({a}, full_matrices={{full_matrices}}, compute_uv=True))")


def _qr_torch(p: Params, s: Sequence[Shape]) -> str:
    a = _render_matrix(p, s, "torch")
    sign = "torch.sign(torch.diagonal(r.R, dim1=-2, dim2=-1))"
    body = f"r.Q * {sign}.unsqueeze(-2)" if p["out"] == "q" else f"{sign}.unsqueeze(-1) * r.R"
    return f"(lambda r: {body})(torch.linalg.qr({a}, mode={{mode}}))"


def _qr_tf(p: Params, s: Sequence[Shape]) -> str:
    a = _render_matrix(p, s, "tf")
    sign = "tf.math.sign(tf.linalg.diag_part(r[1]))"
    body = f"r[0] * tf.expand_dims({sign}, -2)" if p["out"] == "q" else f"tf.expand_dims({sign}, -1) * r[1]"
    return f"(lambda r: {body})(tf.linalg.qr({a}, full_matrices={p['mode'] == 'complete'}))"


def _eigh_torch(p: Params, s: Sequence[Shape]) -> str:
    a = _render_matrix(p, s, "torch")
    if p["out"] == "values":
        return f"torch.linalg.eigvalsh({a}, UPLO={{uplo}})"
    k = _index(p, s[0][-1], ascending=True)
    return f"(lambda v: v[..., :, [{k}]] @ v[..., :, [{k}]].mT)(torch.linalg.eigh({a}, UPLO={{uplo}}).eigenvectors)"


def _eigh_tf(p: Params, s: Sequence[Shape]) -> str:
    a = _render_matrix(p, s, "tf")
    if p["out"] == "values":
        return f"tf.linalg.eigvalsh({a})"
    k = _index(p, s[0][-1], ascending=True)
    return (f"(lambda v: tf.gather(v, [{k}], axis=-1) @ tf.linalg.adjoint(tf.gather(v, [{k}], axis=-1)))"
            f"(tf.linalg.eigh({a})[1])")


# --------------------------------------------------------------------------- plans and the error model


def _gap_condition(m: Array, kind: str) -> float:
    """kappa = ||M||_2 / gap at the actual matrix (module docstring)."""
    if kind == "eigh":
        w = np.linalg.eigvalsh(m)
        gap = np.min(np.diff(w, axis=-1)) if w.shape[-1] > 1 else np.inf
        return float(np.max(np.abs(w)) / min(gap, np.inf))
    s = np.linalg.svd(m[..., :, : min(m.shape[-2:])] if kind == "qr" else m, compute_uv=False)
    if kind == "qr":
        return float(np.max(s[..., 0] / s[..., -1]))
    gaps = -np.diff(s, axis=-1) if s.shape[-1] > 1 else np.full(s.shape, np.inf)
    floor = s[..., -1] if m.shape[-1] != m.shape[-2] else np.inf  # the complement's zero singular values
    return float(np.max(s[..., 0] / np.minimum(np.min(gaps, axis=-1), floor)))


def _lip(apply: Callable[[Array, Params], Array], kind: str) -> Callable[..., tuple[Sequence[float], float, float]]:
    def lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float, float]:
        x = xs[0]
        mat = build(x, p)
        n = max(x.shape[-2:])
        lm = _jacobian_norm(lambda v: apply(v, p), mat, 2)
        # d M = s sech^2(x) d x (sym: the average of two such terms): |J_x| <= L_M s max sech^2(x).
        # From the closed form, not by differences: where tanh saturates (|x| >= 16) a central
        # difference of it is 0 in float64, while the derivative (5e-14 at 16) is not, and the
        # frameworks' tangents of that size err by rounding (explore: TF qr, 'large' regime).
        sech2 = 4.0 * np.exp(-2.0 * np.abs(x)) / (1.0 + np.exp(-2.0 * np.abs(x))) ** 2
        lx = lm * scale(x.shape, p) * float(np.max(sech2))
        work = float(n) ** 3 + 2.0 * n * _gap_condition(mat, kind)
        return (lx,), work, lm * (2.0 * min(x.shape[-2:]) + scale(x.shape, p))

    return lip


def _svd_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    m, n = shapes[0][-2:]
    return {"frac": draw(st.sampled_from(FRACS)), "out": draw(st.sampled_from(("s", "uv"))),
            "full_matrices": draw(st.booleans()) if abs(m - n) <= 1 else False,
            "pair": draw(st.sampled_from(("top", "bottom")))}


def _qr_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    m, n = shapes[0][-2:]
    return {"frac": draw(st.sampled_from(FRACS)), "out": draw(st.sampled_from(("q", "r"))),
            "mode": draw(st.sampled_from(("reduced", "complete"))) if m <= n else "reduced"}


def _eigh_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"frac": draw(st.sampled_from(FRACS)), "out": draw(st.sampled_from(("values", "proj"))),
            "uplo": draw(st.sampled_from(("L", "U"))), "pair": draw(st.sampled_from(("top", "bottom"))), "sym": True}


def _square(shapes: Sequence[Shape]) -> bool:
    s = shapes[0]
    return len(s) >= 2 and s[-1] == s[-2]


def _decomposition(name: str, apply: Callable[[Array, Params], Array], torch: Any, tf: Any,
                   accepts: Callable[[Sequence[Shape]], bool], plan: Any, bound: Callable[[Shape], float]) -> OpSpec:
    return OpSpec(name, "linalg", 1, torch, tf, lambda xs, p, ws: apply(build(xs[0], p), p), accepts, plan,
                  lambda bs, ss, p: bound(ss[0]), _lip(apply, name), composable=False)


def _decomposition_ops() -> list[OpSpec]:
    # A-priori magnitudes: singular values and eigenvalues <= 2k + 1/2; Q, u v^T and v v^T
    # have entries <= 1; R's entries <= ||M||_2.
    return [
        _decomposition("svd", _svd_ref, _svd_torch, _svd_tf, _rank_at_least(2), _svd_plan,
                       lambda s: 2.0 * min(s[-2:]) + 0.5),
        _decomposition("qr", _qr_ref, _qr_torch, _qr_tf, _rank_at_least(2), _qr_plan,
                       lambda s: 2.0 * min(s[-2:]) + 0.5),
        _decomposition("eigh", _eigh_ref, _eigh_torch, _eigh_tf, _square, _eigh_plan,
                       lambda s: 2.0 * s[-1] + 0.5),
    ]


def decomposition_records() -> list[OpRecord]:
    """Matrix decompositions. Parameter classes: ``svd``'s singular values (``svdvals`` /
    ``compute_uv=False``) and one singular pair's ``u v^T`` with ``full_matrices`` True (torch's
    default) and False (TensorFlow's); ``qr``'s ``mode`` "reduced" (default) and "complete", Q
    and R; ``eigh``'s eigenvalues with ``UPLO`` "L" (default) and "U", and the projector on the
    top and the bottom eigenvector. ``frac``, the perturbation's size (1/2 or 1/4), varies
    alongside."""
    return with_classes(_decomposition_ops(), {
        "svd": [{"out": "s", "frac": 0.5}, {"out": "uv", "full_matrices": True, "pair": "top", "frac": 0.25},
                {"out": "uv", "full_matrices": False, "pair": "bottom", "frac": 0.5}],
        "qr": [{"mode": "reduced", "out": "q", "frac": 0.5}, {"mode": "reduced", "out": "r", "frac": 0.25},
               {"mode": "complete", "out": "q", "frac": 0.25}, {"mode": "complete", "out": "r", "frac": 0.5}],
        "eigh": [{"out": "values", "uplo": "L", "frac": 0.5}, {"out": "values", "uplo": "U", "frac": 0.25},
                 {"out": "proj", "pair": "top", "uplo": "L", "frac": 0.25},
                 {"out": "proj", "pair": "bottom", "uplo": "U", "frac": 0.5}],
    }, {name: {"dtype_exclusions": linalg_dtypes(name)} for name in ("svd", "qr", "eigh")})
