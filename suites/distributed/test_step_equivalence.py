"""Synchronous data parallelism gives the weights of one device on the global batch.

distributed.mirrored.step-equivalence: TensorFlow's custom loop under strategy.run
(OneDevice, Mirrored). distributed.multiworker.equivalence: the same loop over N worker
processes. distributed.torch.ddp-equivalence / fsdp-equivalence: DDP and FSDP2 over N
ranks with DistributedSampler. The oracle is the same model and optimizer run on one
device in this process, one step per global batch, with the loss the distributed run is
documented to compute; every replica must also hold bitwise the same weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence
from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import reductions as oracle
from pytest_dlconform.api.distribution import TrainCase, TrainResult, expensive, tf_loop_case, torch_case

from . import tf_programs, torch_programs


def _names(case: TrainCase) -> list[str]:
    return [f"{kind} {i}" for i in range(len(case.widths) - 1) for kind in ("kernel", "bias")]


def _tolerance(case: TrainCase, steps: int, batch: int, handle: Any) -> Any:
    return oracle.step_tolerance(case.dtype, layers=len(case.widths) - 1, steps=max(1, steps), batch=batch,
                                 device=handle.device, framework=handle.framework)


def _describe(case: TrainCase) -> str:
    return (f"widths {case.widths}, {case.activation}, {case.optimizer}(lr={case.lr}), {case.dtype}, "
            f"{len(case.x)} rows")


def _check_tf_loop(case: TrainCase, rows: Sequence[Sequence[int]], weights: Sequence[Any],
                   replica_weights: Sequence[Sequence[Any]], where: str, handle: Any) -> None:
    """One distributed custom-loop run against the single-device loop."""
    __tracebackhide__ = True
    what = f"{where}: custom loop, global batch {case.batch}, loss scaling {case.loss_scaling!r}, {_describe(case)}"
    oracle.check_batch_split(rows, [case.batch] * case.steps, what=what)
    oracle.check_replicas_agree(replica_weights, what=what, names=_names(case))
    expected = dist.tf_single_device_steps(case, rows)
    oracle.check_weights(weights, expected, _tolerance(case, case.steps, case.batch, handle), what=what,
                         names=_names(case))


@pytest.mark.claim("distributed.mirrored.step-equivalence")
@pytest.mark.dl_strategies("one-device", "mirrored", "tpu")
@expensive(2)
@given(data=st.data())
def test_custom_loop_steps_equal_one_device(tf, dl_strategy, dl_groups, data):
    strategy = dist.inprocess_strategy(dl_groups, dl_strategy)
    n = strategy.num_replicas_in_sync
    cases = data.draw(st.lists(tf_loop_case(n), min_size=2, max_size=2), label="cases")
    for case in cases:
        result = tf_programs.tf_custom_loop(strategy, case)
        per_replica = [list(c) for c in zip(*result.info["replica_weights"])]
        _check_tf_loop(case, result.batches, result.weights, per_replica, f"{dl_strategy.name} over {n} replica(s)",
                       dl_strategy)
    evidence.note(replicas=n)


@pytest.mark.claim("distributed.multiworker.equivalence")
@pytest.mark.dl_strategies("multi-worker")
@expensive(2)
@given(data=st.data())
def test_multiworker_custom_loop_equals_one_device(tf, dl_strategy, dl_groups, dl_timeout, data):
    group = dist.group_for(dl_groups, dl_strategy, dl_timeout)
    complete = len(group.local_ranks) == group.world_size
    # Inside an outer cluster this process sees only its own worker's split, so only the
    # split-independent loss scaling (global_batch_size=B) has a computable oracle here.
    scalings = ("global", "default") if complete else ("global",)
    cases = data.draw(st.lists(tf_loop_case(group.world_size, scalings=scalings), min_size=3, max_size=3), label="cases")
    per_rank: dict[int, list[TrainResult]] = group.run(tf_programs.mw_custom_loop, cases, what="custom training loop")
    for i, case in enumerate(cases):
        ranks = sorted(per_rank)
        rows = [tuple(r for rank in ranks for r in per_rank[rank][i].batches[s]) for s in range(case.steps)]
        if not complete:
            rows = [(case.batch,)] * case.steps
        weights = [per_rank[rank][i].weights for rank in ranks]
        what = f"MultiWorkerMirrored over {group.world_size} workers"
        oracle.check_replicas_agree(weights, what=f"{what}: weights of each worker", names=_names(case))
        replica_weights = [list(c) for rank in ranks for c in zip(*per_rank[rank][i].info["replica_weights"])]
        _check_tf_loop(case, rows, weights[0], replica_weights, what, dl_strategy)
    evidence.note(workers=group.world_size, cluster_start_s=dl_groups.started.get(_key(dl_strategy)))


def _key(handle: Any) -> tuple[Any, ...]:
    return (handle.framework, handle.name, handle.replicas, handle.device)


def _torch_steps(handle: Any, pool: Any, timeout: float, data: Any, wrap: str) -> None:
    group = dist.group_for(pool, handle, timeout)
    n = group.world_size
    cases = data.draw(st.lists(torch_case(n), min_size=6, max_size=6), label="cases")
    per_rank: dict[int, list[TrainResult]] = group.run(torch_programs.torch_train_cases, {"wrap": wrap, "cases": cases},
                                                       what=f"{wrap} training")
    for i, case in enumerate(cases):
        what = (f"{wrap.upper()} over {n} ranks ({handle.torch_backend()}), per-rank batch {case.rank_batch}, "
                f"drop_last={case.drop_last}, {_describe(case)}")
        batches = dist.sampler_batches(case, n)
        shards = [[ix for step in batches for ix in step[r]] for r in range(n)]
        oracle.check_sampler_shards(shards, dataset_len=len(case.x), drop_last=case.drop_last, what=what)
        for rank in sorted(per_rank):
            used = list(per_rank[rank][i].batches[0])
            assert used == [step[rank] for step in batches], (
                f"{what}: rank {rank} trained on {used}, but its DistributedSampler shard in batches of "
                f"{case.rank_batch} is {[step[rank] for step in batches]}")
        oracle.check_replicas_agree([per_rank[r][i].weights for r in sorted(per_rank)], what=f"{what}: ranks",
                                    names=_names(case))
        if wrap == "fsdp":
            _check_sharded(per_rank, i, case, what)
        expected = dist.torch_single_process_steps(case, batches)
        tol = _tolerance(case, len(batches), n * case.rank_batch, handle)
        for rank in sorted(per_rank):
            oracle.check_weights(per_rank[rank][i].weights, expected, tol, what=f"{what}: rank {rank}", names=_names(case))
    evidence.note(ranks=n, backend=handle.torch_backend())


def _check_sharded(per_rank: dict[int, list[TrainResult]], i: int, case: TrainCase, what: str) -> None:
    """fully_shard splits every parameter along dim 0 across the ranks."""
    __tracebackhide__ = True
    if len(per_rank) < 2:
        return  # one rank's view cannot show the split
    full = [w.T.shape if w.ndim == 2 else w.shape for w in per_rank[0][i].weights]  # torch layout (out, in)
    for p, shape in enumerate(full):
        local = [per_rank[r][i].info["local_shapes"][p] for r in sorted(per_rank)]
        assert sum(s[0] for s in local) == shape[0] and all(tuple(s[1:]) == tuple(shape[1:]) for s in local), (
            f"{what}: parameter {p} of shape {shape} is held as local shards {local}; "
            "FSDP should split it along dim 0 across the ranks")


@pytest.mark.claim("distributed.torch.ddp-equivalence")
@pytest.mark.dl_strategies("ddp")
@budget(3)
@given(data=st.data())
def test_ddp_steps_equal_one_process(torch, dl_strategy, dl_groups, dl_timeout, data):
    _torch_steps(dl_strategy, dl_groups, dl_timeout, data, "ddp")


@pytest.mark.claim("distributed.torch.fsdp-equivalence")
@pytest.mark.dl_strategies("fsdp")
@budget(3)
@given(data=st.data())
def test_fsdp_steps_equal_one_process(torch, dl_strategy, dl_groups, dl_timeout, data):
    _torch_steps(dl_strategy, dl_groups, dl_timeout, data, "fsdp")
