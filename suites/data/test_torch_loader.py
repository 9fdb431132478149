"""data.torch.*: torch.utils.data.DataLoader and its samplers, as their documentation states them.

Oracles: numpy slicing of the generated dataset in sampler order (checks.pipelines), exact
binomial bounds for random samplers (checks.stats), and the documented worker seeding
(base_seed + worker_id). Worker processes are forked (the Linux default); each loader
iteration with workers starts them anew, so those tests use few, small configurations.
Loaders run under `torch.device("cpu")`: data loading happens on the host whatever the
test's device, and a forked worker must not touch a GPU.
"""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import TEST_ALPHA, assert_frequencies, budget, evidence
from pytest_dlconform.api.pipelines import (
    assert_batches_equal,
    assert_partition,
    assert_permutation,
    assert_worker_seeds,
    reference_batches,
)

DRAWS = 60000  # per random-sampler frequency test
TIMEOUT = 60  # seconds per batch from workers: a hung worker is an error, not a hang


class Rows:
    """A map-style dataset: (features row, integer label, {"id": index})."""

    def __init__(self, n: int, width: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.x = rng.normal(size=(n, width)).astype(np.float32)
        self.y = rng.integers(0, 10, n)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], int(self.y[i]), {"id": i}


def _collect(torch, loader):
    with torch.device("cpu"):
        return [(b[0].numpy(), b[1].numpy(), b[2]["id"].numpy()) for b in loader]


def _expected(ds: Rows, batches: list[list[int]]):
    return [(ds.x[idx], ds.y[idx].astype(np.int64), np.asarray(idx, np.int64)) for idx in batches]


def _assert_loader(got, want, what):
    for field, k in (("features", 0), ("labels", 1), ("ids", 2)):
        assert_batches_equal([g[k] for g in got], [w[k] for w in want], what=f"{what}: {field}")


@pytest.mark.claim("data.torch.loader")
@budget(15)
@given(n=st.integers(0, 40), width=st.integers(1, 3), batch=st.integers(1, 9), drop=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_loader_batches_in_order_with_default_collate(torch, n, width, batch, drop, seed):
    from torch.utils.data import DataLoader

    ds = Rows(n, width, seed)
    loader = DataLoader(ds, batch_size=batch, drop_last=drop)
    idx = reference_batches(n, batch, drop)
    assert len(loader) == (n // batch if drop else math.ceil(n / batch)), f"len(loader) {len(loader)} for n={n}, batch={batch}"
    _assert_loader(_collect(torch, loader), _expected(ds, idx), f"DataLoader(batch_size={batch}, drop_last={drop})")
    with torch.device("cpu"):
        single = list(DataLoader(ds, batch_size=None))  # automatic batching off: elements as they are, converted
        assert len(single) == n and all(np.array_equal(s[0].numpy(), ds.x[i]) for i, s in enumerate(single))
    from torch.utils.data import BatchSampler, SequentialSampler

    bs = BatchSampler(SequentialSampler(range(n)), batch, drop)
    assert [list(b) for b in bs] == idx, "BatchSampler(SequentialSampler) indices"
    _assert_loader(_collect(torch, DataLoader(ds, batch_sampler=bs)), _expected(ds, idx), "DataLoader(batch_sampler=...)")


@pytest.mark.claim("data.torch.loader")
@pytest.mark.parametrize("workers", [1, 2])
def test_workers_yield_the_same_batches_in_the_same_order(torch, dl_seed, workers):
    from torch.utils.data import DataLoader

    ds = Rows(37, 3, dl_seed)
    kwargs = {"batch_size": 4, "drop_last": False}
    base = _collect(torch, DataLoader(ds, **kwargs))
    ordered = _collect(torch, DataLoader(ds, num_workers=workers, timeout=TIMEOUT, **kwargs))
    _assert_loader(ordered, base, f"num_workers={workers} vs 0")
    loose = _collect(torch, DataLoader(ds, num_workers=workers, timeout=TIMEOUT, in_order=False, **kwargs))
    assert_permutation([tuple(b[2]) for b in loose], [tuple(b[2]) for b in base], what=f"in_order=False, {workers} workers")


@pytest.mark.claim("data.torch.shuffle")
@budget(10)
@given(n=st.integers(2, 40), batch=st.integers(1, 8), seed=st.integers(0, 2**62))
def test_seeded_shuffle_is_a_reproducible_permutation_per_epoch(torch, n, batch, seed):
    from torch.utils.data import DataLoader

    ds = Rows(n, 1, seed % 2**32)

    def epochs(k):
        loader = DataLoader(ds, batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(seed))
        return [[int(i) for b in _collect(torch, loader) for i in b[2]] for _ in range(k)]

    first, again = epochs(3), epochs(3)
    for e, order in enumerate(first):
        assert_permutation(order, range(n), what=f"shuffled epoch {e}")
    assert first == again, "two loaders with equally seeded generators must yield the same epochs"
    # Three epochs equal with probability (1/n!)^2 for independent uniform permutations.
    if math.factorial(n) ** 2 >= 1e6:
        assert not (first[0] == first[1] == first[2]), "shuffle=True must reshuffle at every epoch"


@pytest.mark.claim("data.torch.shuffle")
@pytest.mark.parametrize("case", ["uniform-replacement", "weighted", "weighted-no-replacement"])
def test_random_samplers_follow_their_distribution(torch, dl_seed, case):
    g = torch.Generator().manual_seed(dl_seed)
    k = 12
    with torch.device("cpu"):  # samplers draw with randint/multinomial: on the generator's (CPU) device
        idx, probs = _sampled(torch, case, g, k, dl_seed)
    if probs is None:
        assert_permutation(idx, range(k), what="WeightedRandomSampler(replacement=False, num_samples=len)")
        return
    assert len(idx) == DRAWS and all(0 <= i < k for i in idx)
    assert_frequencies(np.bincount(idx, minlength=k), probs, alpha=TEST_ALPHA, what=f"{case} sampler frequencies")


def _sampled(torch, case, g, k, dl_seed):
    from torch.utils.data import RandomSampler, WeightedRandomSampler

    if case == "uniform-replacement":
        return [int(i) for i in RandomSampler(range(k), replacement=True, num_samples=DRAWS, generator=g)], np.full(k, 1 / k)
    w = np.random.default_rng(dl_seed).uniform(0.1, 5, k)
    if case == "weighted":
        return [int(i) for i in WeightedRandomSampler(w.tolist(), DRAWS, replacement=True, generator=g)], w / w.sum()
    return [int(i) for i in WeightedRandomSampler(w.tolist(), k, replacement=False, generator=g)], None


@pytest.mark.claim("data.torch.shuffle")
@budget(12)
@given(n=st.integers(1, 30), replicas=st.integers(1, 4), drop=st.booleans(), shuffle=st.booleans(),
       seed=st.integers(0, 2**31 - 1), epoch=st.integers(0, 3))
def test_distributed_sampler_splits_evenly(torch, n, replicas, drop, shuffle, seed, epoch):
    from torch.utils.data import DistributedSampler, SubsetRandomSampler

    shards = []
    for rank in range(replicas):
        s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop)
        s.set_epoch(epoch)
        with torch.device("cpu"):  # shuffle=True draws randperm with a CPU generator
            shards.append(list(s))
    per = n // replicas if drop and n % replicas else math.ceil(n / replicas)
    assert all(len(s) == per for s in shards), f"shard sizes {[len(s) for s in shards]}, but should all be {per}"
    flat = [i for s in shards for i in s]
    if drop:
        assert len(set(flat)) == len(flat), "drop_last=True: no index twice"
    else:
        assert set(flat) == set(range(n)), "drop_last=False: every index in some shard (padding repeats some)"
    if replicas * per == n:
        assert_partition(shards, n, what="evenly divisible data: shards partition it")
    sub = list(range(0, 3 * n, 3))
    with torch.device("cpu"):
        subset = list(SubsetRandomSampler(sub, generator=torch.Generator().manual_seed(seed)))
    assert_permutation(subset, sub, what="SubsetRandomSampler")


class SeedProbe:
    """Each item reports the worker it ran in and the random state there."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        import torch

        info = torch.utils.data.get_worker_info()
        return {"worker": info.id, "seed": info.seed, "initial": torch.initial_seed(),
                "torch": float(torch.rand(())), "py": random.random(), "np": float(np.random.rand()),
                "init_flag": getattr(info.dataset, "init_flag", -1)}


def _mark_worker(worker_id: int) -> None:
    import torch

    torch.utils.data.get_worker_info().dataset.init_flag = worker_id


@pytest.mark.claim("data.torch.workers")
def test_worker_seeds_are_base_plus_id_and_follow_the_generator(torch, dl_seed):
    from torch.utils.data import DataLoader

    def run(seed):
        loader = DataLoader(SeedProbe(), batch_size=None, num_workers=2, worker_init_fn=_mark_worker,
                            generator=torch.Generator().manual_seed(seed), timeout=TIMEOUT)
        with torch.device("cpu"):
            return list(loader)

    items = run(dl_seed)
    seeds = {int(it["worker"]): int(it["seed"]) for it in items}
    assert_worker_seeds(seeds, what="get_worker_info().seed")
    for it in items:
        assert int(it["initial"]) == int(it["seed"]), (
            f"torch.initial_seed() {int(it['initial'])} in worker, but should be its seed {int(it['seed'])}")
        assert int(it["init_flag"]) == int(it["worker"]), "worker_init_fn must run in each worker with its id"
    again = run(dl_seed)
    for a, b in zip(items, again):
        assert (float(a["torch"]), float(a["py"])) == (float(b["torch"]), float(b["py"])), (
            "equally seeded generators must give the same per-worker random draws"
        )
    first_draw = {int(it["worker"]): float(it["torch"]) for it in items[:2]}
    assert first_draw[0] != first_draw[1], "workers with different seeds drew the same first torch.rand"
    evidence.note(numpy_draws_differ_across_workers=float(items[0]["np"]) != float(items[1]["np"]))


def _stream_class(torch):
    from torch.utils.data import IterableDataset, get_worker_info

    class Stream(IterableDataset):
        def __init__(self, n: int, shard: bool) -> None:
            self.n, self.shard = n, shard

        def __iter__(self):
            info = get_worker_info()
            if not self.shard or info is None:
                return iter(range(self.n))
            return iter(range(info.id, self.n, info.num_workers))

    return Stream


@pytest.mark.claim("data.torch.workers")
def test_iterable_dataset_is_replicated_unless_sharded(torch):
    from torch.utils.data import DataLoader

    stream = _stream_class(torch)
    with torch.device("cpu"):
        replicated = [int(v) for v in DataLoader(stream(11, shard=False), batch_size=None, num_workers=2, timeout=TIMEOUT)]
        sharded = [int(v) for v in DataLoader(stream(11, shard=True), batch_size=None, num_workers=2, timeout=TIMEOUT)]
    assert_partition([replicated], 11, copies=2, what="IterableDataset without sharding, 2 workers")
    assert_partition([sharded], 11, what="IterableDataset sharded by get_worker_info(), 2 workers")


@pytest.mark.claim("data.torch.throughput")
def test_batch_size_and_workers_change_throughput_not_content(torch, dl_seed):
    from torch.utils.data import DataLoader

    ds = Rows(512, 16, dl_seed)
    reference = sorted(int(i) for b in _collect(torch, DataLoader(ds, batch_size=1)) for i in b[2])
    rates = {}
    for batch, workers in ((1, 0), (64, 0), (64, 2)):
        loader = DataLoader(ds, batch_size=batch, num_workers=workers, timeout=TIMEOUT if workers else 0)
        start = time.perf_counter()
        got = _collect(torch, loader)
        rates[f"batch{batch}_workers{workers}"] = len(ds) / (time.perf_counter() - start)
        assert_permutation([int(i) for b in got for i in b[2]], reference, what=f"batch_size={batch}, num_workers={workers}")
    evidence.note(**{f"samples_per_s_{k}": round(v, 1) for k, v in rates.items()})
