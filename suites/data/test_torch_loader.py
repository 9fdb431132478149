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

from pytest_dlconform.api import TEST_ALPHA, assert_frequencies, budget, evidence, scaled
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
    evidence.covers("default_collate", "batch_size=None", "batch_sampler")


def check_drop_last(torch, loader_cls, batch_sampler_cls, n: int, batch: int, drop: bool, seed: int) -> None:
    """len() and content of a loader and of its BatchSampler: ceil(n / b) batches with the
    partial last one, n // b with drop_last=True."""
    __tracebackhide__ = True
    from torch.utils.data import SequentialSampler

    ds = Rows(n, 2, seed)
    idx = reference_batches(n, batch, drop)
    want = n // batch if drop else math.ceil(n / batch)
    where = f"n={n}, batch_size={batch}, drop_last={drop}"
    sampler = batch_sampler_cls(SequentialSampler(range(n)), batch, drop)
    assert len(sampler) == want, f"len(BatchSampler) {len(sampler)} for {where}, but should be {want}"
    assert [list(b) for b in sampler] == idx, f"BatchSampler indices for {where}"
    loader = loader_cls(ds, batch_size=batch, drop_last=drop)
    assert len(loader) == want, f"len(DataLoader) {len(loader)} for {where}, but should be {want}"
    _assert_loader(_collect(torch, loader), _expected(ds, idx), f"DataLoader({where})")


@pytest.mark.claim("data.torch.loader")
@pytest.mark.parametrize("last", ["partial", "exact"])
@pytest.mark.parametrize("drop", [True, False])
@budget(4)
@given(batch=st.integers(2, 9), batches=st.integers(1, 5), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_drop_last_with_and_without_a_partial_batch(torch, drop, last, batch, batches, seed, data):
    from torch.utils.data import BatchSampler, DataLoader

    n = batch * batches + (data.draw(st.integers(1, batch - 1), label="remainder") if last == "partial" else 0)
    check_drop_last(torch, DataLoader, BatchSampler, n, batch, drop, seed)
    evidence.covers(f"drop_last={drop}+{last}")


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
    evidence.covers("num_workers>0+in_order", "in_order=False")


def check_seeded_shuffle(torch, loader_cls, ds, batch: int, seed: int, how: str) -> None:
    """shuffle=True: a permutation per epoch, a new one each epoch; seeded the same way (a
    generator= seeded with s, or torch.manual_seed(s) before the loader when no generator is
    given), two loaders yield the same sequence of epochs."""
    __tracebackhide__ = True
    n = len(ds)

    def epochs(k):
        if how == "generator":
            loader = loader_cls(ds, batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(seed))
        else:
            torch.manual_seed(seed)  # the sampler seeds itself from the global RNG at each epoch
            loader = loader_cls(ds, batch_size=batch, shuffle=True)
        return [[int(i) for b in _collect(torch, loader) for i in b[2]] for _ in range(k)]

    first = epochs(3)
    torch.manual_seed(seed + 1)  # the global RNG elsewhere: the generator's loader must not care
    again = epochs(3)
    for e, order in enumerate(first):
        assert_permutation(order, range(n), what=f"shuffled epoch {e} ({how})")
    assert first == again, f"two loaders seeded the same way ({how}) must yield the same epochs: {first} vs {again}"
    # Three epochs equal with probability (1/n!)^2 for independent uniform permutations.
    if math.factorial(n) ** 2 >= 1e6:
        assert not (first[0] == first[1] == first[2]), f"shuffle=True must reshuffle at every epoch ({how})"


@pytest.mark.claim("data.torch.shuffle")
@pytest.mark.parametrize("how", ["generator", "manual_seed"])
@budget(6)
@given(n=st.integers(2, 40), batch=st.integers(1, 8), seed=st.integers(0, 2**62))
def test_seeded_shuffle_is_a_reproducible_permutation_per_epoch(torch, how, n, batch, seed):
    from torch.utils.data import DataLoader

    check_seeded_shuffle(torch, DataLoader, Rows(n, 1, seed % 2**32), batch, seed, how)
    evidence.covers(f"shuffle+{how}", "reshuffle-per-epoch")


SAMPLERS = ["uniform-replacement", "weighted", "weighted-no-replacement"]
SAMPLER_BUDGET = 3


@pytest.mark.claim("data.torch.shuffle")
@pytest.mark.parametrize("case", SAMPLERS)
@budget(SAMPLER_BUDGET)
@given(k=st.integers(2, 40), spread=st.sampled_from([1.5, 5.0, 50.0]), seed=st.integers(0, 2**62), data=st.data())
def test_random_samplers_follow_their_distribution(torch, case, k, spread, seed, data):
    """Each example is a frequency test at TEST_ALPHA / examples, so the test's false-alarm
    probability stays <= TEST_ALPHA however many examples the profile runs."""
    g = torch.Generator().manual_seed(seed)
    weights = np.random.default_rng(seed % 2**32).uniform(1.0, spread, k)
    with torch.device("cpu"):  # samplers draw with randint/multinomial: on the generator's (CPU) device
        if case == "weighted-no-replacement":
            m = data.draw(st.integers(1, k), label="num_samples")
            idx = _sampled(torch, case, g, weights, m)
            assert len(idx) == m and len(set(idx)) == m and all(0 <= i < k for i in idx), (
                f"WeightedRandomSampler(replacement=False, num_samples={m}) over {k} gave {idx}: "
                "should be distinct indices")
            if m == k:
                assert_permutation(idx, range(k), what="WeightedRandomSampler(replacement=False, num_samples=len)")
            evidence.covers("WeightedRandomSampler+replacement=False")
            return
        idx = _sampled(torch, case, g, weights, DRAWS)
    probs = np.full(k, 1 / k) if case == "uniform-replacement" else weights / weights.sum()
    assert len(idx) == DRAWS and all(0 <= i < k for i in idx), f"{case}: {len(idx)} draws, some outside 0..{k - 1}"
    assert_frequencies(np.bincount(idx, minlength=k), probs, alpha=TEST_ALPHA / scaled(SAMPLER_BUDGET),
                       what=f"{case} sampler frequencies over {k} indices")
    evidence.covers("RandomSampler+replacement" if case == "uniform-replacement" else "WeightedRandomSampler+replacement=True")


def _sampled(torch, case, g, w: np.ndarray, num: int) -> list[int]:
    from torch.utils.data import RandomSampler, WeightedRandomSampler

    k = len(w)
    if case == "uniform-replacement":
        return [int(i) for i in RandomSampler(range(k), replacement=True, num_samples=num, generator=g)]
    return [int(i) for i in WeightedRandomSampler(w.tolist(), num, replacement=case == "weighted", generator=g)]


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
    if shuffle:  # the order is a function of (seed, epoch): set_epoch makes each epoch's order
        def order(e):
            s = DistributedSampler(range(n), num_replicas=replicas, rank=0, shuffle=True, seed=seed, drop_last=drop)
            s.set_epoch(e)
            with torch.device("cpu"):
                return list(s)

        assert order(epoch) == shards[0], f"DistributedSampler(seed={seed}) after set_epoch({epoch}): order not reproducible"
        if math.factorial(n) >= 1e6 and replicas == 1:  # orders of two epochs agree w.p. 1/n!
            assert order(epoch + 1) != shards[0], "set_epoch(e + 1) repeated epoch e's order"
        evidence.covers("DistributedSampler+shuffle+set_epoch")
    evidence.covers("DistributedSampler+drop_last=True" if drop else "DistributedSampler+padding")
    sub = list(range(0, 3 * n, 3))
    with torch.device("cpu"):
        subset = list(SubsetRandomSampler(sub, generator=torch.Generator().manual_seed(seed)))
    assert_permutation(subset, sub, what="SubsetRandomSampler")
    evidence.covers("SubsetRandomSampler")


class SeedProbe:
    """Each item reports the worker it ran in, the random state there and how many items this
    worker's copy of the dataset has served (its state, kept alive by persistent workers)."""

    def __init__(self) -> None:
        self.served = 0

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        import os

        import torch

        self.served += 1
        info = torch.utils.data.get_worker_info()
        return {"worker": -1 if info is None else info.id, "seed": -1 if info is None else info.seed,
                "initial": torch.initial_seed(), "torch": float(torch.rand(())), "py": random.random(),
                "np": float(np.random.rand()), "init_flag": getattr(self, "init_flag", -1), "served": self.served,
                "pid": os.getpid()}


def _mark_worker(worker_id: int) -> None:
    import torch

    torch.utils.data.get_worker_info().dataset.init_flag = worker_id


def check_worker_seeding(torch, make_loader, seed: int, how: str) -> dict:
    """Workers seeded base_seed + worker_id (get_worker_info().seed = torch.initial_seed()), with
    base_seed drawn from the loader's generator= or, without one, from the global RNG seeded by
    torch.manual_seed; worker_init_fn runs in each worker with its id; two loaders seeded the
    same way give the same per-worker draws (torch and Python random), different workers differ.
    ``make_loader(dataset, generator)`` builds the loader (a twin can seed it wrongly)."""
    __tracebackhide__ = True

    def run(s, elsewhere):
        if how == "generator":
            torch.manual_seed(elsewhere)  # the global RNG must not matter when a generator is given
            loader = make_loader(SeedProbe(), torch.Generator().manual_seed(s))
        else:
            torch.manual_seed(s)
            loader = make_loader(SeedProbe(), None)
        with torch.device("cpu"):
            return list(loader)

    items = run(seed, seed + 1)
    seeds = {int(it["worker"]): int(it["seed"]) for it in items}
    assert_worker_seeds(seeds, what=f"get_worker_info().seed ({how})")
    for it in items:
        assert int(it["initial"]) == int(it["seed"]), (
            f"torch.initial_seed() {int(it['initial'])} in worker, but should be its seed {int(it['seed'])}")
        assert int(it["init_flag"]) == int(it["worker"]), "worker_init_fn must run in each worker with its id"
    again = run(seed, seed + 2)
    for a, b in zip(items, again):
        assert (int(a["seed"]), float(a["torch"]), float(a["py"])) == (int(b["seed"]), float(b["torch"]), float(b["py"])), (
            f"two loaders seeded the same way ({how}) must give the same worker seeds and per-worker random draws"
        )
    first_draw = {int(it["worker"]): float(it["torch"]) for it in items[:2]}
    assert first_draw[0] != first_draw[1], "workers with different seeds drew the same first torch.rand"
    return {"numpy_draws_differ_across_workers": float(items[0]["np"]) != float(items[1]["np"])}


@pytest.mark.claim("data.torch.workers")
@pytest.mark.parametrize("how", ["generator", "manual_seed"])
def test_worker_seeds_are_base_plus_id_and_follow_the_generator(torch, dl_seed, how):
    from torch.utils.data import DataLoader

    def make(ds, generator):
        return DataLoader(ds, batch_size=None, num_workers=2, worker_init_fn=_mark_worker, generator=generator,
                          timeout=TIMEOUT)

    notes = check_worker_seeding(torch, make, dl_seed, how)
    evidence.covers(f"num_workers>0+{how}", "worker_init_fn")
    # Undocumented (the docs warn that other libraries' seeds "may be duplicated"): recorded only.
    evidence.note(**notes)


@pytest.mark.claim("data.torch.workers")
def test_main_process_loading_uses_the_global_rng(torch, dl_seed):
    """num_workers=0: no worker (get_worker_info() is None) and the dataset draws from the main
    process's RNG, so torch.manual_seed reproduces its draws."""
    from torch.utils.data import DataLoader

    def draws():
        torch.manual_seed(dl_seed)
        with torch.device("cpu"):
            return list(DataLoader(SeedProbe(), batch_size=None, num_workers=0))

    first, again = draws(), draws()
    assert all(int(it["worker"]) == -1 for it in first), "num_workers=0: get_worker_info() should be None"
    assert [float(it["torch"]) for it in first] == [float(it["torch"]) for it in again], (
        "num_workers=0: torch.manual_seed should reproduce the dataset's torch draws")
    evidence.covers("num_workers=0+manual_seed")


def check_persistent_workers(torch, loader, persistent: bool) -> None:
    """persistent_workers=True keeps the worker processes, and so their Dataset copies, alive
    between epochs; without it every epoch starts new workers with fresh copies. ``loader``
    iterates a SeedProbe with 2 workers."""
    __tracebackhide__ = True
    with torch.device("cpu"):
        epochs = [list(loader) for _ in range(2)]
    served = [{int(it["worker"]): max(int(i["served"]) for i in e if i["worker"] == it["worker"]) for it in e}
              for e in epochs]
    pids = [{int(it["worker"]): int(it["pid"]) for it in e} for e in epochs]
    if persistent:
        assert pids[1] == pids[0], f"persistent_workers=True: worker pids {pids[0]} then {pids[1]}, should persist"
        want = {w: 2 * c for w, c in served[0].items()}
        assert served[1] == want, (
            f"persistent_workers=True: items served per worker copy after two epochs {served[1]}, should be {want}")
    else:
        assert served[1] == served[0], (
            f"persistent_workers=False: the second epoch's fresh copies served {served[1]}, should restart "
            f"like the first's {served[0]}")


@pytest.mark.claim("data.torch.workers")
@pytest.mark.parametrize("persistent", [True, False])
def test_persistent_workers_keep_their_dataset_copies(torch, persistent):
    from torch.utils.data import DataLoader

    loader = DataLoader(SeedProbe(), batch_size=None, num_workers=2, persistent_workers=persistent, timeout=TIMEOUT)
    check_persistent_workers(torch, loader, persistent)
    evidence.covers(f"persistent_workers={persistent}")


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
    evidence.covers("iterable-replicated", "iterable-sharded")


def _reference_collate(ds, idx: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """default_collate's documented result for (array, int, {"id": int}) elements, in numpy:
    each field stacked along a new first dim; Python ints become int64."""
    items = [ds[i] for i in idx]  # the dataset indexed directly, as the sampler's indices say
    return (np.stack([np.asarray(x) for x, _, _ in items]), np.asarray([y for _, y, _ in items], np.int64),
            np.asarray([m["id"] for _, _, m in items], np.int64))


def check_throughput_settings(torch, loader_cls, ds, settings) -> dict[str, float]:
    """Every (batch_size, num_workers) of ``settings`` yields every field of every batch
    equal (values and dtype) to the dataset indexed in sequential order and collated by
    :func:`_reference_collate`; returns samples per second per setting (recorded, never asserted)."""
    __tracebackhide__ = True
    rates = {}
    for batch, workers in settings:
        loader = loader_cls(ds, batch_size=batch, num_workers=workers, timeout=TIMEOUT if workers else 0)
        start = time.perf_counter()
        got = _collect(torch, loader)
        rates[f"batch{batch}_workers{workers}"] = len(ds) / (time.perf_counter() - start)
        want = [_reference_collate(ds, idx) for idx in reference_batches(len(ds), batch, False)]
        what = f"batch_size={batch}, num_workers={workers}"
        assert len(got) == len(want), f"{what}: {len(got)} batches, but should be {len(want)}"
        for field, k in (("features", 0), ("labels", 1), ("ids", 2)):
            for j, (g, w) in enumerate(zip(got, want)):
                assert g[k].dtype == w[k].dtype, f"{what}: {field} of batch {j} is {g[k].dtype}, but should be {w[k].dtype}"
            assert_batches_equal([g[k] for g in got], [w[k] for w in want], what=f"{what}: {field}")
    return rates


@pytest.mark.claim("data.torch.throughput")
def test_batch_size_and_workers_change_throughput_not_content(torch, dl_seed):
    from torch.utils.data import DataLoader

    ds = Rows(512, 16, dl_seed)
    rates = check_throughput_settings(torch, DataLoader, ds, ((1, 0), (64, 0), (64, 2)))
    evidence.note(**{f"samples_per_s_{k}": round(v, 1) for k, v in rates.items()})
    evidence.covers("batch_size=1", "batch_size>1", "num_workers=0", "num_workers>0")
