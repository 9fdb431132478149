"""Meta-tests for the distributed modes of issue 13: every ReduceOp over 2 and 3 ranks, the
tf.distribute reduction grid, DistributedSampler's index lists and DDP.join.

The oracles are fed right implementations (numpy simulations of each collective, rank by
rank) that must pass, and deliberately wrong twins that must fail with a message naming
what is wrong: an all_reduce that returns SUM for MAX on rank 1 only, a MEAN that always
divides by 2, BXOR computed as BOR, a reduce_scatter that hands rank i the chunk of rank
i+1, a PREMUL_SUM or an integer AVG that gloo computes instead of refusing, samplers that
pad with the last index or shard in blocks, and (real ranks) a DDP.join run judged with the
other divisor and a rank whose MAX is SUM.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks import reductions as oracle
from pytest_dlconform.harness import distribution as dist
from pytest_dlconform.harness.distribution import cases as dcases
from pytest_dlconform.harness.distribution import collectives as C
from pytest_dlconform.harness.distribution.payloads import Outcome, ReduceCase
from pytest_dlconform.harness.groups import LocalGroup
from pytest_dlconform.harness.rank import WorkerContext

NUMPY_OPS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sum": lambda a: a.sum(0), "product": lambda a: a.prod(0), "min": lambda a: a.min(0), "max": lambda a: a.max(0),
    "avg": lambda a: a.mean(0), "premul_sum": lambda a: (C.PREMUL_FACTOR * a).sum(0),
    "band": lambda a: np.bitwise_and.reduce(a, 0), "bor": lambda a: np.bitwise_or.reduce(a, 0),
    "bxor": lambda a: np.bitwise_xor.reduce(a, 0),
}


def _simulate(case: ReduceCase, rank: int, backend: str = "gloo",
              op_on: Callable[[str, int], str] = lambda op, rank: op,
              chunk_of: Callable[[int, int], int] = lambda rank, n: rank,
              ops: dict[str, Callable[[np.ndarray], np.ndarray]] = NUMPY_OPS) -> Outcome:
    """What a correct backend gives ``rank`` (or a wrong one, through the two hooks)."""
    if C.expected_refusal(case, backend) is not None:
        return Outcome(error="RuntimeError: refused as documented")
    data = np.stack([np.asarray(v) for v in case.values]).astype(case.dtype)
    if case.api == "all_gather":
        return Outcome(tuple(data), info={"dtype": case.dtype})
    if case.api == "broadcast":
        return Outcome((data[case.src],), info={"dtype": case.dtype})
    if case.api.startswith("reduce_scatter"):
        data = data[:, chunk_of(rank, case.replicas)]
    out = ops[op_on(case.op, rank)](data).astype(case.dtype)
    return Outcome((out,), info={"dtype": case.dtype})


def _judge(cases: list[ReduceCase], **hooks: Any) -> None:
    for case in cases:
        for rank in range(case.replicas):
            if C.receives(case, rank):
                C.check_outcome(case, _simulate(case, rank, **hooks), rank, "gloo")


GRID = C.grid(seed=7)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_any_two_reduce_ops_differ_on_the_witness(n):
    assert C.distinct_results(n) == []


def test_the_grid_covers_every_op_api_rank_count_and_root():
    seen = {(c.replicas, c.api, c.op) for c in GRID}
    for n in (2, 3):
        for api in C.REDUCING:
            assert {op for (k, a, op) in seen if k == n and a == api} == set(C.ALL_OPS)
        assert {c.src for c in GRID if c.replicas == n and c.api == "reduce"} == set(range(n))
    modes = {m for c in GRID for m in C.modes_of(c)}
    assert {"replicas=2", "replicas=3", "ReduceOp.PREMUL_SUM", "ReduceOp.BXOR", "reduce_scatter_tensor"} <= modes


def test_right_collectives_pass_on_every_rank():
    _judge(GRID)


def test_all_reduce_max_as_sum_on_rank_1_only_fails_naming_rank_1():
    cases = [c for c in GRID if c.api == "all_reduce"]
    with pytest.raises(oracle.ReductionMismatch, match=r"rank 1 of 2: all_reduce\(ReduceOp.MAX\)"):
        _judge(cases, op_on=lambda op, rank: "sum" if op == "max" and rank == 1 else op)


def test_mean_dividing_by_2_always_fails_over_3_ranks():
    by_two = {**NUMPY_OPS, "avg": lambda a: a.sum(0) / 2}
    cases = [c for c in GRID if c.op == "avg" and c.dtype == "float32"]
    _judge([c for c in cases if c.replicas == 2], ops=by_two)  # over 2 ranks sum/2 is the mean: 3 ranks catch it
    with pytest.raises(oracle.ReductionMismatch, match=r"ReduceOp.AVG\) over 3 replica"):
        _judge(cases, ops=by_two)


def test_bxor_computed_as_bor_fails():
    cases = [c for c in GRID if c.op == "bxor"]
    with pytest.raises(oracle.ReductionMismatch, match=r"ReduceOp.BXOR\) over 2 ranks, int64: got .* should be"):
        _judge(cases, op_on=lambda op, rank: "bor" if op == "bxor" else op)


def test_reduce_scatter_handing_out_the_next_ranks_chunk_fails():
    cases = [c for c in GRID if c.api == "reduce_scatter"]
    with pytest.raises(oracle.ReductionMismatch, match=r"rank 0 of 2: reduce_scatter"):
        _judge(cases, chunk_of=lambda rank, n: (rank + 1) % n)


def test_reduce_checks_the_dst_only_and_fails_a_wrong_dst():
    case = next(c for c in GRID if c.api == "reduce" and c.op == "sum" and c.src == 1 and c.replicas == 3)
    assert [r for r in range(3) if C.receives(case, r)] == [1]
    wrong = Outcome((np.asarray(case.values[1]),), info={"dtype": case.dtype})  # dst kept its own input
    with pytest.raises(oracle.ReductionMismatch, match=r"rank 1 of 3: reduce, dst=1\(ReduceOp.SUM\)"):
        C.check_outcome(case, wrong, 1, "gloo")


@pytest.mark.parametrize("op, dtype", [("premul_sum", "float32"), ("avg", "int64")])
def test_gloo_computing_what_it_must_refuse_fails(op, dtype):
    case = next(c for c in GRID if c.op == op and c.dtype == dtype and c.api == "all_reduce")
    computed = Outcome((np.asarray(case.values[0]),), info={"dtype": dtype})
    with pytest.raises(oracle.ReductionMismatch, match="but should raise RuntimeError"):
        C.check_outcome(case, computed, 0, "gloo")
    with pytest.raises(oracle.ReductionMismatch, match="but should raise RuntimeError"):
        C.check_outcome(case, Outcome(error="ValueError: something else"), 0, "gloo")


def test_nccl_must_refuse_bitwise_ops():
    case = next(c for c in GRID if c.op == "band" and c.api == "all_reduce")
    with pytest.raises(oracle.ReductionMismatch, match="not available when using the NCCL backend"):
        C.check_outcome(case, _simulate(case, 0, backend="gloo"), 0, "nccl")


# ------------------------------------------------------------------ tf.distribute grid


def _tf_simulate(case: ReduceCase, mean_divisor: Callable[[int], int] = lambda n: n) -> np.ndarray:
    data = [np.asarray(v, np.float64) for v in oracle._as_dtype(case.values, case.dtype)]
    if "gather" in case.api:
        return np.concatenate(data, axis=0)
    stacked = np.stack(data) if case.axis is None else np.concatenate(data, axis=case.axis)
    count = stacked.shape[0]
    return stacked.sum(0) if case.op == "sum" else stacked.sum(0) / mean_divisor(count)


def _tf_judge(cases: list[ReduceCase], **hooks: Any) -> None:
    for case in cases:
        got = _tf_simulate(case, **hooks)
        if "gather" in case.api:
            oracle.check_gather(got.astype(case.dtype), case.values, axis=0, api=case.api, dtype=case.dtype)
        else:
            oracle.check_reduction(got, case.values, op=case.op, dtype=case.dtype, api=case.api, axis=case.axis)


def test_tf_grid_covers_every_mode_over_2_and_3_replicas():
    grid = dcases.tf_reduce_grid(3, (2, 3))
    modes = {m for c in grid for m in dcases.tf_modes_of(c)}
    assert {"replicas=2", "replicas=3", "axis=None", "axis=0", "uneven-rows", "ReduceOp.MEAN", "ReduceOp.SUM",
            "strategy.reduce", "ReplicaContext.all_reduce", "ReplicaContext.all_gather", "strategy.gather"} <= modes
    _tf_judge(grid)


def test_tf_mean_dividing_by_2_always_fails_at_3_replicas():
    grid = [c for c in dcases.tf_reduce_grid(3, (2, 3)) if c.op == "mean" and c.axis is None]
    _tf_judge([c for c in grid if c.replicas == 2], mean_divisor=lambda n: 2)
    with pytest.raises(oracle.ReductionMismatch, match=r"\(MEAN\) over 3 replica"):
        _tf_judge(grid, mean_divisor=lambda n: 2)


@pytest.mark.parametrize("rows, n, expected", [(5, 3, [2, 2, 1]), (4, 3, [2, 2, 0]), (1, 3, [1, 0, 0]), (3, 2, [2, 1]),
                                              (2, 2, [1, 1]), (6, 3, [2, 2, 2]), (7, 3, [3, 3, 1])])
def test_replica_split_of_full_and_partial_batches(rows, n, expected):
    # Full or partial (the last batch of a dataset): the split depends on the rows alone.
    assert dist.replica_split(rows, n) == expected


def test_a_partial_batch_split_as_evenly_as_a_full_one_fails():
    # 9 rows in global batches of 5 over 3 replicas: [2, 2, 1], then the partial 4 rows as [2, 2, 0];
    # 5 rows in batches of 3 over 2: [2, 1], then the partial 2 rows as [1, 1] (not [2, 0]).
    dist.check_replica_split([[2, 2, 1], [2, 2, 0]], [5, 4], 5, what="right")
    with pytest.raises(oracle.SplitMismatch, match=r"partial last global batch of 4 rows into \[2, 1, 1\] per replica, "
                                                   r"but should split it into \[2, 2, 0\]"):
        dist.check_replica_split([[2, 2, 1], [2, 1, 1]], [5, 4], 5, what="even partial")
    dist.check_replica_split([[2, 1], [1, 1]], [3, 2], 3, what="right")
    with pytest.raises(oracle.SplitMismatch, match=r"into \[2, 0\] per replica, but should split it into \[1, 1\]"):
        dist.check_replica_split([[2, 1], [2, 0]], [3, 2], 3, what="the full batch's sizes")
    with pytest.raises(oracle.SplitMismatch, match=r"full global batch of 4 rows into \[2, 1, 1\] per replica, but "
                                                   r"should split it into \[2, 2, 0\] \(per-replica batches of ceil\(4/3\)"):
        dist.check_replica_split([[2, 1, 1]], [4], 4, what="as even as possible")
    with pytest.raises(oracle.SplitMismatch, match="2 steps, but the dataset has 3 global batches"):
        dist.check_replica_split([[2, 2, 1], [2, 2, 1]], [5, 5, 4], 5, what="a lost batch")


# ------------------------------------------------------------------ DistributedSampler


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 6, 7, 10])
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_numpy_sampler_shards_equal_distributed_sampler(rows, ranks, drop_last):
    case = _train_case(rows, drop_last=drop_last)
    dist.check_sampler_reference(dist.torch_sampler_shards(case, ranks), dataset_len=rows, drop_last=drop_last,
                                 what="DistributedSampler")


def test_a_sampler_padding_with_the_last_index_fails():
    # 7 rows over 3 ranks: 9 indices, 2 extra; the documented padding repeats 0 and 1.
    wrong = [[0, 3, 6], [1, 4, 6], [2, 5, 6]]
    with pytest.raises(oracle.SplitMismatch, match=r"DistributedSampler gave the ranks .* but should give "
                                                   r"\[\[0, 3, 6\], \[1, 4, 0\], \[2, 5, 1\]\]"):
        dist.check_sampler_reference(wrong, dataset_len=7, drop_last=False, what="padding")


def test_a_sampler_sharding_in_blocks_fails():
    wrong = [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(oracle.SplitMismatch, match="rank r every 3-th index from r"):
        dist.check_sampler_reference(wrong, dataset_len=7, drop_last=True, what="blocks")


def _train_case(rows: int, **extra: Any) -> dist.TrainCase:
    rng = np.random.default_rng(rows)
    weights = (rng.normal(size=(2, 1)), np.zeros(1))
    return dist.TrainCase((2, 1), "linear", weights, rng.uniform(-1, 1, (rows, 2)), rng.uniform(-1, 1, (rows, 1)),
                          "sgd", 0.1, "float64", **extra)


# ------------------------------------------------------------------ real ranks


def max_is_sum_on_rank_1(ctx: WorkerContext, cases: list[ReduceCase]) -> list[Outcome]:
    """all_reduce(MAX) returns the SUM on rank 1 only: every rank runs both collectives (so
    they match up), rank 1 keeps the sum; ranks 0 and 2 get the right maximum."""
    import torch.distributed as tdist

    from pytest_dlconform.suites.distributed import torch_programs

    if not ctx.state.get("patched"):
        original = tdist.all_reduce

        def all_reduce(tensor: Any, op: Any = tdist.ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
            if op != tdist.ReduceOp.MAX:
                return original(tensor, op, group, async_op)
            total = tensor.clone()
            original(total, tdist.ReduceOp.SUM, group)
            work = original(tensor, op, group)
            if ctx.rank == 1:
                tensor.copy_(total)
            return work
        tdist.all_reduce = all_reduce
        ctx.state["patched"] = True
    return torch_programs.torch_collective_cases(ctx, cases)


def test_real_ranks_every_op_passes_and_a_max_as_sum_rank_fails_join_needs_its_divisor():
    from pytest_dlconform.suites.distributed import torch_programs

    group = LocalGroup.start("torch-modes", 3, timeout=90.0, setup=dist.torch_setup,
                             setup_payload={"backend": "gloo", "timeout": 60.0, "init_method": None, "threads": 1},
                             teardown=dist.torch_teardown)
    try:
        per_rank = group.run(torch_programs.torch_collective_cases, GRID, what="grid")
        for rank, outcomes in per_rank.items():
            for case, outcome in zip(GRID, outcomes):
                if C.receives(case, rank):
                    C.check_outcome(case, outcome, rank, "gloo")
        _check_join(group)  # before the patch below: DDP.join finds the last rank to join with all_reduce(MAX)
        cases = [c for c in GRID if c.api == "all_reduce" and c.op == "max"]
        per_rank = group.run(max_is_sum_on_rank_1, cases, what="max as sum")
        for rank in (0, 2):
            for case, outcome in zip(cases, per_rank[rank]):
                if C.receives(case, rank):
                    C.check_outcome(case, outcome, rank, "gloo")  # the other ranks still reduce right
        with pytest.raises(oracle.ReductionMismatch, match=r"rank 1 of \d: all_reduce\(ReduceOp.MAX\)"):
            for case, outcome in zip(cases, per_rank[1]):
                C.check_outcome(case, outcome, 1, "gloo")
    finally:
        group.close()


def _check_join(group: Any) -> None:
    """DDP.join(divide_by_initial_world_size=True) matches its reference and fails the other's."""
    from pytest_dlconform.suites.distributed import torch_programs

    case = dataclasses.replace(_train_case(7), join="initial", ranks=3, rank_batch=1, lr=0.5)
    per_rank = group.run(torch_programs.torch_train_cases, {"wrap": "ddp", "cases": [case]}, what="join")
    batches = dist.sampler_batches(case, 3)
    assert [len([s for s in batches if s[r]]) for r in range(3)] == [3, 2, 2]  # uneven inputs
    tol = oracle.step_tolerance("float64", layers=1, steps=len(batches), batch=3)
    right = dist.torch_single_process_steps(case, batches)
    other = dist.torch_single_process_steps(dataclasses.replace(case, join="effective"), batches)
    for rank in range(3):
        oracle.check_weights(per_rank[rank][0].weights, right, tol, what=f"rank {rank}")
        with pytest.raises(oracle.StepMismatch, match=f"rank {rank}"):
            oracle.check_weights(per_rank[rank][0].weights, other, tol, what=f"rank {rank}")


# ------------------------------------------------------------------ the modes ledger and known divergences


def test_a_claim_whose_tests_are_all_known_divergences_demands_no_modes():
    from pytest_dlconform.report import modes

    def test(verdict: str, divergence: str | None, covered: dict[str, int] | None = None) -> dict[str, Any]:
        return {"verdict": verdict, "divergence": divergence, "evidence": {"modes": covered or {}}}
    report = {"claims": {
        "a.diverges": {"claim": {"modes": ["optimizer=sgd"]}, "tests": [test("violated", "entry 7 (a.diverges)")]},
        "a.fails": {"claim": {"modes": ["optimizer=sgd"]}, "tests": [test("violated", None)]},
        "a.holds": {"claim": {"modes": ["x", "y"]}, "tests": [test("holds", None, {"x": 1}),
                                                              test("violated", "entry 1", {})]}}}
    led = modes.ledger(report)
    assert led is not None and "a.diverges" not in led["claims"]
    assert modes.problems(led) == ["a.fails: optimizer=sgd", "a.holds: y"]
