"""Scaled dot-product attention, ``softmax(Q K^T * scale + mask) V``, with a boolean mask
(True takes part), an additive float mask, ``is_causal`` (lower-triangular) and ``scale``
(default ``1 / sqrt(E)``); dropout_p = 0.

The one input holds Q, K and V stacked on dim 1, shape (B, 3, L, E), so the gradient of each
is checked. torch: ``F.scaled_dot_product_attention`` on (B, L, E). TensorFlow has no SDPA
op of its own; Keras documents ``keras.ops.dot_product_attention(query, key, value, bias,
mask, scale, is_causal)`` on (B, T, N, H) (a boolean ``mask`` where True takes part, an
additive mask as ``bias``), which with the TensorFlow backend runs TensorFlow ops: the
template uses it with one head. Masks are constants rebuilt from the seed; a boolean mask
keeps the diagonal, so no row is fully masked (torch documents NaN there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..core import ULPS, Array, Draw, OpSpec, Params, Shape, _amax
from ..records import OpRecord, with_classes
from .losses import _full_jacobian_norm


def _hint_qkv(draw: Draw, max_side: int) -> Shape:
    return (draw(st.integers(1, 2)), 3, draw(st.integers(2, max_side)), draw(st.integers(1, max_side)))


def _qkv(shapes: Sequence[Shape]) -> bool:
    return len(shapes[0]) == 4 and shapes[0][1] == 3


def _mask(length: int, p: Params) -> Array | None:
    rng = np.random.default_rng(p["seed"])
    if p["mask"] == "bool":
        return (rng.random((length, length)) < 0.6) | np.eye(length, dtype=bool)
    if p["mask"] == "float":
        return rng.integers(-16, 17, size=(length, length)) / 8.0
    return None


def _scores(x: Array, p: Params) -> Array:
    """The logits QK^T * scale with the masks applied (-inf where masked)."""
    q, k = x[:, 0], x[:, 1]
    scale = p["scale"] if p["scale"] is not None else 1.0 / math.sqrt(x.shape[-1])
    s = np.einsum("bie,bje->bij", q, k) * scale
    m = _mask(x.shape[2], p)
    if m is not None and p["mask"] == "bool":
        s = np.where(m, s, -np.inf)
    elif m is not None:
        s = s + m
    if p["is_causal"]:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    return s


def _sdpa_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    s = _scores(x, p)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return np.einsum("bij,bje->bie", e / np.sum(e, axis=-1, keepdims=True), x[:, 2])


def _finite_amax(s: Array) -> float:
    return _amax(np.where(np.isfinite(s), s, 0.0))


def _sdpa_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float, float]:
    # Rounding work: the two contractions (E and L terms); inner: the logits' rounding
    # (absolute, u |s|) moves the softmax weights by a relative 2 u |s|, the output by that
    # times max|V|.
    x = xs[0]
    lip = _full_jacobian_norm(lambda v: _sdpa_ref([v], p, ws), x)
    inner = 2.0 * _finite_amax(_scores(x, p)) * _amax(x[:, 2])
    return (lip,), float(x.shape[2] + x.shape[3]), inner


def sdpa_gradient_term(xs: Sequence[Array], p: Params) -> float:
    """Units of u per unit tangent (the table's row, float32 and float64; float16/bfloat16 use
    the smaller of this and :func:`sdpa_low_precision_gradient`): the backward recomputes the
    softmax weights from rounded logits (relative error 2 |s|, as for softmax's 2 max|x|) and
    uses them twice (the products with dV and the row sums of P * dP), each term of a Jacobian
    entry <= lip: ``8 max(1, |s|) lip``."""
    lip = _full_jacobian_norm(lambda v: _sdpa_ref([v], p, []), xs[0])
    return 8.0 * max(1.0, _finite_amax(_scores(xs[0], p))) * lip


def _sdpa_weights(x: Array, p: Params, u: float) -> tuple[Array, Array, Array, Array, Array, Array, float]:
    """The forward analysis of :func:`..errors._sdpa_error` at the stacked input ``x``, as arrays:
    ``(live, P, r, o, dev, total, scale)`` with ``live`` the unmasked logits (B, L, L), ``P``
    the exact weights, ``r`` their relative change (``|P~ - P| <= r P`` before the
    normalisation's rounding), ``o`` the exact output, ``dev[b, i, j, e] = |v_je - o_ie|``,
    ``total`` the absolute error bound of each output entry (without propagated input
    errors) and ``scale`` = |scale|. The backward's bound
    (:func:`sdpa_low_precision_gradient`) starts from the same weights."""
    q, k, v = x[:, 0], x[:, 1], x[:, 2]
    length, width = x.shape[2], x.shape[3]
    scale = abs(p["scale"]) if p["scale"] is not None else 1.0 / math.sqrt(width)
    s = _scores(x, p)
    live = np.isfinite(s)
    sf = np.where(live, s, 0.0)
    m = np.max(np.where(live, s, -np.inf), axis=-1, keepdims=True)
    e = np.where(live, np.exp(np.where(live, s - m, 0.0)), 0.0)
    w = e / np.sum(e, axis=-1, keepdims=True)
    mask = _mask(length, p)
    mask_abs = np.abs(mask) if mask is not None and p["mask"] == "float" else 0.0
    dots = np.einsum("bie,bje->bij", np.abs(q), np.abs(k)) * scale
    d = ULPS * u * ((width + 2) * dots + mask_abs + np.abs(sf) + np.abs(np.where(live, s - m, 0.0)) + 1.0)
    r = _weight_changes(np.where(live, d, 0.0), w, -1)
    o = np.einsum("bij,bje->bie", w, v)
    dev = np.abs(v[:, None, :, :] - o[:, :, None, :])  # (B, i, j, E)
    lv = live[..., None]
    logit = np.minimum(np.sum((w * r)[..., None] * dev, axis=2), np.max(np.where(lv, dev, 0.0), axis=2))
    absv = np.abs(v)[:, None, :, :]
    mass = np.minimum(np.sum((w * (1.0 + r))[..., None] * absv, axis=2), np.max(np.where(lv, absv, 0.0), axis=2))
    total = logit + ULPS * u * ((length + 2) * mass + np.abs(o))
    return live, w, r, o, dev, total, scale


def _weight_changes(d: Array, w: Array, axis: int) -> Array:
    """r with |P~ - P| <= r P for softmax weights P whose exponents err by at most ``d``
    (absolute, per entry, not first order): P~_j = P_j e^{d_j} / sum_k P_k e^{d_k}."""
    d = np.minimum(d, 600.0)
    z_lo = np.sum(w * np.exp(-d), axis=axis, keepdims=True)
    z_hi = np.sum(w * np.exp(d), axis=axis, keepdims=True)
    return np.asarray(np.maximum(np.exp(d) / z_lo - 1.0, 1.0 - np.exp(-d) / z_hi))


def sdpa_low_precision_gradient(xs: Sequence[Array], p: Params, u: float) -> float:
    """Bound ``B / u`` on the rounding error of sdpa's reverse mode in float16/bfloat16:
    ``|dX~ - dX| <= B ||G||_1`` per entry of dX = (dQ, dK, dV) for a cotangent G = dO, at
    inputs and G representable in the dtype (no max(1, |s|) factor: not first order in the
    logits, whose rounding may be O(1) or more).

    Exact backward: ``dV = P^T G``, ``dP = G V^T``, ``Delta_i = sum_k P_ik dP_ik``,
    ``dS = P (dP - Delta)`` (torch's softmax backward and TensorFlow's SoftmaxGrad alike),
    ``dQ = c dS K``, ``dK = c dS^T Q`` (c = |scale|). Every error below is a linear form in
    ``|G_ie|``; ``B`` is its largest coefficient. ``U = ULPS u``; a contraction of n terms
    rounds by ``U n`` times the sum of its terms' magnitudes.

    * Weights (the forward analysis, :func:`_sdpa_weights`): the computed P~ differs
      from P by ``d0 = min(r P, max(P, 1 - P))`` before normalising; the changes sum to zero,
      so also by ``sum_{k != j} d0_k``; the normalisation (L terms, a division, the store)
      adds ``U (L + 2) P (1 + r)``, except at the row's largest weight j*: there every rounding
      of ``e_j* = exp(0) = 1`` and of ``1 / Z`` errs by at most the distance to the
      representable 1, so ``ULPS (L + 2) min(u P (1 + r), 2 mu_i)`` with the off-mass
      ``mu_i = sum_{k != j*} min(P_ik (1 + r_ik), 1)``. ``delta`` is the sum, ``Pt = P + delta``;
      the stored weights off j* sum to at most ``omega_i = mu_i + (their normalisation)``.
    * dV: ``|dV~_je - dV_je| <= sum_i (delta_ij + U L Pt_ij) |G_ie|``.
    * dP: ``eps_ij <= U E sum_e |G_ie| |V_je|``.
    * Delta from the same dP~ (P~ not exactly normalised, ``nu_i = |1 - sum_k P~_ik|``):
      ``dP~_ij - sum_k P~_ik dP~_ik - (dP_ij - Delta_i) = sum_k (P~ - P)_ik (dP_ij - dP_ik)
      + sum_k P~_ik (eps_ij - eps_ik) + (1 - sum P~) dP~_ij``; the second term is at most
      ``(sum_{k != j} P~_ik) |eps_ij| + sum_{k != j} P~_ik |eps_ik|``: dP's rounding enters
      weighted by the row's off-mass (``omega_i`` at j*), as it cancels in a saturated row.
      Delta's own rounding: ``U L sum_k P~_ik |dP~_ik|``, or, where smaller (chosen per row),
      ``ULPS L (sum_{k != j*} P~_ik |dP_ik| + omega_i |dP_ij*|)`` (no u: each rounding of a
      partial sum that holds the j* term errs by at most the rest, its distance to a
      representable value).
    * dS: ``delta_ij |dP_ij - Delta_i| + Pt_ij (that difference's error) + 2 U Pt_ij |dP - Delta|``
      (the subtraction, the product), ``|dP_ij - Delta_i| <= sum_e |G_ie| |V_je - o_ie|``.
    * dQ, dK: ``c sum_j |dS~ - dS|_ij |K_je'|``, ``c sum_i |dS~ - dS|_ij |Q_ie'|``, plus their
      contraction and the scaling, ``U (L + 2) c sum |dS~| |K|`` (``|Q|``).

    Assumed: the weights are the forward's (stored, or recomputed identically), and Delta is
    formed from the same dP~ (torch's math path and softmax backward, TensorFlow's
    SoftmaxGrad under Keras). Fused kernels that take Delta = rowsum(dO * O) (torch's CPU
    flash attention) keep dP, Delta and dS in float32 accumulators, so only the stored O and
    the final contractions round in the dtype: not derived separately, measured (torch and
    TensorFlow, bfloat16 and float16, every class and regime: observed/bound <= 0.03).
    Where a row's logits' rounding reaches its gap (``r P`` of order 1, e.g. "large" inputs
    with two logits closer than 2 D), ``delta`` is O(P) and the bound is the size of the
    gradient itself: the sample is then inconclusive, as the forward's hull bound is."""
    x = xs[0]
    live, w, r, _, dev, _, c = _sdpa_weights(x, p, u)
    q, k, v = x[:, 0], x[:, 1], x[:, 2]
    length, width = x.shape[2], x.shape[3]
    big_u = ULPS * u
    av = np.abs(v)  # (B, k, E)
    with np.errstate(over="ignore", invalid="ignore"):
        # r may be infinite where the weight underflows to 0: the product is then only capped.
        rw = np.nan_to_num(r * w, nan=np.inf)
    p0 = np.where(live, np.minimum(w + rw, 1.0), 0.0)
    star = np.arange(length)[None, None, :] == np.argmax(np.where(live, w, -1.0), axis=-1)[..., None]
    mu = np.sum(np.where(star, 0.0, p0), axis=-1, keepdims=True)
    norm = ULPS * (length + 2) * np.where(star, np.minimum(u * p0, 2.0 * mu), u * p0)
    norm = np.where(live, norm, 0.0)
    nu = np.sum(norm, axis=-1, keepdims=True)
    omega = np.minimum(1.0, mu + nu)
    d0 = np.where(live, np.minimum(rw, np.maximum(w, 1.0 - w)), 0.0)
    delta = np.where(live, np.minimum(d0, np.sum(d0, axis=-1, keepdims=True) - d0) + norm, 0.0)
    delta = np.where(star, np.minimum(delta, np.maximum(omega, 1.0 - w)), delta)
    pt = np.where(live, np.minimum(w + delta, 1.0), 0.0)
    rest = np.sum(pt, axis=-1, keepdims=True) - pt  # sum_{k != j} P~_ik
    off = np.where(star, np.minimum(omega, rest), np.minimum(1.0 + nu, rest))
    # Coefficients of |G_ie|, arrays (B, i, j, E).
    vdiff = np.abs(v[:, :, None, :] - v[:, None, :, :])  # |V_je - V_ke|, (B, j, k, E)
    weights_err = np.einsum("bik,bjke->bije", delta, vdiff)
    eps = big_u * width * av  # dP's rounding, (B, k, E)
    dp_err = off[..., None] * eps[:, None] + (np.einsum("bik,bke->bie", pt, eps)[:, :, None] - pt[..., None] * eps[:, None])
    unnormalised = nu[..., None] * av[:, None] * (1.0 + big_u * width)
    plain = big_u * length * np.einsum("bik,bke->bie", pt, av) * (1.0 + big_u * width)
    saturated = ULPS * length * (np.einsum("bik,bke->bie", np.where(star, 0.0, pt), av)
                                  + omega * np.einsum("bik,bke->bie", star.astype(float), av)) * (1.0 + big_u * width)
    pick = np.max(plain, axis=-1, keepdims=True) <= np.max(saturated, axis=-1, keepdims=True)
    rounding = np.where(pick, plain, saturated)[:, :, None]
    inner = weights_err + dp_err + unnormalised + rounding
    ds_err = delta[..., None] * dev + pt[..., None] * (inner + 2.0 * big_u * (dev + inner))
    ds_abs = w[..., None] * dev + ds_err
    per_term = ds_err + big_u * (length + 2) * ds_abs
    b_v = np.max(delta + big_u * length * pt, initial=0.0)
    b_q = np.max(c * np.einsum("bjf,bije->bife", np.abs(k), per_term), initial=0.0)
    b_k = np.max(c * np.abs(q)[:, :, None, :, None] * per_term[:, :, :, None, :], initial=0.0)
    return float(max(b_v, b_q, b_k)) / u


def _sdpa_torch(p: Params, shapes: Sequence[Shape]) -> str:
    m = _mask(shapes[0][2], p)
    if m is None:
        mask = "None"
    elif p["mask"] == "bool":
        mask = f"torch.tensor({m.tolist()!r}, dtype=torch.bool, device={{a}}.device)"
    else:
        mask = f"torch.tensor({m.tolist()!r}, dtype={{a}}.dtype, device={{a}}.device)"
    return (f"F.scaled_dot_product_attention({{a}}[:, 0], {{a}}[:, 1], {{a}}[:, 2], attn_mask={mask}, dropout_p=0.0, "
            f"is_causal={p['is_causal']!r}, scale={p['scale']!r})")


def _sdpa_tf(p: Params, shapes: Sequence[Shape]) -> str:
    m = _mask(shapes[0][2], p)
    values = None if m is None else m.tolist()
    bias = f"tf.constant({values!r}, dtype={{a}}.dtype)" if p["mask"] == "float" else "None"
    mask = f"tf.constant({values!r}, dtype=tf.bool)" if p["mask"] == "bool" else "None"
    q, k, v = (f"{{a}}[:, {i}, :, None, :]" for i in range(3))
    # Keras's TensorFlow backend rounds ``scale`` to float32 (``tf.cast(scale, logits.dtype)``
    # of a Python float converts it to a float32 tensor first) and computes the default
    # 1 / sqrt(H) in float32: a relative error of up to 3e-8 in float64 programs (a finding:
    # docs/findings.md). The scale is passed as a tensor of the program's dtype,
    # the default as the documented 1 / sqrt(H).
    value = p["scale"] if p["scale"] is not None else 1.0 / math.sqrt(shapes[0][3])
    scale = f"tf.constant({value!r}, dtype={{a}}.dtype)"
    return (f"__import__('keras').ops.dot_product_attention({q}, {k}, {v}, bias={bias}, mask={mask}, "
            f"scale={scale}, is_causal={p['is_causal']!r})[:, :, 0, :]")


def _sdpa_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    mask = draw(st.sampled_from((None, "bool", "float")))
    # torch: attn_mask and is_causal together raise ("Explicit attn_mask should not be set
    # when is_causal=True"): causal samples have no explicit mask.
    return {"mask": mask, "is_causal": draw(st.booleans()) if mask is None else False,
            "scale": draw(st.sampled_from((None, 0.5, 0.125))), "seed": draw(st.integers(0, 2**16))}


def _attention_ops() -> list[OpSpec]:
    return [
        OpSpec("sdpa", "attention", 1, _sdpa_torch, _sdpa_tf, _sdpa_ref, _qkv, _sdpa_plan,
               lambda bs, ss, p: bs[0], _sdpa_lip, hint=_hint_qkv, composable=False),
    ]



def attention_records() -> list[OpRecord]:
    """Scaled dot-product attention, with its cancellation terms. Parameter classes: no mask,
    not causal, default scale first."""
    return with_classes(_attention_ops(), {
    "sdpa": [
        {"mask": None, "is_causal": False, "scale": None},
        {"mask": "bool", "is_causal": False, "scale": None},
        {"mask": "float", "is_causal": False, "scale": 0.5},
        {"mask": None, "is_causal": True, "scale": None},
        {"mask": None, "is_causal": True, "scale": 0.125},
        {"mask": "bool", "is_causal": False, "scale": 0.125},
    ],
    }, {"sdpa": {"cancellation": lambda xs, p, g: sdpa_gradient_term(xs, p) if g else 0.0}})
