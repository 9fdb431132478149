"""data.tfdata.*: tf.data keeps content and order through map/batch/prefetch, shuffles within its
buffer, and parallel map keeps order when deterministic.

Oracles: numpy slicing of the generated input (checks.pipelines.reference_batches) and the
buffer guarantee of Dataset.shuffle (checks.pipelines.assert_buffered_shuffle).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence
from pytest_dlconform.api.pipelines import (
    assert_batches_equal,
    assert_buffered_shuffle,
    assert_permutation,
    reference_batches,
    same_order_bound,
)

PREFETCH = st.sampled_from([None, 0, 1, 3, "autotune"])


def _values(n: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-1000, 1000, (n, width)).astype(np.int64)


def _prefetch(tf, ds, k):
    if k is None:
        return ds
    return ds.prefetch(tf.data.AUTOTUNE if k == "autotune" else k)


@pytest.mark.claim("data.tfdata.pipeline")
@budget(15)
@given(n=st.integers(0, 40), width=st.integers(1, 3), batch=st.integers(1, 9), drop=st.booleans(),
       prefetch=PREFETCH, seed=st.integers(0, 2**32 - 1))
def test_map_batch_prefetch_keep_content_and_order(tf, n, width, batch, drop, prefetch, seed):
    x = _values(n, width, seed)
    ds = tf.data.Dataset.from_tensor_slices(x).map(lambda v: v * 3 + 1)
    ds = _prefetch(tf, ds.batch(batch, drop_remainder=drop), prefetch)
    want = [(x[idx] * 3 + 1) if idx else np.zeros((0, width), np.int64) for idx in reference_batches(n, batch, drop)]
    for epoch in range(2):  # a dataset iterates the same way each time
        got = [b.numpy() for b in ds]
        assert_batches_equal(got, want, what=f"map->batch({batch}, drop_remainder={drop})->prefetch({prefetch}), epoch {epoch}")
    spec = ds.element_spec.shape
    assert spec[0] == (batch if drop else None), (
        f"batch dimension {spec[0]}, but should be {batch if drop else None} (drop_remainder={drop})")
    card = int(ds.cardinality())
    assert card == (n // batch if drop else math.ceil(n / batch)), f"cardinality {card} for n={n}, batch={batch}, drop={drop}"


@pytest.mark.claim("data.tfdata.shuffle")
@budget(15)
@given(n=st.integers(1, 60), buffer=st.integers(1, 70), seed=st.integers(0, 2**31 - 1))
def test_shuffle_is_a_buffered_seeded_permutation(tf, n, buffer, seed):
    ds = tf.data.Dataset.range(n).shuffle(buffer, seed=seed)
    first = [int(v) for v in ds]
    assert_buffered_shuffle(first, n, buffer, what=f"shuffle({buffer}, seed={seed}) of {n}")
    again = [int(v) for v in tf.data.Dataset.range(n).shuffle(buffer, seed=seed)]
    assert again == first, f"a second dataset with seed {seed} gave {again[:10]}..., but should repeat {first[:10]}..."
    fixed = tf.data.Dataset.range(n).shuffle(buffer, seed=seed, reshuffle_each_iteration=False)
    epochs = [[int(v) for v in fixed] for _ in range(3)]
    assert epochs[1] == epochs[0] and epochs[2] == epochs[0], "reshuffle_each_iteration=False must repeat the order"
    second = [int(v) for v in ds]  # reshuffle_each_iteration defaults to True
    assert_buffered_shuffle(second, n, buffer, what="second epoch")
    bound = same_order_bound(n, buffer)
    if bound <= 1e-6:  # only where a correct shuffle repeats an order with probability <= 1e-6
        assert second != first, f"the second epoch repeated the first's order (probability <= {bound:.1e} if reshuffled)"
    evidence.note(reshuffle_checked=bound <= 1e-6)


@pytest.mark.claim("data.tfdata.parallel")
@budget(8)
@given(n=st.integers(0, 50), calls=st.sampled_from([1, 2, 4, "autotune"]), seed=st.integers(0, 2**32 - 1),
       how=st.sampled_from(["argument", "options"]))
def test_parallel_map_deterministic_keeps_order(tf, n, calls, seed, how):
    x = _values(n, 2, seed)
    k = tf.data.AUTOTUNE if calls == "autotune" else calls

    def f(v):  # uneven work per element, so a non-deterministic map could reorder
        work = tf.reduce_sum(tf.ones(tf.abs(v[0]) % 7 * 500 + 1))
        return tf.cast(work * 0, v.dtype) + v * 2

    want = [v * 2 for v in x]
    base = tf.data.Dataset.from_tensor_slices(x)
    for det in (None, True):
        ds = base.map(f, num_parallel_calls=k, deterministic=det)
        assert_batches_equal([v.numpy() for v in ds], want, what=f"map(num_parallel_calls={calls}, deterministic={det})")
    if how == "argument":
        loose = base.map(f, num_parallel_calls=k, deterministic=False)
    else:
        options = tf.data.Options()
        options.deterministic = False
        loose = base.map(f, num_parallel_calls=k).with_options(options)
    assert_permutation([tuple(v.numpy()) for v in loose], [tuple(v) for v in want], what=f"non-deterministic map ({how})")
