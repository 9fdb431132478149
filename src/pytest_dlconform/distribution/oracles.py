"""Oracles of the distributed claims that need more than a comparison with a reference.

:func:`stall_problems` judges the outcome of a collective that one rank never joined
(each waiting rank must raise torch's own timeout error); :func:`check_nccl_int_avg`
judges NCCL's AVG on integers from what is documented rather than from what gloo does.
"""

from __future__ import annotations

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
    from ..checks import reductions

    if outcome.error is not None:
        raise reductions.ReductionMismatch(f"{where}: all_reduce(AVG) on {case.dtype} raised {outcome.error}, but NCCL "
                                       "documents ncclAvg for integer types (NCCL >= 2.10)")
    reductions.check_dtype(outcome.info["dtype"], case.dtype, what=f"{where}: all_reduce(AVG) in place")
    exact = reductions.reference("mean", case.values, case.dtype)
    off = float(np.max(np.abs(np.asarray(outcome.results[0], np.float64) - exact), initial=0.0))
    from .. import evidence

    evidence.check(f"nccl int AVG {case.dtype}", observed=off, tolerance=float(case.replicas),
                   basis="n integer quotients, each off by < 1")
    if not off < case.replicas:
        raise reductions.ReductionMismatch(f"{where}: all_reduce(AVG) on {case.dtype} is off the mean by {off:g}, but "
                                       f"should be by less than the world size {case.replicas} (integer quotients, "
                                       "divided before summing)")


__all__ = ["check_nccl_int_avg", "stall_problems"]
