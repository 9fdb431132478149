"""data.tfdata.transformations: the tf.data.Dataset transformations beyond map/batch/shuffle,
each against an independent Python reference of its docstring's semantics.

Each test first reproduces its docstring's examples (the documented contract), then
generalises over small generated inputs with hypothesis. The references are plain Python on
lists (:func:`ref_interleave`, :func:`ref_window`, :func:`ref_padded_batch`, ...); where the
documentation leaves an order open (deterministic=False, the final windows of
group_by_window, bucket flushes) the check compares multisets. sample_from_datasets'
weights are judged by exact binomial bounds at TEST_ALPHA.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import TEST_ALPHA, assert_frequencies, budget, evidence, scaled
from pytest_dlconform.api.pipelines import assert_permutation

SMALL = st.lists(st.integers(-20, 20), max_size=12)

# ------------------------------------------------------------------ references


def ref_interleave(inputs: Sequence[Sequence[Any]], cycle: int, block: int) -> list[Any]:
    """Dataset.interleave: ``cycle`` input elements open at once; cycle through them taking
    ``block`` consecutive elements from each, and "consuming the next input element each time
    it reaches the end of an iterator" (that slot is refilled when the cycle comes back to it)."""
    pending = iter(inputs)
    slots: list[Any] = [None] * cycle
    out: list[Any] = []
    i = taken = 0
    exhausted = False
    while True:
        if slots[i] is not None:
            try:
                out.append(next(slots[i]))
            except StopIteration:
                slots[i], taken, i = None, 0, (i + 1) % cycle
                continue
            taken += 1
            if taken == block:
                taken, i = 0, (i + 1) % cycle
            continue
        if not exhausted:
            nxt = next(pending, None)
            if nxt is not None:
                slots[i] = iter(nxt)
                continue
            exhausted = True
        if all(s is None for s in slots):
            return out
        taken, i = 0, (i + 1) % cycle


def ref_window(xs: Sequence[Any], size: int, shift: int, stride: int, drop: bool) -> list[list[Any]]:
    """Dataset.window: window k starts at input element k * shift and holds every stride-th
    element from there, up to ``size``; shorter windows are dropped with drop_remainder."""
    out = []
    for start in range(0, len(xs), shift):
        w = [xs[j] for j in range(start, min(len(xs), start + (size - 1) * stride + 1), stride)]
        if len(w) == size or not drop:
            out.append(w)
    return out


def ref_padded_batch(rows: Sequence[Sequence[int]], batch: int, pad_to: int | None, value: int,
                     drop: bool) -> list[list[list[int]]]:
    """Dataset.padded_batch of 1-D elements: consecutive batches, each row padded with ``value``
    to ``pad_to`` or, when unknown, to the longest row of its batch."""
    out = []
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        if drop and len(chunk) < batch:
            break
        width = pad_to if pad_to is not None else max((len(r) for r in chunk), default=0)
        out.append([list(r) + [value] * (width - len(r)) for r in chunk])
    return out


def ref_rebatch(batches: Sequence[Sequence[Any]], sizes: Sequence[int], drop: bool) -> list[list[Any]]:
    """Dataset.rebatch: unbatch, then batch cycling through ``sizes``; the last batch is dropped
    with drop_remainder if it is shorter than the size its turn asks for."""
    flat = [x for b in batches for x in b]
    out, i, k = [], 0, 0
    while i < len(flat):
        want = sizes[k % len(sizes)]
        chunk = flat[i:i + want]
        if len(chunk) < want and drop:
            break
        out.append(chunk)
        i, k = i + want, k + 1
    return out


def ref_choose(datasets: Sequence[Sequence[Any]], choices: Sequence[int], stop_on_empty: bool) -> list[Any]:
    """choose_from_datasets: the next element of datasets[c] for each choice c; an exhausted
    dataset stops the selection (stop_on_empty_dataset=True) or is skipped (False)."""
    its = [iter(d) for d in datasets]
    out = []
    for c in choices:
        v = next(its[c], None)
        if v is None:
            if stop_on_empty:
                break
            continue
        out.append(v)
    return out


def ref_group_by_window(xs: Sequence[int], key, size: int) -> list[list[int]]:
    """group_by_window with reduce_func = batch(size): windows of up to ``size`` consecutive
    elements of one key; each window is full except the final one of each key."""
    groups: dict[int, list[int]] = {}
    out = []
    for x in xs:
        g = groups.setdefault(key(x), [])
        g.append(x)
        if len(g) == size:
            out.append(list(g))
            g.clear()
    return out + [g for g in groups.values() if g]


def ref_bucket(rows: Sequence[Sequence[int]], boundaries: Sequence[int], sizes: Sequence[int],
               pad_to_boundary: bool, drop: bool) -> list[list[list[int]]]:
    """bucket_by_sequence_length: bucket i holds lengths in [boundaries[i-1], boundaries[i]);
    each bucket batches sizes[i] elements in order, padded with 0 to the longest of the batch
    (or to its boundary - 1 with pad_to_bucket_boundary); the last partial batch of each
    bucket is kept unless drop_remainder."""
    edges = [0, *boundaries, None]
    buckets: list[list[Sequence[int]]] = [[] for _ in sizes]
    out = []

    def emit(b: int, chunk: list[Sequence[int]]) -> None:
        width = edges[b + 1] - 1 if pad_to_boundary and edges[b + 1] is not None else max(len(r) for r in chunk)
        out.append([list(r) + [0] * (width - len(r)) for r in chunk])

    for r in rows:
        b = next(i for i in range(len(sizes)) if edges[i + 1] is None or len(r) < edges[i + 1])
        buckets[b].append(r)
        if len(buckets[b]) == sizes[b]:
            emit(b, buckets[b])
            buckets[b] = []
    for b, chunk in enumerate(buckets):
        if chunk and not drop:
            emit(b, chunk)
    return out


def assert_sequence(got: Sequence[Any], want: Sequence[Any], *, what: str) -> None:
    """The same elements in the same order; the first difference named."""
    __tracebackhide__ = True
    got, want = list(got), list(want)
    if got == want:
        return
    at = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    raise AssertionError(f"{what}: {len(got)} elements {got}, but should be {len(want)} elements {want} "
                         f"(first difference at position {at})")


def _ints(ds) -> list[int]:
    return [int(v) for v in ds.as_numpy_iterator()]


def _rows(ds) -> list[list[list[int]]]:
    return [np.asarray(b).tolist() for b in ds.as_numpy_iterator()]


# ------------------------------------------------------------------ interleave / flat_map


def _interleave_input(tf, lengths: Sequence[int]):
    """Input element k maps to the dataset [100k, 100k + 1, ..., 100k + lengths[k] - 1]."""
    idx = tf.data.Dataset.from_tensor_slices((np.arange(len(lengths), dtype=np.int64),
                                              np.asarray(lengths, np.int64).reshape(-1)))
    return idx, (lambda k, n: tf.data.Dataset.range(n).map(lambda v: k * 100 + v)), \
        [[100 * k + v for v in range(n)] for k, n in enumerate(lengths)]


def check_interleave(tf, interleave, lengths: Sequence[int], cycle: int, block: int, parallel: Any) -> None:
    """``interleave(ds, f, cycle, block, num_parallel_calls, deterministic)`` against
    :func:`ref_interleave`: the reference's order with deterministic=True or unset (the default
    Options.deterministic=True), the same multiset with deterministic=False, as the argument or
    through Options.deterministic=False."""
    __tracebackhide__ = True
    ds, f, inputs = _interleave_input(tf, lengths)
    want = ref_interleave(inputs, cycle, block)
    what = f"interleave(cycle_length={cycle}, block_length={block}, num_parallel_calls={parallel}) of lengths {list(lengths)}"
    for det in (None, True):
        assert_sequence(_ints(interleave(ds, f, cycle, block, parallel, det)), want, what=f"{what}, deterministic={det}")
    if parallel is None:
        return
    assert_permutation(_ints(interleave(ds, f, cycle, block, parallel, False)), want, what=f"{what}, deterministic=False")
    options = tf.data.Options()
    options.deterministic = False
    assert_permutation(_ints(interleave(ds, f, cycle, block, parallel, None).with_options(options)), want,
                       what=f"{what}, Options.deterministic=False")
    options = tf.data.Options()
    options.deterministic = False
    pinned = interleave(ds, f, cycle, block, parallel, True).with_options(options)
    assert_sequence(_ints(pinned), want, what=f"{what}, deterministic=True under Options.deterministic=False")


def _interleave(ds, f, cycle, block, parallel, det):
    return ds.interleave(f, cycle_length=cycle, block_length=block, num_parallel_calls=parallel, deterministic=det)


@pytest.mark.claim("data.tfdata.transformations")
def test_interleave_and_flat_map_docstring_examples(tf):
    D = tf.data.Dataset
    got = _ints(D.range(1, 6).interleave(lambda x: D.from_tensors(x).repeat(6), cycle_length=2, block_length=4))
    assert got == [1] * 4 + [2] * 4 + [1] * 2 + [2] * 2 + [3] * 4 + [4] * 4 + [3] * 2 + [4] * 2 + [5] * 4 + [5] * 2, got
    assert got == ref_interleave([[x] * 6 for x in range(1, 6)], 2, 4)
    flat = _ints(D.from_tensor_slices([[1, 2, 3], [4, 5, 6], [7, 8, 9]]).flat_map(D.from_tensor_slices))
    assert flat == list(range(1, 10)), flat
    evidence.covers("interleave+docstring", "flat_map")


@pytest.mark.claim("data.tfdata.transformations")
@pytest.mark.parametrize("parallel", [None, "cycle_length", "autotune"])
@budget(5)
@given(lengths=st.lists(st.integers(0, 6), max_size=6), cycle=st.integers(1, 4), block=st.integers(1, 4))
def test_interleave_order_follows_cycle_and_block(tf, parallel, lengths, cycle, block):
    # a fixed num_parallel_calls may not exceed cycle_length (interleave refuses it)
    calls = {None: None, "cycle_length": cycle, "autotune": tf.data.AUTOTUNE}[parallel]
    check_interleave(tf, _interleave, lengths, cycle, block, calls)
    ds, f, inputs = _interleave_input(tf, lengths)
    if parallel is None:  # flat_map is interleave(cycle_length=1)
        assert_sequence(_ints(ds.flat_map(f)), ref_interleave(inputs, 1, 1), what=f"flat_map of lengths {lengths}")
        evidence.covers("interleave+cycle_length+block_length", "flat_map")
    else:
        evidence.covers("interleave+num_parallel_calls+deterministic=True", "interleave+deterministic=False",
                        "interleave+Options.deterministic=False")


# ------------------------------------------------------------------ window / scan / zip


def check_window(tf, window, xs: Sequence[int], size: int, shift: int, stride: int, drop: bool) -> None:
    """``window(ds, size, shift, stride, drop_remainder)`` against :func:`ref_window`."""
    __tracebackhide__ = True
    ds = tf.data.Dataset.from_tensor_slices(np.asarray(xs, np.int64).reshape(-1))
    got = [_ints(w) for w in window(ds, size, shift, stride, drop)]
    assert_sequence(got, ref_window(xs, size, shift, stride, drop),
                    what=f"window(size={size}, shift={shift}, stride={stride}, drop_remainder={drop}) of {list(xs)}")


def _window(ds, size, shift, stride, drop):
    return ds.window(size, shift=shift, stride=stride, drop_remainder=drop)


@pytest.mark.claim("data.tfdata.transformations")
def test_window_scan_zip_docstring_examples(tf):
    D = tf.data.Dataset
    assert [_ints(w) for w in D.range(7).window(3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [_ints(w) for w in D.range(7).window(3, shift=1, drop_remainder=True)] == [[i, i + 1, i + 2] for i in range(5)]
    assert [_ints(w) for w in D.range(7).window(3, shift=1, stride=2, drop_remainder=True)] == [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
    pairs = [(_ints(a), _ints(b)) for a, b in D.from_tensor_slices(([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])).window(2)]
    assert pairs == [([1, 2], [6, 7]), ([3, 4], [8, 9]), ([5], [10])], pairs
    scanned = _ints(D.range(10).scan(tf.constant(0, tf.int64), lambda s, i: (s + i, s + i)))
    assert scanned == [0, 1, 3, 6, 10, 15, 21, 28, 36, 45], scanned
    a, b, d = D.range(1, 4), D.range(4, 7), D.range(13, 15)
    assert [(int(i), int(j)) for i, j in D.zip(a, b).as_numpy_iterator()] == [(1, 4), (2, 5), (3, 6)]
    assert [(int(i), int(j)) for i, j in D.zip(a, d).as_numpy_iterator()] == [(1, 13), (2, 14)]
    evidence.covers("window+docstring", "scan", "zip")


@pytest.mark.claim("data.tfdata.transformations")
@budget(10)
@given(xs=SMALL, size=st.integers(1, 5), shift=st.integers(1, 4), stride=st.integers(1, 3), drop=st.booleans())
def test_window_size_shift_stride_drop_remainder(tf, xs, size, shift, stride, drop):
    check_window(tf, _window, xs, size, shift, stride, drop)
    evidence.covers(f"window+drop_remainder={drop}", "window+shift+stride")


@pytest.mark.claim("data.tfdata.transformations")
@budget(8)
@given(xs=SMALL, ys=SMALL, zs=SMALL, start=st.integers(-5, 5))
def test_scan_zip_enumerate_match_python(tf, xs, ys, zs, start):
    D = tf.data.Dataset

    def ds(v):
        return D.from_tensor_slices(np.asarray(v, np.int64).reshape(-1))

    running = _ints(ds(xs).scan((tf.constant(0, tf.int64), tf.constant(1, tf.int64)),
                                lambda s, x: ((s[0] + x, s[1] * 2 % 1000), s[0] * 1000 + x * s[1])))
    want, (acc, mul) = [], (0, 1)
    for x in xs:  # output uses the old state, as scan_func(old_state, x) -> (new_state, output)
        want.append(acc * 1000 + x * mul)
        acc, mul = acc + x, mul * 2 % 1000
    assert_sequence(running, want, what=f"scan with a (sum, product) state over {xs}")
    nested = [(int(a), (int(b["u"]), int(b["v"]))) for a, b in D.zip(ds(xs), {"u": ds(ys), "v": ds(zs)}).as_numpy_iterator()]
    assert_sequence(nested, [(a, (b, c)) for a, b, c in zip(xs, ys, zs)], what="zip(a, {'u': b, 'v': c}) (shortest wins)")
    enum = [(int(i), int(v)) for i, v in ds(xs).enumerate(start=start).as_numpy_iterator()]
    assert_sequence(enum, list(enumerate(xs, start)), what=f"enumerate(start={start}) of {xs}")
    evidence.covers("scan", "zip+nested", "enumerate")


# ------------------------------------------------------------------ padded / ragged / unbatch / rebatch


def _variable_rows(tf, rows: Sequence[Sequence[int]]):
    return tf.data.Dataset.from_generator(lambda: (np.asarray(r, np.int64) for r in rows),
                                          output_signature=tf.TensorSpec([None], tf.int64))


def check_padded_batch(tf, padded_batch, rows: Sequence[Sequence[int]], batch: int, pad_to: int | None,
                       value: int | None, drop: bool) -> None:
    """``padded_batch(ds, batch, padded_shapes, padding_values, drop_remainder)`` against
    :func:`ref_padded_batch` (padding value 0 when none is given)."""
    __tracebackhide__ = True
    got = _rows(padded_batch(_variable_rows(tf, rows), batch, None if pad_to is None else [pad_to],
                             None if value is None else tf.constant(value, tf.int64), drop))
    want = ref_padded_batch(rows, batch, pad_to, 0 if value is None else value, drop)
    what = f"padded_batch({batch}, padded_shapes={pad_to}, padding_values={value}, drop_remainder={drop}) of {list(rows)}"
    assert_sequence([[list(r) for r in b] for b in got], want, what=what)


def _padded_batch(ds, batch, shapes, values, drop):
    return ds.padded_batch(batch, padded_shapes=shapes, padding_values=values, drop_remainder=drop)


ROWS = st.lists(st.lists(st.integers(1, 9), max_size=5), max_size=9)


@pytest.mark.claim("data.tfdata.transformations")
def test_padded_ragged_unbatch_rebatch_docstring_examples(tf):
    D = tf.data.Dataset
    A = D.range(1, 5, output_type=tf.int32).map(lambda x: tf.fill([x], x))
    assert _rows(A.padded_batch(2)) == [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
    assert _rows(A.padded_batch(2, padded_shapes=5)) == [[[1, 0, 0, 0, 0], [2, 2, 0, 0, 0]],
                                                         [[3, 3, 3, 0, 0], [4, 4, 4, 4, 0]]]
    assert _rows(A.padded_batch(2, padded_shapes=5, padding_values=-1)) == [
        [[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]], [[3, 3, 3, -1, -1], [4, 4, 4, 4, -1]]]
    elements = [([1, 2, 3], [10]), ([4, 5], [11, 12])]
    nested = D.from_generator(lambda: iter(elements), (tf.int32, tf.int32)).padded_batch(
        2, padded_shapes=([4], [None]), padding_values=(-1, 100))
    (x, y), = list(nested.as_numpy_iterator())
    assert x.tolist() == [[1, 2, 3, -1], [4, 5, -1, -1]] and y.tolist() == [[10, 100], [11, 12]], (x, y)
    (e1, e2), _ = list(D.zip((A, A)).padded_batch(2, padding_values=-1).as_numpy_iterator())
    assert e1.tolist() == e2.tolist() == [[1, -1], [2, 2]]
    ragged = [b.to_list() for b in D.range(6).map(lambda x: tf.range(x)).ragged_batch(2)]
    assert ragged == [[[], [0]], [[0, 1], [0, 1, 2]], [[0, 1, 2, 3], [0, 1, 2, 3, 4]]], ragged
    unb = _ints(D.from_generator(lambda: [[1, 2, 3], [1, 2], [1, 2, 3, 4]], tf.int64).unbatch())
    assert unb == [1, 2, 3, 1, 2, 1, 2, 3, 4], unb
    assert _rows(D.range(6).batch(2).rebatch(3)) == [[0, 1, 2], [3, 4, 5]]
    assert _rows(D.range(7).batch(4).rebatch(3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert _rows(D.range(7).batch(2).rebatch(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]
    assert _rows(D.range(8).batch(4).rebatch([2, 1, 1])) == [[0, 1], [2], [3], [4, 5], [6], [7]]
    evidence.covers("padded_batch+docstring", "padded_batch+nested", "ragged_batch", "unbatch", "rebatch")


@pytest.mark.claim("data.tfdata.transformations")
@budget(10)
@given(rows=ROWS, batch=st.integers(1, 4), fixed=st.booleans(), value=st.one_of(st.none(), st.integers(-9, -1)),
       drop=st.booleans())
def test_padded_batch_shapes_values_drop_remainder(tf, rows, batch, fixed, value, drop):
    check_padded_batch(tf, _padded_batch, rows, batch, 6 if fixed else None, value, drop)
    evidence.covers("padded_batch+padded_shapes=fixed" if fixed else "padded_batch+padded_shapes=None",
                    "padded_batch+padding_values" if value is not None else "padded_batch+default-padding",
                    f"padded_batch+drop_remainder={drop}")


@pytest.mark.claim("data.tfdata.transformations")
@budget(6)
@given(rows=ROWS, batch=st.integers(1, 4), drop=st.booleans(),
       sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_ragged_batch_unbatch_rebatch_match_python(tf, rows, batch, drop, sizes):
    ragged = [b.to_list() for b in _variable_rows(tf, rows).ragged_batch(batch, drop_remainder=drop)]
    want = [list(map(list, rows[i:i + batch])) for i in range(0, len(rows), batch)
            if not (drop and len(rows[i:i + batch]) < batch)]
    assert_sequence(ragged, want, what=f"ragged_batch({batch}, drop_remainder={drop}) of {rows}")
    assert_sequence(_ints(_variable_rows(tf, rows).unbatch()), [x for r in rows for x in r], what=f"unbatch of {rows}")
    flat = [x for r in rows for x in r]
    batched = tf.data.Dataset.from_tensor_slices(np.asarray(flat, np.int64).reshape(-1)).batch(batch)
    arg = sizes[0] if len(sizes) == 1 else sizes
    got = [list(map(int, b)) for b in batched.rebatch(arg, drop_remainder=drop).as_numpy_iterator()]
    assert_sequence(got, ref_rebatch([flat], sizes, drop), what=f"batch({batch}).rebatch({arg}, drop_remainder={drop})")
    evidence.covers("ragged_batch", "unbatch", "rebatch")


# ------------------------------------------------------------------ sequence operations


@pytest.mark.claim("data.tfdata.transformations")
@budget(8)
@given(xs=SMALL, ys=SMALL, count=st.integers(-1, 14), limit=st.integers(-20, 20), shards=st.integers(1, 4),
       data=st.data())
def test_concatenate_skip_take_take_while_shard_unique(tf, xs, ys, count, limit, shards, data):
    def ds(v):
        return tf.data.Dataset.from_tensor_slices(np.asarray(v, np.int64).reshape(-1))

    index = data.draw(st.integers(0, shards - 1), label="index")
    assert_sequence(_ints(ds(xs).concatenate(ds(ys))), xs + ys, what="concatenate")
    assert_sequence(_ints(ds(xs).take(count)), xs if count == -1 else xs[:count], what=f"take({count}) of {xs}")
    assert_sequence(_ints(ds(xs).skip(count)), [] if count == -1 else xs[count:], what=f"skip({count}) of {xs}")
    assert_sequence(_ints(ds(xs).take(-1)), xs, what=f"take(-1) of {xs}")  # -1: the whole dataset
    assert_sequence(_ints(ds(xs).skip(-1)), [], what=f"skip(-1) of {xs}")
    prefix = []
    for x in xs:
        if not x < limit:
            break
        prefix.append(x)
    assert_sequence(_ints(ds(xs).take_while(lambda v: v < limit)), prefix, what=f"take_while(x < {limit}) of {xs}")
    assert_sequence(_ints(ds(xs).shard(shards, index)), xs[index::shards], what=f"shard({shards}, {index}) of {xs}")
    uniq = _ints(ds(xs).unique())
    assert_permutation(uniq, set(xs), what=f"unique of {xs}")
    evidence.note(unique_keeps_first_occurrence_order=uniq == list(dict.fromkeys(xs)))
    evidence.covers("concatenate", "take", "skip", "take/skip=-1", "take/skip=k", "take_while",
                    "shard", "unique")


@pytest.mark.claim("data.tfdata.transformations")
def test_shard_unique_take_while_group_bucket_docstring_examples(tf):
    D = tf.data.Dataset
    assert [_ints(D.range(10).shard(num_shards=3, index=i)) for i in range(3)] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert sorted(_ints(D.from_tensor_slices([1, 37, 2, 37, 2, 1]).unique())) == [1, 2, 37]
    assert _ints(D.range(10).take_while(lambda x: x < 5)) == [0, 1, 2, 3, 4]
    assert [(int(p), int(e)) for p, e in D.from_tensor_slices([1, 2, 3]).enumerate(start=5).as_numpy_iterator()] == [
        (5, 1), (6, 2), (7, 3)]
    grouped = _rows(D.range(10).group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, d: d.batch(5),
                                                window_size=5))
    assert grouped == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]], grouped
    elements = [[0], [1, 2, 3, 4], [5, 6, 7], [7, 8, 9, 10, 11], [13, 14, 15, 16, 19, 20], [21, 22]]
    bucketed = _rows(D.from_generator(lambda: elements, tf.int64, output_shapes=[None]).bucket_by_sequence_length(
        element_length_func=lambda e: tf.shape(e)[0], bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2]))
    assert bucketed == [[[1, 2, 3, 4], [5, 6, 7, 0]], [[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]],
                        [[0, 0], [21, 22]]], bucketed
    evidence.covers("shard", "unique", "take_while", "enumerate", "group_by_window", "bucket_by_sequence_length")


def _as_multiset(batches: Sequence[Sequence[Any]]) -> Counter:
    return Counter(repr(b) for b in batches)


@pytest.mark.claim("data.tfdata.transformations")
@budget(6)
@given(xs=st.lists(st.integers(0, 30), max_size=16), keys=st.integers(1, 3), size=st.integers(1, 4))
def test_group_by_window_windows_per_key(tf, xs, keys, size):
    ds = tf.data.Dataset.from_tensor_slices(np.asarray(xs, np.int64).reshape(-1))
    fixed = _rows(ds.group_by_window(lambda x: x % keys, lambda k, d: d.batch(size), window_size=size))
    by_func = _rows(ds.group_by_window(lambda x: x % keys, lambda k, d: d.batch(size + 3),
                                       window_size_func=lambda k: tf.constant(size, tf.int64)))
    want = ref_group_by_window(xs, lambda x: x % keys, size)
    for got, how in ((fixed, "window_size"), (by_func, "window_size_func")):
        assert _as_multiset(got) == _as_multiset(want), (
            f"group_by_window(key x % {keys}, {how}={size}) of {xs}: windows {got}, but should be {want} (in any order)")
    evidence.note(group_by_window_order_matches_reference=fixed == want)
    evidence.covers("group_by_window", "group_by_window+window_size_func")


@pytest.mark.claim("data.tfdata.transformations")
@budget(6)
@given(rows=st.lists(st.lists(st.integers(1, 9), min_size=1, max_size=7), max_size=10),
       boundaries=st.lists(st.integers(2, 7), min_size=1, max_size=2, unique=True).map(sorted),
       sizes=st.lists(st.integers(1, 3), min_size=3, max_size=3), pad=st.booleans(), drop=st.booleans())
def test_bucket_by_sequence_length_buckets_pads_and_batches(tf, rows, boundaries, sizes, pad, drop):
    sizes = sizes[:len(boundaries) + 1]
    if pad:  # the caller must keep every length < max(boundaries) with pad_to_bucket_boundary
        rows = [r[:max(boundaries) - 1] for r in rows]
    got = _rows(_variable_rows(tf, rows).bucket_by_sequence_length(
        element_length_func=lambda e: tf.shape(e)[0], bucket_boundaries=boundaries, bucket_batch_sizes=sizes,
        pad_to_bucket_boundary=pad, drop_remainder=drop))
    want = ref_bucket(rows, boundaries, sizes, pad, drop)
    assert _as_multiset(got) == _as_multiset(want), (
        f"bucket_by_sequence_length(boundaries={boundaries}, batch_sizes={sizes}, pad_to_bucket_boundary={pad}, "
        f"drop_remainder={drop}) of {rows}: {got}, but should be {want} (in any order)")
    evidence.covers("bucket_by_sequence_length", f"bucket+pad_to_bucket_boundary={pad}", f"bucket+drop_remainder={drop}")


# ------------------------------------------------------------------ sampling and choosing


@pytest.mark.claim("data.tfdata.transformations")
@budget(10)
@given(lengths=st.lists(st.integers(0, 5), min_size=1, max_size=3), stop=st.booleans(), data=st.data())
def test_choose_from_datasets_follows_the_choices(tf, lengths, stop, data):
    datasets = [[10 * k + j for j in range(n)] for k, n in enumerate(lengths)]
    choices = data.draw(st.lists(st.integers(0, len(lengths) - 1), max_size=14), label="choices")
    D = tf.data.Dataset
    got = _ints(D.choose_from_datasets([D.from_tensor_slices(np.asarray(d, np.int64).reshape(-1)) for d in datasets],
                                       D.from_tensor_slices(np.asarray(choices, np.int64).reshape(-1)),
                                       stop_on_empty_dataset=stop))
    assert_sequence(got, ref_choose(datasets, choices, stop),
                    what=f"choose_from_datasets(lengths {lengths}, choices {choices}, stop_on_empty_dataset={stop})")
    evidence.covers(f"choose_from_datasets+stop_on_empty_dataset={stop}")


SAMPLE_BUDGET = 4
DRAWS = 6000


def check_sample_frequencies(tf, sample, weights: Sequence[float], seed: int, alpha: float) -> list[int]:
    """``sample(datasets, weights, seed)`` over endless constant datasets picks dataset i with
    probability weights[i] / sum (exact binomial bounds at ``alpha``); the same seed gives the
    same sequence, and a second epoch repeats the first (rerandomize_each_iteration defaults
    to False). Returns the first sequence."""
    __tracebackhide__ = True
    D = tf.data.Dataset
    k = len(weights)

    def build():
        return sample([D.from_tensors(tf.constant(i, tf.int64)).repeat() for i in range(k)], weights, seed).batch(DRAWS)

    def draws(ds):  # one batch of all the draws: iterating the draws one by one is slow
        return next(iter(ds)).numpy().tolist()

    ds = build()
    first = draws(ds)
    probs = np.asarray(weights) / np.sum(weights)
    assert_frequencies(np.bincount(first, minlength=k), probs, alpha=alpha,
                       what=f"sample_from_datasets(weights={[round(w, 3) for w in weights]}, seed={seed})")
    assert draws(build()) == first, f"sample_from_datasets with seed={seed} twice gave different sequences"
    assert draws(ds) == first, "a second epoch should repeat the first (rerandomize_each_iteration=False)"
    return first


def _sample(datasets, weights, seed):
    import tensorflow as tf

    return tf.data.Dataset.sample_from_datasets(datasets, weights=weights, seed=seed)


@pytest.mark.claim("data.tfdata.transformations")
@budget(SAMPLE_BUDGET)
@given(weights=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_sample_from_datasets_follows_its_weights(tf, weights, seed):
    check_sample_frequencies(tf, _sample, weights, seed, TEST_ALPHA / scaled(SAMPLE_BUDGET))
    evidence.covers("sample_from_datasets+weights", "sample_from_datasets+seed")


@pytest.mark.claim("data.tfdata.transformations")
@budget(10)
@given(lengths=st.lists(st.integers(0, 6), min_size=2, max_size=3), stop=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_sample_from_datasets_stop_on_empty_dataset(tf, lengths, stop, seed):
    """Each dataset's elements come in their order (sampling is without replacement); with
    stop_on_empty_dataset=False every element comes; with True the output stops at the first
    empty dataset drawn, so some dataset is exhausted and the rest are prefixes."""
    D = tf.data.Dataset
    datasets = [[10 * k + j for j in range(n)] for k, n in enumerate(lengths)]
    got = _ints(D.sample_from_datasets([D.from_tensor_slices(np.asarray(d, np.int64).reshape(-1)) for d in datasets],
                                       seed=seed, stop_on_empty_dataset=stop))
    per = [[v for v in got if v // 10 == k] for k in range(len(lengths))]
    what = f"sample_from_datasets(lengths {lengths}, stop_on_empty_dataset={stop}, seed={seed}) gave {got}"
    for k, d in enumerate(datasets):
        assert per[k] == d[:len(per[k])], f"{what}: dataset {k}'s elements {per[k]} out of order"
    if stop:
        assert any(len(p) == len(d) for p, d in zip(per, datasets)), f"{what}: stopped before any dataset was empty"
    else:
        assert_permutation(got, [v for d in datasets for v in d], what=what)
    evidence.covers(f"sample_from_datasets+stop_on_empty_dataset={stop}")
