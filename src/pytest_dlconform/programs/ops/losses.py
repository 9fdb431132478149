"""Losses of predictions (N, C) against constant targets (parameters, rebuilt from a seed):
cross_entropy (class weights, ignore_index, label_smoothing, reduction), nll_loss, mse_loss,
huber_loss (delta), smooth_l1_loss (beta) and bce_with_logits (pos_weight, weight).
Gradients are taken with respect to the predictions only.

References are torch's documented formulas. Cross-entropy with label smoothing ``e`` and
class weights ``w`` (``aten/src/ATen/native/LossNLL.cpp``, cross_entropy_loss_label_smoothing):
``l_n = m_n [(1 - e) w_y (-log p_{n,y}) + e / C sum_c w_c (-log p_{n,c})]`` with ``m_n = 0``
for an ignored target, and "mean" divides the sum by ``sum_n m_n w_{y_n}``.

TensorFlow/Keras: Keras's CategoricalCrossentropy documents ``label_smoothing`` as "use
e / num_classes for non-target labels and 1 - e + e / num_classes for target labels", the
same target distribution as torch's; it has no class weights or ignored class (its
``sample_weight`` scales a whole sample, smoothing term included, and "sum_over_batch_size"
divides by N, not by the weights), so where torch's weights or ignore_index apply, the
TensorFlow template feeds Keras torch's target distribution per row with ``label_smoothing=0``
and the row's total weight as Keras's ``sample_weight``, and divides Keras's "sum" by torch's
denominator; each framework is
checked against its own documented formula. Keras's MeanSquaredError and Huber average over
the last axis before reducing: "mean" (sum_over_batch_size) is the global mean, "sum" is
torch's sum / C, and "none" is per row, so elementwise losses apply them to (..., 1).
``smooth_l1_loss`` is torch's ``huber_loss / beta`` (documented), Keras's Huber(delta=beta) / beta.
BCE with logits: ``tf.nn.weighted_cross_entropy_with_logits`` documents torch's pos_weight
formula ``labels * -log(sigmoid(x)) * pos_weight + (1 - labels) * -log(1 - sigmoid(x))``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, OpSpec, Params, Shape, _amax
from ..records import AUTOCAST_FLOAT32, Autocast, OpRecord, with_classes
from .pooling import valid_plan

REDUCTIONS: Final = ("mean", "sum", "none")
_KERAS_REDUCTION: Final = {"mean": "'sum_over_batch_size'", "sum": "'sum'", "none": "None"}


def _hint_logits(draw: Draw, max_side: int) -> Shape:
    return (draw(st.integers(1, max_side)), draw(st.integers(2, max_side)))


def _matrix(shapes: Sequence[Shape]) -> bool:
    return len(shapes[0]) == 2 and shapes[0][1] >= 2


def _rng(p: Params, k: int) -> np.random.Generator:
    return np.random.default_rng(p["seed"] * 7 + k)


def _classes(shape: Shape, p: Params) -> Array:
    return _rng(p, 0).integers(0, shape[1], size=shape[0])


def _class_weights(shape: Shape, p: Params) -> Array:
    """Positive class weights in [0.5, 2] (multiples of 1/8), or ones."""
    if not p.get("weighted"):
        return np.ones(shape[1])
    return _rng(p, 1).integers(4, 17, size=shape[1]) / 8.0


def _kept(shape: Shape, p: Params) -> Array:
    ignore = p.get("ignore_index")
    y = _classes(shape, p)
    return (y != ignore).astype(np.float64) if ignore is not None else np.ones(shape[0])


def _reduce(per: Array, p: Params, denom: float) -> Array:
    if p["reduction"] == "none":
        return per
    if denom <= 0:
        raise ValueError("every target is ignored: the mean is 0/0")
    total = np.sum(per)
    return total / denom if p["reduction"] == "mean" else total


def _log_softmax(x: Array) -> Array:
    m = np.max(x, axis=-1, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


def _ce_targets(shape: Shape, p: Params) -> Array:
    """torch's per-sample target distribution times weights and mask: l_n = -sum_c T_nc log p_nc."""
    y, w, m = _classes(shape, p), _class_weights(shape, p), _kept(shape, p)
    e, c = p["label_smoothing"], shape[1]
    onehot = np.eye(c)[y]
    return m[:, None] * ((1 - e) * onehot * w[y][:, None] + e / c * w[None, :])


def _ce_denominator(shape: Shape, p: Params) -> float:
    y, w, m = _classes(shape, p), _class_weights(shape, p), _kept(shape, p)
    return float(np.sum(m * w[y]))


def _ce_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    per = -np.sum(_ce_targets(x.shape, p) * _log_softmax(x), axis=-1)
    return _reduce(per, p, _ce_denominator(x.shape, p))


def _lit(values: Array, like: str = "{a}") -> str:
    return f"tf.constant({np.asarray(values).tolist()!r}, dtype={like}.dtype)"


def _torch_lit(values: Array) -> str:
    return f"torch.tensor({np.asarray(values).tolist()!r}, dtype={{a}}.dtype, device={{a}}.device)"


def _ce_torch(p: Params, shapes: Sequence[Shape]) -> str:
    y = _classes(shapes[0], p).tolist()
    weight = _torch_lit(_class_weights(shapes[0], p)) if p["weighted"] else "None"
    ignore = -100 if p["ignore_index"] is None else p["ignore_index"]  # torch's default
    return (f"F.cross_entropy({{a}}, torch.tensor({y!r}, device={{a}}.device), weight={weight}, "
            f"ignore_index={ignore}, reduction={p['reduction']!r}, label_smoothing={p['label_smoothing']!r})")


def _ce_tf(p: Params, shapes: Sequence[Shape]) -> str:
    shape = shapes[0]
    keras = "__import__('keras').losses.CategoricalCrossentropy"
    if not p["weighted"] and p["ignore_index"] is None:  # torch's formula is Keras's here
        onehot = np.eye(shape[1])[_classes(shape, p)]
        return (f"{keras}(from_logits=True, label_smoothing={p['label_smoothing']!r}, "
                f"reduction={_KERAS_REDUCTION[p['reduction']]}, dtype={{a}}.dtype.name)({_lit(onehot)}, {{a}})")
    # Keras's cross-entropy takes a probability distribution per row (its gradient,
    # softmax - labels, assumes one): torch's weighted, masked target row T_n is s_n D_n with
    # D_n a distribution, and s_n goes in as Keras's documented per-sample ``sample_weight``.
    t = _ce_targets(shape, p)
    s_n = np.sum(t, axis=-1)
    dist = np.where(s_n[:, None] > 0, t / np.where(s_n > 0, s_n, 1.0)[:, None], 1.0 / shape[1])
    reduction = "None" if p["reduction"] == "none" else "'sum'"
    loss = (f"{keras}(from_logits=True, label_smoothing=0.0, reduction={reduction}, dtype={{a}}.dtype.name)"
            f"({_lit(dist)}, {{a}}, sample_weight={_lit(s_n)})")
    return f"({loss} / {_ce_denominator(shape, p)!r})" if p["reduction"] == "mean" else loss


def _nll_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    t = _ce_targets(x.shape, {**p, "label_smoothing": 0.0})
    return _reduce(-np.sum(t * x, axis=-1), p, _ce_denominator(x.shape, p))


def _nll_torch(p: Params, shapes: Sequence[Shape]) -> str:
    y = _classes(shapes[0], p).tolist()
    weight = _torch_lit(_class_weights(shapes[0], p)) if p["weighted"] else "None"
    ignore = -100 if p["ignore_index"] is None else p["ignore_index"]
    return (f"F.nll_loss({{a}}, torch.tensor({y!r}, device={{a}}.device), weight={weight}, ignore_index={ignore}, "
            f"reduction={p['reduction']!r})")


def _nll_tf(p: Params, shapes: Sequence[Shape]) -> str:
    # TensorFlow has no NLL loss: the documented formula in tf ops (a weighted gather).
    t = _ce_targets(shapes[0], {**p, "label_smoothing": 0.0})
    per = f"-tf.reduce_sum({_lit(t)} * {{a}}, axis=-1)"
    if p["reduction"] == "none":
        return per
    total = f"tf.reduce_sum({per})"
    return f"({total} / {_ce_denominator(shapes[0], p)!r})" if p["reduction"] == "mean" else total


# --------------------------------------------------------------------------- regression losses


def _targets(shape: Shape, p: Params) -> Array:
    """Constant targets: multiples of 1/8 in [-2, 2] (mse), or the constant ``c`` (huber and
    smooth L1, whose kinks at c +- delta are then points the inputs avoid)."""
    if "c" in p:
        return np.full(shape, float(p["c"]))
    return _rng(p, 2).integers(-16, 17, size=shape) / 8.0


def _elementwise_reduce(per: Array, p: Params) -> Array:
    if p["reduction"] == "none":
        return per
    return np.mean(per) if p["reduction"] == "mean" else np.sum(per)


def _mse_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    return _elementwise_reduce((xs[0] - _targets(xs[0].shape, p)) ** 2, p)


def _huber(d: Array, delta: float) -> Array:
    a = np.abs(d)
    return np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


def _huber_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    return _elementwise_reduce(_huber(xs[0] - p["c"], p["delta"]), p)


def _smooth_l1_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    return _elementwise_reduce(_huber(xs[0] - p["c"], p["beta"]) / p["beta"], p)


def _mse_torch(p: Params, shapes: Sequence[Shape]) -> str:
    return f"F.mse_loss({{a}}, {_torch_lit(_targets(shapes[0], p))}, reduction={p['reduction']!r})"


def _mse_tf(p: Params, shapes: Sequence[Shape]) -> str:
    return _keras_loss("MeanSquaredError()", _lit(_targets(shapes[0], p)), p, shapes[0])


def _keras_loss(ctor: str, target: str, p: Params, shape: Shape) -> str:
    """``ctor`` is 'Name(args)': the Keras loss class with the program's dtype."""
    name, args = ctor.split("(", 1)
    args = args.rstrip(")")
    extra = f"{args}, " if args else ""
    loss = f"(lambda reduction: __import__('keras').losses.{name}({extra}reduction=reduction, dtype={{a}}.dtype.name))"
    if p["reduction"] == "none":
        inner = f"{loss}(None)(tf.reshape({target}, {(*shape, 1)}), tf.reshape({{a}}, {(*shape, 1)}))"
        return f"tf.reshape({inner}, {shape})"
    value = f"{loss}({_KERAS_REDUCTION[p['reduction']]})({target}, {{a}})"
    return f"({value} * {shape[-1]})" if p["reduction"] == "sum" else value


def _huber_tf(p: Params, shapes: Sequence[Shape]) -> str:
    return _keras_loss(f"Huber(delta={p['delta']!r})", f"tf.fill({shapes[0]}, tf.constant({p['c']!r}, {{a}}.dtype))",
                       p, shapes[0])


def _smooth_l1_tf(p: Params, shapes: Sequence[Shape]) -> str:
    loss = _keras_loss(f"Huber(delta={p['beta']!r})", f"tf.fill({shapes[0]}, tf.constant({p['c']!r}, {{a}}.dtype))",
                       p, shapes[0])
    return f"({loss} / {p['beta']!r})"


# --------------------------------------------------------------------------- BCE with logits


def _bce_targets(shape: Shape, p: Params) -> Array:
    return _rng(p, 3).integers(0, 9, size=shape) / 8.0  # soft targets, 0 and 1 included


def _pos_weight(shape: Shape, p: Params) -> Array | None:
    return _rng(p, 4).integers(4, 25, size=shape[-1]) / 8.0 if p["pos_weight"] else None


def _bce_weight(shape: Shape, p: Params) -> Array | None:
    return _rng(p, 5).integers(4, 17, size=shape[-1]) / 8.0 if p["weight"] else None


def _log_sigmoid(x: Array) -> Array:
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def _bce_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    t, pw, w = _bce_targets(x.shape, p), _pos_weight(x.shape, p), _bce_weight(x.shape, p)
    pos = 1.0 if pw is None else pw
    per = -(pos * t * _log_sigmoid(x) + (1 - t) * _log_sigmoid(-x))
    if w is not None:
        per = per * w
    return _elementwise_reduce(per, p)


def _bce_torch(p: Params, shapes: Sequence[Shape]) -> str:
    s = shapes[0]
    pw, w = _pos_weight(s, p), _bce_weight(s, p)
    return (f"F.binary_cross_entropy_with_logits({{a}}, {_torch_lit(_bce_targets(s, p))}, "
            f"weight={'None' if w is None else _torch_lit(w)}, reduction={p['reduction']!r}, "
            f"pos_weight={'None' if pw is None else _torch_lit(pw)})")


def _bce_tf(p: Params, shapes: Sequence[Shape]) -> str:
    s = shapes[0]
    pw, w = _pos_weight(s, p), _bce_weight(s, p)
    labels = _lit(_bce_targets(s, p))
    if pw is None:
        per = f"tf.nn.sigmoid_cross_entropy_with_logits(labels={labels}, logits={{a}})"
    else:
        per = f"tf.nn.weighted_cross_entropy_with_logits(labels={labels}, logits={{a}}, pos_weight={_lit(pw)})"
    if w is not None:
        per = f"({per} * {_lit(w)})"
    return {"none": per, "mean": f"tf.reduce_mean({per})", "sum": f"tf.reduce_sum({per})"}[p["reduction"]]


# --------------------------------------------------------------------------- plans and bounds


def _full_jacobian_norm(fn: Callable[[Array], Array], x: Array) -> float:
    """Largest row sum of |J| by central differences, one input entry at a time (inputs of
    these ops have at most a few dozen entries)."""
    rows = np.zeros(np.shape(fn(x)))
    for idx in np.ndindex(*x.shape):
        h = 2.0**-20 * max(1.0, abs(float(x[idx])))
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        rows = rows + np.abs(fn(xp) - fn(xm)) / (2 * h)
    return 1.25 * _amax(rows)


def _numeric_lip(ref: Callable[[Sequence[Array], Params, Sequence[Array]], Array], work: Callable[[Shape], float]) -> Any:
    def lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
        return (_full_jacobian_norm(lambda v: ref([v], p, ws), xs[0]),), work(xs[0].shape)

    return lip


def _seed(draw: Draw) -> int:
    return draw(st.integers(0, 2**16))


def _ce_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"reduction": draw(st.sampled_from(REDUCTIONS)), "label_smoothing": draw(st.sampled_from((0.0, 0.1, 0.5))),
            "ignore_index": draw(st.sampled_from((None, 0))), "weighted": draw(st.booleans()), "seed": _seed(draw)}


def _nll_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"reduction": draw(st.sampled_from(REDUCTIONS)), "ignore_index": draw(st.sampled_from((None, 0))),
            "weighted": draw(st.booleans()), "seed": _seed(draw)}


def _size(shape: Shape) -> float:
    return float(math.prod(shape))


def _loss_ops() -> list[OpSpec]:
    red = lambda draw: draw(st.sampled_from(REDUCTIONS))
    # A-priori magnitudes: -log p <= 2 max|x| + log C; mean/sum over N rows (x C for sum).
    ce_bound = lambda bs, ss, p: 2.0 * (2 * bs[0] + math.log(ss[0][1]) + 1) * math.prod(ss[0])
    sq_bound = lambda bs, ss, p: (bs[0] + 2.0) ** 2 * math.prod(ss[0])
    lin_bound = lambda bs, ss, p: 4.0 * (bs[0] + 2.0) * math.prod(ss[0])
    return [
        OpSpec("cross_entropy", "loss", 1, _ce_torch, _ce_tf, _ce_ref, _matrix, valid_plan(_ce_plan, _ce_ref), ce_bound,
               _numeric_lip(_ce_ref, lambda s: 2.0 * _size(s)), hint=_hint_logits, composable=False),
        OpSpec("nll_loss", "loss", 1, _nll_torch, _nll_tf, _nll_ref, _matrix, valid_plan(_nll_plan, _nll_ref), lin_bound,
               _numeric_lip(_nll_ref, _size), hint=_hint_logits, composable=False),
        OpSpec("mse_loss", "loss", 1, _mse_torch, _mse_tf, _mse_ref,
               _matrix, lambda draw, s, b: {"reduction": red(draw), "seed": _seed(draw)}, sq_bound,
               _numeric_lip(_mse_ref, _size), hint=_hint_logits, composable=False),
        OpSpec("huber_loss", "loss", 1,
               "F.huber_loss({a}, torch.full_like({a}, {c}), reduction={reduction}, delta={delta})",
               _huber_tf, _huber_ref, _matrix,
               lambda draw, s, b: {"reduction": red(draw), "delta": draw(st.sampled_from((1.0, 0.5, 2.0))),
                                   "c": draw(st.sampled_from((0.0, 0.5)))},
               lin_bound, _numeric_lip(_huber_ref, _size), hint=_hint_logits, composable=False,
               kinks=lambda p: (p["c"] - p["delta"], p["c"] + p["delta"])),
        OpSpec("smooth_l1_loss", "loss", 1,
               "F.smooth_l1_loss({a}, torch.full_like({a}, {c}), reduction={reduction}, beta={beta})",
               _smooth_l1_tf, _smooth_l1_ref, _matrix,
               lambda draw, s, b: {"reduction": red(draw), "beta": draw(st.sampled_from((1.0, 0.5, 2.0))),
                                   "c": draw(st.sampled_from((0.0, 0.5)))},
               lin_bound, _numeric_lip(_smooth_l1_ref, _size), hint=_hint_logits, composable=False,
               kinks=lambda p: (p["c"] - p["beta"], p["c"] + p["beta"])),
        OpSpec("bce_with_logits", "loss", 1, _bce_torch, _bce_tf, _bce_ref, _matrix,
               lambda draw, s, b: {"reduction": red(draw), "pos_weight": draw(st.booleans()),
                                   "weight": draw(st.booleans()), "seed": _seed(draw)},
               lambda bs, ss, p: 6.0 * (bs[0] + 1.0) * math.prod(ss[0]), _numeric_lip(_bce_ref, lambda s: 4.0 * _size(s)),
               # The documented loss is smooth, but TensorFlow's weighted_cross_entropy_with_logits
               # differentiates its abs/max pieces at logits exactly 0 and gets the gradient wrong
               # there (report/findings/tf_weighted_cross_entropy_gradient_at_zero.py): per-op inputs keep
               # away from 0 (a "kink" of the implementation) and test_documented_gradients.py
               # checks x = 0 in both frameworks, TensorFlow's pinned to that symptom.
               hint=_hint_logits, composable=False, kinks=lambda p: (0.0,)),
    ]


def _cycle(**options: Sequence[Any]) -> list[dict[str, Any]]:
    n = max(len(v) for v in options.values())
    return [{k: v[i % len(v)] for k, v in options.items()} for i in range(n)]



def loss_records() -> list[OpRecord]:
    """The losses, with cross-entropy's cancellation terms. Parameter classes: torch's defaults
    first (mean, no smoothing, no ignored class, no weights; huber delta 1, smooth L1 beta 1),
    then each other value."""
    return with_classes(_loss_ops(), {
    "cross_entropy": [
        {"reduction": "mean", "label_smoothing": 0.0, "ignore_index": None, "weighted": False},
        {"reduction": "sum", "label_smoothing": 0.1, "ignore_index": None, "weighted": False},
        {"reduction": "none", "label_smoothing": 0.5, "ignore_index": None, "weighted": False},
        {"reduction": "mean", "label_smoothing": 0.1, "ignore_index": 0, "weighted": True},
        {"reduction": "mean", "label_smoothing": 0.0, "ignore_index": 0, "weighted": False},
        {"reduction": "sum", "label_smoothing": 0.0, "ignore_index": None, "weighted": True},
        {"reduction": "none", "label_smoothing": 0.1, "ignore_index": 0, "weighted": True},
        {"reduction": "mean", "label_smoothing": 0.5, "ignore_index": None, "weighted": True},
    ],
    "nll_loss": [
        {"reduction": "mean", "ignore_index": None, "weighted": False},
        {"reduction": "sum", "ignore_index": 0, "weighted": True},
        {"reduction": "none", "ignore_index": None, "weighted": True},
        {"reduction": "mean", "ignore_index": 0, "weighted": True},
        {"reduction": "mean", "ignore_index": None, "weighted": True},
    ],
    "mse_loss": _cycle(reduction=REDUCTIONS),
    "huber_loss": _cycle(delta=(1.0, 0.5, 2.0), reduction=REDUCTIONS, c=(0.0, 0.5)),
    "smooth_l1_loss": _cycle(beta=(1.0, 0.5, 2.0), reduction=REDUCTIONS, c=(0.0, 0.5)),
    "bce_with_logits": [
        {"reduction": "mean", "pos_weight": False, "weight": False},
        {"reduction": "sum", "pos_weight": True, "weight": False},
        {"reduction": "none", "pos_weight": False, "weight": True},
        {"reduction": "mean", "pos_weight": True, "weight": True},
    ],
    }, {"cross_entropy": {"cancellation": lambda xs, p, g: ce_gradient_term(xs[0], p) if g else ce_forward_term(xs[0], p),
                          # on CUDA log_softmax + nll_loss, both float32-listed there
                          "autocast": Autocast(ac.function("cross_entropy", ac.M, ac.labels), cpu=AUTOCAST_FLOAT32,
                                               cuda=AUTOCAST_FLOAT32, aten="cross_entropy_loss",
                                               composite=("cuda",))},
        "nll_loss": {"autocast": Autocast(ac.function("nll_loss", ac.log_probs, ac.labels), cpu=AUTOCAST_FLOAT32,
                                          cuda=AUTOCAST_FLOAT32)},
        **{name: {"autocast": Autocast(ac.function(name, ac.M, ac.M), cpu=AUTOCAST_FLOAT32, cuda=AUTOCAST_FLOAT32)}
           for name in ("mse_loss", "huber_loss", "smooth_l1_loss")}})


def ce_forward_term(x: Array, p: Params) -> float:
    """Units of u: each log-probability ``x_c - m - log sum exp(x - m)`` errs by about
    ``u (|x_c| + |m| + log C)`` however small the loss (``-log p_y`` of a saturated row is
    ``exp(-17)`` from terms of 17: explore seed 48213), weighted by the targets ``T_nc`` and
    reduced as the loss is."""
    t = _ce_targets(x.shape, p)
    m = np.max(np.abs(x), axis=-1, keepdims=True)
    per = np.sum(np.abs(t) * (np.abs(x) + m + math.log(x.shape[1])), axis=-1)
    return _amax(_reduce(per, p, _ce_denominator(x.shape, p)))


def ce_gradient_term(x: Array, p: Params) -> float:
    """Units of u per unit tangent: the backward's softmax weights ``exp(x - m)`` err by a
    relative ``2 u max|x|`` (as the softmax ops', docs/tolerances.md), and enter each Jacobian
    entry ``(sum_c T_nc) p_c - T_nc`` through ``(sum_c T_nc) / denominator``."""
    t = _ce_targets(x.shape, p)
    denom = _ce_denominator(x.shape, p) if p["reduction"] == "mean" else 1.0
    return 2.0 * _amax(x) * float(np.max(np.sum(t, axis=-1))) / max(denom, 1e-300)
