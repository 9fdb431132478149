"""Distributed programs of the model claims: one SGD step of a user's model under DDP,
FSDP2 or a tf.distribute strategy (run in each rank), and the single-device oracle step.

Importing this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..roundtrip.errors import one_line
from .adapters import LR, KerasOps, TorchOps, _np
from .refusals import WRAP_REFUSALS, refusal_reason

REFUSED = "__refused__"  # a rank's answer when DDP/FSDP refuses the model (a documented refusal)
WRAP_FAILED = "__wrap_failed__"  # a rank's answer when DDP/FSDP raised anything else


class WrapFailed(AssertionError):
    """DDP or FSDP raised on the user's model, and not with a refusal its documentation names
    (checks.usermodel.refusals.WRAP_REFUSALS): a violation, not "not applicable"."""


def wrap(model: Any, how: str, device: str) -> tuple[Any, dict[str, str] | None]:
    """The model wrapped in DDP or FSDP2 (``how``), or a rank's answer saying why not: a
    documented refusal (:data:`REFUSED`, its one-line reason) or anything else the wrapper
    raised (:data:`WRAP_FAILED`)."""
    try:
        if how == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            return DistributedDataParallel(model, device_ids=None if device == "cpu" else [device]), None
        from torch.distributed.fsdp import fully_shard

        fully_shard(model)
        return model, None
    except Exception as exc:  # judged here, in every rank alike: a documented refusal or a violation
        reason = refusal_reason(WRAP_REFUSALS.get(how, ()), exc)
        if reason is not None:
            return None, {REFUSED: reason}
        return None, {WRAP_FAILED: one_line(exc)}


def wrap_verdict(replicas: Sequence[dict[str, Any]], how: str, what: str) -> str | None:
    """From the ranks' answers: raise :class:`WrapFailed` if any rank's wrapper raised something
    undocumented; the one-line "not applicable" reason if the wrapper refused; else None."""
    __tracebackhide__ = True
    failed = sorted({rep[WRAP_FAILED] for rep in replicas if WRAP_FAILED in rep})
    if failed:
        raise WrapFailed(f"{what}: {how} raised wrapping the model, not a documented refusal: {'; '.join(failed)}")
    refused = sorted({rep[REFUSED] for rep in replicas if REFUSED in rep})
    return "; ".join(refused) if refused else None


def torch_rank_step(ctx: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """DDP or FSDP2 (``payload["wrap"]``) over the group: this rank's contiguous share of the
    global batch, one SGD step; the full parameters by name come back."""
    import torch

    from .factory import call_factory, resolve

    device = ctx.state["device"]
    um = call_factory(resolve(payload["ref"]), device=device, dtype="float32")
    model = um.model.to(device)
    TorchOps().load_state(model, payload["state"])
    model, refused = wrap(model, payload["wrap"], device)
    if refused is not None:
        return refused
    n, r = ctx.world_size, ctx.rank
    b = len(payload["targets"]) // n
    rows = slice(r * b, (r + 1) * b)
    ops = TorchOps()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=LR)
    opt.zero_grad()
    args = ops.tensors(model, [a[rows] for a in payload["inputs"]])
    ctx.arrive(f"{payload['wrap']} forward and backward")
    ops.loss(model, args, payload["targets"][rows], loss=um.loss).backward()
    opt.step()
    ctx.arrive(f"{payload['wrap']} gather parameters")
    out = {}
    inner = getattr(model, "module", model)
    for name, p in inner.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name] = _np(full)
    return out


def torch_single_step(model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray,
                      loss: Any = None) -> dict[str, np.ndarray]:
    """The oracle: one device, one SGD step on the whole global batch (its mean loss). DDP and
    FSDP average the ranks' mean losses over equal shares, the same number when rows are
    independent (and the factory's ``loss`` is a mean over rows); a layer that mixes rows
    (batch statistics) makes the two differ."""
    return TorchOps().sgd_step(model, inputs, targets, loss=loss)


def keras_strategy_step(strategy: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """One SGD step of the custom training loop under ``strategy``: model and optimizer built in
    ``scope()``, replica k takes the k-th contiguous share of the global batch, per-row losses
    summed and divided by the global batch (tf.nn.compute_average_loss)."""
    import tensorflow as tf

    from .factory import call_factory, resolve

    ops = KerasOps()
    with strategy.scope():
        um = call_factory(resolve(payload["ref"]), device="cpu", dtype="float32")
        model = um.model
        ops.load_state(model, payload["state"])
        opt = ops.keras.optimizers.SGD(LR)
    n = strategy.num_replicas_in_sync
    global_batch = len(payload["targets"])
    b = global_batch // n

    def shard(ctx: Any) -> Any:
        k = ctx.replica_id_in_sync_group
        return ([tf.constant(a[k * b:(k + 1) * b]) for a in payload["inputs"]],
                tf.constant(payload["targets"][k * b:(k + 1) * b]))

    values = strategy.experimental_distribute_values_from_function(shard)

    @tf.function(autograph=False)
    def step(batch: Any) -> None:
        def replica(data: Any) -> None:
            xs, y = data
            xs = [tf.cast(x, ops.dtype_of(model)) if x.dtype.is_floating else x for x in xs]
            with tf.GradientTape() as tape:
                if um.loss is None:
                    loss = tf.nn.compute_average_loss(ops.per_row_loss(model, xs, y), global_batch_size=global_batch)
                else:  # the replica's mean over its equal share, averaged over the replicas by the sum
                    loss = ops.loss(model, xs, y, loss=um.loss) / n
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))

        strategy.run(replica, args=(batch,))

    step(values)
    return {"weights": {k: [np.asarray(c.numpy()) for c in strategy.experimental_local_results(v.value)]
                        for k, v in ops.params(model).items()}, "replicas": n}


def tf_mw_step(ctx: Any, payload: dict[str, Any]) -> dict[str, Any]:
    return keras_strategy_step(ctx.state["strategy"], payload)


def keras_single_step(model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray,
                      loss: Any = None) -> dict[str, np.ndarray]:
    return KerasOps().sgd_step(model, inputs, targets, loss=loss)
