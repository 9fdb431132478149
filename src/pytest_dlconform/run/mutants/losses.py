"""Mutants of the loss functions: torch.nn CrossEntropyLoss's weighted mean, ignore_index and
label smoothing, and keras.losses' reductions (claims modules.torch.losses, modules.keras.losses)."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap


def _class_dim(input: Any) -> int:
    return 0 if input.dim() == 1 else 1


def _weights_of(torch: Any, input: Any, weight: Any) -> Any:
    c = input.shape[_class_dim(input)]
    return torch.ones(c, dtype=input.dtype, device=input.device) if weight is None else weight


@mutant("torch-ce-label-smoothing-counts-ignored", areas="modules", claims="modules.torch.losses", target="torch",
        select="CrossEntropyLoss", cite="https://github.com/pytorch/pytorch/issues/73205",
        bug="CrossEntropyLoss with label_smoothing adds the uniform (smoothing) part of the loss of targets "
            "equal to ignore_index, which the one-hot part ignores (issue 73205: 'the uniform part of the loss "
            "incorrectly takes into account ignored samples').")
def _torch_ce_smoothing_counts_ignored() -> None:
    import torch
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None,
                          ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                          label_smoothing: float = 0.0) -> Any:
            out = orig(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
            if label_smoothing <= 0 or target.is_floating_point():
                return out
            ignored = target == ignore_index
            if not bool(ignored.any()):
                return out
            dim = _class_dim(input)
            w = _weights_of(torch, input, weight)
            shape = [1] * input.dim()
            shape[dim] = -1
            logp = torch.log_softmax(input, dim)
            smooth = -(logp * w.view(shape)).sum(dim) * label_smoothing / input.shape[dim]
            extra = torch.where(ignored, smooth, torch.zeros_like(smooth))
            if reduction == "none":
                return out + extra
            if reduction == "sum":
                return out + extra.sum()
            safe = torch.where(ignored, torch.zeros_like(target), target)
            denom = torch.where(ignored, torch.zeros_like(w[safe]), w[safe]).sum()
            return out + extra.sum() / denom
        return cross_entropy
    wrap(F, "cross_entropy", make)


@mutant("torch-ce-weighted-mean-over-count", areas="modules", claims="modules.torch.losses", target="torch",
        select="CrossEntropyLoss", cite="https://github.com/pytorch/pytorch/issues/25571",
        bug="CrossEntropyLoss(weight=..., reduction='mean') divides the weighted sum by the number of "
            "non-ignored targets instead of the sum of their weights (what issue 25571 expected 'mean' to be; "
            "the documented denominator is sum_n w_{y_n} 1{y_n != ignore_index}).")
def _torch_ce_weighted_mean_over_count() -> None:
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None,
                          ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                          label_smoothing: float = 0.0) -> Any:
            if reduction != "mean" or weight is None or target.is_floating_point():
                return orig(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
            total = orig(input, target, weight, size_average, ignore_index, reduce, "sum", label_smoothing)
            return total / (target != ignore_index).sum()
        return cross_entropy
    wrap(F, "cross_entropy", make)


@mutant("keras-mean-with-sample-weight-over-count", areas="modules", claims="modules.keras.losses", target="keras",
        select="keras and (MeanSquaredError or MeanAbsoluteError or Huber or Poisson)",
        cite="https://github.com/keras-team/keras/pull/20410",
        bug="reduction='mean_with_sample_weight' divides the weighted sum by the number of loss elements, as "
            "'sum_over_batch_size' does, instead of the sum of the sample weights (the behaviour of issue 19740 "
            "that PR 20410 added this reduction to change).")
def _keras_mean_with_sample_weight_over_count() -> None:
    from keras.src.losses import loss as loss_module

    def make(orig: Any) -> Any:
        def reduce_values(values: Any, sample_weight: Any = None, reduction: str = "sum_over_batch_size") -> Any:
            if reduction == "mean_with_sample_weight":
                reduction = "sum_over_batch_size"
            return orig(values, sample_weight, reduction)
        return reduce_values
    wrap(loss_module, "reduce_values", make)


@mutant("keras-circle-negative-margin-sign", areas="modules", claims="modules.keras.losses", target="keras",
        select="keras and Circle", cite="https://github.com/keras-team/keras/pull/20452",
        bug="Circle loss with the negatives' decision margin Delta_n = -m instead of the paper's m: the sign slip "
            "reported against the paper's reference code (xiangli13/circle-loss issue 3: 'your code: margin_n = "
            "-self.margin, but in the paper, it is self.margin'), in the Circle loss keras PR 20452 added.")
def _keras_circle_negative_margin_sign() -> None:
    import keras
    from keras.src.losses import losses

    ops = keras.ops

    def make(orig: Any) -> Any:
        def circle(y_true: Any, y_pred: Any, ref_labels: Any = None, ref_embeddings: Any = None,
                   remove_diagonal: bool = True, gamma: float = 80, margin: float = 0.4) -> Any:
            y_pred = ops.convert_to_tensor(y_pred)
            y_true = ops.cast(y_true, "int32")
            ref_e = y_pred if ref_embeddings is None else ops.convert_to_tensor(ref_embeddings)
            ref_l = y_true if ref_labels is None else ops.cast(ref_labels, "int32")
            s = ops.matmul(y_pred, ops.transpose(ref_e))
            pos, neg = losses.build_pos_neg_masks(y_true, ref_l, remove_diagonal=remove_diagonal)
            ap = ops.maximum(1 + margin - s, 0.0)
            an = ops.maximum(s + margin, 0.0)
            lp = ops.logsumexp(ops.where(pos, -gamma * ap * (s - (1 - margin)), float("-inf")), axis=1)
            ln = ops.logsumexp(ops.where(neg, gamma * an * (s + margin), float("-inf")), axis=1)  # the bug: -m
            return ops.softplus(lp + ln)
        return circle
    wrap(losses, "circle", make)
