"""The single-device runs the distributed ones are compared with, and the models they share.

A :class:`~.payloads.TrainCase` is built the same way everywhere: :func:`keras_model` /
:func:`keras_optimizer` for TensorFlow (in a strategy's scope or not) and
:func:`torch_model` / :func:`torch_optimizer` for torch, with weights read back in the
case's layout. The references are one process, one device, one step per global batch,
with the loss the distributed run is documented to compute (:func:`tf_single_device_steps`,
:func:`torch_single_process_steps`), and the batches DistributedSampler documents
(:func:`sampler_batches`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...frameworks import HarnessError, adapter
from .payloads import TrainCase


def tf_module() -> Any:
    import sys

    if "tensorflow" not in sys.modules:
        return adapter("tensorflow").module
    return sys.modules["tensorflow"]


# --------------------------------------------------------------------------- TensorFlow


def keras_model(case: TrainCase) -> Any:
    import keras

    layers = [keras.Input((case.widths[0],), dtype=case.dtype)]
    for i, width in enumerate(case.widths[1:]):
        last = i == len(case.widths) - 2
        layers.append(keras.layers.Dense(width, activation=None if last else case.activation, dtype=case.dtype))
    model = keras.Sequential(layers)
    model.set_weights([np.asarray(w, dtype=case.dtype) for w in case.weights])
    return model


def keras_optimizer(case: TrainCase) -> Any:
    import keras

    if case.optimizer == "sgd":
        return keras.optimizers.SGD(case.lr)
    if case.optimizer == "momentum":
        return keras.optimizers.SGD(case.lr, momentum=0.9)
    if case.optimizer == "adam":
        return keras.optimizers.Adam(case.lr)
    raise HarnessError(f"unknown optimizer {case.optimizer!r}")


def tf_single_device_steps(case: TrainCase, replica_rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, ...]:
    """The oracle: the same model and optimizer on one device, one step per global batch,
    with the loss the distributed run is documented to compute.

    ``replica_rows[s]`` are the per-replica batch sizes of step s. With
    ``global_batch_size=B`` the loss is the mean over the B rows whatever the split; with
    the default (local batch size x replicas) replica r's rows are weighted 1/(N * b_r)."""
    tf = tf_module()
    with tf.distribute.get_strategy().scope():
        model = keras_model(case)
        optimizer = keras_optimizer(case)
    for s, sizes in enumerate(replica_rows):
        lo = s * case.batch
        x = tf.constant(case.x[lo:lo + case.batch], dtype=case.dtype)
        y = tf.constant(case.y[lo:lo + case.batch], dtype=case.dtype)
        weights = tf.constant(sample_weights(case.loss_scaling, sizes, case.batch), dtype=case.dtype)
        with tf.GradientTape() as tape:
            per_example = tf.reduce_sum(tf.square(model(x, training=True) - y), axis=1)
            loss = tf.reduce_sum(per_example * weights)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return tuple(np.asarray(v.numpy()) for v in model.weights)


def sample_weights(scaling: str, sizes: Sequence[int], batch: int) -> np.ndarray:
    """Weight of each row of a global batch in the loss, given the per-replica sizes."""
    if scaling == "global":
        return np.full(sum(sizes), 1.0 / batch)
    if scaling != "default":
        raise HarnessError(f"no single-device loss for loss scaling {scaling!r}")
    n = len(sizes)
    return np.concatenate([np.full(b, 1.0 / (n * b)) for b in sizes if b > 0] or [np.zeros(0)])


# --------------------------------------------------------------------------- torch


def torch_model(case: TrainCase) -> Any:
    import torch

    dtype = getattr(torch, case.dtype)
    act = {"tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid, "linear": torch.nn.Identity}[case.activation]
    layers: list[Any] = []
    for i in range(len(case.widths) - 1):
        lin = torch.nn.Linear(case.widths[i], case.widths[i + 1], dtype=dtype)
        with torch.no_grad():  # kernels are stored (in, out) as in Keras; torch keeps (out, in)
            lin.weight.copy_(torch.tensor(case.weights[2 * i].T, dtype=dtype))
            lin.bias.copy_(torch.tensor(case.weights[2 * i + 1], dtype=dtype))
        layers.append(lin)
        if i < len(case.widths) - 2:
            layers.append(act())
    return torch.nn.Sequential(*layers)


def torch_optimizer(case: TrainCase, params: Any) -> Any:
    import torch

    if case.optimizer == "sgd":
        return torch.optim.SGD(params, lr=case.lr)
    if case.optimizer == "momentum":
        return torch.optim.SGD(params, lr=case.lr, momentum=0.9)
    if case.optimizer == "adam":
        return torch.optim.Adam(params, lr=case.lr)
    raise HarnessError(f"unknown optimizer {case.optimizer!r}")


def torch_weights(params: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """Weights in the TrainCase layout: kernel (in, out), bias, layer by layer."""
    out = []
    for p in params:
        full = p.full_tensor() if hasattr(p, "full_tensor") else p  # FSDP's DTensor shards
        a = full.detach().cpu().numpy()
        out.append(a.T if a.ndim == 2 else a)
    return tuple(out)


def sampler_shards(dataset_len: int, ranks: int, drop_last: bool) -> list[list[int]]:
    """DistributedSampler(shuffle=False)'s shards, computed with no torch: the index list
    made divisible by the ranks (drop_last=True drops the tail; False appends indices
    again from the start, "extra indices to make the data evenly divisible", repeated as
    often as needed when the dataset has fewer rows than ranks), rank r taking every
    ranks-th index from position r."""
    per_rank = dataset_len // ranks if drop_last else -(-dataset_len // ranks)
    total = per_rank * ranks
    indices = list(range(dataset_len))
    if total > dataset_len and indices:
        indices = (indices * -(-total // dataset_len))[:total]
    indices = indices[:total]
    return [indices[r:total:ranks] for r in range(ranks)]


def sampler_batches(case: TrainCase, world_size: int) -> list[list[tuple[int, ...]]]:
    """Per step, per rank: the dataset indices each rank's loader gives it, from the numpy
    shards (:func:`sampler_shards`) in batches of ``case.rank_batch``; with ``case.join``,
    each rank's contiguous share of the rows (as even as possible, the first ranks taking
    one row more), an exhausted rank contributing an empty batch to the later steps."""
    if case.join:
        shards = [list(map(int, a)) for a in np.array_split(np.arange(len(case.x)), world_size)]
    else:
        shards = sampler_shards(len(case.x), world_size, case.drop_last)
    b = case.rank_batch
    steps = max((-(-len(shard) // b) for shard in shards), default=0)
    return [[tuple(shard[s * b:(s + 1) * b]) for shard in shards] for s in range(steps)]


def torch_sampler_shards(case: TrainCase, world_size: int) -> list[list[int]]:
    """What torch's DistributedSampler(shuffle=False) gives each rank (for comparison with
    :func:`sampler_shards`)."""
    _ = adapter("torch").module  # the configured torch (threads) before anything of it runs
    from torch.utils.data import DistributedSampler

    with adapter("torch").module.device("cpu"):  # a sampler's draws belong on the host whatever the default device
        # DistributedSampler uses only len() of its dataset: a range stands for the rows.
        rows: Any = range(len(case.x))
        samplers: list[Any] = [DistributedSampler(rows, num_replicas=world_size, rank=r, shuffle=False, drop_last=case.drop_last)
                    for r in range(world_size)]
        return [[int(i) for i in sampler] for sampler in samplers]


def torch_single_process_steps(case: TrainCase, global_batches: Sequence[Sequence[Sequence[int]]]) -> tuple[np.ndarray, ...]:
    """The oracle: one process, the same model and optimizer, one step per global batch,
    loss = mean over ranks of each rank's mean loss (what DDP and FSDP average; ranks with
    no batch left under DDP.join count as zero, see ``case.join``)."""
    torch = adapter("torch").module
    dtype = getattr(torch, case.dtype)
    model = torch_model(case)
    optimizer = torch_optimizer(case, model.parameters())
    x, y = torch.tensor(case.x, dtype=dtype), torch.tensor(case.y, dtype=dtype)
    for per_rank in global_batches:
        optimizer.zero_grad()
        losses = [((model(x[list(ix)]) - y[list(ix)]) ** 2).sum(dim=1).mean() for ix in per_rank if len(ix)]
        # DDP averages over the ranks; under join(divide_by_initial_world_size=False) over
        # the ranks that still have inputs (its reference), else over the initial world size.
        loss = torch.stack(losses).sum() / (len(losses) if case.join == "effective" else len(per_rank))
        loss.backward()
        optimizer.step()
    return torch_weights(list(model.parameters()))


__all__ = [
    "keras_model", "keras_optimizer", "sample_weights", "sampler_batches", "sampler_shards", "tf_module",
    "tf_single_device_steps", "torch_model", "torch_optimizer", "torch_sampler_shards", "torch_single_process_steps",
    "torch_weights",
]
