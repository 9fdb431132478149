"""Synchronous data parallelism gives the weights of one device on the global batch.

distributed.mirrored.step-equivalence: TensorFlow's custom loop under strategy.run
(OneDevice, Mirrored). distributed.multiworker.equivalence: the same loop over N worker
processes. distributed.torch.ddp-equivalence / fsdp-equivalence: DDP and FSDP2 over N
ranks with DistributedSampler. The oracle is the same model and optimizer run on one
device in this process, one step per global batch, with the loss the distributed run is
documented to compute; every replica must also hold bitwise the same weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence
from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import reductions as oracle
from pytest_dlconform.api.distribution import OPTIMIZERS, TrainCase, TrainResult, expensive, tf_loop_case, torch_case

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
    dist.check_replica_split(rows, case.global_batches, case.batch, what=what)
    oracle.check_replicas_agree(replica_weights, what=what, names=_names(case))
    expected = dist.tf_single_device_steps(case, rows)
    oracle.check_weights(weights, expected, _tolerance(case, case.steps, case.batch, handle), what=what,
                         names=_names(case))


# Per replica count, by construction (with one replica only the loss and batch modes):
# (B not divisible by N, partial last batch, global_batch_size=B) and (B divisible by N over
# 2 replicas / not over 3, default global_batch_size), optimizers in turn.
LOOP_KINDS = {2: ({"uneven": True, "partial": True, "scalings": ("global",)},
                  {"uneven": False, "partial": False, "scalings": ("default",)}),
              3: ({"uneven": True, "partial": True, "scalings": ("global",)},
                  {"uneven": True, "partial": False, "scalings": ("default",)})}


def _loop_modes(case: TrainCase, n: int) -> list[str]:
    modes = [f"optimizer={case.optimizer}", "uneven-batch" if case.batch % n else "even-batch",
             "global_batch_size=B" if case.loss_scaling == "global" else "global_batch_size=default"]
    if len(case.x) % case.batch:
        modes.append("partial-last-batch")
    return modes + ([f"replicas={n}"] if n in dist.REPLICA_COUNTS else [])


@pytest.mark.claim("distributed.mirrored.step-equivalence")
@pytest.mark.dl_strategies("one-device", "mirrored", "tpu")
@expensive(1)
@given(data=st.data())
def test_custom_loop_steps_equal_one_device(tf, dl_strategy, dl_groups, data):
    counts = [n for n in dist.REPLICA_COUNTS if n in dl_strategy.replica_counts()] if dl_strategy.name == "mirrored" else [
        dist.inprocess_strategy(dl_groups, dl_strategy).num_replicas_in_sync]
    covered: set[str] = set()
    i = 0
    for n in counts:
        strategy = dist.inprocess_strategy(dl_groups, dl_strategy, n if dl_strategy.name == "mirrored" else None)
        for kind in LOOP_KINDS.get(n, LOOP_KINDS[3]):
            case = data.draw(tf_loop_case(n, **kind), label=f"{n} replicas: {kind}")
            case = dataclasses.replace(case, optimizer=OPTIMIZERS[i % len(OPTIMIZERS)])
            i += 1
            result = tf_programs.tf_custom_loop(strategy, case)
            per_replica = [list(c) for c in zip(*result.info["replica_weights"])]
            _check_tf_loop(case, result.batches, result.weights, per_replica, f"{dl_strategy.name} over {n} replica(s)",
                           dl_strategy)
            covered.update(_loop_modes(case, n))
    evidence.covers(*sorted(covered))
    evidence.note(replicas=counts)


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
    # By construction: B not divisible by the workers with each loss scaling, and B divisible.
    kinds = [{"uneven": True, "scalings": scalings[:1]}, {"uneven": True, "scalings": scalings[-1:]},
             {"uneven": False, "scalings": scalings[-1:]}]
    cases = [data.draw(tf_loop_case(group.world_size, **kind), label=f"case {kind}") for kind in kinds]
    per_rank: dict[int, list[TrainResult]] = group.run(tf_programs.mw_custom_loop, cases, what="custom training loop")
    for i, case in enumerate(cases):
        ranks = sorted(per_rank)
        rows = [tuple(r for rank in ranks for r in per_rank[rank][i].batches[s]) for s in range(case.steps)]
        if not complete:
            rows = [(b,) for b in case.global_batches]
        weights = [per_rank[rank][i].weights for rank in ranks]
        what = f"MultiWorkerMirrored over {group.world_size} workers"
        oracle.check_replicas_agree(weights, what=f"{what}: weights of each worker", names=_names(case))
        replica_weights = [list(c) for rank in ranks for c in zip(*per_rank[rank][i].info["replica_weights"])]
        _check_tf_loop(case, rows, weights[0], replica_weights, what, dl_strategy)
        n = group.world_size
        evidence.covers("uneven-batch" if case.batch % n else "even-batch",
                        "global_batch_size=B" if case.loss_scaling == "global" else "global_batch_size=default")
    evidence.note(workers=group.world_size, cluster_start_s=dl_groups.started.get(_key(dl_strategy)))


def _key(handle: Any) -> tuple[Any, ...]:
    return (handle.framework, handle.name, handle.replicas, handle.device)


JOINS = {2: "effective", 3: "initial"}  # DDP.join(divide_by_initial_world_size=False / True)


def _torch_cases(data: Any, counts: Sequence[int], wrap: str) -> list[TrainCase]:
    """By construction per replica count: a dataset not divisible by N with drop_last False
    (padding) and True (truncation), one divisible (drop_last drawn), and for DDP uneven
    inputs under join; optimizers in turn (SGD, momentum, Adam)."""
    cases = []
    # The largest group first: a rank's first DDP/FSDP construction takes seconds (lazy
    # imports), and ranks outside a smaller subgroup would otherwise pay it later, alone,
    # while the others wait.
    for n in sorted(counts, reverse=True):
        kinds: list[dict[str, Any]] = [{"drop_last": False, "uneven": True}, {"drop_last": True, "uneven": True},
                                       {"uneven": False}]
        if wrap == "ddp":
            kinds.append({"uneven": True, "join": JOINS.get(n, "initial")})
        cases += [data.draw(torch_case(n, ranks=n, **kind), label=f"{n} ranks: {kind}") for kind in kinds]
    return [dataclasses.replace(c, optimizer=OPTIMIZERS[i % len(OPTIMIZERS)]) for i, c in enumerate(cases)]


def _torch_modes(case: TrainCase, n: int) -> list[str]:
    modes = [f"replicas={n}", f"optimizer={case.optimizer}"]
    if case.join:
        return [*modes, f"join+divide_by_initial_world_size={case.join == 'initial'}"]
    modes += [f"drop_last={case.drop_last}", "uneven-dataset" if len(case.x) % n else "even-dataset"]
    return modes + (["padding-repeats"] if len(case.x) % n and not case.drop_last else [])


def _torch_steps(handle: Any, pool: Any, timeout: float, data: Any, wrap: str) -> None:
    group = dist.group_for(pool, handle, timeout, world=dist.torch_ranks(handle))
    counts = [n for n in dist.REPLICA_COUNTS if n <= group.world_size] or [group.world_size]
    cases = _torch_cases(data, counts, wrap)
    per_rank: dict[int, list[TrainResult]] = group.run(torch_programs.torch_train_cases, {"wrap": wrap, "cases": cases},
                                                       what=f"{wrap} training")
    covered: set[str] = set()
    for i, case in enumerate(cases):
        n = case.ranks
        ranks = [r for r in sorted(per_rank) if r < n]
        what = (f"{wrap.upper()} over {n} ranks ({handle.torch_backend()}), per-rank batch {case.rank_batch}, "
                + (f"uneven inputs under join(divide_by_initial_world_size={case.join == 'initial'})" if case.join
                   else f"drop_last={case.drop_last}") + f", {_describe(case)}")
        batches = dist.sampler_batches(case, n)
        if not case.join:
            _check_sampler(case, n, what)
        for rank in ranks:
            used = list(per_rank[rank][i].batches[0])
            mine = [step[rank] for step in batches if step[rank]]
            assert used == mine, (f"{what}: rank {rank} trained on {used}, but its "
                                  f"{'share' if case.join else 'DistributedSampler shard'} in batches of "
                                  f"{case.rank_batch} is {mine}")
        oracle.check_replicas_agree([per_rank[r][i].weights for r in ranks], what=f"{what}: ranks", names=_names(case))
        if wrap == "fsdp":
            _check_sharded({r: per_rank[r] for r in ranks}, i, case, what)
        expected = dist.torch_single_process_steps(case, batches)
        tol = _tolerance(case, len(batches), n * case.rank_batch, handle)
        for rank in ranks:
            oracle.check_weights(per_rank[rank][i].weights, expected, tol, what=f"{what}: rank {rank}", names=_names(case))
        covered.update(_torch_modes(case, n))
    evidence.covers(*sorted(covered))
    evidence.note(ranks=counts, backend=handle.torch_backend())


def _check_sampler(case: TrainCase, n: int, what: str) -> None:
    """DistributedSampler's shards: its documented contract, and the numpy index lists."""
    __tracebackhide__ = True
    dist.check_sampler_reference(dist.torch_sampler_shards(case, n), dataset_len=len(case.x),
                                 drop_last=case.drop_last, what=what)


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
@budget(1)
@given(data=st.data())
def test_ddp_steps_equal_one_process(torch, dl_strategy, dl_groups, dl_timeout, data):
    _torch_steps(dl_strategy, dl_groups, dl_timeout, data, "ddp")


@pytest.mark.claim("distributed.torch.fsdp-equivalence")
@pytest.mark.dl_strategies("fsdp")
@budget(1)
@given(data=st.data())
def test_fsdp_steps_equal_one_process(torch, dl_strategy, dl_groups, dl_timeout, data):
    _torch_steps(dl_strategy, dl_groups, dl_timeout, data, "fsdp")
