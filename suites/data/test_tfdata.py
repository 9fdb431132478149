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
    evidence.covers("map", f"batch+drop_remainder={drop}", "repeat-epochs",
                    "prefetch=none" if prefetch is None else f"prefetch={'AUTOTUNE' if prefetch == 'autotune' else 'k'}")


def _orders(ds, epochs: int) -> list[list[int]]:
    return [[int(v) for v in ds] for _ in range(epochs)]


def check_shuffle_seeding(tf, make, n: int, buffer: int, seed: int, seeding: str, reshuffle: bool) -> bool:
    """Dataset.shuffle(buffer, seed, reshuffle_each_iteration) under each documented way of seeding.

    tf.random.set_seed: "If the global seed is set but the operation seed is not ... the system
    deterministically picks an operation seed in conjunction with the global seed" (and set_seed
    resets that choice); an operation seed alone, or both, fix the sequence too. So two pipelines
    built the same way after the same seeding give the same sequence of epoch orders; successive
    pipelines under one global seed get distinct operation seeds. With reshuffle_each_iteration
    False every epoch repeats the first; True reshuffles. ``make(buffer, seed, reshuffle)`` builds
    the pipeline (a twin may ignore an argument). Returns whether "reshuffles" was checkable
    (a repeat probability <= 1e-6)."""
    __tracebackhide__ = True
    op_seed = seed if "seed=op" in seeding else None

    def build():
        if "set_seed" in seeding:
            tf.random.set_seed(seed)
        return make(buffer, op_seed, reshuffle)

    first = _orders(build(), 3)
    for e, order in enumerate(first):
        assert_buffered_shuffle(order, n, buffer, what=f"shuffle({buffer}), {seeding}, epoch {e}")
    bound = same_order_bound(n, buffer)
    if seeding == "set_seed-distinct-ops":
        tf.random.set_seed(seed)
        a, b = make(buffer, None, reshuffle), make(buffer, None, reshuffle)
        if bound <= 1e-6:
            assert _orders(a, 1) != _orders(b, 1), (
                f"two shuffles created after one tf.random.set_seed({seed}) gave the same order (distinct op seeds "
                f"repeat an order with probability <= {bound:.1e})")
        return bound <= 1e-6
    again = _orders(build(), 3)
    assert again == first, f"a second pipeline seeded the same way ({seeding}) gave epochs {again}, but should repeat {first}"
    if not reshuffle:
        assert first[1] == first[0] and first[2] == first[0], (
            f"reshuffle_each_iteration=False must repeat the first epoch's order ({seeding}): {first}")
    elif bound <= 1e-6:  # only where a correct reshuffle repeats an order with probability <= 1e-6
        assert first[1] != first[0], f"the second epoch repeated the first's order (probability <= {bound:.1e} if reshuffled)"
    return bound <= 1e-6


SEEDINGS = ["seed=op", "tf.random.set_seed", "tf.random.set_seed+seed=op", "set_seed-distinct-ops"]


@pytest.mark.claim("data.tfdata.shuffle")
@pytest.mark.parametrize("seeding", SEEDINGS)
@pytest.mark.parametrize("reshuffle", [True, False])
@budget(3)
@given(n=st.integers(1, 60), buffer=st.integers(1, 70), seed=st.integers(0, 2**31 - 1))
def test_shuffle_is_a_buffered_seeded_permutation(tf, seeding, reshuffle, n, buffer, seed):
    def make(b, s, r):
        return tf.data.Dataset.range(n).shuffle(b, seed=s, reshuffle_each_iteration=r)

    checked = check_shuffle_seeding(tf, make, n, buffer, seed, seeding, reshuffle)
    evidence.covers(seeding, f"reshuffle_each_iteration={reshuffle}", "buffer_size")
    evidence.note(reshuffle_checked=checked)


@pytest.mark.claim("data.tfdata.parallel")
@pytest.mark.parametrize("how", ["argument", "options"])
@pytest.mark.parametrize("calls", [2, "autotune"])
@budget(2)
@given(n=st.integers(0, 50), seed=st.integers(0, 2**32 - 1))
def test_parallel_map_deterministic_keeps_order(tf, how, calls, n, seed):
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
    # The argument overrides the option: deterministic=True keeps the order under Options(deterministic=False).
    options = tf.data.Options()
    options.deterministic = False
    pinned = base.map(f, num_parallel_calls=k, deterministic=True).with_options(options)
    assert_batches_equal([v.numpy() for v in pinned], want,
                         what=f"map(num_parallel_calls={calls}, deterministic=True) with Options.deterministic=False")
    evidence.covers("num_parallel_calls=AUTOTUNE" if calls == "autotune" else "num_parallel_calls=k",
                    "deterministic=None", "deterministic=True", f"deterministic=False+{how}", "argument-overrides-options")
