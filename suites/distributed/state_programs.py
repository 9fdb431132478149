"""Programs of the non-trainable-state suite (test_nontrainable_state.py): torch programs run in
every rank of a process group, TensorFlow programs in this process under an in-process
MirroredStrategy.

The torch programs are ``program(ctx, payload)`` for
:meth:`pytest_dlconform.harness.groups.LocalGroup.run`; ranks import this module by name, so
it holds module-level functions only, imports no test module and no framework at import
time. Results are plain data (numpy arrays, dicts, strings).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_dlconform.api.distribution import first_line, tf_module
from pytest_dlconform.api.harness import WorkerContext

# --------------------------------------------------------------------------- torch: DDP buffers


def _group_of(ctx: WorkerContext, size: int) -> Any:
    """Ranks 0..size-1 (None: the whole world). Shares ``ctx.state["subgroups"]`` with the
    other distributed suites' programs, so every rank creates each subgroup once, in order."""
    import torch.distributed as dist

    if size == ctx.world_size:
        return None
    subgroups = ctx.state["subgroups"]
    if size not in subgroups:
        subgroups[size] = dist.new_group(list(range(size)))
    return subgroups[size]


def _buffers(bn: Any) -> dict[str, np.ndarray]:
    return {"running_mean": bn.running_mean.detach().cpu().numpy().copy(),
            "running_var": bn.running_var.detach().cpu().numpy().copy(),
            "num_batches_tracked": bn.num_batches_tracked.detach().cpu().numpy().copy()}


def ddp_buffer_cases(ctx: WorkerContext, cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each case on the subgroup of its first ``case["ranks"]`` ranks (others skip it): a
    BatchNorm1d (float64, its buffers set to this rank's ``init_buffers`` row) followed by a
    Linear, wrapped in DDP with the case's keyword arguments, trained ``len(batches)`` SGD
    steps on this rank's batches, then one eval forward on ``eval_x``. Returned per case: the
    buffers right after construction, after each step, the eval output, the buffers after the
    eval forward, the parameters, the warnings DDP gave."""
    for size in sorted({c["ranks"] for c in cases}):
        _group_of(ctx, size)
    return [_ddp_case(ctx, case) for case in cases]


def _ddp_case(ctx: WorkerContext, case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    n = case["ranks"]
    if ctx.rank >= n:
        return {"skipped": True}
    group = _group_of(ctx, n)
    device = ctx.state["device"]
    c = int(case["channels"])
    torch.manual_seed(int(case["seed"]))  # the same parameters on every rank
    bn = torch.nn.BatchNorm1d(c, momentum=case["momentum"], dtype=torch.float64)
    model = torch.nn.Sequential(bn, torch.nn.Flatten(), torch.nn.Linear(c * int(case["length"] or 1), 1,
                                                                        dtype=torch.float64)).to(device)
    mean0, var0, tracked0 = case["init_buffers"][ctx.rank]
    with torch.no_grad():  # rank-dependent buffers: only a sync makes them equal
        bn.running_mean.copy_(torch.as_tensor(mean0, dtype=torch.float64))
        bn.running_var.copy_(torch.as_tensor(var0, dtype=torch.float64))
        bn.num_batches_tracked.fill_(int(tracked0))
    ctx.arrive(f"DDP({case['kwargs']}) over {n} ranks")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ddp = DistributedDataParallel(model, device_ids=None if device == "cpu" else [device], process_group=group,
                                      **case["kwargs"])
    steps: list[dict[str, np.ndarray]] = []
    seen: dict[str, Any] = {"after_init": _buffers(bn), "after_step": steps,
                            "warnings": [f"{w.category.__name__}: {str(w.message).splitlines()[0]}" for w in caught
                                         if issubclass(w.category, (FutureWarning, DeprecationWarning))]}
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step, x in enumerate(case["batches"][ctx.rank]):
        ctx.arrive(f"DDP step {step}")
        optimizer.zero_grad()
        out = ddp(torch.as_tensor(x, device=device))
        (out ** 2).mean().backward()
        optimizer.step()
        steps.append(_buffers(bn))
    ddp.eval()
    with torch.no_grad():
        seen["eval_bn"] = bn(torch.as_tensor(case["eval_x"], device=device)).cpu().numpy()  # without a DDP forward
        ddp(torch.as_tensor(case["eval_x"], device=device))  # a DDP forward: the documented sync point
        seen["eval_bn_after_ddp_forward"] = bn(torch.as_tensor(case["eval_x"], device=device)).cpu().numpy()
    seen["after_eval"] = _buffers(bn)
    seen["params"] = [p.detach().cpu().numpy().copy() for p in model.parameters()]
    return seen


def sync_batchnorm_cpu(ctx: WorkerContext, payload: dict[str, Any]) -> dict[str, Any]:
    """torch.nn.SyncBatchNorm in training on this rank's device: alone, and inside DDP (the
    documented setup). Returns each attempt's error (None: it ran) and, where it ran, the
    output and buffers."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    device = ctx.state["device"]
    x = torch.as_tensor(payload["batches"][ctx.rank], device=device)
    found: dict[str, Any] = {}
    for how in ("alone", "ddp"):
        torch.manual_seed(0)
        layer = torch.nn.SyncBatchNorm(x.shape[1], momentum=payload["momentum"], dtype=torch.float64).to(device)
        ctx.arrive(f"SyncBatchNorm {how}")
        try:
            module: Any = layer
            if how == "ddp":
                module = DistributedDataParallel(layer, device_ids=None if device == "cpu" else [device])
            out = module(x)
        except (ValueError, RuntimeError, NotImplementedError) as exc:
            found[how] = {"error": f"{type(exc).__name__}: {first_line(exc)}"}
            continue
        found[how] = {"error": None, "out": out.detach().cpu().numpy(), **_buffers(layer)}
    return found


# --------------------------------------------------------------------------- TensorFlow: Keras BN


def keras_bn_step(strategy: Any, case: dict[str, Any]) -> dict[str, Any]:
    """keras.layers.BatchNormalization(synchronized=..., axis, momentum, epsilon) built in
    ``strategy.scope()``, called once with training=True under ``strategy.run`` on each
    replica's own shard (``case["shards"][r]``, float32), then with training=False on
    ``case["eval_x"]``. Returns each replica's output and each replica's copy of the moving
    statistics."""
    import keras

    tf = tf_module()
    shards = [np.asarray(s, np.float32) for s in case["shards"]]
    with strategy.scope():
        layer = keras.layers.BatchNormalization(axis=case["axis"], momentum=case["momentum"], epsilon=case["epsilon"],
                                                synchronized=case["synchronized"],
                                                moving_mean_initializer=keras.initializers.Constant(case["mean0"]),
                                                moving_variance_initializer=keras.initializers.Constant(case["var0"]))
        layer.build((None, *shards[0].shape[1:]))
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(shards[ctx.replica_id_in_sync_group]))
    out = strategy.run(tf.function(lambda x: layer(x, training=True)), args=(values,))

    def local(v: Any) -> list[np.ndarray]:
        return [np.asarray(p.numpy()) for p in strategy.experimental_local_results(v)]

    return {"out": local(out), "moving_mean": local(layer.moving_mean.value),
            "moving_variance": local(layer.moving_variance.value),
            "variable_types": [type(w.value).__name__ for w in (layer.moving_mean, layer.moving_variance)]}


# --------------------------------------------------------------------------- TensorFlow: variables


def _aggregation(name: str) -> Any:
    return getattr(tf_module().VariableAggregation, name)


def tf_on_read(strategy: Any, case: dict[str, Any]) -> dict[str, Any]:
    """A non-trainable ON_READ variable (SyncOnReadVariable) with ``case["aggregation"]``:
    replica r assigns ``case["values"][r]`` in replica context and reads it back there; then
    the variable is read in cross-replica context, and (``case["cross_assign"]``) assigned one
    value in cross-replica context, whose per-replica components are returned."""
    tf = tf_module()
    values = [np.asarray(v, np.float32) for v in case["values"]]
    with strategy.scope():
        v = tf.Variable(np.asarray(case["init"], np.float32), trainable=False,
                        synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=_aggregation(case["aggregation"]))

    def step() -> Any:
        r = tf.distribute.get_replica_context().replica_id_in_sync_group
        v.assign(tf.gather(tf.constant(np.stack(values)), r))
        return v.read_value()

    seen: dict[str, Any] = {"type": type(v).__name__}
    seen["replica_reads"] = [np.asarray(t.numpy()) for t in strategy.experimental_local_results(strategy.run(tf.function(step)))]
    seen["components"] = [np.asarray(p.numpy()) for p in strategy.experimental_local_results(v)]
    try:
        seen["cross_read"], seen["cross_read_error"] = np.asarray(v.read_value().numpy()), None
    except (ValueError, TypeError) as exc:
        seen["cross_read"], seen["cross_read_error"] = None, f"{type(exc).__name__}: {first_line(exc)}"
    if case.get("cross_assign") is not None:
        try:
            v.assign(np.asarray(case["cross_assign"], np.float32))
            seen["after_cross_assign"] = [np.asarray(p.numpy()) for p in strategy.experimental_local_results(v)]
        except (ValueError, TypeError) as exc:
            seen["after_cross_assign"] = f"{type(exc).__name__}: {first_line(exc)}"
    return seen


def tf_on_write(strategy: Any, case: dict[str, Any]) -> dict[str, Any]:
    """A non-trainable ON_WRITE variable (MirroredVariable) with ``case["aggregation"]``,
    updated in replica context by ``case["op"]`` (assign or assign_add) with replica r's
    ``case["values"][r]``: returns the value each replica got back, or the error."""
    tf = tf_module()
    values = [np.asarray(v, np.float32) for v in case["values"]]
    with strategy.scope():
        v = tf.Variable(np.asarray(case["init"], np.float32), trainable=False,
                        synchronization=tf.VariableSynchronization.ON_WRITE,
                        aggregation=_aggregation(case["aggregation"]))

    def step() -> Any:
        r = tf.distribute.get_replica_context().replica_id_in_sync_group
        return getattr(v, case["op"])(tf.gather(tf.constant(np.stack(values)), r))

    seen: dict[str, Any] = {"type": type(v).__name__}
    try:
        strategy.run(tf.function(step))
        seen["error"] = None
    except (ValueError, TypeError, NotImplementedError, RuntimeError) as exc:
        seen["error"] = f"{type(exc).__name__}: {first_line(exc)}"
    seen["components"] = [np.asarray(p.numpy()) for p in strategy.experimental_local_results(v)]
    return seen
