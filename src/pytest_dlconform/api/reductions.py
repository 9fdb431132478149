"""Distributed reductions: the oracles for all-reduce, gather, broadcast, batch splits and
sampler shards, and the step tolerance of replicated training.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..checks.reductions import (
    ReductionMismatch,
    StepMismatch,
    check_batch_split,
    check_broadcast,
    check_dtype,
    check_gather,
    check_gather_list,
    check_reduction,
    check_replicas_agree,
    check_sampler_shards,
    check_weights,
    split_sizes,
    step_tolerance,
)

__all__ = [
    "ReductionMismatch",
    "StepMismatch",
    "check_batch_split",
    "check_broadcast",
    "check_dtype",
    "check_gather",
    "check_gather_list",
    "check_reduction",
    "check_replicas_agree",
    "check_sampler_shards",
    "check_weights",
    "split_sizes",
    "step_tolerance",
]
