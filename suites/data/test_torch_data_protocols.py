"""data.torch.protocols: the base-class protocols of torch.utils.data as their docstrings and the
torch.utils.data documentation page state them: a user's map-style Dataset subclass
(__getitem__/__len__, non-integral keys with a custom Sampler, ``+`` giving a ConcatDataset), a
user's IterableDataset subclass (``+`` giving a ChainDataset, the two docstring examples of
sharding across workers and the duplication without it, drop_last per worker), and a user's
Sampler subclass (the Sampler docstring's two examples) used as ``sampler=`` and
``batch_sampler=``, with the Sampler docstring's note on ``__len__``.

Oracles: pure-Python references of the documented rules. A loader over a map-style dataset
yields ``dataset[k]`` for the keys in its sampler's order (the sampler iterated on its own),
chunked by batch_size (:func:`reference_batches`, the partial batch dropped with drop_last),
or exactly the batch sampler's lists; len(loader) follows the sampler's length. The
IterableDataset docstring's examples are reproduced as written (their outputs where the
docstring states them without IGNORE_WANT, the multiset where it says "non deterministic")
and generalised to other ranges with the docstring's own ceil split (:func:`example_shards`):
each element exactly once with sharding, exactly num_workers times without. Workers are
forked processes: at most two, tiny datasets, ``timeout`` set so a hung worker is an error.

Out of scope (api_out_of_scope.toml): the DataPipe names torch.utils.data still exports
(IterDataPipe, MapDataPipe, DFIterDataPipe, DataChunk, functional_datapipe, ...), which the
torch.utils.data documentation page does not document and whose documentation (torchdata)
deprecated and removed them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence
from pytest_dlconform.api.pipelines import assert_permutation, reference_batches

CLAIM = "data.torch.protocols"
TIMEOUT = 60  # seconds per batch from a worker


# ------------------------------------------------------------------ references


def chunk(order: Sequence[Any], batch_size: int | None, drop_last: bool) -> list[list[Any]]:
    """What a loader yields for a sampler order: single items (batch_size None) or consecutive
    chunks of batch_size, the short last one dropped with drop_last."""
    if batch_size is None:
        return [[k] for k in order]
    return [[order[i] for i in idx] for idx in reference_batches(len(order), batch_size, drop_last)]


def reference_loader_len(n: int, batch_size: int | None, drop_last: bool) -> int:
    """len(DataLoader): the sampler's length, divided by batch_size, rounded down with drop_last
    and up without (the DataLoader docstring's warning on len(dataloader))."""
    if batch_size is None:
        return n
    return n // batch_size if drop_last else math.ceil(n / batch_size)


def example_shards(start: int, end: int, workers: int) -> list[list[int]]:
    """The IterableDataset docstring's split: per_worker = ceil((end - start) / num_workers);
    worker w reads range(start + w * per_worker, min(start + (w + 1) * per_worker, end))."""
    if workers == 0:
        return [list(range(start, end))]
    per = int(math.ceil((end - start) / float(workers)))  # noqa: RUF046 (as the docstring writes it)
    return [list(range(start + w * per, min(start + w * per + per, end))) for w in range(workers)]


def assert_each_exactly(got: Sequence[int], values: Sequence[int], copies: int, *, what: str) -> None:
    """Every value yielded exactly ``copies`` times and nothing else, naming the first value
    whose count is off."""
    __tracebackhide__ = True
    counts = Counter(got)
    for v in sorted(set(values) | set(counts)):
        want = copies if v in set(values) else 0
        if counts[v] != want:
            raise AssertionError(f"{what}: element {v} yielded {counts[v]} times, but should be {want} "
                                 f"(each of {sorted(set(values))} exactly {copies} times); got {list(got)}")
    assert_permutation(got, [v for v in values for _ in range(copies)], what=what)


def check_order(got: Sequence[Sequence[Any]], want: Sequence[Sequence[Any]], *, what: str) -> None:
    __tracebackhide__ = True
    if [list(b) for b in got] != [list(b) for b in want]:
        raise AssertionError(f"{what}: the loader yielded {[list(b) for b in got]}, but the documented order is "
                             f"{[list(b) for b in want]}")


# ------------------------------------------------------------------ user subclasses


def _classes(torch):
    """The user subclasses, written the way the docstrings say (defined after torch is imported:
    the classes subclass torch's)."""
    from torch.utils.data import Dataset, IterableDataset, Sampler

    class Squares(Dataset):
        """Map-style: __getitem__ and __len__."""

        def __init__(self, n: int, offset: int = 0) -> None:
            self.n, self.offset = n, offset

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int) -> int:
            if not 0 <= i < self.n:
                raise IndexError(i)
            return (self.offset + i) ** 2

    class Keyed(Dataset):
        """Map-style with non-integral keys: a dict of words to their lengths."""

        def __init__(self, words: Sequence[str]) -> None:
            self.table = {w: len(w) for w in words}

        def __len__(self) -> int:
            return len(self.table)

        def __getitem__(self, key: str) -> int:
            return self.table[key]

    class Stream(IterableDataset):
        """Iterable-style: __iter__ only (and __len__ where given, for the length estimate)."""

        def __init__(self, items: Sequence[int], with_len: bool = False) -> None:
            self.items = list(items)
            self.with_len = with_len

        def __iter__(self) -> Iterator[int]:
            return iter(self.items)

        def __len__(self) -> int:
            if not self.with_len:
                raise TypeError("no len")
            return len(self.items)

    class AscendingLength(Sampler):
        """The Sampler docstring's AccedingSequenceLengthSampler (argsort made stable, so ties
        keep their index order and the reference is deterministic)."""

        def __init__(self, data: Sequence[str]) -> None:
            self.data = data

        def __len__(self) -> int:
            return len(self.data)

        def __iter__(self) -> Iterator[int]:
            sizes = torch.tensor([len(x) for x in self.data])
            yield from torch.argsort(sizes, stable=True).tolist()

    class AscendingLengthBatches(Sampler):
        """The Sampler docstring's AccedingSequenceLengthBatchSampler (stable argsort)."""

        def __init__(self, data: Sequence[str], batch_size: int) -> None:
            self.data, self.batch_size = data, batch_size

        def __len__(self) -> int:
            return (len(self.data) + self.batch_size - 1) // self.batch_size

        def __iter__(self) -> Iterator[list[int]]:
            sizes = torch.tensor([len(x) for x in self.data])
            for batch in torch.chunk(torch.argsort(sizes, stable=True), len(self)):
                yield batch.tolist()

    class KeysByLength(Sampler):
        """Yields a keyed dataset's keys (strings), shortest first."""

        def __init__(self, words: Sequence[str]) -> None:
            self.words = list(words)

        def __len__(self) -> int:
            return len(self.words)

        def __iter__(self) -> Iterator[str]:
            return iter(sorted(self.words, key=lambda w: (len(w), w)))

    class Reversed(Sampler):
        """A sampler without __len__ ('The __len__ method isn't strictly required by DataLoader')."""

        def __init__(self, n: int) -> None:
            self.n = n

        def __iter__(self) -> Iterator[int]:
            return iter(range(self.n - 1, -1, -1))

    return {"Squares": Squares, "Keyed": Keyed, "Stream": Stream, "AscendingLength": AscendingLength,
            "AscendingLengthBatches": AscendingLengthBatches, "KeysByLength": KeysByLength, "Reversed": Reversed}


def _values(torch, batch: Any) -> list[Any]:
    """A yielded batch (a tensor, a list, or a single converted item) as a list of Python values."""
    if isinstance(batch, torch.Tensor):
        return batch.reshape(-1).tolist()
    if isinstance(batch, list):
        return [v.item() if isinstance(v, torch.Tensor) else v for v in batch]
    return [batch]


def _epoch(torch, loader) -> list[list[Any]]:
    with torch.device("cpu"):
        return [_values(torch, b) for b in loader]


# ------------------------------------------------------------------ map-style Dataset


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize(("batch_size", "drop_last"), [(None, False), (1, False), (3, False), (3, True)])
def test_map_style_subclass_yields_its_items_in_sampler_order(torch, batch_size, drop_last):
    """A Dataset subclass with __getitem__ and __len__: the default sequential sampler gives keys
    0..n-1, and the loader yields dataset[k] in that order, chunked by batch_size."""
    from torch.utils.data import DataLoader

    n = 8
    ds = _classes(torch)["Squares"](n)
    got = _epoch(torch, DataLoader(ds, batch_size=batch_size, drop_last=drop_last))
    want = chunk([ds[k] for k in range(n)], batch_size, drop_last)
    check_order(got, want, what=f"Dataset subclass, batch_size={batch_size}, drop_last={drop_last}")
    loader = DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
    assert len(loader) == reference_loader_len(n, batch_size, drop_last), (
        f"len(DataLoader) {len(loader)}, but should be {reference_loader_len(n, batch_size, drop_last)} "
        f"from len(dataset) = {n}")
    evidence.covers("Dataset+subclass")


@pytest.mark.claim(CLAIM)
@budget(15)
@given(sizes=st.lists(st.integers(0, 5), min_size=2, max_size=4))
def test_dataset_add_gives_a_concat_dataset(torch, sizes):
    """Dataset.__add__: a + b is a ConcatDataset of [a, b] (a + b + c nests, left first): its
    length is the sum and item i walks a's items, then b's, then c's."""
    from torch.utils.data import ConcatDataset

    squares = _classes(torch)["Squares"]
    parts = [squares(s, offset=10 * k) for k, s in enumerate(sizes)]
    total = parts[0] + parts[1]
    assert isinstance(total, ConcatDataset) and list(total.datasets) == parts[:2], (
        f"Dataset + Dataset gave {type(total).__name__}, but should be ConcatDataset([a, b])")
    for p in parts[2:]:
        total = total + p
        assert isinstance(total, ConcatDataset), f"ConcatDataset + Dataset gave {type(total).__name__}"
    want = [p[i] for p in parts for i in range(len(p))]
    got = [total[i] for i in range(len(total))]
    assert len(total) == sum(sizes) and got == want, (
        f"sum of datasets of sizes {sizes}: items {got} (len {len(total)}), but should be {want}")
    evidence.covers("Dataset+add")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("batch_size", [None, 2])
def test_non_integral_keys_with_a_custom_sampler(torch, batch_size):
    """'To make it work with a map-style dataset with non-integral indices/keys, a custom sampler
    must be provided': the loader fetches dataset[key] for the keys the sampler yields, in order."""
    from torch.utils.data import DataLoader

    cls = _classes(torch)
    words = ["kiwi", "fig", "banana", "apple", "plum", "cherry", "date"]
    ds, sampler = cls["Keyed"](words), cls["KeysByLength"](words)
    keys = list(sampler)
    got = _epoch(torch, DataLoader(ds, sampler=sampler, batch_size=batch_size))
    check_order(got, chunk([ds[k] for k in keys], batch_size, False),
                what=f"string keys from a custom sampler, batch_size={batch_size}")
    evidence.covers("Dataset+non-integral-keys+sampler")


# ------------------------------------------------------------------ Sampler subclasses

WORDS = st.lists(st.text(alphabet="ab", max_size=6), min_size=1, max_size=12)


@pytest.mark.claim(CLAIM)
@budget(15)
@given(words=WORDS, batch_size=st.one_of(st.none(), st.integers(1, 4)), drop_last=st.booleans())
def test_user_sampler_as_sampler(torch, words, batch_size, drop_last):
    """The Sampler docstring's index sampler as ``sampler=``: the loader yields the items at the
    sampler's indices in the sampler's order, chunked by batch_size (drop_last drops a short last
    batch); len(loader) is len(sampler), divided by batch_size ('len(dataloader) heuristic is
    based on the length of the sampler used')."""
    from torch.utils.data import DataLoader

    drop_last = drop_last and batch_size is not None
    cls = _classes(torch)
    sampler = cls["AscendingLength"](words)
    order = list(sampler)
    loader = DataLoader(list(range(100, 100 + len(words))), sampler=sampler, batch_size=batch_size, drop_last=drop_last)
    got = _epoch(torch, loader)
    check_order(got, chunk([100 + k for k in order], batch_size, drop_last),
                what=f"sampler=AscendingLength({words}), batch_size={batch_size}, drop_last={drop_last}")
    want_len = reference_loader_len(len(sampler), batch_size, drop_last)
    assert len(loader) == want_len, f"len(DataLoader) {len(loader)}, but should be {want_len} from len(sampler)"
    evidence.covers("Sampler+sampler=")


@pytest.mark.claim(CLAIM)
@budget(15)
@given(words=WORDS, batch_size=st.integers(1, 5))
def test_user_sampler_as_batch_sampler(torch, words, batch_size):
    """The Sampler docstring's batch sampler as ``batch_sampler=``: each yielded batch holds the
    items at one of its lists of indices, in order; len(loader) is len(batch_sampler)."""
    from torch.utils.data import DataLoader

    batches = _classes(torch)["AscendingLengthBatches"](words, batch_size)
    want = [[100 + k for k in b] for b in batches]
    loader = DataLoader(list(range(100, 100 + len(words))), batch_sampler=batches)
    check_order(_epoch(torch, loader), want, what=f"batch_sampler=AscendingLengthBatches({words}, {batch_size})")
    assert len(loader) == len(batches), f"len(DataLoader) {len(loader)}, but should be len(batch_sampler) {len(batches)}"
    evidence.covers("Sampler+batch_sampler=")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("kind", ["sampler", "batch_sampler"])
def test_user_sampler_order_with_workers(torch, kind):
    """'For map-style datasets, the main process generates the indices using sampler and sends
    them to the workers': with two workers the loader yields the same batches in the same order."""
    from torch.utils.data import DataLoader

    cls = _classes(torch)
    words = ["abab", "a", "", "bbb", "ab", "aaaaa", "b", "ba", "abb"]
    data = list(range(100, 100 + len(words)))
    if kind == "sampler":
        sampler = cls["AscendingLength"](words)
        want = chunk([100 + k for k in sampler], 2, False)
        loader = DataLoader(data, sampler=sampler, batch_size=2, num_workers=2, timeout=TIMEOUT)
    else:
        batches = cls["AscendingLengthBatches"](words, 2)
        want = [[100 + k for k in b] for b in batches]
        loader = DataLoader(data, batch_sampler=batches, num_workers=2, timeout=TIMEOUT)
    check_order(_epoch(torch, loader), want, what=f"{kind}= with num_workers=2")
    evidence.covers(f"Sampler+{kind}=+num_workers=2")


@pytest.mark.claim(CLAIM)
def test_sampler_without_len(torch):
    """Sampler docstring: 'The __len__ method isn't strictly required by DataLoader, but is
    expected in any calculation involving the length of a DataLoader': a sampler without it
    drives iteration, and len(loader) cannot be computed (TypeError, what len() of an object
    without __len__ raises)."""
    from torch.utils.data import DataLoader

    loader = DataLoader(list(range(10, 17)), sampler=_classes(torch)["Reversed"](7), batch_size=3)
    check_order(_epoch(torch, loader), chunk(list(range(16, 9, -1)), 3, False), what="sampler without __len__")
    with pytest.raises(TypeError):
        len(loader)
    evidence.covers("Sampler+no-__len__")


# ------------------------------------------------------------------ IterableDataset


@pytest.mark.claim(CLAIM)
@budget(15)
@given(parts=st.lists(st.lists(st.integers(0, 99), max_size=5), min_size=2, max_size=4),
       batch_size=st.one_of(st.none(), st.integers(1, 4)), drop_last=st.booleans())
def test_iterable_subclass_and_add_give_a_chain(torch, parts, batch_size, drop_last):
    """An IterableDataset subclass (__iter__ only): a + b is a ChainDataset yielding a's items,
    then b's (a + b + c likewise); the loader without workers yields the stream in order,
    chunked by batch_size ('dataset_iter = iter(dataset); for indices in batch_sampler: yield
    collate_fn([next(dataset_iter) for _ in indices])'), a short last batch dropped with
    drop_last; with __len__ defined, len(loader) is the documented estimate len(dataset) /
    batch_size rounded by drop_last."""
    from torch.utils.data import ChainDataset, DataLoader

    drop_last = drop_last and batch_size is not None
    stream = _classes(torch)["Stream"]
    total = stream(parts[0]) + stream(parts[1])
    assert isinstance(total, ChainDataset), f"IterableDataset + IterableDataset gave {type(total).__name__}"
    for p in parts[2:]:
        total = total + stream(p)
        assert isinstance(total, ChainDataset), f"ChainDataset + IterableDataset gave {type(total).__name__}"
    flat = [v for p in parts for v in p]
    assert list(total) == flat, f"the chain of {parts} yielded {list(total)}, but should be {flat}"
    got = _epoch(torch, DataLoader(total, batch_size=batch_size, drop_last=drop_last))
    check_order(got, chunk(flat, batch_size, drop_last), what=f"IterableDataset chain, batch_size={batch_size}")
    sized = DataLoader(stream(flat, with_len=True), batch_size=batch_size, drop_last=drop_last)
    want_len = reference_loader_len(len(flat), batch_size, drop_last)
    assert len(sized) == want_len, (f"len(DataLoader(IterableDataset of len {len(flat)}, batch_size={batch_size}, "
                                    f"drop_last={drop_last})) {len(sized)}, but the documented estimate is {want_len}")
    evidence.covers("IterableDataset+subclass", "IterableDataset+add", "IterableDataset+len-estimate")


def _example_classes(torch):
    """The two MyIterableDataset classes and the worker_init_fn of the IterableDataset docstring,
    as written there."""
    from torch.utils.data import IterableDataset

    class Example1(IterableDataset):
        def __init__(self, start: int, end: int) -> None:
            super().__init__()
            assert end > start, "this example only works with end >= start"
            self.start, self.end = start, end

        def __iter__(self) -> Iterator[int]:
            import torch as t

            worker_info = t.utils.data.get_worker_info()
            if worker_info is None:  # single-process data loading, return the full iterator
                iter_start, iter_end = self.start, self.end
            else:  # in a worker process: split workload
                per_worker = int(math.ceil((self.end - self.start) / float(worker_info.num_workers)))  # noqa: RUF046 (as the docstring writes it)
                iter_start = self.start + worker_info.id * per_worker
                iter_end = min(iter_start + per_worker, self.end)
            return iter(range(iter_start, iter_end))

    class Example2(IterableDataset):
        def __init__(self, start: int, end: int) -> None:
            super().__init__()
            assert end > start, "this example only works with end >= start"
            self.start, self.end = start, end

        def __iter__(self) -> Iterator[int]:
            return iter(range(self.start, self.end))

    return Example1, Example2


def example_worker_init_fn(worker_id: int) -> None:
    """The IterableDataset docstring's worker_init_fn: configure this worker's dataset copy."""
    import torch

    worker_info = torch.utils.data.get_worker_info()
    dataset = worker_info.dataset  # the dataset copy in this worker process
    overall_start, overall_end = dataset.start, dataset.end
    per_worker = int(math.ceil((overall_end - overall_start) / float(worker_info.num_workers)))  # noqa: RUF046 (as the docstring writes it)
    dataset.start = overall_start + worker_info.id * per_worker
    dataset.end = min(dataset.start + per_worker, overall_end)


RANGES = [(3, 7), (0, 11), (5, 6), (2, 9)]


def _ints(torch, loader) -> list[int]:
    with torch.device("cpu"):
        return [int(v) for b in loader for v in _values(torch, b)]


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_docstring_example1_shards_in_iter(torch, workers):
    """IterableDataset docstring, Example 1 (splitting the workload in __iter__ with
    get_worker_info): the loader 'should give same set of data as range(start, end)', each
    element exactly once, with 0 and 2 workers; without workers in order ([3, 4, 5, 6] for
    range(3, 7), as shown), with workers in some order ('non deterministic')."""
    from torch.utils.data import DataLoader

    example1, _ = _example_classes(torch)
    for start, end in RANGES:
        kw = {"num_workers": workers, "timeout": TIMEOUT} if workers else {}
        got = _ints(torch, DataLoader(example1(start, end), **kw))
        shards = example_shards(start, end, workers)
        assert_each_exactly(got, list(range(start, end)), 1,
                            what=f"Example 1, range({start}, {end}), num_workers={workers}")
        if workers == 0:
            assert got == list(range(start, end)), f"Example 1 without workers yielded {got}, not range({start}, {end})"
        evidence.note(**{f"order_{start}_{end}": got, f"shards_{start}_{end}": shards})
    evidence.covers(f"IterableDataset+example1+num_workers={workers}")


@pytest.mark.claim(CLAIM)
def test_iterable_docstring_example2_duplicates_then_shards(torch):
    """IterableDataset docstring, Example 2: without sharding 'Directly doing multi-process
    loading yields duplicate data' ([3, 3, 4, 4, 5, 5, 6, 6] with 2 workers: every element
    exactly twice), and its worker_init_fn configures each copy so each element comes once
    ([3, 5, 4, 6], as shown); without workers [3, 4, 5, 6]. The outputs the docstring shows
    are checked as shown; other ranges by their multisets."""
    from torch.utils.data import DataLoader

    _, example2 = _example_classes(torch)
    kw = {"num_workers": 2, "timeout": TIMEOUT}
    shown = {"num_workers=0": ([3, 4, 5, 6], {}), "duplicated": ([3, 3, 4, 4, 5, 5, 6, 6], kw),
             "worker_init_fn": ([3, 5, 4, 6], {**kw, "worker_init_fn": example_worker_init_fn})}
    for name, (want, options) in shown.items():
        got = _ints(torch, DataLoader(example2(3, 7), **options))
        assert got == want, f"IterableDataset docstring Example 2 ({name}): {got}, but the docstring shows {want}"
    for start, end in RANGES[1:]:
        values = list(range(start, end))
        assert_each_exactly(_ints(torch, DataLoader(example2(start, end), **kw)), values, 2,
                            what=f"Example 2 without sharding, range({start}, {end}), 2 workers")
        evidence.covers("IterableDataset+duplicated-without-sharding")
        assert_each_exactly(_ints(torch, DataLoader(example2(start, end), worker_init_fn=example_worker_init_fn, **kw)),
                            values, 1, what=f"Example 2 with its worker_init_fn, range({start}, {end}), 2 workers")
        evidence.covers("IterableDataset+worker_init_fn-sharding")


def _round_robin(torch):
    from torch.utils.data import IterableDataset, get_worker_info

    class RoundRobin(IterableDataset):
        """Element i goes to worker i % num_workers; each item says which worker yielded it."""

        def __init__(self, n: int) -> None:
            self.n = n

        def __iter__(self) -> Iterator[tuple[int, int]]:
            info = get_worker_info()
            start, step = (0, 1) if info is None else (info.id, info.num_workers)
            return iter([(i, -1 if info is None else info.id) for i in range(start, self.n, step)])

    return RoundRobin


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("drop_last", [False, True])
def test_iterable_drop_last_drops_each_workers_last_batch(torch, drop_last):
    """'in multi-process loading, the drop_last argument drops the last non-full batch of each
    worker's iterable-style dataset replica': with 2 workers and a sharded stream, each worker's
    batches chunk its own shard, and with drop_last each worker's short last batch is gone."""
    from torch.utils.data import DataLoader

    n, batch, workers = 17, 3, 2
    loader = DataLoader(_round_robin(torch)(n), batch_size=batch, drop_last=drop_last, num_workers=workers,
                        timeout=TIMEOUT)
    with torch.device("cpu"):
        got = [([int(v) for v in b[0]], {int(w) for w in b[1]}) for b in loader]
    for w in range(workers):
        shard = list(range(w, n, workers))
        mine = [idx for idx, ws in got if ws == {w}]
        want = chunk(shard, batch, drop_last)
        assert mine == want, (f"drop_last={drop_last}: worker {w}'s batches {mine}, but should be {want} "
                              f"(its shard {shard} chunked by {batch})")
    assert all(len(ws) == 1 for _, ws in got), "a batch mixed workers"
    evidence.covers(f"IterableDataset+drop_last={drop_last}+num_workers=2")
