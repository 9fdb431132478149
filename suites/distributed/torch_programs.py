"""The torch programs of the distributed suites, run in every rank of a process group.

Each function is a program for :meth:`pytest_dlconform.harness.groups.LocalGroup.run`:
``program(ctx, payload)`` in a rank whose setup made the process group
(:func:`pytest_dlconform.harness.distribution.ranks.torch_setup`); ranks import this module by
name, so it holds module-level functions only and imports no test module.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_dlconform.api import HarnessError
from pytest_dlconform.api.distribution import (
    Outcome,
    ReduceCase,
    TrainCase,
    TrainResult,
    collectives,
    first_line,
    torch_model,
    torch_optimizer,
    torch_weights,
)
from pytest_dlconform.api.harness import WorkerContext

PREMUL_FACTOR = collectives.PREMUL_FACTOR

# --------------------------------------------------------------------------- collectives


def _torch_group_of(ctx: WorkerContext, size: int) -> Any:
    """The process group of ranks 0..size-1 (the default group when size is the world);
    every rank must call new_group, so all ranks build the same subgroups in order."""
    import torch.distributed as dist

    if size == ctx.world_size:
        return None
    subgroups = ctx.state["subgroups"]
    if size not in subgroups:
        subgroups[size] = dist.new_group(list(range(size)))
    return subgroups[size]


def torch_collective_cases(ctx: WorkerContext, cases: Sequence[ReduceCase]) -> list[Outcome]:
    """Each case on the group of its first ``case.replicas`` ranks; other ranks skip it."""
    for size in sorted({c.replicas for c in cases}):
        _torch_group_of(ctx, size)  # create subgroups up front, in the same order on every rank
    return [_torch_collective(ctx, case) for case in cases]


def _torch_collective(ctx: WorkerContext, case: ReduceCase) -> Outcome:
    import torch

    if ctx.rank >= case.replicas:
        return Outcome(info={"skipped": True})
    group = _torch_group_of(ctx, case.replicas)
    device = ctx.state["device"]
    mine = torch.tensor(case.values[ctx.rank], dtype=getattr(torch, case.dtype), device=device)
    ctx.arrive(f"{case.api} {case.op}".strip())
    try:
        results = _run_collective(case, mine, group)
    except (RuntimeError, ValueError, TypeError) as exc:
        return Outcome(error=f"{type(exc).__name__}: {first_line(exc)}")
    return Outcome(tuple(_torch_numpy(t) for t in results), info={"dtype": str(results[0].dtype).removeprefix("torch.")})


def _reduce_op(name: str) -> Any:
    import torch.distributed as dist

    if name == "premul_sum":  # the documented constructor: ReduceOp.PREMUL_SUM(factor)
        return dist.ReduceOp.PREMUL_SUM(PREMUL_FACTOR)
    return getattr(dist.ReduceOp, {"mean": "AVG"}.get(name, name.upper()))


def _run_collective(case: ReduceCase, mine: Any, group: Any) -> tuple[Any, ...]:
    """One collective; reduce's dst and broadcast's src are ``case.src`` (a global rank:
    subgroups are ranks 0..n-1, so it is the group rank too)."""
    import torch
    import torch.distributed as dist

    n = case.replicas
    if case.api == "all_reduce":
        out = mine.clone()
        dist.all_reduce(out, op=_reduce_op(case.op), group=group)
        return (out,)
    if case.api == "reduce":
        out = mine.clone()
        dist.reduce(out, dst=case.src, op=_reduce_op(case.op), group=group)
        return (out,)
    if case.api == "reduce_scatter":  # mine: one row per rank; rank i receives the reduction of rows i
        out = torch.empty_like(mine[0])
        dist.reduce_scatter(out, [row.clone() for row in mine], op=_reduce_op(case.op), group=group)
        return (out,)
    if case.api == "reduce_scatter_tensor":  # the rows concatenated along dim 0
        out = torch.empty_like(mine[0])
        dist.reduce_scatter_tensor(out, mine.reshape(-1).clone(), op=_reduce_op(case.op), group=group)
        return (out,)
    if case.api == "all_gather":
        outs = [torch.empty_like(mine) for _ in range(n)]
        dist.all_gather(outs, mine, group=group)
        return tuple(outs)
    if case.api == "broadcast":
        out = mine.clone()
        dist.broadcast(out, src=case.src, group=group)
        return (out,)
    raise HarnessError(f"unknown torch collective {case.api!r}")


def _torch_numpy(t: Any) -> np.ndarray:
    import torch

    t = t.detach()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds every bfloat16 exactly
        t = t.float()
    return t.cpu().numpy()


# --------------------------------------------------------------------------- training


def torch_train_cases(ctx: WorkerContext, payload: dict[str, Any]) -> list[TrainResult]:
    """DDP or FSDP (``payload["wrap"]``) training of each case on ranks 0..case.ranks-1 (a
    subgroup; 0: the whole group), each rank on its DistributedSampler shard (or, with
    ``case.join``, its contiguous share under DDP.join); the result holds the dataset
    indices of every step's batch. Ranks outside a case's subgroup skip it."""
    for size in sorted({c.ranks for c in payload["cases"] if c.ranks}):
        _torch_group_of(ctx, size)  # create subgroups up front, in the same order on every rank
    return [_torch_train(ctx, case, payload["wrap"]) for case in payload["cases"]]


def _torch_loader(ctx: WorkerContext, case: TrainCase, n: int, data: Any) -> Any:
    import torch
    from torch.utils.data import DataLoader, DistributedSampler, Subset

    if case.join:  # uneven inputs: this rank's contiguous share, as even as possible (first ranks one row more)
        share = np.array_split(np.arange(len(case.x)), n)[ctx.rank]
        return DataLoader(Subset(data, [int(i) for i in share]), batch_size=case.rank_batch)
    with torch.device("cpu"):
        sampler = DistributedSampler(data, num_replicas=n, rank=ctx.rank, shuffle=False, drop_last=case.drop_last)
    return DataLoader(data, batch_size=case.rank_batch, sampler=sampler)


def _torch_train(ctx: WorkerContext, case: TrainCase, wrap: str) -> TrainResult:
    import contextlib

    import torch
    from torch.utils.data import TensorDataset

    n = case.ranks or ctx.world_size
    if ctx.rank >= n:
        return TrainResult((), info={"skipped": True})
    group = _torch_group_of(ctx, n)
    device = ctx.state["device"]
    dtype = getattr(torch, case.dtype)
    data = TensorDataset(torch.arange(len(case.x)), torch.tensor(case.x, dtype=dtype), torch.tensor(case.y, dtype=dtype))
    loader = _torch_loader(ctx, case, n, data)
    model = torch_model(case).to(device)
    ctx.arrive(f"wrap model in {wrap} over {n} ranks")
    joined: Any = contextlib.nullcontext()
    if wrap == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=None if device == "cpu" else [device], process_group=group)
        if case.join:
            joined = model.join(divide_by_initial_world_size=case.join == "initial")
    elif wrap == "fsdp":
        from torch.distributed.fsdp import fully_shard

        mesh = None if group is None else _mesh_of(ctx, n, group)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    elif wrap != "none":  # "none": no gradient synchronisation, the meta-tests' wrong data parallelism
        raise HarnessError(f"unknown wrapper {wrap!r}")
    optimizer = torch_optimizer(case, model.parameters())
    seen = []
    with joined:
        for step, (index, x, y) in enumerate(loader):
            ctx.arrive(f"{wrap} step {step}")
            optimizer.zero_grad()
            loss = ((model(x.to(device)) - y.to(device)) ** 2).sum(dim=1).mean()
            loss.backward()
            optimizer.step()
            seen.append(tuple(int(i) for i in index))
    ctx.arrive(f"{wrap} gather weights")
    # FSDP parameters are DTensors: to_local() is this rank's shard; DDP's are plain tensors.
    shards = {"local_shapes": [tuple(p.to_local().shape if hasattr(p, "to_local") else p.shape)
                               for p in model.parameters()]}
    return TrainResult(torch_weights(list(model.parameters())), (tuple(seen),), info=shards)


def _mesh_of(ctx: WorkerContext, n: int, group: Any) -> Any:
    """A one-dimensional DeviceMesh over a subgroup, for fully_shard(mesh=...)."""
    from torch.distributed.device_mesh import DeviceMesh

    meshes = ctx.state.setdefault("meshes", {})
    if n not in meshes:
        meshes[n] = DeviceMesh.from_group(group, "cpu" if ctx.state["device"] == "cpu" else "cuda")
    return meshes[n]


# --------------------------------------------------------------------------- failures


def torch_stall(ctx: WorkerContext, spec: dict[str, Any]) -> dict[str, Any]:
    """A collective that one rank never joins: every rank creates a group with
    ``spec["timeout"]`` (new_group is itself collective), then rank ``spec["absent"]``
    sleeps ``spec["sleep"]`` seconds instead of calling all_reduce; the others call it and
    report how torch ended the call and after how long.

    A collective's return means it was enqueued, not done: NCCL returns at once and runs
    it on a stream, and a later read (``.tolist()``) would block until the watchdog kills
    the rank, a crash instead of the timeout's error. So the call is made asynchronous on
    every backend (gloo too, where it shows the same semantics without a GPU) and the rank
    waits on its work handle, the documented way to wait for completion. NCCL raises the
    timeout on that wait only with TORCH_NCCL_BLOCKING_WAIT=1, read when the group is
    created ("when TORCH_NCCL_BLOCKING_WAIT is set, this is the duration for which the
    process will block and wait for collectives to complete before throwing an exception";
    otherwise "collectives will be aborted asynchronously and the process will crash").
    ``spec["wait"] = False`` reads the result without waiting: the meta-tests' wrong code."""
    import torch
    import torch.distributed as dist

    previous = os.environ.get(BLOCKING_WAIT)
    os.environ[BLOCKING_WAIT] = "1"
    try:
        group = dist.new_group(list(range(ctx.world_size)), timeout=datetime.timedelta(seconds=float(spec["timeout"])))
    finally:
        if previous is None:
            os.environ.pop(BLOCKING_WAIT, None)
        else:
            os.environ[BLOCKING_WAIT] = previous
    if ctx.rank == spec["absent"]:
        time.sleep(float(spec["sleep"]))
        return {"absent": True}
    x = torch.ones(3, device=ctx.state["device"])
    ctx.arrive("all_reduce")
    start = time.monotonic()
    try:
        work = dist.all_reduce(x, group=group, async_op=True)
        if spec.get("wait", True):
            work.wait()
    except Exception as exc:  # broad on purpose: the outcome under test
        return {"error": f"{type(exc).__name__}: {first_line(exc)}", "elapsed": time.monotonic() - start,
                "runtime_error": isinstance(exc, RuntimeError)}
    return {"error": None, "elapsed": time.monotonic() - start, "value": x.tolist()}


BLOCKING_WAIT = "TORCH_NCCL_BLOCKING_WAIT"
