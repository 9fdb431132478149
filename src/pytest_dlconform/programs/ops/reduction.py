"""Reductions and ops along one axis (sum, var, norm, softmax, cumulative sums, ...).

Frameworks' differing defaults are noted at the rows (var's correction, cumsum's
exclusive/reverse, TF's exclusive logcumsumexp).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, OpSpec, Params, PlanFn, Shape, Template, _amax
from ..records import AUTOCAST_FLOAT32, TF_API, TORCH_API, Autocast, OpRecord, StableRef, each, param_class, records
from .common import (
    ALL,
    DIMS,
    FIRST,
    LAST,
    _axes_extra,
    _draw_axis,
    _draw_dims,
    _norm_axis,
    _rank_at_least,
    _reduced_size,
    _unary,
    exp_weights_cancellation,
    lse,
    softmax,
)


def _dims_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"dims": _draw_dims(draw, len(shapes[0])), "keepdims": draw(st.booleans())}


def _reduction(name: str, ref: Callable[[Array, tuple[int, ...], bool], Array], torch_fn: str, tf_fn: str,
               bound: Callable[[float, int], float], lip: Callable[[int], float]) -> OpSpec:
    """Reductions over a tuple of dims, with keepdims, the same in both frameworks."""

    def n_of(s: Sequence[Shape], p: Params) -> int:
        return _reduced_size(s[0], p["dims"])

    return OpSpec(
        name, "reduction", 1, f"{torch_fn}({{a}}, dim={{dims}}, keepdim={{keepdims}})",
        f"{tf_fn}({{a}}, axis={{axes}}, keepdims={{keepdims}})",
        lambda xs, p, ws: np.asarray(ref(xs[0], p["dims"], p["keepdims"])), _rank_at_least(1), _dims_plan,
        lambda bs, ss, p: bound(bs[0], n_of(ss, p)),
        lambda xs, out, p, ws: ((lip(_reduced_size(xs[0].shape, p["dims"])),), _reduced_size(xs[0].shape, p["dims"])),
        extras=_axes_extra,
    )


def _logsumexp_ref(x: Array, dims: tuple[int, ...], keepdims: bool) -> Array:
    m = np.max(x, axis=dims, keepdims=True)
    out = m + np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=dims)


def _var_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    p = _dims_plan(draw, shapes, bounds)
    n = _reduced_size(shapes[0], p["dims"])
    return {**p, "correction": draw(st.sampled_from((1, 0))) if n > 1 else 0}


def _var_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    n = _reduced_size(xs[0].shape, p["dims"])
    return (4 * n * _amax(xs[0]) / (n - p["correction"]),), n


def _axis_plan(max_len: int = 1 << 30) -> PlanFn:
    def plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
        ok = [a for a, n in enumerate(shapes[0]) if n <= max_len]
        if not ok:
            return None
        axis = draw(st.sampled_from(ok))
        return {"axis": axis - len(shapes[0]) if draw(st.booleans()) else axis, "keepdims": draw(st.booleans())}

    return plan


def _axis_len(xs: Sequence[Array], p: Params) -> int:
    return int(xs[0].shape[p["axis"]])


def _norm_ref(x: Array, p: Params) -> Array:
    ax = _norm_axis(p["axis"], x.ndim)
    pads = [(0, 1) if d == ax else (0, 0) for d in range(x.ndim)]
    xp = np.abs(np.pad(x, pads, constant_values=p["pad"]))
    return np.sum(xp ** p["ord"], axis=ax, keepdims=p["keepdims"]) ** (1.0 / p["ord"])


def _norm_extras(p: Params, s: Sequence[Shape]) -> dict[str, str]:
    r = len(s[0])
    ax = _norm_axis(p["axis"], r)
    torch_pad = [0, 0] * (r - 1 - ax) + [0, 1]  # F.pad counts from the last dim backwards
    tf_pad = [[0, 1] if d == ax else [0, 0] for d in range(r)]
    return {"torch_pad": repr(tuple(torch_pad)), "tf_pad": repr(tf_pad)}


def _softmax_ref(x: Array, axis: int) -> Array:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax_ref(x: Array, axis: int) -> Array:
    z = x - np.max(x, axis=axis, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))


def _cumsum_ref(x: Array, p: Params) -> Array:
    ax = p["axis"]
    y = np.flip(x, ax) if p["reverse"] else x
    c = np.cumsum(y, axis=ax)
    if p["exclusive"]:
        head = np.zeros_like(np.take(c, [0], axis=ax))
        c = np.concatenate([head, np.take(c, range(c.shape[ax] - 1), axis=ax)], axis=ax)
    return np.flip(c, ax) if p["reverse"] else c


def _cumsum_torch(p: Params, s: Sequence[Shape]) -> str:
    # torch.cumsum has neither TF's exclusive nor reverse: flips and a subtraction.
    base = "torch.cumsum({a}, dim={axis})"
    if p["reverse"]:
        base = "torch.flip(torch.cumsum(torch.flip({a}, dims=({axis},)), dim={axis}), dims=({axis},))"
    return f"({base} - {{a}})" if p["exclusive"] else base


def _logcumsumexp_ref(x: Array, p: Params) -> Array:
    ax = p["axis"]
    y = np.flip(x, ax) if p["reverse"] else x
    c = np.logaddexp.accumulate(y, axis=ax)
    return np.flip(c, ax) if p["reverse"] else c


def _logcumsumexp_torch(p: Params, s: Sequence[Shape]) -> str:
    if p["reverse"]:
        return "torch.flip(torch.logcumsumexp(torch.flip({a}, dims=({axis},)), dim={axis}), dims=({axis},))"
    return "torch.logcumsumexp({a}, dim={axis})"


def _axis_op(name: str, ref: Callable[[Array, Params], Array], torch: Template, tf: Template,
             bound: Callable[[float, int], float], lip: Callable[[int], float], **flags: Sequence[Any]) -> OpSpec:
    """Ops along one axis (softmax, cumulative sums): same shape out."""

    def plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
        return {"axis": _draw_axis(draw, len(shapes[0])), **{k: draw(st.sampled_from(v)) for k, v in flags.items()}}

    return OpSpec(
        name, "reduction", 1, torch, tf, _unary(ref), _rank_at_least(1), plan,
        lambda bs, ss, p: bound(bs[0], ss[0][p["axis"]]),
        lambda xs, out, p, ws: ((lip(_axis_len(xs, p)),), _axis_len(xs, p)),
    )


def _reduction_ops() -> list[OpSpec]:
    return [
        _reduction("sum", lambda x, d, k: np.sum(x, axis=d, keepdims=k), "torch.sum", "tf.math.reduce_sum",
                   lambda b, n: n * b, lambda n: n),
        _reduction("mean", lambda x, d, k: np.mean(x, axis=d, keepdims=k), "torch.mean", "tf.math.reduce_mean",
                   lambda b, n: b, lambda n: 1.0),
        _reduction("logsumexp", _logsumexp_ref, "torch.logsumexp", "tf.math.reduce_logsumexp",
                   lambda b, n: b + math.log(n), lambda n: 1.0),
        # Defaults differ: torch.var corrects by 1 (unbiased), tf.math.reduce_variance does not.
        OpSpec("var", "reduction", 1, "torch.var({a}, dim={dims}, correction={correction}, keepdim={keepdims})",
               "tf.math.reduce_variance({a}, axis={axes}, keepdims={keepdims}) * {factor}",
               lambda xs, p, ws: np.asarray(np.var(xs[0], axis=p["dims"], ddof=p["correction"], keepdims=p["keepdims"])),
               _rank_at_least(1), _var_plan, lambda bs, ss, p: 2 * bs[0] ** 2 * _reduced_size(ss[0], p["dims"]),
               _var_lip,
               extras=lambda p, s: {**_axes_extra(p, s), "factor": _var_factor(s[0], p)}),
        # prod only over short axes of bounded values: the generator checks b**n.
        OpSpec("prod", "reduction", 1, "torch.prod({a}, dim={axis}, keepdim={keepdims})",
               "tf.math.reduce_prod({a}, axis={axis}, keepdims={keepdims})",
               lambda xs, p, ws: np.asarray(np.prod(xs[0], axis=p["axis"], keepdims=p["keepdims"])), _rank_at_least(1),
               _axis_plan(max_len=4), lambda bs, ss, p: bs[0] ** ss[0][p["axis"]],
               lambda xs, out, p, ws: ((_axis_len(xs, p) * max(1.0, _amax(xs[0])) ** (_axis_len(xs, p) - 1),),
                                       _axis_len(xs, p))),
        # ||concat(x, pad)||_ord: the norm API itself, kept away from 0 (where it has a kink).
        OpSpec("norm_c", "reduction", 1,
               "torch.linalg.vector_norm(F.pad({a}, {torch_pad}, value={pad}), ord={ord}, dim={axis}, keepdim={keepdims})",
               "tf.norm(tf.pad({a}, {tf_pad}, constant_values={pad}), ord={ord}, axis={axis}, keepdims={keepdims})",
               _unary(_norm_ref), _rank_at_least(1), _norm_plan,
               lambda bs, ss, p: (ss[0][p["axis"]] + 1) * max(bs[0], p["pad"]),
               lambda xs, out, p, ws: ((float(_axis_len(xs, p)),), _axis_len(xs, p) + 1), extras=_norm_extras),
        _axis_op("softmax", lambda x, p: _softmax_ref(x, p["axis"]), "F.softmax({a}, dim={axis})",
                 "tf.nn.softmax({a}, axis={axis})", lambda b, n: 1.0, lambda n: 1.0),
        _axis_op("log_softmax", lambda x, p: _log_softmax_ref(x, p["axis"]), "F.log_softmax({a}, dim={axis})",
                 "tf.nn.log_softmax({a}, axis={axis})", lambda b, n: 2 * b + math.log(n), lambda n: 2.0),
        _axis_op("cumsum", _cumsum_ref, _cumsum_torch,
                 "tf.math.cumsum({a}, axis={axis}, exclusive={exclusive}, reverse={reverse})",
                 lambda b, n: n * b, lambda n: n, exclusive=(False, True), reverse=(False, True)),
        # TF's exclusive logcumsumexp starts at -inf: left out.
        _axis_op("logcumsumexp", _logcumsumexp_ref, _logcumsumexp_torch,
                 "tf.math.cumulative_logsumexp({a}, axis={axis}, reverse={reverse})",
                 lambda b, n: b + math.log(n), lambda n: 1.0, reverse=(False, True)),
    ]


def _var_factor(shape: Shape, p: Params) -> str:
    n = _reduced_size(shape, p["dims"])
    return f"({n} / {n - p['correction']})"


def _norm_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"axis": _draw_axis(draw, len(shapes[0])), "ord": draw(st.sampled_from((2, 4))),
            "pad": draw(st.sampled_from((1.0, 0.25, 0.5, 2.0))), "keepdims": draw(st.booleans())}


def _lcse_vjp(x: Array, w: Array) -> Array:
    y = np.logaddexp.accumulate(x, axis=-1)  # g_i = sum_{j >= i} w_j exp(x_i - y_j)
    return np.sum(np.triu(np.ones((x.shape[-1],) * 2)) * w[..., None, :] * np.exp(x[..., :, None] - y[..., None, :]), -1)


def _along_last(name: str) -> ac.AutocastCall:
    """F.<name>(x, -1), as torch's autocast check calls it."""
    return ac.call(lambda t, x: ac.functional(name)(t)(x[0], -1), ac.M)


def reduction_records() -> list[OpRecord]:
    """The reductions and ops along an axis; the log-sum-exp family with its documented
    stability and its float64 references on the last axis (x may carry leading sign-pattern
    axes)."""
    inf = math.inf
    return records(_reduction_ops(), {
        "sum": {"params": DIMS, "linear": True, "autocast": Autocast(ac.method("sum", ac.M), cuda=AUTOCAST_FLOAT32)},
        "mean": {"params": DIMS, "linear": True},
        "logsumexp": {
            "cancellation": exp_weights_cancellation, "params": DIMS, "stable": True,
            "stable_ref": StableRef({"dims": (-1,), "keepdims": False}, lse, lambda x, w: w[..., :1] * softmax(x)),
            "stable_source": f"{TORCH_API}torch.logsumexp.html: 'The computation is numerically stabilized'; "
                             f"{TF_API}tf/math/reduce_logsumexp: 'It avoids overflows caused by taking the exp of large "
                             "inputs and underflows caused by taking the log of small inputs'",
            "nonfinite_vectors": (("-inf,0", ((-inf, 0.0),), (0.0,)), ("-inf,-inf", ((-inf, -inf),), (-inf,)),
                                  ("inf,0", ((inf, 0.0),), (inf,)))},
        "var": {"params": (param_class(dims=LAST, keepdims=False, correction=1),
                           param_class(dims=ALL, keepdims=True, correction=0),
                           param_class(dims=FIRST, keepdims=False, correction=0))},
        "prod": {"params": (param_class(axis=-1, keepdims=False), param_class(axis=0, keepdims=True)),
                 "autocast": Autocast(ac.method("prod", ac.M), cpu=AUTOCAST_FLOAT32, cuda=AUTOCAST_FLOAT32)},
        "norm_c": {"params": each(ord=(2, 4), pad=(1.0, 0.25, 0.5, 2.0))},
        "softmax": {
            "cancellation": exp_weights_cancellation, "params": each(axis=(-1, 0)), "stable": True,
            "autocast": Autocast(_along_last("softmax"), cuda=AUTOCAST_FLOAT32, aten="softmax.int"),
            "stable_ref": StableRef({"axis": -1}, softmax,
                                    lambda x, w: softmax(x) * (w - np.sum(softmax(x) * w, -1, keepdims=True))),
            "stable_source": f"{TORCH_API}torch.nn.functional.softmax.html: 're-scale them so that the elements lie "
                             f"in the range [0, 1] and sum to 1'; {TF_API}tf/nn/softmax: 'The sum of all outputs "
                             "generated by softmax is 1'",
            "nonfinite_vectors": (("-inf,0,0", ((-inf, 0.0, 0.0),), (0.0, 0.5, 0.5)),)},
        "log_softmax": {
            "cancellation": exp_weights_cancellation, "params": each(axis=(-1, 0)), "stable": True,
            "autocast": Autocast(_along_last("log_softmax"), cuda=AUTOCAST_FLOAT32, aten="log_softmax.int"),
            "stable_ref": StableRef({"axis": -1}, lambda x: x - lse(x)[..., None],
                                    lambda x, w: w - softmax(x) * np.sum(w, -1, keepdims=True)),
            "stable_source": f"{TORCH_API}torch.nn.functional.log_softmax.html: 'doing these two operations "
                             "separately is slower and numerically unstable. This function uses an alternative "
                             "formulation to compute the output and gradient correctly'; "
                             f"{TF_API}tf/nn/log_softmax: logits - log(reduce_sum(exp(logits)))",
            "nonfinite_vectors": (("-inf,0,0", ((-inf, 0.0, 0.0),), (-inf, -math.log(2), -math.log(2))),)},
        "cumsum": {"linear": True, "autocast": Autocast(ac.call(lambda t, x: t.cumsum(x[0], 0), ac.M), cuda=AUTOCAST_FLOAT32),
                   "params": tuple(param_class(exclusive=e, reverse=r) for e in (False, True) for r in (False, True))},
        "logcumsumexp": {
            "own_program_ids": "torch's forward-mode JVP of torch.logcumsumexp (docs/findings.md)",
            "cancellation": exp_weights_cancellation, "params": each(reverse=(False, True)), "stable": True,
            "stable_ref": StableRef({"axis": -1, "reverse": False}, lambda x: np.logaddexp.accumulate(x, axis=-1),
                                    _lcse_vjp),
            "stable_source": f"{TF_API}tf/math/cumulative_logsumexp: 'significantly more numerically stable than "
                             f"the equivalent tf.math.log(tf.math.cumsum(tf.math.exp(x)))'; "
                             f"{TORCH_API}torch.logcumsumexp.html"},
    })
