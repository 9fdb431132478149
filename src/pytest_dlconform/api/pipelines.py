"""Input pipelines: oracles for batching, shuffling buffers, partitions and worker seeds.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..checks.pipelines import (
    assert_batches_equal,
    assert_buffered_shuffle,
    assert_partition,
    assert_permutation,
    assert_worker_seeds,
    reference_batches,
    same_order_bound,
)

__all__ = [
    "assert_batches_equal",
    "assert_buffered_shuffle",
    "assert_partition",
    "assert_permutation",
    "assert_worker_seeds",
    "reference_batches",
    "same_order_bound",
]
