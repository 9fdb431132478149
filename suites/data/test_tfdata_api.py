"""data.tfdata.api-*: the rest of the public tf.data API, each against a plain Python model of
its docstring.

- api-elements: apply, filter, reduce, get_single_element, counter, ignore_errors, sparse_batch,
  fingerprint (a one-way promise: equal fingerprints mean equal elements).
- api-persistence: cache (memory and file), save/load (compression, shard_func, reader_func,
  element_spec, checkpoint_args), snapshot (compression, shard_func, reader_func).
- api-random: Dataset.random (seed, rerandomize_each_iteration, uniform low bits), list_files
  (shuffle, seed, pattern forms), rejection_resample (target distribution: exact binomial
  bounds at a false-alarm probability of 1e-9 per check, derived below).
- api-readers: TFRecordDataset, TextLineDataset and FixedLengthRecordDataset read files this
  module writes itself (TFRecord framing with masked CRC32C, zlib and gzip from the standard
  library), with every compression_type, buffer_size and num_parallel_reads.
- api-structure: Options / with_options / options / merge, ThreadingOptions, DatasetSpec and
  element_spec (nested datasets included), Iterator (iter, get_next, get_next_as_optional).

Files go under pytest's tmp_path (or a fresh temporary directory in @given tests), never cwd.
The references are plain Python on bytes and lists; where a docstring leaves an order open
(num_parallel_reads > 1, a custom shard_func, snapshot reads) the check compares multisets and
each file's own order.
"""

from __future__ import annotations

import gzip
import itertools
import os
import struct
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_frequencies, budget, evidence

from ..modules._optim_reference import pairwise

INTS = st.lists(st.integers(-50, 50), max_size=14)

# ------------------------------------------------------------------ references: element sequences


def assert_sequence(got: Iterable[Any], want: Iterable[Any], *, what: str) -> None:
    """The same elements in the same order; the first difference named."""
    __tracebackhide__ = True
    got, want = list(got), list(want)
    if got == want:
        return
    at = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    raise AssertionError(f"{what}: {len(got)} elements {got[:12]}, but should be {len(want)} elements {want[:12]} "
                         f"(first difference at position {at})")


def assert_same_multiset(got: Iterable[Hashable], want: Iterable[Hashable], *, what: str) -> None:
    """The same elements with the same multiplicities, in any order."""
    __tracebackhide__ = True
    g, w = Counter(got), Counter(want)
    if g != w:
        raise AssertionError(f"{what}: not the same elements; missing {dict(list((w - g).items())[:5])}, "
                             f"extra {dict(list((g - w).items())[:5])} (element: count)")


def assert_interleaved(got: Sequence[Hashable], per_file: Sequence[Sequence[Hashable]], *, what: str) -> None:
    """``got`` holds every file's records (a multiset match) and each file's records in file
    order: what "outputted in an interleaved order" allows, whatever the interleaving."""
    __tracebackhide__ = True
    assert_same_multiset(got, [r for f in per_file for r in f], what=what)
    origin = {r: k for k, f in enumerate(per_file) for r in f}
    for k, f in enumerate(per_file):
        mine = [r for r in got if origin[r] == k]
        if mine != list(f):
            raise AssertionError(f"{what}: file {k}'s records come as {mine[:8]}, out of their file order {list(f)[:8]}")


def ref_counter(start: float, step: float, n: int) -> list[float]:
    """Dataset.counter(start, step).take(n): start, start + step, ..."""
    return [start + i * step for i in range(n)]


def ref_sparse_batch(rows: Sequence[np.ndarray], batch: int, row_shape: Sequence[int]) -> list[tuple[list, list, list]]:
    """Dataset.sparse_batch: consecutive groups of ``batch`` elements as (indices, values,
    dense_shape), every entry of each element kept in row-major order, index = (position in
    the batch, *entry index); dense_shape = [effective batch size, *row_shape]."""
    out = []
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        indices, values = [], []
        for b, r in enumerate(chunk):
            r = np.asarray(r)
            for idx in np.ndindex(*r.shape):
                indices.append([b, *map(int, idx)])
                values.append(r[idx].item())
        out.append((indices, values, [len(chunk), *map(int, row_shape)]))
    return out


def check_fingerprints(cases: Sequence[tuple[str, int, list[Any]]], *, what: str) -> int:
    """fingerprint's one-way promise: "If two datasets have the same fingerprint, it is guaranteed
    that they would produce identical elements". ``cases``: (description, fingerprint, elements).
    Returns how many pairs shared a fingerprint."""
    __tracebackhide__ = True
    shared = 0
    for (na, fa, ea), (nb, fb, eb) in itertools.combinations(cases, 2):
        if fa == fb:
            shared += 1
            if ea != eb:
                raise AssertionError(f"{what}: {na} and {nb} share the fingerprint {fa:#x} but produce different "
                                     f"elements {ea[:8]} and {eb[:8]}")
    return shared


def check_epochs(epochs: Sequence[Sequence[int]], rerandomize: bool, *, what: str) -> None:
    """Dataset.random: rerandomize_each_iteration=False (or unset) repeats the first epoch's
    sequence; True gives each epoch a different one (two epochs of >= 8 uniform 32-bit draws
    agree with probability <= 2**-256)."""
    __tracebackhide__ = True
    first = list(epochs[0])
    for e, seq in enumerate(epochs[1:], 1):
        same = list(seq) == first
        if rerandomize and same:
            raise AssertionError(f"{what}: epoch {e} repeats epoch 0 ({first[:4]}...) with rerandomize_each_iteration=True")
        if not rerandomize and not same:
            raise AssertionError(f"{what}: epoch {e} gives {list(seq)[:4]}..., not epoch 0's {first[:4]}... "
                                 "(rerandomize_each_iteration=False repeats the sequence)")


# The rejection_resample check: each output class is an independent draw from target_dist
# (the input classes are i.i.d. from initial_dist, so both the rejection branch and the
# mixing branch yield independent target_dist draws), hence each class count ~ Binomial(N, t_i).
# assert_frequencies checks every class at alpha / k with exact two-sided binomial tails, so
# P(false alarm) <= RESAMPLE_ALPHA = 1e-9 per check (the union bound over the k classes).
RESAMPLE_ALPHA = 1e-9


def check_resampled(classes: Sequence[int], target: Sequence[float], *, alpha: float, what: str) -> None:
    """``classes`` (the class_func values of a rejection_resample output) follow ``target``:
    no class of target probability 0 at all, and exact binomial bounds at ``alpha``."""
    __tracebackhide__ = True
    k = len(target)
    counts = np.bincount(np.asarray(classes, dtype=np.int64), minlength=k)
    if len(counts) > k:
        raise AssertionError(f"{what}: class {len(counts) - 1} out of range [0, {k})")
    zero = [i for i in range(k) if target[i] == 0 and counts[i]]
    if zero:
        raise AssertionError(f"{what}: classes {zero} have target probability 0 but came {counts[zero].tolist()} times")
    assert_frequencies(counts, np.asarray(target, dtype=np.float64) / np.sum(target), alpha=alpha, what=what)


# ------------------------------------------------------------------ references: file formats

_CRC32C_TABLE: list[int] = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the TFRecord checksum."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The TFRecord format's masked CRC: rotate right by 15 and add 0xa282ead8."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_bytes(records: Iterable[bytes]) -> bytes:
    """A TFRecord file: per record uint64 length, uint32 masked_crc32c(length), data, uint32
    masked_crc32c(data), all little-endian (the format TFRecordDataset documents reading)."""
    out = bytearray()
    for r in records:
        length = struct.pack("<Q", len(r))
        out += length + struct.pack("<I", masked_crc32c(length)) + r + struct.pack("<I", masked_crc32c(r))
    return bytes(out)


def compress(data: bytes, kind: str) -> bytes:
    """compression_type "" (none), "ZLIB" (a zlib stream) or "GZIP" (a gzip member)."""
    if kind == "ZLIB":
        return zlib.compress(data)
    if kind == "GZIP":
        return gzip.compress(data, mtime=0)
    return data


def ref_text_lines(content: bytes) -> list[bytes]:
    """TextLineDataset: the lines of a file split at '\\n', the newline stripped; a final
    newline ends the last line rather than starting an empty one."""
    lines = content.split(b"\n")
    return lines[:-1] if lines[-1] == b"" else lines


def ref_fixed_length(content: bytes, record_bytes: int, header: int, footer: int) -> list[bytes]:
    """FixedLengthRecordDataset: skip header_bytes and footer_bytes, then records of record_bytes."""
    body = content[header:len(content) - footer]
    return [body[i:i + record_bytes] for i in range(0, len(body), record_bytes)]


# ------------------------------------------------------------------ references: element specs


def spec_model_of_value(value: Any, *, batch: int | str | None = "none") -> Any:
    """The element_spec a dataset of ``value``'s slices has, as plain data: a nested structure of
    ("tensor", shape, dtype name) leaves; ``batch``: "none" for from_tensor_slices as is, an int
    for batch(b, drop_remainder=True), None for batch(b) (unknown batch dimension)."""
    if isinstance(value, dict):
        return {k: spec_model_of_value(v, batch=batch) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(spec_model_of_value(v, batch=batch) for v in value)
    arr = np.asarray(value)
    shape = tuple(arr.shape[1:])
    if batch != "none":
        shape = (batch, *shape)
    name = "string" if arr.dtype.kind in "SU" else arr.dtype.name
    return ("tensor", shape, name)


def assert_spec_model(got: Any, want: Any, *, what: str) -> None:
    __tracebackhide__ = True
    if got != want:
        raise AssertionError(f"{what}: element_spec {got}, but should be {want}")


def spec_model(tf, spec: Any) -> Any:
    """A tf.TypeSpec structure as the plain data of :func:`spec_model_of_value`
    (DatasetSpec as ("dataset", inner))."""
    if isinstance(spec, dict):
        return {k: spec_model(tf, v) for k, v in spec.items()}
    if isinstance(spec, tuple):
        return tuple(spec_model(tf, v) for v in spec)
    if isinstance(spec, tf.data.DatasetSpec):
        return ("dataset", spec_model(tf, spec.element_spec))
    return ("tensor", tuple(spec.shape.as_list()), spec.dtype.name)


# ------------------------------------------------------------------ helpers


def _ints(ds) -> list[int]:
    return [int(v) for v in ds.as_numpy_iterator()]


def _i64(tf, xs: Sequence[int]):
    return tf.data.Dataset.from_tensor_slices(np.asarray(xs, np.int64).reshape(-1))


def _plain(v: Any) -> Any:
    """A numpy element as hashable Python data."""
    if isinstance(v, dict):
        return tuple(sorted((k, _plain(x)) for k, x in v.items()))
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    a = np.asarray(v)
    return a.item() if a.ndim == 0 else tuple(a.tolist())


# ================================================================== api-elements


@pytest.mark.claim("data.tfdata.api-elements")
def test_elements_docstring_examples(tf):
    D = tf.data.Dataset
    assert _ints(D.range(100).apply(lambda ds: ds.filter(lambda x: x < 5))) == [0, 1, 2, 3, 4]
    ds = D.from_tensor_slices([1, 2, 3]).filter(lambda x: x < 3)
    assert _ints(ds) == [1, 2]
    assert _ints(ds.filter(lambda x: tf.math.equal(x, 1))) == [1]
    assert int(D.range(5).reduce(np.int64(0), lambda x, _: x + 1)) == 5
    assert int(D.range(5).reduce(np.int64(0), lambda x, y: x + y)) == 10
    assert _ints(D.counter().take(5)) == [0, 1, 2, 3, 4]
    assert D.counter().element_spec == tf.TensorSpec([], tf.int64)
    assert D.counter(dtype=tf.int32).element_spec == tf.TensorSpec([], tf.int32)
    assert _ints(D.counter(start=2).take(5)) == [2, 3, 4, 5, 6]
    assert _ints(D.counter(start=2, step=5).take(5)) == [2, 7, 12, 17, 22]
    assert _ints(D.counter(start=10, step=-1).take(5)) == [10, 9, 8, 7, 6]
    bad = D.from_tensor_slices([1., 2., 0., 4.]).map(lambda x: tf.debugging.check_numerics(1. / x, ""))
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(bad.as_numpy_iterator())
    assert [float(v) for v in bad.ignore_errors().as_numpy_iterator()] == [1.0, 0.5, 0.25]
    rows = [np.array([1, 2, 3]), np.array([4, 5]), np.array([6, 7, 8, 9])]
    sb = D.from_generator(lambda: iter(rows), output_signature=tf.TensorSpec([None], tf.int64)).sparse_batch(2, [6])
    got = [(s.indices.numpy().tolist(), s.values.numpy().tolist(), s.dense_shape.numpy().tolist()) for s in sb]
    assert got == [([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]], [1, 2, 3, 4, 5], [2, 6]),
                   ([[0, 0], [0, 1], [0, 2], [0, 3]], [6, 7, 8, 9], [1, 6])], got
    assert got == ref_sparse_batch(rows, 2, [6])
    evidence.covers("apply", "filter", "reduce", "counter", "counter+dtype", "ignore_errors", "sparse_batch")


@pytest.mark.claim("data.tfdata.api-elements")
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
@budget(3)
@given(xs=INTS, mod=st.integers(1, 4), rem=st.integers(0, 3), start=st.integers(-20, 20), step=st.integers(-5, 5),
       n=st.integers(0, 9))
def test_apply_filter_reduce_counter_match_python(tf, dtype, xs, mod, rem, start, step, n):
    D = tf.data.Dataset
    rem %= mod
    want = [x for x in xs if x % mod == rem]
    assert_sequence(_ints(_i64(tf, xs).filter(lambda x: x % mod == rem)), want, what=f"filter(x % {mod} == {rem}) of {xs}")
    nested = D.from_tensor_slices({"a": np.asarray(xs, np.int64).reshape(-1), "b": -np.asarray(xs, np.int64).reshape(-1)})
    got = [(int(e["a"]), int(e["b"])) for e in nested.filter(lambda e: e["b"] % mod == rem).as_numpy_iterator()]
    assert_sequence(got, [(x, -x) for x in xs if (-x) % mod == rem], what=f"filter of dict elements of {xs}")
    evidence.covers("filter")
    twice = _i64(tf, xs).apply(lambda ds: ds.map(lambda x: 2 * x).filter(lambda x: x > 0))
    assert_sequence(_ints(twice), [2 * x for x in xs if 2 * x > 0], what=f"apply(map(2x).filter(> 0)) of {xs}")
    evidence.covers("apply")
    # reduce: an order-sensitive polynomial hash and the sum/count, as one nested state
    state = _i64(tf, xs).reduce((np.int64(7), {"sum": np.int64(0), "n": np.int64(0)}),
                                lambda s, x: ((s[0] * 31 + x) % 1000003, {"sum": s[1]["sum"] + x, "n": s[1]["n"] + 1}))
    h = 7
    for x in xs:
        h = (h * 31 + x) % 1000003  # Python's % and tf's floormod agree in sign for a positive modulus
    got_state = (int(state[0]), int(state[1]["sum"]), int(state[1]["n"]))
    assert got_state == (h, sum(xs), len(xs)), f"reduce over {xs}: {got_state}, but should be {(h, sum(xs), len(xs))}"
    evidence.covers("reduce", "reduce+nested-state")
    counter = D.counter(start=start, step=step, dtype=getattr(tf, dtype))
    assert counter.element_spec == tf.TensorSpec([], getattr(tf, dtype)), counter.element_spec
    values = [v.item() for v in counter.take(n).as_numpy_iterator()]
    # small integers are exact in float32 too
    assert_sequence(values, ref_counter(start, step, n), what=f"counter(start={start}, step={step}, dtype={dtype}).take({n})")
    evidence.covers("counter", "counter+dtype")


@pytest.mark.claim("data.tfdata.api-elements")
@pytest.mark.parametrize("log_warning", [False, True])
@budget(3)
@given(xs=st.lists(st.integers(-3, 3), max_size=12))
def test_ignore_errors_drops_exactly_the_failing_elements(tf, log_warning, xs):
    ds = tf.data.Dataset.from_tensor_slices(np.asarray(xs, np.float64).reshape(-1))
    ds = ds.map(lambda x: tf.debugging.check_numerics(1.0 / x, "division by zero"))
    got = [float(v) for v in ds.ignore_errors(log_warning=log_warning).as_numpy_iterator()]
    # one float64 division of small integers: correctly rounded, so exactly Python's 1.0 / x
    assert_sequence(got, [1.0 / x for x in xs if x != 0], what=f"ignore_errors(log_warning={log_warning}) of 1/x over {xs}")
    evidence.covers("ignore_errors", f"ignore_errors+log_warning={log_warning}")


@pytest.mark.claim("data.tfdata.api-elements")
@budget(6)
@given(n=st.integers(0, 4), data=st.data())
def test_get_single_element_returns_the_element_or_raises(tf, n, data):
    D = tf.data.Dataset
    a = data.draw(st.lists(st.integers(-9, 9), min_size=n * 3, max_size=n * 3), label="a")
    arr = np.asarray(a, np.int64).reshape(n, 3)
    ds = D.from_tensor_slices({"x": arr, "y": (arr.sum(axis=1), arr.astype(np.float64))})
    if n == 1:
        got = ds.get_single_element()
        assert got["x"].numpy().tolist() == arr[0].tolist() and int(got["y"][0]) == int(arr[0].sum())
        assert got["y"][1].numpy().tolist() == arr[0].astype(np.float64).tolist()
        batched = tf.function(lambda x: D.from_tensor_slices(x).map(lambda v: v * 2).batch(4).get_single_element())
        assert batched(tf.constant(arr)).numpy().tolist() == (2 * arr).tolist()
        evidence.covers("get_single_element")
    else:
        with pytest.raises(tf.errors.InvalidArgumentError):
            ds.get_single_element()
        evidence.covers("get_single_element+not-one-element")


@pytest.mark.claim("data.tfdata.api-elements")
@budget(6)
@given(rows=st.lists(st.lists(st.integers(-9, 9), max_size=5), max_size=8), batch=st.integers(1, 4),
       extra=st.integers(0, 2), two_d=st.booleans())
def test_sparse_batch_matches_the_dense_rows(tf, rows, batch, extra, two_d):
    if two_d:  # elements of shape (len, 2); row_shape [max + extra, 3]
        arrays = [np.asarray([[v, v + 1] for v in r], np.int64).reshape(-1, 2) for r in rows]
        sig, row_shape = tf.TensorSpec([None, 2], tf.int64), [max((len(r) for r in rows), default=0) + extra, 3]
    else:
        arrays = [np.asarray(r, np.int64).reshape(-1) for r in rows]
        sig, row_shape = tf.TensorSpec([None], tf.int64), [max((len(r) for r in rows), default=0) + extra]
    ds = tf.data.Dataset.from_generator(lambda: iter(arrays), output_signature=sig).sparse_batch(batch, row_shape)
    got = [(s.indices.numpy().tolist(), s.values.numpy().tolist(), s.dense_shape.numpy().tolist()) for s in ds]
    assert_sequence(got, ref_sparse_batch(arrays, batch, row_shape),
                    what=f"sparse_batch({batch}, row_shape={row_shape}) of {'2-D' if two_d else '1-D'} rows {rows}")
    assert isinstance(ds.element_spec, tf.SparseTensorSpec) and ds.element_spec.shape.as_list() == [None, *row_shape]
    evidence.covers("sparse_batch")


@pytest.mark.claim("data.tfdata.api-elements")
@budget(4)
@given(xs=INTS, k=st.integers(1, 3))
def test_fingerprint_equal_means_equal_elements(tf, xs, k):
    D = tf.data.Dataset
    builds: list[tuple[str, Callable[[], Any]]] = [
        ("from_tensor_slices(xs)", lambda: _i64(tf, xs)),
        ("from_tensor_slices(xs) again", lambda: _i64(tf, xs)),
        (f"from_tensor_slices(xs).map(x * {k})", lambda: _i64(tf, xs).map(lambda x: x * k)),
        (f"from_tensor_slices(xs).map(x * {k + 1})", lambda: _i64(tf, xs).map(lambda x: x * (k + 1))),
        (f"range({len(xs)})", lambda: D.range(len(xs))),
        (f"range({len(xs) + 1})", lambda: D.range(len(xs) + 1)),
        ("from_tensor_slices(reversed xs)", lambda: _i64(tf, xs[::-1])),
        (f"from_tensor_slices(xs).take({k})", lambda: _i64(tf, xs).take(k)),
    ]
    cases = []
    for name, build in builds:
        ds = build()
        fp = ds.fingerprint()
        assert fp.dtype == tf.uint64 and fp.shape == (), f"fingerprint of {name}: {fp.dtype} {fp.shape}, not a uint64 scalar"
        cases.append((name, int(fp.numpy()), _ints(ds)))
    shared = check_fingerprints(cases, what=f"fingerprints over xs={xs}")
    evidence.note(fingerprint_pairs_shared=shared, identical_builds_share_fingerprint=cases[0][1] == cases[1][1])
    evidence.covers("fingerprint")


# ================================================================== api-persistence


@pytest.mark.claim("data.tfdata.api-persistence")
def test_cache_docstring_example_and_file_persistence(tf, tmp_path):
    D = tf.data.Dataset
    ds = D.range(5).map(lambda x: x ** 2).cache()
    assert _ints(ds) == [0, 1, 4, 9, 16] and _ints(ds) == [0, 1, 4, 9, 16]
    path = str(tmp_path / "cache")
    assert _ints(D.range(5).cache(path)) == [0, 1, 2, 3, 4]
    assert _ints(D.range(10).cache(path)) == [0, 1, 2, 3, 4], "a second pipeline on the same cache file should read it"
    assert _ints(D.range(10).cache(str(tmp_path / "other"))) == list(range(10)), "a new filename caches anew"
    evidence.covers("cache+memory", "cache+file", "cache+file-persists")


@pytest.mark.claim("data.tfdata.api-persistence")
@pytest.mark.parametrize("to_file", [False, True])
@budget(2)
@given(n=st.integers(1, 12), seed=st.integers(0, 2**31 - 1))
def test_cache_second_epoch_reads_the_cache(tf, to_file, n, seed):
    """A source that differs every epoch (random with rerandomize_each_iteration=True, so two
    epochs of n >= 1 uniform 32-bit draws agree with probability <= 2**-32) makes the cache
    visible: the cached dataset repeats its first epoch."""
    src = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).take(n)
    with tempfile.TemporaryDirectory() as d:
        ds = src.cache(os.path.join(d, "c") if to_file else "")
        first = _ints(ds)
        what = f"second epoch of random(seed={seed}).take({n}).cache({'file' if to_file else ''})"
        assert_sequence(_ints(ds), first, what=what)
        assert_sequence(_ints(ds), first, what="third epoch of the cached dataset")
    evidence.note(source_epochs_differ=_ints(src) != _ints(src))
    evidence.covers("cache+file" if to_file else "cache+memory")


#: The documented options of save/load, every pair of values in some row (a covering array: each
#: option's modes by construction, not by the luck of a draw).
SAVE_ROWS = pairwise({"compression": [None, "GZIP"], "shards": [None, 1, 3], "reader": [False, True],
                      "spec": [False, True]})
#: snapshot: every compression with and without shard_func, reader_func alternating so that every
#: pair of values of any two options is in some row.
SNAPSHOT_ROWS = [{"compression": c, "shards": s, "reader": bool((i + j) % 2)}
                 for i, c in enumerate(["AUTO", "GZIP", "SNAPPY", None]) for j, s in enumerate([None, 3])]


def _row_id(row: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in row.items())


def _saved_input(tf, xs: Sequence[int]):
    a = np.asarray(xs, np.int64).reshape(-1)
    s = np.asarray([f"v{x}".encode() for x in xs] or [b""])[:len(xs)]
    return tf.data.Dataset.from_tensor_slices({"i": a, "f": a.astype(np.float64) / 4, "s": s})


def _saved_elements(ds) -> list[tuple[int, float, bytes]]:
    return [(int(e["i"]), float(e["f"]), bytes(e["s"])) for e in ds.as_numpy_iterator()]


@pytest.mark.claim("data.tfdata.api-persistence")
@pytest.mark.parametrize("row", SAVE_ROWS, ids=_row_id)
@budget(2)
@given(xs=INTS)
def test_save_load_round_trip(tf, row, xs):
    compression, shards, reader, spec = row["compression"], row["shards"], row["reader"], row["spec"]
    ds = _saved_input(tf, xs)
    want = [(x, x / 4, f"v{x}".encode()) for x in xs]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "saved")
        shard_func = None if shards is None else (lambda e: e["i"] % shards)
        ds.save(path, compression=compression, shard_func=shard_func)
        kwargs: dict[str, Any] = {"compression": compression}
        if reader:
            kwargs["reader_func"] = lambda datasets: datasets.interleave(lambda x: x, cycle_length=2)
        if spec:
            kwargs["element_spec"] = ds.element_spec
        loaded = tf.data.Dataset.load(path, **kwargs)
        got = _saved_elements(loaded)
    what = f"save/load(compression={compression}, shard_func={'x % ' + str(shards) if shards else None}, reader_func={reader})"
    assert_spec_model(spec_model(tf, loaded.element_spec), spec_model(tf, ds.element_spec), what=what)
    if shards is None and not reader:  # "the element order of the saved dataset will be preserved"
        assert_sequence(got, want, what=what)
    else:
        assert_same_multiset(got, want, what=what)
    evidence.covers("save-load", f"save+compression={compression or 'NONE'}")
    evidence.covers(*(["save+shard_func"] if shards else []), *(["load+reader_func"] if reader else []),
                    *(["load+element_spec"] if spec else []))


@pytest.mark.claim("data.tfdata.api-persistence")
@pytest.mark.parametrize("n,interval", [(1, 5), (6, 2), (6, 100)])
def test_save_with_checkpoint_args_round_trips(tf, tmp_path, n, interval):
    step = tf.Variable(0, trainable=False)
    path, ckpt = str(tmp_path / "saved"), str(tmp_path / "ckpt")
    returned = tf.data.Dataset.range(n).save(path, checkpoint_args={
        "checkpoint_interval": interval, "step_counter": step, "directory": ckpt, "max_to_keep": 3})
    assert returned is None, f"save with checkpoint_args returned {returned!r}; 'When writing checkpoints, returns None'"
    assert os.path.exists(os.path.join(ckpt, "checkpoint")), "no checkpoint written to checkpoint_args['directory']"
    assert_sequence(_ints(tf.data.Dataset.load(path)), range(n),
                    what=f"load of range({n}) saved with checkpoint_args(checkpoint_interval={interval})")
    evidence.covers("save+checkpoint_args")


@pytest.mark.claim("data.tfdata.api-persistence")
@pytest.mark.parametrize("row", SNAPSHOT_ROWS, ids=_row_id)
@budget(2)
@given(n=st.integers(1, 20), seed=st.integers(0, 2**31 - 1))
def test_snapshot_persists_the_first_epoch(tf, row, n, seed):
    """The source differs every epoch (random, rerandomize_each_iteration=True), so a later
    epoch equal to the first comes from the snapshot; the order of reads is left open by
    the docstring (parallel reads of the shards), so epochs compare as multisets."""
    compression, shards, reader = row["compression"], row["shards"], row["reader"]
    src = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).take(n).enumerate()
    kwargs: dict[str, Any] = {"compression": compression}
    if shards:
        kwargs["shard_func"] = lambda i, x: i % shards
    if reader:
        kwargs["reader_func"] = lambda datasets: datasets.interleave(lambda x: x, cycle_length=2)
    with tempfile.TemporaryDirectory() as d:
        ds = src.snapshot(os.path.join(d, "snap"), **kwargs)
        epochs = [[(int(i), int(x)) for i, x in ds.as_numpy_iterator()] for _ in range(3)]
    what = f"snapshot(compression={compression}, shard_func={'i % 3' if shards else None}, reader_func={reader})"
    assert_same_multiset([i for i, _ in epochs[0]], range(n), what=f"{what}: first epoch's positions")
    for e in (1, 2):
        assert_same_multiset(epochs[e], epochs[0], what=f"{what}: epoch {e} against the snapshot written in epoch 0")
    evidence.note(snapshot_first_epoch_in_order=[i for i, _ in epochs[0]] == list(range(n)))
    evidence.covers("snapshot", f"snapshot+compression={compression}")
    evidence.covers(*(["snapshot+shard_func"] if shards else []), *(["snapshot+reader_func"] if reader else []))


# ================================================================== api-random


@pytest.mark.claim("data.tfdata.api-random")
def test_random_docstring_examples(tf):
    D = tf.data.Dataset
    assert _ints(D.random(seed=4).take(10)) == _ints(D.random(seed=4).take(10))
    ds3 = D.random(seed=4).take(10)
    assert _ints(ds3) == _ints(ds3)
    ds4 = D.random(seed=4, rerandomize_each_iteration=True).take(10)
    assert _ints(ds4) != _ints(ds4)
    assert D.random(seed=4).element_spec == tf.TensorSpec([], tf.int64)
    evidence.covers("random+seed", "random+rerandomize_each_iteration=False", "random+rerandomize_each_iteration=True")


@pytest.mark.claim("data.tfdata.api-random")
@pytest.mark.parametrize("rerandomize", [None, False, True])
@budget(2)
@given(seed=st.integers(0, 2**31 - 1))
def test_random_seed_and_rerandomize_each_iteration(tf, rerandomize, seed):
    def build():
        return tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=rerandomize).take(8)

    ds = build()
    epochs = [_ints(ds) for _ in range(3)]
    check_epochs(epochs, bool(rerandomize), what=f"random(seed={seed}, rerandomize_each_iteration={rerandomize})")
    again = build()
    # "a different deterministic sequence ... for each epoch": the same seed, the same epochs
    assert [_ints(again) for _ in range(3)] == epochs, f"random(seed={seed}): a second build gave different epochs"
    evidence.covers("random+seed", f"random+rerandomize_each_iteration={bool(rerandomize)}")


@pytest.mark.claim("data.tfdata.api-random")
def test_random_low_bits_are_uniform(tf):
    """"a sequence of uniformly distributed integer values": the docstring names no range;
    the values observed lie in [0, 2**32), and for a uniform range of M >= 2**32 values the
    low 8 bits are uniform within 256 / M <= 2**-24, far below the bounds' resolution.
    4096 draws, 256 categories, exact binomial bounds at 1e-9 in all (union bound)."""
    draws = np.asarray(next(iter(tf.data.Dataset.random(seed=1234).batch(4096))).numpy(), dtype=np.int64)
    evidence.note(random_min=int(draws.min()), random_max=int(draws.max()))
    assert_frequencies(np.bincount(draws & 255, minlength=256), np.full(256, 1 / 256), alpha=1e-9,
                       what="Dataset.random(seed=1234): low 8 bits of 4096 draws")
    evidence.covers("random+uniform")


def _files(tmp: str, n: int = 12) -> tuple[str, list[str], list[str]]:
    for i in range(n):
        open(os.path.join(tmp, f"f{i:02d}.txt"), "w").close()
    for name in ("a.py", "b.py"):
        open(os.path.join(tmp, name), "w").close()
    txt = sorted(os.path.join(tmp, f"f{i:02d}.txt") for i in range(n))
    py = sorted(os.path.join(tmp, f) for f in ("a.py", "b.py"))
    return tmp, txt, py


def _names(ds) -> list[str]:
    return [v.decode() for v in ds.as_numpy_iterator()]


@pytest.mark.claim("data.tfdata.api-random")
def test_list_files_matches_patterns_and_orders(tf, tmp_path):
    D = tf.data.Dataset
    d, txt, py = _files(str(tmp_path))
    star_txt, star_py = os.path.join(d, "*.txt"), os.path.join(d, "*.py")
    for form, pattern in (("str", star_py), ("list", [star_py]), ("tensor", tf.constant(star_py))):
        assert_same_multiset(_names(D.list_files(pattern, shuffle=False)), py, what=f"list_files({form} '*.py')")
    assert_same_multiset(_names(D.list_files([star_txt, star_py], shuffle=False)), txt + py, what="list_files([txt, py])")
    evidence.covers("list_files+patterns")
    # shuffle=False: "a deterministic order": two builds and two epochs agree
    fixed = D.list_files(star_txt, shuffle=False)
    order = _names(fixed)
    assert_same_multiset(order, txt, what="list_files(shuffle=False)")
    assert _names(fixed) == order and _names(D.list_files(star_txt, shuffle=False)) == order, \
        "list_files(shuffle=False) gave different orders"
    evidence.note(shuffle_false_is_sorted=order == sorted(order))
    evidence.covers("list_files+shuffle=False")
    # seed: deterministic; shuffle=True (the default): a permutation, shuffled: P(a uniform
    # permutation of 12 names equals a given order) = 1/12! = 2.1e-9, so two seeds both
    # giving the unshuffled order has probability 4.4e-18
    seeded = [_names(D.list_files(star_txt, seed=s)) for s in (3, 4)]
    for s, got in zip((3, 4), seeded):
        assert_same_multiset(got, txt, what=f"list_files(seed={s})")
        assert _names(D.list_files(star_txt, seed=s)) == got, f"list_files(seed={s}) twice gave different orders"
    assert any(got != order for got in seeded), f"list_files(seed=3 and 4) both kept the order {order[:3]}...: not shuffled"
    assert_same_multiset(_names(D.list_files(star_txt, shuffle=True)), txt, what="list_files(shuffle=True)")
    evidence.covers("list_files+seed", "list_files+shuffle=True")


@pytest.mark.claim("data.tfdata.api-random")
def test_rejection_resample_docstring_example(tf):
    rng = np.random.default_rng(0)
    elems = rng.choice(2, size=1000, p=[0.6, 0.4])
    ds = tf.data.Dataset.from_tensor_slices(elems).rejection_resample(class_func=lambda x: x, target_dist=[0.5, 0.5],
                                                                       initial_dist=[0.6, 0.4], seed=1)
    pairs = [(int(c), int(x)) for c, x in ds.as_numpy_iterator()]
    assert pairs and all(c == x for c, x in pairs), "rejection_resample should yield (class_func(x), x) pairs"
    evidence.note(docstring_example_fraction_of_zeros=sum(1 for c, _ in pairs if c == 0) / len(pairs))
    evidence.covers("rejection_resample+pairs")


RESAMPLE_DRAWS = 2000
CLASS_OF = [0, 0, 0, 0, 1, 1, 1, 2]  # uniform over 8 -> initial_dist [1/2, 3/8, 1/8]


@pytest.mark.claim("data.tfdata.api-random")
@pytest.mark.parametrize("target", [(0.2, 0.3, 0.5), (0.5, 0.5, 0.0), (1 / 3, 1 / 3, 1 / 3)], ids=["skewed", "zero", "flat"])
def test_rejection_resample_reaches_the_target_distribution(tf, target):
    """Input: an endless stream of i.i.d. classes with initial_dist exactly [1/2, 3/8, 1/8]
    (CLASS_OF of a uniform draw from 8, from one stateful tf.random.Generator shared by
    every iterator of the input, so the resampler's two passes over it draw independently).
    Output classes are then i.i.d. from target_dist; see RESAMPLE_ALPHA for the bound."""
    gen = tf.random.Generator.from_seed(2024)
    table = tf.constant(CLASS_OF, tf.int32)
    src = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).repeat().map(
        lambda _: tf.gather(table, gen.uniform([], 0, 8, dtype=tf.int32)))
    ds = src.rejection_resample(lambda x: x, target_dist=list(target), initial_dist=[0.5, 0.375, 0.125], seed=5)
    out = next(iter(ds.batch(RESAMPLE_DRAWS)))
    classes, data = out[0].numpy(), out[1].numpy()
    assert (classes == data).all(), "rejection_resample should pair each element with its class_func value"
    check_resampled(classes.tolist(), target, alpha=RESAMPLE_ALPHA,
                    what=f"rejection_resample(target_dist={[round(t, 3) for t in target]}, initial_dist=[.5, .375, .125])")
    evidence.covers("rejection_resample+initial_dist", "rejection_resample+pairs")
    if 0.0 in target:
        # initial_dist estimated live: no exact law for the early outputs, but a zero-target
        # class is never accepted (acceptance probability t_i / p_i = 0)
        live = next(iter(src.rejection_resample(lambda x: x, target_dist=list(target), seed=5).batch(500)))
        zero = [int(c) for c in live[0].numpy() if target[int(c)] == 0]
        assert not zero, f"rejection_resample, initial_dist estimated live, yielded {len(zero)} elements of a zero-target class"
        evidence.covers("rejection_resample+estimated")


@pytest.mark.claim("data.tfdata.api-random")
def test_rejection_resample_seed_repeats(tf):
    x = np.array([0, 1, 2, 1, 0, 0, 1, 2, 0, 0] * 20, np.int32)

    def run():
        ds = tf.data.Dataset.from_tensor_slices(x).rejection_resample(
            lambda v: v, [0.2, 0.3, 0.5], initial_dist=[0.5, 0.3, 0.2], seed=11)
        return [(int(c), int(v)) for c, v in ds.as_numpy_iterator()]

    assert_sequence(run(), run(), what="rejection_resample(seed=11) built twice")
    evidence.covers("rejection_resample+seed")


# ================================================================== api-readers

COMPRESSIONS = ["", "ZLIB", "GZIP"]
#: Each reader's documented options as covering arrays (every pair of values in some row).
TFRECORD_ROWS = pairwise({"compression": COMPRESSIONS, "buffer_size": [None, 1, 13, 1 << 16],
                          "parallel": [None, 2, 3], "as_dataset": [False, True]})
TEXT_ROWS = pairwise({"compression": COMPRESSIONS, "buffer_size": [None, 0, 1, 7], "parallel": [None, 2],
                      "as_dataset": [False, True]})
FIXED_ROWS = pairwise({"compression": COMPRESSIONS, "buffer_size": [None, 1, 5, 1 << 12], "parallel": [None, 2],
                       "as_dataset": [False, True]})
RECORD = st.binary(min_size=0, max_size=40)


def _write(d: str, name: str, data: bytes) -> str:
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _reader_modes(compression: str, buffer_size: Any, parallel: Any) -> list[str]:
    return [f"compression_type={compression or 'none'}", "buffer_size" if buffer_size is not None else "buffer_size=None",
            "num_parallel_reads>1" if parallel and parallel > 1 else "num_parallel_reads=None"]


def _files_arg(tf, paths: list[str], as_dataset: bool):
    return tf.data.Dataset.from_tensor_slices(paths) if as_dataset else paths


@pytest.mark.claim("data.tfdata.api-readers")
@pytest.mark.parametrize("row", TFRECORD_ROWS, ids=_row_id)
@budget(2)
@given(files=st.lists(st.lists(RECORD, max_size=5), min_size=1, max_size=3))
def test_tfrecord_dataset_reads_records_as_written(tf, row, files):
    compression, buffer_size, parallel, as_dataset = (row["compression"], row["buffer_size"], row["parallel"],
                                                      row["as_dataset"])
    # tag each record with its file and position so the interleaving check can trace it
    per_file = [[bytes([k, j]) + r for j, r in enumerate(recs)] for k, recs in enumerate(files)]
    with tempfile.TemporaryDirectory() as d:
        paths = [_write(d, f"r{k}.tfrecord", compress(tfrecord_bytes(recs), compression)) for k, recs in enumerate(per_file)]
        ds = tf.data.TFRecordDataset(_files_arg(tf, paths, as_dataset), compression_type=compression,
                                     buffer_size=buffer_size, num_parallel_reads=parallel)
        got = [bytes(v) for v in ds.as_numpy_iterator()]
    what = f"TFRecordDataset(compression_type={compression!r}, buffer_size={buffer_size}, num_parallel_reads={parallel})"
    if parallel is None:  # "files will be read sequentially"
        assert_sequence(got, [r for recs in per_file for r in recs], what=what)
    else:
        assert_interleaved(got, per_file, what=what)
    assert ds.element_spec == tf.TensorSpec([], tf.string), ds.element_spec
    evidence.covers("TFRecordDataset", *_reader_modes(compression, buffer_size, parallel))


LINE = st.text(alphabet="ab c", max_size=6).map(str.encode)


@pytest.mark.claim("data.tfdata.api-readers")
@pytest.mark.parametrize("row", TEXT_ROWS, ids=_row_id)
@budget(2)
@given(files=st.lists(st.tuples(st.lists(LINE, max_size=5), st.booleans()), min_size=1, max_size=3))
def test_text_line_dataset_yields_the_lines(tf, row, files):
    compression, buffer_size, parallel, as_dataset = (row["compression"], row["buffer_size"], row["parallel"],
                                                      row["as_dataset"])
    contents = [b"\n".join(lines) + (b"\n" if trailing and lines else b"") for lines, trailing in files]
    with tempfile.TemporaryDirectory() as d:
        paths = [_write(d, f"t{k}.txt", compress(c, compression)) for k, c in enumerate(contents)]
        ds = tf.data.TextLineDataset(_files_arg(tf, paths, as_dataset), compression_type=compression,
                                     buffer_size=buffer_size, num_parallel_reads=parallel)
        got = [bytes(v) for v in ds.as_numpy_iterator()]
    per_file = [ref_text_lines(c) if c else [] for c in contents]
    what = (f"TextLineDataset(compression_type={compression!r}, buffer_size={buffer_size}, "
            f"num_parallel_reads={parallel}) of {contents}")
    if parallel is None:
        assert_sequence(got, [x for f in per_file for x in f], what=what)
    else:  # lines repeat across files: multiset, and in order within each file where they are unique
        assert_same_multiset(got, [x for f in per_file for x in f], what=what)
    evidence.covers("TextLineDataset", *_reader_modes(compression, buffer_size, parallel))


@pytest.mark.claim("data.tfdata.api-readers")
def test_reader_docstring_examples(tf, tmp_path):
    t0 = _write(str(tmp_path), "text_lines0.txt", b"the cow\njumped over\nthe moon\n")
    t1 = _write(str(tmp_path), "text_lines1.txt", b"jack and jill\nwent up\nthe hill\n")
    assert [bytes(v) for v in tf.data.TextLineDataset([t0, t1]).as_numpy_iterator()] == [
        b"the cow", b"jumped over", b"the moon", b"jack and jill", b"went up", b"the hill"]
    f0 = _write(str(tmp_path), "fixed_length0.bin", b"HEADER012345FOOTER")
    f1 = _write(str(tmp_path), "fixed_length1.bin", b"HEADER6789abFOOTER")
    ds = tf.data.FixedLengthRecordDataset([f0, f1], record_bytes=2, header_bytes=6, footer_bytes=6)
    assert [bytes(v) for v in ds.as_numpy_iterator()] == [b"01", b"23", b"45", b"67", b"89", b"ab"]
    r = _write(str(tmp_path), "example.tfrecords", tfrecord_bytes([b"x", b"", b"yz"]))
    assert [bytes(v) for v in tf.data.TFRecordDataset([r]).as_numpy_iterator()] == [b"x", b"", b"yz"]
    evidence.covers("TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset", "header_bytes+footer_bytes")


@pytest.mark.claim("data.tfdata.api-readers")
@pytest.mark.parametrize("row", FIXED_ROWS, ids=_row_id)
@budget(2)
@given(counts=st.lists(st.integers(0, 5), min_size=1, max_size=3), record_bytes=st.integers(2, 6),
       header=st.integers(0, 5), footer=st.integers(0, 5), seed=st.integers(0, 2**32 - 1))
def test_fixed_length_record_dataset_skips_header_and_footer(tf, row, counts, record_bytes, header, footer, seed):
    compression, buffer_size, parallel, as_dataset = (row["compression"], row["buffer_size"], row["parallel"],
                                                      row["as_dataset"])
    rng = np.random.default_rng(seed)

    def record(k: int, j: int) -> bytes:  # first two bytes name the file and position
        return bytes([k, j]) + rng.integers(0, 256, record_bytes - 2, dtype=np.uint8).tobytes()

    contents = [rng.integers(0, 256, header, dtype=np.uint8).tobytes() + b"".join(record(k, j) for j in range(n))
                + rng.integers(0, 256, footer, dtype=np.uint8).tobytes() for k, n in enumerate(counts)]
    with tempfile.TemporaryDirectory() as d:
        paths = [_write(d, f"b{k}.bin", compress(c, compression)) for k, c in enumerate(contents)]
        ds = tf.data.FixedLengthRecordDataset(_files_arg(tf, paths, as_dataset), record_bytes, header_bytes=header,
                                              footer_bytes=footer, buffer_size=buffer_size,
                                              compression_type=compression, num_parallel_reads=parallel)
        got = [bytes(v) for v in ds.as_numpy_iterator()]
    per_file = [ref_fixed_length(c, record_bytes, header, footer) for c in contents]
    what = (f"FixedLengthRecordDataset(record_bytes={record_bytes}, header_bytes={header}, footer_bytes={footer}, "
            f"compression_type={compression!r}, buffer_size={buffer_size}, num_parallel_reads={parallel})")
    if parallel is None:
        assert_sequence(got, [r for f in per_file for r in f], what=what)
    else:
        assert_interleaved(got, per_file, what=what)
    evidence.covers("FixedLengthRecordDataset", "header_bytes+footer_bytes", *_reader_modes(compression, buffer_size, parallel))


# ================================================================== api-structure


@pytest.mark.claim("data.tfdata.api-structure")
def test_options_set_carried_and_merged(tf):
    D = tf.data.Dataset
    options = tf.data.Options()
    options.deterministic = False
    ds = D.range(42).with_options(options)
    assert ds.options().deterministic is False
    assert D.range(42).options().deterministic is None, "an unset option reads None (deterministic: 'If None, defaults to True')"
    # "carried over to datasets created through tf.data transformations"
    downstream = ds.map(lambda x: x + 1).batch(4).filter(lambda b: tf.size(b) > 0)
    assert downstream.options().deterministic is False, "Options.deterministic lost after map/batch/filter"
    evidence.covers("options+with_options", "options+carried")
    # different options set in two calls are merged
    a, b = tf.data.Options(), tf.data.Options()
    a.threading.private_threadpool_size = 2
    b.threading.max_intra_op_parallelism = 1
    merged = D.range(3).with_options(a).with_options(b).options()
    assert (merged.threading.private_threadpool_size, merged.threading.max_intra_op_parallelism) == (2, 1), merged
    m = a.merge(b)
    assert (m.threading.private_threadpool_size, m.threading.max_intra_op_parallelism) == (2, 1)
    # Options.merge: "this object's value is updated with the options object's value"
    c = tf.data.Options()
    c.threading.private_threadpool_size = 5
    assert a.merge(c).threading.private_threadpool_size == 5
    evidence.covers("options+merge")
    with pytest.raises(TypeError):
        tf.data.Options().deterministic = 3  # typed properties
    evidence.covers("options+typed")


@pytest.mark.claim("data.tfdata.api-structure")
def test_with_options_twice_with_different_non_default_values_raises(tf):
    """with_options: "Raises: ValueError: when an option is set more than once to a non-default value"."""
    a, b = tf.data.Options(), tf.data.Options()
    a.threading.private_threadpool_size = 2
    b.threading.private_threadpool_size = 3
    ds = tf.data.Dataset.range(3).with_options(a)
    with pytest.raises(ValueError):
        ds.with_options(b)
    evidence.covers("with_options+conflict")


@pytest.mark.claim("data.tfdata.api-structure")
@pytest.mark.parametrize("det", [None, True, False])
@budget(2)
@given(xs=INTS, pool=st.integers(0, 3), intra=st.integers(1, 3))
def test_threading_and_deterministic_options(tf, det, xs, pool, intra):
    """ThreadingOptions set resources, not results: with deterministic True or unset (the
    default True) a parallel map keeps the sequential order under any threading options;
    with deterministic=False it yields the same elements in some order."""
    options = tf.data.Options()
    threading = tf.data.ThreadingOptions()  # "set ... through the threading property of tf.data.Options"
    threading.private_threadpool_size = pool
    threading.max_intra_op_parallelism = intra
    options.threading = threading
    if det is not None:
        options.deterministic = det
    ds = _i64(tf, xs).map(lambda x: x * 3 + 1, num_parallel_calls=4).with_options(options)
    got_options = ds.options()
    assert (got_options.threading.private_threadpool_size, got_options.threading.max_intra_op_parallelism,
            got_options.deterministic) == (pool, intra, det), "options() should report what with_options set"
    want = [x * 3 + 1 for x in xs]
    what = f"map under ThreadingOptions(private_threadpool_size={pool}, max_intra_op_parallelism={intra}), deterministic={det}"
    if det is False:
        assert_same_multiset(_ints(ds), want, what=what)
        evidence.covers("deterministic=False")
    else:
        assert_sequence(_ints(ds), want, what=what)
        evidence.covers("deterministic=True/None")
    evidence.covers("ThreadingOptions")


@pytest.mark.claim("data.tfdata.api-structure")
@budget(6)
@given(n=st.integers(1, 6), width=st.integers(0, 3), batch=st.integers(1, 4), drop=st.booleans())
def test_element_spec_and_dataset_spec(tf, n, width, batch, drop):
    D = tf.data.Dataset
    value = {"a": np.zeros((n, width), np.float64), "b": (np.arange(n, dtype=np.int32), np.array([b"x"] * n))}
    ds = D.from_tensor_slices(value)
    assert_spec_model(spec_model(tf, ds.element_spec), spec_model_of_value(value), what="from_tensor_slices")
    batched = ds.batch(batch, drop_remainder=drop)
    assert_spec_model(spec_model(tf, batched.element_spec), spec_model_of_value(value, batch=batch if drop else None),
                      what=f"batch({batch}, drop_remainder={drop})")
    evidence.covers("element_spec")
    spec = tf.data.DatasetSpec.from_value(ds)
    assert isinstance(spec, tf.data.DatasetSpec) and spec == tf.data.DatasetSpec(ds.element_spec)
    assert_spec_model(spec_model(tf, spec.element_spec), spec_model_of_value(value), what="DatasetSpec.from_value")
    # nested datasets: window() and from_tensors(dataset) yield datasets, described by DatasetSpec
    windows = ds.window(batch)
    assert_spec_model(spec_model(tf, windows.element_spec),
                      {"a": ("dataset", ("tensor", (width,), "float64")),
                       "b": (("dataset", ("tensor", (), "int32")), ("dataset", ("tensor", (), "string")))},
                      what="window(...).element_spec")
    nested = D.from_tensors(ds)
    assert_spec_model(spec_model(tf, nested.element_spec), ("dataset", spec_model_of_value(value)), what="from_tensors(dataset)")
    inner = [list(e["b"][0].as_numpy_iterator()) for e in windows]
    assert_sequence([v for w in inner for v in w], range(n), what="window elements through their DatasetSpec")
    assert_sequence(_ints(nested.flat_map(lambda d: d.map(lambda e: tf.cast(e["b"][0], tf.int64)))), range(n),
                    what="a dataset of a dataset, flattened")
    # common supertype: the shape dimension that differs becomes unknown
    s2, s3 = tf.data.DatasetSpec(tf.TensorSpec([2], tf.int64)), tf.data.DatasetSpec(tf.TensorSpec([3], tf.int64))
    sup = s2.most_specific_common_supertype([s3])
    assert_spec_model(spec_model(tf, sup), ("dataset", ("tensor", (None,), "int64")), what="most_specific_common_supertype")
    assert s2.is_subtype_of(sup) and s3.is_subtype_of(sup) and not sup.is_subtype_of(s2)
    evidence.covers("DatasetSpec", "DatasetSpec+nested")


@pytest.mark.claim("data.tfdata.api-structure")
@budget(6)
@given(xs=INTS)
def test_iterator_get_next_and_optional(tf, xs):
    ds = _i64(tf, xs).map(lambda x: {"x": x, "y": tf.cast(x, tf.float64) / 2})
    it = iter(ds)
    assert isinstance(it, tf.data.Iterator)
    assert_spec_model(spec_model(tf, it.element_spec), spec_model(tf, ds.element_spec), what="Iterator.element_spec")
    got = [(int(e["x"]), float(e["y"])) for e in (it.get_next() for _ in xs)]
    assert_sequence(got, [(x, x / 2) for x in xs], what="get_next() over the dataset")
    with pytest.raises(tf.errors.OutOfRangeError):
        it.get_next()
    evidence.covers("Iterator+get_next", "Iterator+element_spec")
    it2 = iter(ds)
    seen = []
    for _ in range(len(xs) + 2):
        opt = it2.get_next_as_optional()
        if not bool(opt.has_value()):
            break
        seen.append(int(opt.get_value()["x"]))
    assert_sequence(seen, xs, what="get_next_as_optional() values")
    assert not bool(it2.get_next_as_optional().has_value()), "an exhausted iterator's optional should have no value"
    assert_sequence([int(e["x"]) for e in ds], xs, what="for-loop over the dataset")
    evidence.covers("Iterator+get_next_as_optional", "Iterator+for-loop")


@pytest.mark.claim("data.tfdata.api-structure")
def test_iterator_docstring_examples(tf):
    D = tf.data.Dataset
    it = iter(D.range(2))
    assert [int(it.get_next()), int(it.get_next())] == [0, 1]
    it = iter(D.from_tensors(42))
    assert it.element_spec == tf.TensorSpec([], tf.int32)
    opt = it.get_next_as_optional()
    assert bool(opt.has_value()) and int(opt.get_value()) == 42
    assert not bool(it.get_next_as_optional().has_value())
    spec = tf.data.DatasetSpec.from_value(D.range(3))
    assert spec.element_spec == tf.TensorSpec([], tf.int64)
    evidence.covers("Iterator+get_next", "Iterator+get_next_as_optional", "DatasetSpec")
