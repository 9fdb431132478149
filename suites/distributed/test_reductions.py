"""Cross-replica reductions equal numpy on the per-replica values.

distributed.mirrored.reduce: strategy.reduce, ReplicaContext.all_reduce / all_gather and
strategy.gather under the default, OneDevice, Mirrored (1..N of the run's replicas) and
MultiWorkerMirrored (N worker processes) strategies.
distributed.torch.collectives: all_reduce / all_gather / broadcast over N ranks and over
subgroups of 1..N ranks.

Each hypothesis example is a batch of cases, run in one call of the pooled cluster.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence
from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import reductions as oracle
from pytest_dlconform.api.distribution import (
    TF_APIS,
    TF_DTYPES,
    TORCH_APIS,
    TORCH_DTYPES,
    Outcome,
    ReduceCase,
    collectives,
    reduce_batches,
    tf_modes_of,
    tf_reduce_grid,
)

from . import tf_programs, torch_programs

CASES_PER_CALL = 8


def _check(case: ReduceCase, outcome: Outcome, where: str, *, expected_dtype: str) -> None:
    """One replica's (or rank's) results of one case against numpy."""
    __tracebackhide__ = True
    what = f"{where}: {case.api}"
    if outcome.error is not None:
        raise oracle.ReductionMismatch(f"{what}({case.op or ''}) on {case.dtype} {[v.shape for v in case.values]} "
                                       f"raised {outcome.error}")
    oracle.check_dtype(outcome.info["dtype"], expected_dtype, what=what)
    if case.api == "all_gather":  # torch: a list with one tensor per rank
        oracle.check_gather_list(outcome.results, case.values, api=case.api, dtype=case.dtype)
        return
    for result in outcome.results:
        if "gather" in case.api:
            oracle.check_gather(result, case.values, axis=case.axis or 0, api=case.api, dtype=case.dtype)
        elif case.api == "broadcast":
            oracle.check_broadcast(result, case.values, src=case.src, api=case.api, dtype=case.dtype)
        else:
            oracle.check_reduction(result, case.values, op=case.op, dtype=case.dtype, api=case.api, axis=case.axis)


def _tf_expected_dtype(case: ReduceCase) -> str:
    # Observed precise truth: a MEAN of integers that divides (over several replicas, or
    # along an axis) is a true division and returns float64; over one replica and without
    # an axis nothing is divided and the integer dtype stays.
    divides = case.replicas > 1 or case.axis is not None
    return "float64" if case.op == "mean" and case.dtype.startswith("int") and divides else case.dtype


def _tf_outcomes(handle: Any, pool: Any, timeout: float, cases: Sequence[ReduceCase]) -> dict[str, list[Outcome]]:
    """Outcomes per place (a worker, or this process), in case order."""
    if handle.name == "multi-worker":
        per_rank = dist.group_for(pool, handle, timeout).run(tf_programs.mw_reduce, list(cases), what="reductions")
        return {f"worker {rank}": outs for rank, outs in per_rank.items()}
    outcomes: list[Outcome | None] = [None] * len(cases)
    by_replicas: dict[int, list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        by_replicas[case.replicas].append(i)
    for replicas, indices in by_replicas.items():
        strategy = dist.inprocess_strategy(pool, handle, replicas)
        for i, outcome in zip(indices, tf_programs.tf_reduce_cases(strategy, [cases[i] for i in indices])):
            outcomes[i] = outcome
    return {"this process": [o for o in outcomes if o is not None]}


def _tf_replica_counts(handle: Any, pool: Any, timeout: float) -> st.SearchStrategy[int]:
    if handle.name == "multi-worker":
        return st.just(dist.group_for(pool, handle, timeout).world_size)
    if handle.name == "mirrored":
        return st.sampled_from(handle.replica_counts())
    if handle.name == "tpu":
        dist.tpu_strategy()  # reports "not applicable: no TPU" with TensorFlow's error
    return st.just(1)


@pytest.mark.claim("distributed.mirrored.reduce")
@pytest.mark.dl_strategies("default", "one-device", "mirrored", "multi-worker", "tpu")
@budget(4)
@given(data=st.data())
def test_tf_cross_replica_reductions_equal_numpy(tf, dl_strategy, dl_groups, dl_timeout, data):
    replicas = _tf_replica_counts(dl_strategy, dl_groups, dl_timeout)
    cases = data.draw(reduce_batches(TF_APIS, TF_DTYPES, replicas, CASES_PER_CALL), label="cases")
    for where, outcomes in _tf_outcomes(dl_strategy, dl_groups, dl_timeout, cases).items():
        for case, outcome in zip(cases, outcomes):
            _check(case, outcome, f"{dl_strategy.name}, {where}", expected_dtype=_tf_expected_dtype(case))


@pytest.mark.claim("distributed.mirrored.reduce")
@pytest.mark.dl_strategies("mirrored")
@budget(1)
@given(seed=st.integers(0, 2**32 - 1))
def test_tf_every_reduction_mode_over_2_and_3_replicas(tf, dl_strategy, dl_groups, seed):
    """By construction: SUM and MEAN, axis None and 0, every reducing and gathering API,
    over 2 and 3 logical devices (3: the non-power-of-two MEAN)."""
    counts = [n for n in dist.REPLICA_COUNTS if n in dl_strategy.replica_counts()]
    missing = sorted(set(dist.REPLICA_COUNTS) - set(counts))
    cases = tf_reduce_grid(seed, counts)
    covered: set[str] = set()
    for where, outcomes in _tf_outcomes(dl_strategy, dl_groups, 0.0, cases).items():
        for case, outcome in zip(cases, outcomes):
            _check(case, outcome, f"{dl_strategy.name}, {where}", expected_dtype=_tf_expected_dtype(case))
            covered.update(tf_modes_of(case))
    evidence.covers(*sorted(covered))
    if missing:  # GPUs only (a CPU run always has 3 logical devices): the ledger shows the mode unchecked
        evidence.note(not_run=f"MirroredStrategy over {missing} replicas: this run has {max(dl_strategy.replica_counts())} "
                              f"{dl_strategy.device} device(s) (--dl-replicas={dl_strategy.replicas})")


@pytest.mark.claim("distributed.mirrored.reduce")
def test_tf_reduce_ops_are_sum_and_mean_only(tf):
    """tf.distribute.ReduceOp documents SUM and MEAN; MAX is torch's, not TensorFlow's."""
    names = sorted(op.name for op in tf.distribute.ReduceOp)
    assert names == ["MEAN", "SUM"], f"tf.distribute.ReduceOp members are {names}, but should be MEAN and SUM"
    evidence.covers("ReduceOp-members")


@pytest.mark.claim("distributed.torch.collectives")
@pytest.mark.dl_strategies("ddp")
@budget(1)
@given(seed=st.integers(0, 2**32 - 1))
def test_torch_every_reduce_op_on_every_rank_over_2_and_3_ranks(torch, dl_strategy, dl_groups, dl_timeout, seed):
    """By construction: every documented ReduceOp x all_reduce, reduce (every rank as dst),
    reduce_scatter, reduce_scatter_tensor, plus all_gather and broadcast (every src), over 2
    and 3 ranks, each rank's result checked against numpy over all ranks' inputs."""
    group = dist.group_for(dl_groups, dl_strategy, dl_timeout, world=dist.torch_ranks(dl_strategy))
    counts = [n for n in dist.REPLICA_COUNTS if n <= group.world_size]
    cases = collectives.grid(seed, counts=counts)
    if dl_strategy.device == "gpu":  # ranks share one GPU over gloo: only all_reduce and broadcast exist there
        cases = [c for c in cases if c.api in dist.TORCH_GLOO_CUDA]
    per_rank = group.run(torch_programs.torch_collective_cases, cases, what="every ReduceOp on every collective")
    backend = dl_strategy.torch_backend()
    covered: set[str] = set()
    for rank, outcomes in sorted(per_rank.items()):
        for case, outcome in zip(cases, outcomes):
            if collectives.receives(case, rank):
                collectives.check_outcome(case, outcome, rank, backend)
                covered.update(collectives.modes_of(case))
    evidence.covers(*sorted(covered))
    evidence.note(backend=backend, world_size=group.world_size, cases=len(cases),
                  not_applicable_on_gloo={"ReduceOp.PREMUL_SUM": collectives.DOC_PREMUL} if backend == "gloo" else {})
    missing = sorted(set(dist.REPLICA_COUNTS) - set(counts))
    if missing:  # GPUs or torchrun only (a local CPU group has 3 ranks): the ledger shows the mode unchecked
        evidence.note(not_run=f"{missing} ranks: this group has {group.world_size} (--dl-replicas={dl_strategy.replicas})")


@pytest.mark.claim("distributed.torch.collectives")
@pytest.mark.dl_strategies("ddp")
@budget(4)
@given(data=st.data())
def test_torch_collectives_equal_numpy(torch, dl_strategy, dl_groups, dl_timeout, data):
    group = dist.group_for(dl_groups, dl_strategy, dl_timeout, world=dist.torch_ranks(dl_strategy))
    apis = TORCH_APIS
    if dl_strategy.device == "gpu":  # ranks share one GPU over gloo: all_gather is not implemented there
        apis = {api: ops for api, ops in TORCH_APIS.items() if api in dist.TORCH_GLOO_CUDA}
        evidence.note(not_applicable=f"{sorted(set(TORCH_APIS) - set(apis))}: {dist.GLOO_CUDA_REASON}")
    cases = data.draw(reduce_batches(apis, TORCH_DTYPES, st.integers(1, group.world_size), 2 * CASES_PER_CALL),
                      label="cases")
    per_rank = group.run(torch_programs.torch_collective_cases, cases, what="collectives")
    backend = dl_strategy.torch_backend()
    for rank, outcomes in per_rank.items():
        for case, outcome in zip(cases, outcomes):
            if outcome.info.get("skipped"):
                continue  # this rank is not in the case's subgroup
            where = f"{backend}, rank {rank} of {case.replicas}"
            if case.op == "mean" and case.dtype.startswith("int"):
                if backend == "gloo":
                    _check_int_avg_raises(case, outcome, where)
                else:
                    dist.check_nccl_int_avg(case, outcome, where)
                continue
            _check(case, outcome, where, expected_dtype=case.dtype)


def _check_int_avg_raises(case: ReduceCase, outcome: Outcome, where: str) -> None:
    """AVG divides, and an integer tensor cannot hold the quotient: torch raises."""
    __tracebackhide__ = True
    if outcome.error is None or not outcome.error.startswith("RuntimeError"):
        raise oracle.ReductionMismatch(
            f"{where}: all_reduce(AVG) on {case.dtype} gave {outcome.results or outcome.error}, "
            "but should raise RuntimeError (the float quotient cannot be cast to the integer tensor)")
