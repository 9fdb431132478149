"""Oracles of the distributed claims that need more than a comparison with a reference.

:func:`stall_problems` judges the outcome of a collective that one rank never joined
(each waiting rank must raise torch's own timeout error); :func:`check_nccl_int_avg`
judges NCCL's AVG on integers from what is documented rather than from what gloo does;
:func:`check_sampler_reference` judges DistributedSampler's shards against index lists
computed without torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .payloads import Outcome, ReduceCase


def stall_problems(per_rank: dict[int, dict[str, Any]], absent: int) -> list[str]:
    """What is wrong with the waiting ranks' outcomes of :func:`torch_stall`: each must
    have raised torch's own timeout error (a RuntimeError saying it timed out)."""
    problems = []
    for rank, out in sorted(per_rank.items()):
        if rank == absent:
            continue
        if out["error"] is None:
            problems.append(f"rank {rank}: all_reduce without rank {absent} returned {out.get('value')} after "
                            f"{out['elapsed']:.1f} s, but should raise")
        elif not out.get("runtime_error") or "imed out" not in out["error"]:
            problems.append(f"rank {rank}: all_reduce without rank {absent} raised {out['error']}, but should raise "
                            "torch's timeout error (a RuntimeError)")
    return problems


def check_nccl_int_avg(case: ReduceCase, outcome: Outcome, where: str) -> None:
    """NCCL's AVG on integers, from what is documented rather than from what gloo does:
    torch.distributed.ReduceOp "AVG divides values by the world size before summing
    across ranks", all_reduce works in place (the result keeps the tensor's dtype), and
    NCCL's ncclAvg takes every ncclDataType_t, integers included. Each rank's quotient
    is an integer off the exact one by less than 1 whatever the rounding, so the sum of
    the n quotients is off the exact mean by less than n."""
    __tracebackhide__ = True
    from ...checks import reductions

    if outcome.error is not None:
        raise reductions.ReductionMismatch(f"{where}: all_reduce(AVG) on {case.dtype} raised {outcome.error}, but NCCL "
                                       "documents ncclAvg for integer types (NCCL >= 2.10)")
    reductions.check_dtype(outcome.info["dtype"], case.dtype, what=f"{where}: all_reduce(AVG) in place")
    exact = reductions.reference("mean", case.values, case.dtype)
    off = float(np.max(np.abs(np.asarray(outcome.results[0], np.float64) - exact), initial=0.0))
    from ...core import evidence

    evidence.check(f"nccl int AVG {case.dtype}", observed=off, tolerance=float(case.replicas),
                   basis="n integer quotients, each off by < 1")
    if not off < case.replicas:
        raise reductions.ReductionMismatch(f"{where}: all_reduce(AVG) on {case.dtype} is off the mean by {off:g}, but "
                                       f"should be by less than the world size {case.replicas} (integer quotients, "
                                       "divided before summing)")


def replica_split(rows: int, replicas: int) -> list[int]:
    """Rows per replica of a global batch of ``rows`` (a full batch, or fewer rows for a
    partial last one) under experimental_distribute_dataset: each batch is cut into
    per-replica batches of ceil(rows/N) rows in replica order, so the last replicas get
    fewer rows or none (the empty batches the distributed-input guide describes for partial
    batches). A batch of 4 over 3 replicas is [2, 2, 0], not [2, 1, 1] (the rebatch
    docstring's own example, "[0, 1], [2, 3], []"); a partial batch of 2 over 2 is [1, 1].
    Observed with TensorFlow 2.21."""
    per_replica = -(-rows // replicas)
    left, sizes = rows, []
    for _ in range(replicas):
        sizes.append(min(per_replica, left))
        left -= sizes[-1]
    return sizes


def check_replica_split(sizes_per_step: Sequence[Sequence[int]], batches: Sequence[int], batch: int, *,
                        what: str) -> None:
    """Each step's per-replica rows against :func:`replica_split` of its global batch."""
    __tracebackhide__ = True
    from ...checks.reductions import SplitMismatch

    for step, (sizes, rows) in enumerate(zip(sizes_per_step, batches)):
        expected = replica_split(rows, len(sizes))
        if list(sizes) != expected:
            kind = "full" if rows == batch else "partial last"
            raise SplitMismatch(f"{what}: step {step} split a {kind} global batch of {rows} rows into {list(sizes)} "
                                f"per replica, but should split it into {expected} (per-replica batches of ceil({rows}/"
                                f"{len(sizes)}) rows in replica order)")
    if len(sizes_per_step) != len(batches):
        raise SplitMismatch(f"{what}: {len(sizes_per_step)} steps, but the dataset has {len(batches)} global batches")


def check_sampler_reference(shards: list[list[int]], *, dataset_len: int, drop_last: bool, what: str) -> None:
    """DistributedSampler(shuffle=False)'s shards (one per rank): its documented contract
    (same length on every rank; drop_last=False uses every index, True repeats none) and
    the index lists computed without torch (:func:`.reference.sampler_shards`)."""
    __tracebackhide__ = True
    from ...checks import reductions
    from .reference import sampler_shards

    reductions.check_sampler_shards(shards, dataset_len=dataset_len, drop_last=drop_last, what=what)
    expected = sampler_shards(dataset_len, len(shards), drop_last)
    if [list(s) for s in shards] != expected:
        raise reductions.SplitMismatch(
            f"{what}: DistributedSampler gave the ranks {[list(s) for s in shards]}, but should give {expected} "
            f"(rank r every {len(shards)}-th index from r; drop_last=False repeats indices from the start)")


__all__ = ["check_nccl_int_avg", "check_replica_split", "check_sampler_reference", "replica_split", "stall_problems"]
