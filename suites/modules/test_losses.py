"""modules.torch.losses and modules.keras.losses: every torch.nn loss module and its
torch.nn.functional twin, and every keras.losses class and function, against numpy references
written from the formulas their docstrings state (suites/modules/_loss_reference.py).

Coverage by construction. Each torch loss has a row in TORCH_LOSSES with its documented options as
factors, two or three values each (reduction always, weight / ignore_index / label_smoothing /
target kind / input shape / pos_weight / log_input / full / eps / beta / delta / margin / p / swap /
log_target / var shape / blank / zero_infinity / target layout where the loss has them); the rows
run are a pairwise covering array (``_optim_reference.pairwise``): every pair of values of two
factors is in some row. Each row is checked through the module and through the functional form,
on fixed float64 inputs (seeded by the loss's name) that put every documented branch in play:
ignored targets present, Huber/SmoothL1 differences on both sides of delta/beta, BCE inputs at
exactly 0 and 1 (the log clamp), Poisson targets 0 and > 1 (the Stirling term), variances under
eps (the clamp), infeasible CTC alignments (zero_infinity). LinearCrossEntropyLoss's reference
is the linear map of its weight (and bias) followed by the CrossEntropyLoss reference, on its
reference and chunked (LinearCrossEntropyOptions()) paths. The gradient w.r.t. the input is
checked against the analytic gradient for every CrossEntropyLoss and BCEWithLogitsLoss row, and
against the derivative of the elementwise formula for every MSELoss, HuberLoss, SmoothL1Loss,
PoissonNLLLoss, KLDivLoss row and GaussianNLLLoss row with a per-element var (w.r.t. var too,
through its documented autograd-transparent clamp).
CrossEntropyLoss also runs weight x ignore_index x label_smoothing x reduction in full (class-index
targets), the interaction where the documented weighted-mean denominator meets ignored targets
and smoothing.
Keras: each class (dtype="float64") under every reduction with no, per-sample and broadcast
(scalar) sample weights, and each function form, on the options the docstrings list. Left out, one
line each: torch AdaptiveLogSoftmaxWithLoss (a layer with cutoff clusters, not yet covered).
keras Circle's reference is the paper its docstring cites (Sun et al. 2020, eq. 6 with the
recommended optima and margins); keras.losses.Loss, the base, is checked through a user subclass
written as its docstring shows (every reduction, "none" included, and every sample weight). The
function forms run once per distinct option row (log_cosh and ctc in their own test).

Error model (docs/tolerances.md). A loss element is at most ``ops`` elementwise operations
(counted per loss in its row: the formula's operations, logs and exps at OP_ROUNDING each) on
float64 inputs, and the reduction sums at most ``n`` terms (the element count of the input):
rtol = (4 ops + n) u(float64). The result may cancel (log softmax, y log y - y x, a hinge at its
kink): the absolute floor is rtol times the magnitude of the intermediates (the reference returns
it per element: the absolute values of the terms that cancel), reduced as the loss is. CTC runs a
T-step recursion of logaddexp: ops = 8 T. Keras functions in float64 use the same model; the
gradient uses ops + 4 (the softmax and the products of the analytic formula).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import assert_close, evidence, tolerance

from . import _loss_reference as ref
from ._optim_reference import pairwise

TORCH = "modules.torch.losses"
KERAS = "modules.keras.losses"
REDUCTIONS = ["none", "mean", "sum"]
N, C = 5, 4


def _rng(name: str, row: Mapping[str, Any]) -> np.random.Generator:
    key = name + repr(sorted(row.items()))
    return np.random.default_rng([ord(ch) for ch in key])


@dataclass(frozen=True)
class LossInfo:
    """One torch loss: its options, its inputs and its reference."""

    name: str
    functional: str
    factors: dict[str, list[Any]]
    make: Callable[[np.random.Generator, Mapping[str, Any]], tuple[list[Any], dict[str, Any], Any]]
    ops: int
    valid: Callable[[Mapping[str, Any]], bool] = field(default=lambda row: True)


# Each make(rng, row) returns (positional inputs, keyword options, reference Pointwise).


def _shape(row: Mapping[str, Any]) -> tuple[int, ...]:
    return {"N": (N,), "N,C": (N, C), "N,C,d1,d2": (N, C, 2, 3), "C": (C,), "N,d": (N, 3, 2)}[row.get("shape", "N,d")]


def _make_elementwise(fn: Callable[..., ref.Pointwise], option: str | None = None, spread: float = 1.0) -> Any:
    def make(rng, row):
        x, y = rng.normal(size=_shape(row)) * spread, rng.normal(size=_shape(row)) * spread
        kw = {option: row[option]} if option else {}
        return [x, y], kw, fn(x, y, **kw)
    return make


def _make_soft_margin(rng, row):
    x = rng.normal(size=_shape(row)) * 2
    y = np.where(rng.random(size=x.shape) < 0.5, -1.0, 1.0)
    return [x, y], {}, ref.soft_margin(x, y)


def _class_weight(rng, row):
    return rng.uniform(0.2, 2.0, size=C) if row.get("weight") else None


def _targets(rng, row, ignore: int) -> np.ndarray:
    shape = _shape(row)
    tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    t = rng.integers(0, C, size=tshape)
    if row.get("ignore_index") == "present":
        t = np.asarray(t)
        flat = t.reshape(-1)
        flat[:: 2] = ignore  # every other target is ignored, never all
        if flat.size == 1:
            flat[0] = (ignore + 1) % C
    return np.asarray(t, dtype=np.int64)


IGNORE = 1  # a real class, so an implementation that forgets the mask is caught


def _make_ce(rng, row):
    x = rng.normal(size=_shape(row)) * 2
    w = _class_weight(rng, row)
    kw: dict[str, Any] = {"weight": w, "label_smoothing": row["label_smoothing"]}
    if row["ignore_index"] == "present":
        kw["ignore_index"] = IGNORE
    if row["target"] == "index":
        t = _targets(rng, row, IGNORE)
    else:
        t = np.exp(ref.log_softmax(rng.normal(size=x.shape) * 2, 0 if x.ndim == 1 else 1))
    return [x, t], kw, ref.cross_entropy(x, t, w, kw.get("ignore_index", -100), row["label_smoothing"])


def _make_nll(rng, row):
    x = ref.log_softmax(rng.normal(size=_shape(row)) * 2, 0 if row["shape"] == "C" else 1)
    w = _class_weight(rng, row)
    kw: dict[str, Any] = {"weight": w}
    if row["ignore_index"] == "present":
        kw["ignore_index"] = IGNORE
    t = _targets(rng, row, IGNORE)
    return [x, t], kw, ref.nll(x, t, w, kw.get("ignore_index", -100))


def _make_bce(rng, row):
    shape = _shape(row)
    x = rng.uniform(0.02, 0.98, size=shape)
    y = rng.uniform(0, 1, size=shape)
    if row["saturated"]:  # documented: the logs are clamped to >= -100
        flat_x, flat_y = x.reshape(-1), y.reshape(-1)
        flat_x[:4], flat_y[:4] = [0.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]
    w = rng.uniform(0.2, 2.0, size=shape) if row["weight"] else None
    return [x, y], {"weight": w}, ref.bce(x, y, w)


def _make_bce_logits(rng, row):
    shape = _shape(row)
    x = rng.normal(size=shape) * 3
    y = rng.uniform(0, 1, size=shape)
    w = rng.uniform(0.2, 2.0, size=shape[-1:]) if row["weight"] else None
    pw = rng.uniform(0.5, 3.0, size=shape[-1:]) if row["pos_weight"] else None
    return [x, y], {"weight": w, "pos_weight": pw}, ref.bce_with_logits(x, y, w, pw)


def _make_kl(rng, row):
    shape = _shape(row)
    x = ref.log_softmax(rng.normal(size=shape), -1)
    if row["log_target"]:
        y = ref.log_softmax(rng.normal(size=shape), -1)
    else:
        y = np.exp(ref.log_softmax(rng.normal(size=shape), -1))
        y.reshape(-1)[::3] = 0.0  # 0 log 0 = 0 by the definition of KL divergence
    return [x, y], {"log_target": row["log_target"]}, ref.kl_div(x, y, row["log_target"])


def _make_poisson(rng, row):
    shape = _shape(row)
    y = rng.integers(0, 6, size=shape).astype(np.float64)
    y.reshape(-1)[:2] = [0.0, 1.0]
    x = rng.normal(size=shape) if row["log_input"] else rng.uniform(0.0, 4.0, size=shape)
    if not row["log_input"]:
        x.reshape(-1)[2] = 0.0  # log(0 + eps): eps in play
    kw = {"log_input": row["log_input"], "full": row["full"], "eps": row["eps"]}
    return [x, y], kw, ref.poisson_nll(x, y, **kw)


def _make_gaussian(rng, row):
    shape = _shape(row)
    x, y = rng.normal(size=shape), rng.normal(size=shape)
    var: Any
    if row["var"] == "same":
        var = rng.uniform(0.1, 2.0, size=shape)
    elif row["var"] == "last-dim-1":
        var = rng.uniform(0.1, 2.0, size=(*shape[:-1], 1))
    elif row["var"] == "one-fewer-dim":
        var = rng.uniform(0.1, 2.0, size=shape[:-1])
    else:
        var = 0.7
    if not isinstance(var, float):
        var.reshape(-1)[0] = 1e-9  # under eps: clamped
    kw = {"full": row["full"], "eps": row["eps"]}
    return [x, y, var], kw, ref.gaussian_nll(x, y, var, **kw)


def _make_mlsm(rng, row):
    shape = _shape(row)
    x = rng.normal(size=shape) * 2
    y = (rng.random(size=shape) < 0.5).astype(np.float64)
    w = rng.uniform(0.2, 2.0, size=C) if row["weight"] else None
    return [x, y], {"weight": w}, ref.multilabel_soft_margin(x, y, w)


def _make_mlm(rng, row):
    shape = _shape(row)
    x = rng.normal(size=shape)
    y = np.full(shape, -1, dtype=np.int64)
    yb = y[None] if y.ndim == 1 else y
    for i in range(yb.shape[0]):
        k = 1 + i % (C - 1)
        yb[i, :k] = rng.permutation(C)[:k]
    if yb.shape[0] > 1:
        yb[-1, 2] = 0  # after the first -1 of a row: must be ignored
        yb[-1, 1] = -1
    return [x, y], {}, ref.multilabel_margin(x, y)


def _make_mm(rng, row):
    shape = _shape(row)
    x = rng.normal(size=shape)
    y = rng.integers(0, C, size=shape[:-1]) if len(shape) > 1 else np.asarray(rng.integers(0, C))
    y = np.asarray(y, dtype=np.int64)
    w = rng.uniform(0.2, 2.0, size=C) if row["weight"] else None
    kw = {"p": row["p"], "margin": row["margin"], "weight": w}
    return [x, y], kw, ref.multi_margin(x, y, **kw)


def _make_ranking(rng, row):
    x1, x2 = rng.normal(size=(N,)), rng.normal(size=(N,))
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    return [x1, x2, y], {"margin": row["margin"]}, ref.margin_ranking(x1, x2, y, row["margin"])


def _make_hinge(rng, row):
    x = rng.normal(size=(N, 3))
    y = np.where(rng.random(size=x.shape) < 0.5, -1.0, 1.0)
    return [x, y], {"margin": row["margin"]}, ref.hinge_embedding(x, y, row["margin"])


def _make_cosine(rng, row):
    x1, x2 = rng.normal(size=(N, 3)), rng.normal(size=(N, 3))
    y = np.array([1.0, -1.0, 1.0, -1.0, -1.0])
    return [x1, x2, y], {"margin": row["margin"]}, ref.cosine_embedding(x1, x2, y, row["margin"])


def _triplet_inputs(rng):
    a = rng.normal(size=(N, 3))
    return a, a + 0.5 * rng.normal(size=(N, 3)), a + rng.normal(size=(N, 3))


def _make_triplet(rng, row):
    a, p, n = _triplet_inputs(rng)
    kw = {"margin": row["margin"], "p": row["p"], "eps": row["eps"], "swap": row["swap"]}
    return [a, p, n], kw, ref.triplet_margin(a, p, n, **kw)


def _make_triplet_distance(rng, row):
    a, p, n = _triplet_inputs(rng)
    kw = {"margin": row["margin"], "swap": row["swap"], "distance_function": row["distance_function"]}
    dist = ref.cosine_distance if row["distance_function"] == "cosine" else None
    return [a, p, n], kw, ref.triplet_margin(a, p, n, margin=row["margin"], swap=row["swap"], distance=dist)


def _make_linear_ce(rng, row):
    out = (2,) if row["out_features"] == "d1" else ()  # out_features=() or (2,)
    x = rng.normal(size=(N, 3))
    lw = rng.normal(size=(C, *out, 3))
    lb = rng.normal(size=(C, *out)) if row["bias"] else None
    logits = np.einsum("c...i,ni->nc...", lw, x) + (0.0 if lb is None else lb[None])
    w = _class_weight(rng, row)
    kw: dict[str, Any] = {"weight": w, "label_smoothing": row["label_smoothing"], "linear_weight": lw,
                          "linear_bias": lb, "out_features": out, "options": row["options"]}
    if row["ignore_index"] == "present":
        kw["ignore_index"] = IGNORE
    if row["target"] == "index":
        t = rng.integers(0, C, size=(N, *out)).astype(np.int64)
        if row["ignore_index"] == "present":
            t.reshape(-1)[::2] = IGNORE
    else:
        t = np.exp(ref.log_softmax(rng.normal(size=logits.shape) * 2, 1))
    p = ref.cross_entropy(logits, t, w, kw.get("ignore_index", -100), row["label_smoothing"])
    mag = np.abs(np.einsum("c...i,ni->nc...", np.abs(lw), np.abs(x))).sum(axis=1)
    return [x, t], kw, ref.Pointwise(p.loss, p.denominator, p.magnitude + mag)


T_CTC = 6


def _make_ctc(rng, row):
    blank = 0 if row["blank"] == "first" else C - 1
    labels = [c for c in range(C) if c != blank]
    lp = ref.log_softmax(rng.normal(size=(T_CTC, 3, C)), 2)
    targets = [[labels[0], labels[1]], [labels[2], labels[2], labels[0]], [labels[1]] * 4]
    input_lengths = [T_CTC, T_CTC - 1, T_CTC - 2]  # the third needs 7 frames (repeats need a blank): infeasible
    lengths = [len(t) for t in targets]
    if row["targets"] == "padded":
        tg = np.full((3, max(lengths)), blank, dtype=np.int64)
        for i, t in enumerate(targets):
            tg[i, : len(t)] = t
    else:
        tg = np.asarray([v for t in targets for v in t], dtype=np.int64)
    kw = {"blank": blank, "zero_infinity": row["zero_infinity"]}
    p = ref.ctc(lp, targets, input_lengths, blank, row["zero_infinity"])
    if row["reduction"] == "mean":
        p = ref.ctc_mean(p, lengths)
    return [lp, tg, np.asarray(input_lengths), np.asarray(lengths)], kw, p


R = {"reduction": REDUCTIONS}
TORCH_LOSSES = [
    LossInfo("L1Loss", "l1_loss", {**R, "shape": ["N", "N,d"]}, _make_elementwise(ref.l1), ops=2),
    LossInfo("MSELoss", "mse_loss", {**R, "shape": ["N", "N,d"]}, _make_elementwise(ref.mse), ops=2),
    LossInfo("HuberLoss", "huber_loss", {**R, "delta": [1.0, 0.3, 2.5]}, _make_elementwise(ref.huber, "delta", 1.5),
             ops=4),
    LossInfo("SmoothL1Loss", "smooth_l1_loss", {**R, "beta": [1.0, 0.3, 0.0]},
             _make_elementwise(ref.smooth_l1, "beta", 1.5), ops=4),
    LossInfo("SoftMarginLoss", "soft_margin_loss", {**R, "shape": ["N", "N,d"]}, _make_soft_margin, ops=4),
    LossInfo("CrossEntropyLoss", "cross_entropy",
             {**R, "weight": [False, True], "ignore_index": ["absent", "present"], "label_smoothing": [0.0, 0.2],
              "target": ["index", "probs"], "shape": ["N,C", "N,C,d1,d2", "C"]}, _make_ce, ops=8,
             valid=lambda r: not (r["target"] == "probs" and r["ignore_index"] == "present")),
    LossInfo("NLLLoss", "nll_loss", {**R, "weight": [False, True], "ignore_index": ["absent", "present"],
                                     "shape": ["N,C", "N,C,d1,d2", "C"]}, _make_nll, ops=2),
    LossInfo("BCELoss", "binary_cross_entropy", {**R, "weight": [False, True], "saturated": [False, True],
                                                 "shape": ["N", "N,C"]}, _make_bce, ops=8),
    LossInfo("BCEWithLogitsLoss", "binary_cross_entropy_with_logits",
             {**R, "weight": [False, True], "pos_weight": [False, True], "shape": ["N,C", "N,d"]}, _make_bce_logits, ops=10),
    LossInfo("KLDivLoss", "kl_div", {"reduction": [*REDUCTIONS, "batchmean"], "log_target": [False, True],
                                     "shape": ["N,C", "N,d"]}, _make_kl, ops=4),
    LossInfo("PoissonNLLLoss", "poisson_nll_loss", {**R, "log_input": [True, False], "full": [False, True],
                                                    "eps": [1e-8, 0.5]}, _make_poisson, ops=12),
    LossInfo("GaussianNLLLoss", "gaussian_nll_loss",
             {**R, "full": [False, True], "eps": [1e-6, 0.3], "var": ["same", "last-dim-1", "one-fewer-dim", "scalar"]},
             _make_gaussian, ops=8),
    LossInfo("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss", {**R, "weight": [False, True],
                                                                        "shape": ["N,C", "C"]}, _make_mlsm, ops=8),
    LossInfo("MultiLabelMarginLoss", "multilabel_margin_loss", {**R, "shape": ["N,C", "C"]}, _make_mlm, ops=4),
    LossInfo("MultiMarginLoss", "multi_margin_loss", {**R, "p": [1, 2], "margin": [1.0, 0.4], "weight": [False, True],
                                                      "shape": ["N,C", "C"]}, _make_mm, ops=6),
    LossInfo("MarginRankingLoss", "margin_ranking_loss", {**R, "margin": [0.0, 0.5]}, _make_ranking, ops=3),
    LossInfo("HingeEmbeddingLoss", "hinge_embedding_loss", {**R, "margin": [1.0, 0.3]}, _make_hinge, ops=2),
    LossInfo("CosineEmbeddingLoss", "cosine_embedding_loss", {**R, "margin": [0.0, 0.3, -0.4]}, _make_cosine, ops=12),
    LossInfo("TripletMarginLoss", "triplet_margin_loss",
             {**R, "margin": [1.0, 0.3], "p": [2.0, 1.0, 3.0], "eps": [1e-6, 0.1], "swap": [False, True]},
             _make_triplet, ops=16),
    LossInfo("TripletMarginWithDistanceLoss", "triplet_margin_with_distance_loss",
             {**R, "distance_function": ["default", "cosine"], "margin": [1.0, 0.3], "swap": [False, True]},
             _make_triplet_distance, ops=16),
    LossInfo("LinearCrossEntropyLoss", "linear_cross_entropy",
             {**R, "weight": [False, True], "ignore_index": ["absent", "present"], "label_smoothing": [0.0, 0.2],
              "target": ["index", "probs"], "bias": [False, True], "out_features": ["none", "d1"],
              "options": ["None", "chunked"]}, _make_linear_ce, ops=10,
             valid=lambda r: not (r["target"] == "probs" and r["ignore_index"] == "present")),
    LossInfo("CTCLoss", "ctc_loss", {**R, "blank": ["first", "last"], "zero_infinity": [False, True],
                                     "targets": ["padded", "concatenated"]}, _make_ctc, ops=8 * T_CTC),
]
# Public torch.nn classes ending in "Loss" that this table leaves out, with the reason.
LEFT_OUT = {
    "AdaptiveLogSoftmaxWithLoss": "a model layer with its own weights and cutoff clusters, not a criterion of "
                                  "(input, target) with the documented reduction options (not yet covered)",
}
BY_NAME = {info.name: info for info in TORCH_LOSSES}
COVERING = {info.name: pairwise(info.factors, info.valid) for info in TORCH_LOSSES}


def _cross_entropy_interaction_rows() -> list[dict[str, Any]]:
    """CrossEntropyLoss's weight x ignore_index x label_smoothing x reduction in full (24 rows, the
    interaction where the weighted-mean denominator with ignored targets and smoothing lives), with
    class-index targets, on (N, C) and K-dimensional inputs in turn."""
    rows = []
    factors = BY_NAME["CrossEntropyLoss"].factors
    for i, (red, w, ig, ls) in enumerate(itertools.product(factors["reduction"], factors["weight"],
                                                           factors["ignore_index"], factors["label_smoothing"])):
        row = {"reduction": red, "weight": w, "ignore_index": ig, "label_smoothing": ls, "target": "index",
               "shape": ["N,C", "N,C,d1,d2"][i % 2]}
        if row not in COVERING["CrossEntropyLoss"]:
            rows.append(row)
    return rows


COVERING["CrossEntropyLoss"] = COVERING["CrossEntropyLoss"] + _cross_entropy_interaction_rows()
CASES = [(info.name, row) for info in TORCH_LOSSES for row in COVERING[info.name]]
LOSS_FAMILY, KERAS_LOSS_FAMILY = "torch.nn losses", "keras.losses"  # the combinations ledger's families


def _ids(cases: Sequence[tuple[str, Mapping[str, Any]]], name: str) -> list[str]:
    """The test ids of one loss's rows: what its tests register in the combinations ledger."""
    return [_case_id(n, r) for n, r in cases if n == name]


def _case_id(name: str, row: Mapping[str, Any]) -> str:
    return name + "[" + ",".join(f"{k}={v}" for k, v in row.items()) + "]"


def _tensor(torch, v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return torch.from_numpy(np.asarray(v))


def _torch_options(torch, info: LossInfo, kw: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: _tensor(torch, v) for k, v in kw.items()}
    if info.name == "TripletMarginWithDistanceLoss":
        fn = out.pop("distance_function")
        out["distance_function"] = None if fn == "default" else (
            lambda u, v: 1.0 - torch.nn.functional.cosine_similarity(u, v))
    return out


def expected(info: LossInfo, row: Mapping[str, Any], p: ref.Pointwise, batch: int) -> tuple[np.ndarray, Any]:
    """The reference value of ``row``'s reduction and the tolerance of the error model."""
    want, magnitude = ref.reduce(p, row["reduction"], batch)
    n = max(int(np.size(p.loss)) * C, 2)
    return want, tolerance("float64", ops=info.ops, reduction=n, magnitude=max(magnitude, 1e-300))


def compare_torch_output(info: LossInfo, row: Mapping[str, Any], form: str, got: np.ndarray, inputs: list[Any],
                         p: ref.Pointwise) -> None:
    """``got`` (the module's or the functional's output) equals the reference of ``row``'s reduction
    within the error model (module docstring)."""
    __tracebackhide__ = True
    want, tol = expected(info, row, p, len(inputs[0]) if np.ndim(inputs[0]) > 1 else 1)
    if info.name == "CosineEmbeddingLoss":
        # torch adds a stabiliser of 1e-12 to each squared norm (torch/nn/functional.py, not in the
        # docstring): cos moves by at most 1e-12 / min |x|^2 relative, |cos| <= 1, per element.
        norms = min(float(np.min(np.sum(v * v, axis=-1))) for v in inputs[:2])
        count = 1.0 if row["reduction"] in ("none", "mean") else float(len(inputs[0]))
        tol = tol.with_floor(2e-12 / norms * count, "the 1e-12 stabiliser of each squared norm")
    assert got.shape == np.shape(want), (f"{_case_id(info.name, row)} ({form}): output shape {got.shape}, but "
                                         f"should be {np.shape(want)}")
    assert_close(got, want, tol, what=f"{_case_id(info.name, row)} ({form}) vs the documented formula")


def check_torch_loss(torch, info: LossInfo, row: Mapping[str, Any], form: str) -> None:
    __tracebackhide__ = True
    inputs, kw, p = info.make(_rng(info.name, row), row)
    options = _torch_options(torch, info, kw)
    tensors = [_tensor(torch, v) for v in inputs]
    with torch.device("cpu"):  # the inputs are numpy-backed CPU tensors; the claim is about CPU float64
        if info.name == "LinearCrossEntropyLoss":
            got = _linear_cross_entropy(torch, row, form, tensors, options)
        elif form == "module":
            got = getattr(torch.nn, info.name)(reduction=row["reduction"], **options)(*tensors)
        else:
            got = getattr(torch.nn.functional, info.functional)(*tensors, reduction=row["reduction"], **options)
    compare_torch_output(info, row, form, got.detach().cpu().numpy(), inputs, p)


def _linear_cross_entropy(torch, row: Mapping[str, Any], form: str, tensors: list[Any], options: dict[str, Any]) -> Any:
    """LinearCrossEntropyLoss(in_features, num_classes, out_features, bias, ...) with its linear weight
    set to the case's (stored flat: (C * prod(out_features), in_features)), or F.linear_cross_entropy."""
    lw, lb, out = options.pop("linear_weight"), options.pop("linear_bias"), options.pop("out_features")
    chunked = options.pop("options") == "chunked"
    opts = torch.nn.LinearCrossEntropyOptions() if chunked else None
    if form == "module":
        m = torch.nn.LinearCrossEntropyLoss(3, C, out_features=out, bias=lb is not None, dtype=torch.float64,
                                            reduction=row["reduction"], options=opts, **options)
        with torch.no_grad():
            m.linear.weight.copy_(lw.reshape(-1, 3))
            if lb is not None:
                m.linear.bias.copy_(lb.reshape(-1))
        return m(*tensors)
    return torch.nn.functional.linear_cross_entropy(tensors[0], lw, tensors[1], linear_bias=lb,
                                                    reduction=row["reduction"], options=opts, **options)


def _modes_of(info: LossInfo, row: Mapping[str, Any]) -> list[str]:
    return [f"{info.name}.{k}={v}" for k, v in row.items() if k != "reduction"]


@pytest.mark.claim(TORCH)
@pytest.mark.parametrize("name,row", CASES, ids=[_case_id(n, r) for n, r in CASES])
def test_torch_loss_matches_documented_formula(torch, name, row):
    evidence.registers(LOSS_FAMILY, name, _ids(CASES, name), own=_case_id(name, row))
    info = BY_NAME[name]
    for form in ("module", "functional"):
        check_torch_loss(torch, info, row, form)
    evidence.covers(name)
    evidence.covers(f"reduction={row['reduction']}")
    evidence.covers("functional")
    for mode in _modes_of(info, row):
        evidence.covers(mode)
    evidence.visits(LOSS_FAMILY, name, _case_id(name, row))


def compare_gradient(name: str, row: Mapping[str, Any], inputs: list[Any], kw: Mapping[str, Any], got: np.ndarray) -> None:
    """``got`` (d sum(loss) / d input) equals the analytic derivative of the documented formula."""
    __tracebackhide__ = True
    if name == "CrossEntropyLoss":
        want = ref.cross_entropy_grad(inputs[0], inputs[1], row["reduction"], kw["weight"],
                                      kw.get("ignore_index", -100), kw["label_smoothing"])
    else:
        want = ref.bce_with_logits_grad(inputs[0], inputs[1], row["reduction"], kw["weight"], kw["pos_weight"])
    # per element: the softmax (or sigmoid) and the products of the formula, a sum over C classes;
    # the terms cancel (p sum w q - w q) from the size of the largest term.
    tol = tolerance("float64", ops=BY_NAME[name].ops + 4, reduction=C, magnitude=_grad_magnitude(name, inputs, kw, row))
    assert_close(got, want, tol, what=f"{_case_id(name, row)}: d sum(loss) / d input vs the analytic gradient")


def _grad_magnitude(name: str, inputs: list[Any], kw: Mapping[str, Any], row: Mapping[str, Any]) -> float:
    """The terms of the analytic gradient that cancel: softmax * sum_c w_c q_c and w_k q_k (each at
    most max w), or w (p_c y + 1 - y) sigma(x) and w p_c y (at most max w (max p_c + 1)); times the
    mean's 1 / denominator."""
    w = 1.0 if kw["weight"] is None else float(np.max(kw["weight"]))
    if name == "CrossEntropyLoss":
        denom = ref.cross_entropy(inputs[0], inputs[1], kw["weight"], kw.get("ignore_index", -100),
                                  kw["label_smoothing"]).denominator
        size = 2 * w
    else:
        denom = float(np.size(inputs[0]))
        size = w * (2 + (0.0 if kw["pos_weight"] is None else float(np.max(kw["pos_weight"]))))
    return size / denom if row["reduction"] == "mean" else size


GRAD_CASES = [(n, r) for n, r in CASES if n in ("CrossEntropyLoss", "BCEWithLogitsLoss")]


@pytest.mark.claim(TORCH)
@pytest.mark.parametrize("name,row", GRAD_CASES, ids=[_case_id(n, r) for n, r in GRAD_CASES])
def test_torch_loss_input_gradient_matches_analytic(torch, name, row):
    """The gradient of sum(loss) w.r.t. the input equals the analytic derivative of the documented
    formula (_loss_reference.cross_entropy_grad / bce_with_logits_grad)."""
    evidence.registers(LOSS_FAMILY, f"{name} input gradient", _ids(GRAD_CASES, name), own=_case_id(name, row))
    info = BY_NAME[name]
    inputs, kw, _ = info.make(_rng(info.name, row), row)
    with torch.device("cpu"):
        x = torch.from_numpy(inputs[0].copy()).requires_grad_(True)
        rest = [_tensor(torch, v) for v in inputs[1:]]
        loss = getattr(torch.nn, name)(reduction=row["reduction"], **_torch_options(torch, info, kw))(x, *rest)
        loss.sum().backward()
    compare_gradient(name, row, inputs, kw, x.grad.detach().cpu().numpy())
    evidence.covers("gradient")
    evidence.visits(LOSS_FAMILY, f"{name} input gradient", _case_id(name, row))


ELEMENTWISE_GRAD = ("MSELoss", "HuberLoss", "SmoothL1Loss", "PoissonNLLLoss", "KLDivLoss", "GaussianNLLLoss")
ELEMENTWISE_GRAD_CASES = [(n, r) for n, r in CASES if n in ELEMENTWISE_GRAD
                          and (n != "GaussianNLLLoss" or r["var"] == "same")]


def compare_elementwise_gradient(name: str, row: Mapping[str, Any], inputs: list[Any], kw: Mapping[str, Any],
                                 got: list[np.ndarray]) -> None:
    """``got`` (d sum(loss) / d input, and d / d var for GaussianNLLLoss) equals the derivative of the
    documented elementwise formula (_loss_reference.elementwise_grad, gaussian_nll_grads), divided
    by the documented denominator for 'mean' (the batch for KLDivLoss's 'batchmean')."""
    __tracebackhide__ = True
    x, y = inputs[0], inputs[1]
    if name == "GaussianNLLLoss":
        gx, gv = ref.gaussian_nll_grads(x, y, inputs[2], kw["eps"])
        v = np.maximum(inputs[2], kw["eps"])
        wants = [(gx, np.abs(x - y) / v, "input"), (gv, 0.5 / v + (x - y) ** 2 / v ** 2, "var")]
    else:
        g, mag = ref.elementwise_grad(name, x, y, **kw)
        wants = [(g, mag, "input")]
    scale = {"mean": float(np.size(x)), "batchmean": float(len(x))}.get(row["reduction"], 1.0)
    for (want, mag, wrt), have in zip(wants, got):
        tol = tolerance("float64", ops=BY_NAME[name].ops, reduction=2, magnitude=float(np.max(mag)) / scale)
        assert_close(have, want / scale, tol, what=f"{_case_id(name, row)}: d sum(loss) / d {wrt} vs the derivative "
                                                   "of the documented formula")


@pytest.mark.claim(TORCH)
@pytest.mark.parametrize("name,row", ELEMENTWISE_GRAD_CASES, ids=[_case_id(n, r) for n, r in ELEMENTWISE_GRAD_CASES])
def test_torch_elementwise_loss_gradient_matches_derivative(torch, name, row):
    evidence.registers(LOSS_FAMILY, f"{name} input gradient", _ids(ELEMENTWISE_GRAD_CASES, name),
                       own=_case_id(name, row))
    info = BY_NAME[name]
    inputs, kw, _ = info.make(_rng(info.name, row), row)
    with torch.device("cpu"):
        leaves = [torch.from_numpy(np.asarray(v).copy()).requires_grad_(True) for v in inputs]
        if name != "GaussianNLLLoss":
            leaves[1].requires_grad_(False)
        loss = getattr(torch.nn, name)(reduction=row["reduction"], **_torch_options(torch, info, kw))(*leaves)
        loss.sum().backward()
    got = [leaves[0].grad.detach().cpu().numpy()]
    if name == "GaussianNLLLoss":
        got.append(leaves[2].grad.detach().cpu().numpy())
    compare_elementwise_gradient(name, row, inputs, kw, got)
    evidence.covers("gradient")
    evidence.visits(LOSS_FAMILY, f"{name} input gradient", _case_id(name, row))


@pytest.mark.claim(TORCH)
def test_torch_loss_table_lists_every_public_loss(torch):
    """The table names every public torch.nn class whose name ends in "Loss" (or says why not), so a
    new loss in a future release is noticed rather than silently left out."""
    names = sorted(n for n in dir(torch.nn) if n.endswith("Loss") and isinstance(getattr(torch.nn, n), type))
    missing = [n for n in names if n not in BY_NAME and n not in LEFT_OUT]
    assert not missing, f"torch.nn exports {missing} that suites/modules/test_losses.py's table leaves out"
    evidence.note(losses=names, left_out=sorted(LEFT_OUT))
    evidence.covers("table-complete")


# ----------------------------------------------------------------- keras.losses


@dataclass(frozen=True)
class KerasInfo:
    """One keras loss: its class and function, options, inputs, reference and operation count."""

    name: str
    function: str
    factors: dict[str, list[Any]]
    make: Callable[[np.random.Generator, Mapping[str, Any]], tuple[np.ndarray, np.ndarray]]
    reference: Callable[..., np.ndarray]
    ops: int
    valid: Callable[[Mapping[str, Any]], bool] = field(default=lambda row: True)


KERAS_REDUCTIONS = ["sum_over_batch_size", "sum", "mean", "mean_with_sample_weight", None]
SAMPLE_WEIGHTS = ["none", "per-sample", "scalar"]
KR = {"reduction": KERAS_REDUCTIONS, "sample_weight": SAMPLE_WEIGHTS}
KSHAPE = (N, 3)


def _normal(spread: float = 1.0, shape: tuple[int, ...] = KSHAPE) -> Any:
    return lambda rng, row: (rng.normal(size=shape) * spread, rng.normal(size=shape) * spread)


def _k_positive(rng, row):
    return rng.uniform(0.1, 3.0, size=KSHAPE), rng.uniform(0.1, 3.0, size=KSHAPE)


def _k_mape(rng, row):
    return rng.uniform(0.5, 2.0, size=KSHAPE) * np.sign(rng.normal(size=KSHAPE)), rng.normal(size=KSHAPE)


def _k_cosine(rng, row):
    return rng.normal(size=(N, 3, 2)), rng.normal(size=(N, 3, 2))


def _k_hinge(rng, row):
    y = (rng.random(size=KSHAPE) < 0.5).astype(np.float64)
    return (y if row["labels"] == "0/1" else 2 * y - 1), rng.normal(size=KSHAPE)


def _onehot(rng, shape=(N, C), axis=-1):
    idx = rng.integers(0, shape[axis], size=np.delete(np.asarray(shape), axis % len(shape)))
    return np.moveaxis(np.eye(shape[axis])[idx], -1, axis % len(shape))


def _k_cat_hinge(rng, row):
    return _onehot(rng), rng.normal(size=(N, C))


def _k_probs(rng, row):
    return (np.exp(ref.log_softmax(rng.normal(size=(N, C)), -1)), np.exp(ref.log_softmax(rng.normal(size=(N, C)), -1)))


def _k_poisson(rng, row):
    return rng.integers(0, 5, size=KSHAPE).astype(np.float64), rng.uniform(0.2, 3.0, size=KSHAPE)


def _k_binary(rng, row):
    shape = (N, 3, 2)
    y = rng.uniform(0, 1, size=shape)
    p = rng.normal(size=shape) * 2 if row["from_logits"] else rng.uniform(0.05, 0.95, size=shape)
    return y, p


def _k_categorical(rng, row):
    shape = (N, C, 2) if row.get("axis") == 1 else (N, C)
    axis = row.get("axis", -1)
    y = 0.8 * _onehot(rng, shape, axis) + 0.2 * np.exp(ref.log_softmax(rng.normal(size=shape), axis))
    p = rng.normal(size=shape) * 2 if row.get("from_logits") else rng.uniform(0.05, 1.0, size=shape)
    return y, p


def _k_sparse(rng, row):
    y = rng.integers(0, C, size=(N,)).astype(np.float64)
    if row["ignore_class"] is not None:
        y[::2] = row["ignore_class"]
    p = rng.normal(size=(N, C)) * 2 if row["from_logits"] else rng.uniform(0.05, 1.0, size=(N, C))
    return y, p


def _k_gce(rng, row):
    return (rng.integers(0, C, size=(N,)).astype(np.float64),
            np.exp(ref.log_softmax(rng.normal(size=(N, C)), -1)))


def _k_overlap(rng, row):
    shape = (N, 3, 2)
    return (rng.random(size=shape) < 0.5).astype(np.float64), rng.uniform(0.0, 1.0, size=shape)


def _k_ctc(rng, row):
    y = np.array([[1, 2, 0], [3, 3, 1], [2, 0, 0], [1, 3, 2], [3, 0, 0]], dtype=np.float64)  # 0: padding
    return y, rng.normal(size=(N, T_CTC, C)) * 2


def _k_circle(rng, row):
    """Integer labels, each present twice or more (every anchor has a positive and a negative);
    L2-normalised embeddings (the docstring: "predicted L2 normalized embeddings")."""
    y = rng.permutation(np.array([0, 0, 1, 1, 1], dtype=np.float64))
    p = rng.normal(size=(N, 3))
    return y, p / np.linalg.norm(p, axis=-1, keepdims=True)


DICE_AXES = {"per-sample": (1, 2), "all": None}
KERAS_LOSSES = [
    KerasInfo("MeanSquaredError", "mean_squared_error", KR, _normal(), ref.k_mse, ops=2),
    KerasInfo("MeanAbsoluteError", "mean_absolute_error", KR, _normal(), ref.k_mae, ops=2),
    KerasInfo("MeanAbsolutePercentageError", "mean_absolute_percentage_error", KR, _k_mape, ref.k_mape, ops=5),
    KerasInfo("MeanSquaredLogarithmicError", "mean_squared_logarithmic_error", KR, _k_positive, ref.k_msle, ops=6),
    KerasInfo("CosineSimilarity", "cosine_similarity", {**KR, "axis": [-1, 1]}, _k_cosine, ref.k_cosine_similarity,
              ops=10),
    KerasInfo("Huber", "huber", {**KR, "delta": [1.0, 0.3, 2.5]}, _normal(1.5), ref.k_huber, ops=5),
    KerasInfo("LogCosh", "log_cosh", KR, _normal(2.0), ref.k_log_cosh, ops=6),
    KerasInfo("Hinge", "hinge", {**KR, "labels": ["0/1", "-1/1"]}, _k_hinge, ref.k_hinge, ops=3),
    KerasInfo("SquaredHinge", "squared_hinge", {**KR, "labels": ["0/1", "-1/1"]}, _k_hinge, ref.k_squared_hinge, ops=4),
    KerasInfo("CategoricalHinge", "categorical_hinge", KR, _k_cat_hinge, ref.k_categorical_hinge, ops=4),
    KerasInfo("KLDivergence", "kl_divergence", KR, _k_probs, ref.k_kl_divergence, ops=4),
    KerasInfo("Poisson", "poisson", KR, _k_poisson, ref.k_poisson, ops=4),
    KerasInfo("BinaryCrossentropy", "binary_crossentropy",
              {**KR, "from_logits": [False, True], "label_smoothing": [0.0, 0.2], "axis": [-1, 1]},
              _k_binary, ref.k_binary_crossentropy, ops=10),
    KerasInfo("BinaryFocalCrossentropy", "binary_focal_crossentropy",
              {**KR, "apply_class_balancing": [False, True], "alpha": [0.25, 0.6], "gamma": [2.0, 0.0, 1.5],
               "from_logits": [False, True], "label_smoothing": [0.0, 0.2], "axis": [-1, 1]},
              _k_binary, ref.k_binary_focal_crossentropy, ops=18),
    KerasInfo("CategoricalCrossentropy", "categorical_crossentropy",
              {**KR, "from_logits": [False, True], "label_smoothing": [0.0, 0.2], "axis": [-1, 1]},
              _k_categorical, ref.k_categorical_crossentropy, ops=10),
    KerasInfo("CategoricalFocalCrossentropy", "categorical_focal_crossentropy",
              {**KR, "alpha": [0.25, 0.6], "gamma": [2.0, 0.0, 1.5], "from_logits": [False, True],
               "label_smoothing": [0.0, 0.2], "axis": [-1, 1]},
              _k_categorical, ref.k_categorical_focal_crossentropy, ops=16),
    KerasInfo("SparseCategoricalCrossentropy", "sparse_categorical_crossentropy",
              {**KR, "from_logits": [False, True], "ignore_class": [None, 1]},
              _k_sparse, ref.k_sparse_categorical_crossentropy, ops=10),
    KerasInfo("CategoricalGeneralizedCrossEntropy", "categorical_generalized_cross_entropy", {**KR, "q": [0.5, 0.2]},
              _k_gce, ref.k_generalized_cross_entropy, ops=6),
    KerasInfo("CTC", "ctc", KR, _k_ctc, ref.k_ctc, ops=8 * T_CTC),
    KerasInfo("Dice", "dice", {**KR, "axis": ["per-sample", "all"]}, _k_overlap, ref.k_dice, ops=6,
              valid=lambda r: r["axis"] != "all" or r["sample_weight"] == "none"),
    KerasInfo("Tversky", "tversky", {**KR, "alpha": [0.5, 0.7], "beta": [0.5, 0.2], "axis": ["per-sample", "all"]},
              _k_overlap, ref.k_tversky, ops=10, valid=lambda r: r["axis"] != "all" or r["sample_weight"] == "none"),
    # Circle's loss carries a mask (loss > 0, all True here), under which Keras broadcasts a scalar
    # weight before "mean_with_sample_weight" sums it (the other classes divide by the scalar): "the
    # sum of the sample weights" of a scalar is not defined by the docstring, so that pair is out.
    KerasInfo("Circle", "circle", {**KR, "gamma": [80.0, 4.0], "margin": [0.4, 0.25], "remove_diagonal": [True, False]},
              _k_circle, ref.k_circle, ops=16,
              valid=lambda r: not (r["reduction"] == "mean_with_sample_weight" and r["sample_weight"] == "scalar")),
]
# Public keras.losses classes this table leaves out, with the reason.
KERAS_LEFT_OUT = {
    "Loss": "the abstract base class: test_keras_loss_subclass_per_its_docstring checks a user subclass",
}
KERAS_BY_NAME = {info.name: info for info in KERAS_LOSSES}
KERAS_COVERING = {info.name: pairwise(info.factors, info.valid) for info in KERAS_LOSSES}
KERAS_CASES = [(info.name, row) for info in KERAS_LOSSES for row in KERAS_COVERING[info.name]]


def _keras_options(info: KerasInfo, row: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k not in ("reduction", "sample_weight", "labels")}
    if "axis" in out and info.name in ("Dice", "Tversky"):
        out["axis"] = DICE_AXES[out["axis"]]
    return out


def _sample_weight(kind: str, shape: tuple[int, ...]) -> Any:
    """Per-sample weights have the loss's rank, (N,) or (N, 1, ...), and broadcast over its trailing
    dimensions (Keras raises for an (N,) weight on an (N, k) loss: it only squeezes or expands a
    trailing dimension of size 1)."""
    if kind == "per-sample" and shape:
        return np.linspace(0.2, 2.0, shape[0]).reshape(shape[:1] + (1,) * (len(shape) - 1))
    if kind == "scalar":
        return 1.7
    return None


def keras_expected(info: KerasInfo, row: Mapping[str, Any], y: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any]:
    """The per-sample reference, the reduced reference and the tolerance of the error model."""
    opts = _keras_options(info, row)
    per_sample = info.reference(y, p, **opts)
    mask = None
    if info.name == "SparseCategoricalCrossentropy" and row["ignore_class"] is not None:
        mask = (y != row["ignore_class"]).astype(np.float64)
    want = ref.keras_reduce(per_sample, row["reduction"], _sample_weight(row["sample_weight"], np.shape(per_sample)), mask)
    sw = 1.0 if row["sample_weight"] == "none" else 2.0
    # magnitude of the intermediates: the inputs, the loss terms and their weights
    mag = sw * (float(np.max(np.abs(per_sample), initial=0.0)) + float(np.max(np.abs(y))) + float(np.max(np.abs(p))))
    if row["reduction"] == "sum":
        mag *= np.size(per_sample)
    if info.name == "Circle":  # exponents up to gamma (1 + 2m)(2 + m) cancel in the softplus
        mag += sw * ref.k_circle_scale(y, p, **opts) * (np.size(per_sample) if row["reduction"] == "sum" else 1)
    tol = tolerance("float64", ops=info.ops, reduction=max(int(np.size(p)), 2), magnitude=mag)
    if info.name in ("Dice", "Tversky"):
        # keras adds keras.config.epsilon() = 1e-7 (the documented "fuzz factor") to the ratio's
        # denominator: the ratio in [0, 1] moves by at most 1e-7 / denominator.
        denom = float(np.min(np.sum(y + p, axis=opts["axis"]))) / 2 * min(1.0, opts.get("beta", 0.5), 0.5)
        tol = tol.with_floor(sw * ref.KERAS_EPSILON / denom * (np.size(per_sample) if row["reduction"] == "sum" else 1),
                             "keras.config.epsilon() in the denominator")
    return per_sample, want, tol


def _modes_keras(info: KerasInfo, row: Mapping[str, Any]) -> list[str]:
    return [f"{info.name}.{k}={v}" for k, v in row.items() if k not in ("reduction", "sample_weight")]


@pytest.mark.claim(KERAS)
@pytest.mark.parametrize("name,row", KERAS_CASES, ids=[_case_id(n, r) for n, r in KERAS_CASES])
def test_keras_loss_matches_documented_formula(keras, name, row):
    evidence.registers(KERAS_LOSS_FAMILY, name, _ids(KERAS_CASES, name), own=_case_id(name, row))
    info = KERAS_BY_NAME[name]
    y, p = info.make(_rng(name, row), row)
    per_sample, want, tol = keras_expected(info, row, y, p)
    loss = getattr(keras.losses, name)(reduction=row["reduction"], dtype="float64", **_keras_options(info, row))
    weight = _sample_weight(row["sample_weight"], np.shape(per_sample))
    got = keras.ops.convert_to_numpy(loss(y, p, sample_weight=weight))
    label = _case_id(name, row)
    assert got.dtype == np.float64, f"{label}: the loss built with dtype='float64' returned {got.dtype}"
    assert got.shape == np.shape(want), f"{label}: output shape {got.shape}, but should be {np.shape(want)}"
    # The class and option modes are reached once the loss ran with them and its dtype and shape
    # held: a pinned divergence below then shows in the modes ledger with its verdict, not unchecked.
    evidence.covers(f"keras.{name}")
    for mode in _modes_keras(info, row):
        evidence.covers(f"keras.{mode}")
    assert_close(got, want, tol, what=f"{label} (class) vs the documented formula")
    if (name, row) in KERAS_FUNCTION_ROWS:  # the function form, checked here where the class form holds
        _check_keras_function(keras, info, row, y, p, per_sample, tol)
    evidence.covers(f"keras.reduction={row['reduction']}")
    evidence.covers(f"keras.sample_weight={row['sample_weight']}")
    evidence.visits(KERAS_LOSS_FAMILY, name, _case_id(name, row))


def _check_keras_function(keras, info: KerasInfo, row: Mapping[str, Any], y: np.ndarray, p: np.ndarray,
                          per_sample: np.ndarray, tol: Any) -> None:
    __tracebackhide__ = True
    fn = getattr(keras.losses, info.function)
    opts = _keras_options(info, row)
    got_fn = keras.ops.convert_to_numpy(fn(y, p, **opts))
    mag = float(np.max(np.abs(per_sample))) + float(np.max(np.abs(p))) + float(np.max(np.abs(y)))
    if info.name == "Circle":
        mag += ref.k_circle_scale(y, p, **opts)
    tol_fn = tolerance("float64", ops=info.ops, reduction=max(int(np.size(p)), 2), magnitude=mag)
    if info.name in ("Dice", "Tversky"):
        tol_fn = tol_fn.with_floor(tol.atol, "keras.config.epsilon() in the denominator")
    assert_close(got_fn, per_sample, tol_fn,
                 what=f"keras.losses.{info.function}({_case_id('', row)}) vs the documented formula")
    evidence.covers("keras.function")


# The function form has no reduction or sample weight: it runs once per distinct option row (the
# first covering row with those options), in the class test where its class form holds, and in
# test_keras_loss_function_form where the class form is a pinned divergence (LogCosh, CTC, ...).
_SEEN: set[tuple[str, tuple[tuple[str, Any], ...]]] = set()
KERAS_FUNCTION_ROWS: list[tuple[str, Mapping[str, Any]]] = []
for _name, _row in KERAS_CASES:
    _key = (_name, tuple((k, v) for k, v in _row.items() if k not in ("reduction", "sample_weight")))
    if _key not in _SEEN:
        _SEEN.add(_key)
        KERAS_FUNCTION_ROWS.append((_name, _row))
# Classes whose class form fails on every row (pinned divergences of the float64 computation): the
# class test stops there, so the function form gets its own test.
KERAS_FUNCTION_ALONE = ("LogCosh", "CTC")
KERAS_FUNCTION_ALONE_ROWS = [(n, r) for n, r in KERAS_FUNCTION_ROWS if n in KERAS_FUNCTION_ALONE]


@pytest.mark.claim(KERAS)
@pytest.mark.parametrize("name,row", KERAS_FUNCTION_ALONE_ROWS, ids=[_case_id(n, r) for n, r in KERAS_FUNCTION_ALONE_ROWS])
def test_keras_loss_function_form(keras, name, row):
    """keras.losses.log_cosh and keras.losses.ctc (the function forms) against the documented
    formula, apart from their classes, whose float64 check is a pinned divergence."""
    evidence.registers(KERAS_LOSS_FAMILY, f"{name} function form", _ids(KERAS_FUNCTION_ALONE_ROWS, name), own=_case_id(name, row))
    info = KERAS_BY_NAME[name]
    y, p = info.make(_rng(name, row), row)
    per_sample, _, tol = keras_expected(info, row, y, p)
    _check_keras_function(keras, info, row, y, p, per_sample, tol)
    evidence.visits(KERAS_LOSS_FAMILY, f"{name} function form", _case_id(name, row))


@pytest.mark.claim(KERAS)
def test_keras_loss_table_lists_every_public_loss(keras):
    """The table names every public keras.losses class (or says why not)."""
    names = sorted(n for n in dir(keras.losses) if isinstance(getattr(keras.losses, n), type)
                   and issubclass(getattr(keras.losses, n), keras.losses.Loss))
    missing = [n for n in names if n not in KERAS_BY_NAME and n not in KERAS_LEFT_OUT]
    assert not missing, f"keras.losses exports {missing} that suites/modules/test_losses.py's table leaves out"
    evidence.note(losses=names, left_out=sorted(KERAS_LEFT_OUT))
    evidence.covers("keras.table-complete")


@pytest.mark.claim(KERAS)
def test_keras_loss_serialize_deserialize_and_get_round_trip(keras):
    """keras.losses.serialize / deserialize / get, documented: serialize "Serializes loss function or
    Loss instance", deserialize "Deserializes a serialized loss class/function instance", get
    "Retrieves a Keras loss as a function/Loss class instance" from "the string name of a loss
    function or Loss class" or a config dict. For every class of the table, with its first
    documented option values and a non-default reduction: the round trip gives an instance of the
    class with the same config; get(config) too; get(function name) is the public function."""
    problems = []
    for name in sorted(KERAS_BY_NAME):
        info = KERAS_BY_NAME[name]
        row = {k: v[0] for k, v in info.factors.items()}
        original = getattr(keras.losses, name)(reduction="sum", dtype="float64", **_keras_options(info, row))
        config = original.get_config()
        for how, call in (("deserialize(serialize(loss))", keras.losses.deserialize),
                          ("get(serialize(loss))", keras.losses.get)):
            try:
                twin = call(keras.losses.serialize(original))
            except Exception as exc:  # a documented call that raises is a violation, reported with the rest
                problems.append(f"{name}: {how} raised {type(exc).__name__}: {str(exc).splitlines()[0]:.100}")
                continue
            if type(twin) is not type(original):
                problems.append(f"{name}: {how} returned {type(twin).__name__} ({twin!r:.60})")
            elif twin.get_config() != config:
                problems.append(f"{name}: {how} has config {twin.get_config()}, the original {config}")
        try:
            fn = keras.losses.get(info.function)
        except Exception as exc:
            problems.append(f"{name}: get({info.function!r}) raised {type(exc).__name__}: {str(exc).splitlines()[0]:.100}")
            continue
        if fn is not getattr(keras.losses, info.function):
            problems.append(f"{name}: get({info.function!r}) returned {fn!r:.60}, not keras.losses.{info.function}")
    assert not problems, f"{len(problems)} round trip(s) failed:\n" + "\n".join(problems)
    evidence.covers("keras.serialize")


@pytest.mark.claim(KERAS)
@pytest.mark.parametrize("reduction", [*KERAS_REDUCTIONS, "none"])
def test_keras_loss_subclass_per_its_docstring(keras, reduction):
    """keras.losses.Loss: "the class to subclass in order to create new custom losses", "to be
    implemented by subclasses: call()": the docstring's MeanSquaredError subclass (call returns
    mean(square(y_pred - y_true), axis=-1), per sample) and a per-element twin (square(y_pred -
    y_true), shape (N, 3)), built with dtype='float64', under every reduction (None and "none"
    perform no aggregation) and no / per-sample / scalar sample weights: the reduced loss is the
    documented reduction of call()'s values (keras_reduce), in float64; name is the name given;
    dtype=None computes in keras.backend.floatx()."""
    ops = keras.ops

    class UserMSE(keras.losses.Loss):
        def call(self, y_true, y_pred):
            return ops.mean(ops.square(y_pred - y_true), axis=-1)

    class UserSquares(keras.losses.Loss):
        def call(self, y_true, y_pred):
            return ops.square(y_pred - y_true)

    rng = np.random.default_rng(20240531)
    y, p = rng.normal(size=KSHAPE), rng.normal(size=KSHAPE)
    for cls, per in ((UserMSE, ref.k_mse(y, p)), (UserSquares, (p - y) ** 2)):
        loss = cls(name="user_loss", reduction=reduction, dtype="float64")
        assert loss.name == "user_loss", f"{cls.__name__}(name='user_loss').name is {loss.name!r}"
        for kind in SAMPLE_WEIGHTS:
            weight = _sample_weight(kind, per.shape)
            got = keras.ops.convert_to_numpy(loss(y, p, sample_weight=weight))
            want = ref.keras_reduce(per, reduction, weight)
            label = f"{cls.__name__}(reduction={reduction!r}), sample_weight={kind}"
            assert got.dtype == np.float64, f"{label}: dtype='float64' gave {got.dtype}"
            assert got.shape == want.shape, f"{label}: output shape {got.shape}, but should be {want.shape}"
            mag = 2.0 * (float(np.max(per)) + float(np.max(np.abs(y))) + float(np.max(np.abs(p))))
            mag *= per.size if reduction == "sum" else 1
            assert_close(got, want, tolerance("float64", ops=4, reduction=per.size, magnitude=mag),
                         what=f"{label} vs the documented reduction of call()")
            evidence.covers(f"keras.reduction={reduction}")
            evidence.covers(f"keras.sample_weight={kind}")
    default = UserMSE(reduction=reduction)
    got32 = keras.ops.convert_to_numpy(default(y, p))
    assert got32.dtype == np.dtype(keras.backend.floatx()), (
        f"UserMSE(dtype=None) computed in {got32.dtype}, not keras.backend.floatx() = {keras.backend.floatx()}")
    evidence.covers("keras.Loss.subclass")


@pytest.mark.claim(KERAS)
@pytest.mark.parametrize("refs", ["explicit-self", "separate"])
def test_keras_circle_function_reference_embeddings(keras, refs):
    """keras.losses.circle's ref_labels / ref_embeddings ("If None, defaults to y_true / y_pred"):
    the batch itself passed explicitly gives the default's loss (remove_diagonal=True); a separate
    reference set (4 embeddings, every label present in it) gives the paper's loss against it
    (remove_diagonal=False: a separate set holds no self-similarities)."""
    rng = np.random.default_rng(7)
    y, p = _k_circle(rng, {})
    if refs == "explicit-self":
        kw: dict[str, Any] = {"ref_labels": y, "ref_embeddings": p, "remove_diagonal": True}
    else:
        r = rng.normal(size=(4, 3))
        kw = {"ref_labels": np.array([1.0, 0.0, 1.0, 0.0]), "ref_embeddings": r / np.linalg.norm(r, axis=-1, keepdims=True),
              "remove_diagonal": False}
    got = keras.ops.convert_to_numpy(keras.losses.circle(y, p, gamma=4.0, margin=0.25, **kw))
    want = ref.k_circle(y, p, gamma=4.0, margin=0.25, **kw)
    tol = tolerance("float64", ops=16, reduction=12, magnitude=float(np.max(np.abs(want))) + ref.k_circle_scale(y, p, 4.0, 0.25))
    assert_close(got, want, tol, what=f"keras.losses.circle(ref={refs}) vs the paper's formula")
    evidence.covers(f"keras.circle.refs={refs}")
