"""Data-pipeline oracles: what a loader must yield, computed from the documentation alone.

The oracles work on what a pipeline produced, as numpy arrays or plain Python values, so
the same checks serve ``tf.data`` and ``torch.utils.data``:

* :func:`reference_batches`: index batches of a sequential pass (``batch_size``,
  ``drop_last``/``drop_remainder``);
* :func:`assert_batches_equal`: batch by batch, bitwise, with the first difference named;
* :func:`assert_permutation`: the same multiset of elements, order free;
* :func:`assert_buffered_shuffle`: the guarantee of a shuffle buffer of size B (the
  element at position j is one of the first j + B inputs);
* :func:`same_order_bound`: an upper bound on the probability that two independent
  buffered shuffles produce the same order, used to pick sizes at which "reshuffles
  each epoch" is checked with a false-alarm probability below 1e-6;
* :func:`assert_worker_seeds`: DataLoader workers seeded ``base_seed + worker_id``;
* :func:`assert_partition`: shards (DistributedSampler ranks, IterableDataset workers)
  that together cover the data the documented number of times.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core import evidence

__all__ = [
    "PipelineMismatch",
    "assert_batches_equal",
    "assert_buffered_shuffle",
    "assert_partition",
    "assert_permutation",
    "assert_worker_seeds",
    "reference_batches",
    "same_order_bound",
]


class PipelineMismatch(AssertionError):
    """A pipeline yielded something other than what its documentation says."""


def reference_batches(n: int, batch_size: int, drop_last: bool) -> list[list[int]]:
    """Indices of each batch of a sequential pass over n elements."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    batches = [list(range(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]
    if drop_last and batches and len(batches[-1]) < batch_size:
        batches.pop()
    return batches


def _describe(a: np.ndarray) -> str:
    return f"shape {a.shape}, dtype {a.dtype}"


def assert_batches_equal(actual: Sequence[Any], expected: Sequence[Any], *, what: str) -> None:
    """Same number of batches, each bitwise equal (shape, dtype and values) to the expected one."""
    __tracebackhide__ = True
    evidence.check(f"{what}: batch count difference", observed=abs(len(actual) - len(expected)), tolerance=0.0)
    if len(actual) != len(expected):
        sizes = [len(np.asarray(b)) if np.ndim(b) else 1 for b in actual]
        raise PipelineMismatch(
            f"{what}: {len(actual)} batches (sizes {sizes[:8]}{'...' if len(sizes) > 8 else ''}), "
            f"but should be {len(expected)}"
        )
    for i, (a, e) in enumerate(zip(actual, expected)):
        a_arr, e_arr = np.asarray(a), np.asarray(e)
        if a_arr.shape != e_arr.shape or a_arr.dtype != e_arr.dtype:
            raise PipelineMismatch(f"{what}: batch {i} has {_describe(a_arr)}, but should have {_describe(e_arr)}")
        if not np.array_equal(a_arr, e_arr):
            where = np.argwhere(a_arr != e_arr)[0] if a_arr.ndim else ()
            raise PipelineMismatch(
                f"{what}: batch {i} differs at index {tuple(int(v) for v in where)}: "
                f"{a_arr[tuple(where)].tolist()!r}, but should be {e_arr[tuple(where)].tolist()!r}"
            )


def assert_permutation(actual: Iterable[Hashable], expected: Iterable[Hashable], *, what: str) -> None:
    """The same elements with the same multiplicities, in any order."""
    __tracebackhide__ = True
    got, want = Counter(actual), Counter(expected)
    missing, extra = want - got, got - want
    evidence.check(f"{what}: elements missing or extra", observed=sum(missing.values()) + sum(extra.values()), tolerance=0.0)
    if missing or extra:
        raise PipelineMismatch(
            f"{what}: not a permutation of the input; missing {dict(list(missing.items())[:5])}, "
            f"extra {dict(list(extra.items())[:5])} (element: count)"
        )


def assert_buffered_shuffle(order: Sequence[int], n: int, buffer_size: int, *, what: str) -> None:
    """``order`` (input positions in output order) is what a shuffle buffer of size B can produce.

    tf.data.Dataset.shuffle fills a buffer with the first B elements and repeatedly
    outputs a random one of the buffer, refilling from the input: so output j is one of
    inputs 0 .. j + B - 1, and every input comes out exactly once.
    """
    __tracebackhide__ = True
    assert_permutation(order, range(n), what=what)
    late = [(j, int(i)) for j, i in enumerate(order) if int(i) >= j + buffer_size]
    evidence.check(f"{what}: outputs ahead of the buffer", observed=len(late), tolerance=0.0, buffer_size=buffer_size)
    if late:
        j, i = late[0]
        raise PipelineMismatch(
            f"{what}: output {j} is input {i}, but a buffer of {buffer_size} only holds inputs "
            f"< {j + buffer_size} at that point ({len(late)} such outputs)"
        )


def same_order_bound(n: int, buffer_size: int) -> float:
    """An upper bound on P(two independent buffered shuffles of n elements give the same order).

    At output j the buffer holds c_j = min(B, n - j) candidates, each chosen with
    probability 1/c_j; the chance that a second shuffle repeats any fixed order is at most
    prod_j 1/c_j.
    """
    log_p = -sum(math.log(min(buffer_size, n - j)) for j in range(n))
    return math.exp(log_p)


def assert_worker_seeds(seeds: Mapping[int, int], base_seed: int | None = None, *, what: str) -> int:
    """Workers ``0..k-1`` report seeds ``base + id`` for one common base; returns the base."""
    __tracebackhide__ = True
    ids = sorted(seeds)
    if ids != list(range(len(ids))):
        raise PipelineMismatch(f"{what}: worker ids {ids}, but should be 0..{len(ids) - 1}")
    bases = {seeds[i] - i for i in ids}
    base = next(iter(bases)) if len(bases) == 1 else None
    if base is None or (base_seed is not None and base != base_seed):
        raise PipelineMismatch(
            f"{what}: worker seeds {[seeds[i] for i in ids]}, but should be base_seed + worker_id"
            + (f" with base_seed {base_seed}" if base_seed is not None else " for one common base_seed")
        )
    return base


def assert_partition(shards: Sequence[Sequence[int]], n: int, *, copies: int = 1, what: str) -> None:
    """The shards together hold every index 0..n-1 exactly ``copies`` times."""
    __tracebackhide__ = True
    flat = [int(i) for shard in shards for i in shard]
    assert_permutation(flat, [i for i in range(n) for _ in range(copies)], what=what)
