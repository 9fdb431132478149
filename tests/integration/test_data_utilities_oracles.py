"""Meta-tests for the data.torch.utilities and data.tfdata.transformations checks (issue 29):
the covering-array generator covers every allowed pair, and each reference or check passes
the real framework and fails a deliberately wrong implementation with a message a person can
act on: a random_split that gives the remainder to the last split, a ConcatDataset off by one
at its boundaries, collates that lose a NamedTuple or stack strings, a convert that adds a
batch dimension, a DataLoader that ignores drop_last or its generator, an interleave that
ignores block_length, a padded_batch that ignores padding_values, a window that ignores
drop_remainder, a sample_from_datasets that ignores its weights.
"""

from __future__ import annotations

import bisect
import itertools
import math

import numpy as np
import pytest

from suites.data import test_tfdata_transformations as tfs
from suites.data import test_torch_data_utilities as tu

# ------------------------------------------------------------------ covering arrays (no framework)


@pytest.mark.parametrize("sizes", [(2, 2), (2, 3, 2), (3, 3, 3, 3), (2, 2, 2, 2, 2, 2, 2), (4, 1, 3)])
def test_pairwise_covers_every_pair_with_fewer_cases(sizes):
    factors = {f"f{i}": list(range(s)) for i, s in enumerate(sizes)}
    cases = tu.pairwise(factors)
    assert tu.uncovered_pairs(cases, factors) == []
    assert cases == tu.pairwise(factors), "the generator must be deterministic"
    assert len(cases) <= math.prod(sizes)
    assert len(cases) >= max(a * b for a, b in itertools.combinations(sizes, 2))


def test_pairwise_respects_the_loader_constraint_and_covers_the_allowed_pairs():
    cases = tu.LOADER_CASES
    assert tu.uncovered_pairs(cases, tu.LOADER_FACTORS, tu.loader_allowed) == []
    assert all(tu.loader_allowed(c) for c in cases)
    assert len(cases) < math.prod(len(v) for v in tu.LOADER_FACTORS.values())


def test_uncovered_pairs_names_what_a_truncated_array_misses():
    factors = {"a": [0, 1], "b": [0, 1], "c": [0, 1]}
    cases = tu.pairwise(factors)
    missing = tu.uncovered_pairs(cases[:-1], factors)
    assert missing and all(" with " in m for m in missing), missing
    assert tu.uncovered_pairs([{"a": 1, "b": 1, "c": 1}], factors, lambda c: c.get("a") != 1)[-1].endswith("not allowed")


def test_split_lengths_follow_the_documented_rule():
    assert tu.reference_split_lengths(30, [0.3, 0.3, 0.4]) == [9, 9, 12]
    assert tu.reference_split_lengths(11, [0.5, 0.5]) == [6, 5]
    assert tu.reference_split_lengths(7, [0.25, 0.25, 0.25, 0.25]) == [2, 2, 2, 1]
    assert tu.reference_split_lengths(5, [2, 3]) == [2, 3]


def test_reference_collate_and_tf_references_reproduce_the_docstrings():
    assert tu.reference_batch_sampler(list(range(10)), 3, False) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert tu.reference_batch_sampler(list(range(10)), 3, True) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert tfs.ref_window(list(range(7)), 3, 3, 1, False) == [[0, 1, 2], [3, 4, 5], [6]]
    assert tfs.ref_window(list(range(7)), 3, 1, 2, True) == [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
    assert tfs.ref_rebatch([list(range(8))], [2, 1, 1], False) == [[0, 1], [2], [3], [4, 5], [6], [7]]
    assert tfs.ref_rebatch([list(range(7))], [3], True) == [[0, 1, 2], [3, 4, 5]]
    assert tfs.ref_padded_batch([[1], [2, 2], [3, 3, 3], [4, 4, 4, 4]], 2, 5, -1, False)[1] == [
        [3, 3, 3, -1, -1], [4, 4, 4, 4, -1]]
    assert tfs.ref_choose([["foo"] * 3, ["bar"] * 3, ["baz"] * 3], [0, 1, 2] * 3, True) == ["foo", "bar", "baz"] * 3
    assert tfs.ref_choose([[1], [2, 3]], [0, 0, 1, 1], True) == [1]
    assert tfs.ref_choose([[1], [2, 3]], [0, 0, 1, 1], False) == [1, 2, 3]
    assert sorted(tfs.ref_group_by_window(list(range(10)), lambda x: x % 2, 5)) == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    rows = [[0], [1, 2, 3, 4], [5, 6, 7], [7, 8, 9, 10, 11], [13, 14, 15, 16, 19, 20], [21, 22]]
    assert tfs.ref_bucket(rows, [3, 5], [2, 2, 2], False, False) == [
        [[1, 2, 3, 4], [5, 6, 7, 0]], [[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]], [[0, 0], [21, 22]]]


def test_assert_sequence_names_the_first_difference():
    tfs.assert_sequence([1, 2], [1, 2], what="w")
    with pytest.raises(AssertionError, match=r"w: 2 elements \[1, 3\], but should be 2 elements \[1, 2\] "
                                             r"\(first difference at position 1\)"):
        tfs.assert_sequence([1, 3], [1, 2], what="w")


# ------------------------------------------------------------------ torch twins

torch = pytest.importorskip("torch")


def test_random_split_check_fails_a_split_that_gives_the_remainder_to_the_last():
    from torch.utils.data import random_split

    tu.check_random_split(torch, random_split, 11, [0.5, 0.5], 3)

    def last_gets_rest(ds, lengths, generator=None):
        n = len(ds)
        ints = [math.floor(n * f) for f in lengths]
        ints[-1] += n - sum(ints)
        return random_split(ds, ints, generator=generator)

    with pytest.raises(AssertionError, match=r"lengths \[5, 6\], but should be \[6, 5\]"):
        tu.check_random_split(torch, last_gets_rest, 11, [0.5, 0.5], 3)

    def unseeded(ds, lengths, generator=None):
        return random_split(ds, lengths, generator=torch.Generator().manual_seed(int(torch.randint(0, 2**30, ()))))

    with pytest.raises(AssertionError, match="generator seed 3 twice gave"):
        tu.check_random_split(torch, unseeded, 20, [10, 10], 3)


def test_concat_check_fails_an_off_by_one_at_the_boundaries():
    from torch.utils.data import ConcatDataset

    tu.check_concat(ConcatDataset, [2, 0, 3])

    class OffByOne(ConcatDataset):
        def __getitem__(self, idx):
            idx = idx + len(self) if idx < 0 else idx
            k = bisect.bisect_left(self.cumulative_sizes, idx)
            return self.datasets[k][idx - (self.cumulative_sizes[k - 1] if k else 0)]

    with pytest.raises((AssertionError, IndexError)):
        tu.check_concat(OffByOne, [2, 0, 3])

    class NoNegative(ConcatDataset):
        def __getitem__(self, idx):
            return super().__getitem__(-idx - 1 if idx < 0 else idx)  # mirrored, not from the end

    with pytest.raises(AssertionError, match=r"\[-5\] is \(1, 2\), but should be \(0, 0\)"):
        tu.check_concat(NoNegative, [2, 3])


def test_collate_check_fails_collates_that_break_the_type_mapping():
    from torch.utils.data import default_collate

    batch = [tu.Point(np.arange(2), "a"), tu.Point(np.arange(2) + 1, "b")]
    want = tu.reference_collate(batch)
    tu.assert_collated(torch, default_collate(batch), want)
    with pytest.raises(AssertionError, match="should stay the namedtuple Point"):
        tu.assert_collated(torch, list(default_collate(batch)), want)
    with pytest.raises(AssertionError, match=r"batch\.y: tensor .*but should be"):
        tu.assert_collated(torch, tu.Point(default_collate(batch).x, torch.tensor([1, 2])),
                           ("namedtuple", tu.Point, [want[2][0], ("tensor", np.array([1, 3]), False)]))
    pairs = [(1, 2.0), (3, 4.0)]
    with pytest.raises(AssertionError, match="a sequence should become a list"):
        tu.assert_collated(torch, tuple(default_collate(pairs)), tu.reference_collate(pairs))
    with pytest.raises(AssertionError, match=r"batch\[0\]: tensor float32"):
        tu.assert_collated(torch, [torch.tensor([1.0, 3.0]), torch.tensor([2.0, 4.0])], tu.reference_collate(pairs))


def test_convert_check_fails_a_convert_that_adds_a_batch_dimension():
    from torch.utils.data import default_convert

    elem = {"a": np.arange(3), "b": [np.ones(2), 5]}
    tu.check_default_convert(torch, default_convert, elem)
    with pytest.raises(AssertionError, match=r"default_convert\(element\[.a.\]\): int64\[1, 3\], should be int64\[3\]"):
        tu.check_default_convert(torch, lambda e: {"a": torch.as_tensor(e["a"])[None], "b": e["b"]}, elem)


def test_loader_case_check_fails_loaders_that_ignore_drop_last_or_the_generator():
    from torch.utils.data import DataLoader

    case = {"num_workers": 0, "batch_size": 4, "shuffle": True, "seeding": "generator", "drop_last": True,
            "collate_fn": "default"}
    tu.check_loader_case(torch, DataLoader, case, 11, 5)

    def keeps_last(ds, **kw):
        return DataLoader(ds, **{**kw, "drop_last": False})

    with pytest.raises(AssertionError, match=r"yielded indices .*, but should be"):
        tu.check_loader_case(torch, keeps_last, case, 11, 5)

    def own_generator(ds, **kw):
        kw["generator"] = torch.Generator().manual_seed(int(torch.randint(0, 2**30, ())))
        return DataLoader(ds, **kw)

    with pytest.raises(AssertionError):
        tu.check_loader_case(torch, own_generator, case, 11, 5)


# ------------------------------------------------------------------ tf twins

tf = pytest.importorskip("tensorflow")


def test_interleave_check_fails_an_interleave_that_ignores_block_length():
    tfs.check_interleave(tf, tfs._interleave, [3, 2, 4], 2, 2, 2)

    def no_blocks(ds, f, cycle, block, parallel, det):
        return tfs._interleave(ds, f, cycle, 1, parallel, det)

    with pytest.raises(AssertionError, match=r"interleave\(cycle_length=2, block_length=2.*first difference at position 1"):
        tfs.check_interleave(tf, no_blocks, [3, 2, 4], 2, 2, 2)


def test_padded_batch_check_fails_when_padding_values_are_ignored():
    rows = [[1], [2, 2], [3, 3, 3]]
    tfs.check_padded_batch(tf, tfs._padded_batch, rows, 2, None, -1, False)

    def zero_padding(ds, batch, shapes, values, drop):
        return tfs._padded_batch(ds, batch, shapes, None, drop)

    with pytest.raises(AssertionError, match=r"padding_values=-1.*first difference at position 0"):
        tfs.check_padded_batch(tf, zero_padding, rows, 2, None, -1, False)


def test_window_check_fails_when_drop_remainder_is_ignored():
    tfs.check_window(tf, tfs._window, list(range(7)), 3, 1, 1, True)

    def keeps_short(ds, size, shift, stride, drop):
        return tfs._window(ds, size, shift, stride, False)

    with pytest.raises(AssertionError, match=r"drop_remainder=True\) of .*: 7 elements .*but should be 5 elements"):
        tfs.check_window(tf, keeps_short, list(range(7)), 3, 1, 1, True)


def test_sample_frequency_check_fails_a_sampler_that_ignores_its_weights():
    from pytest_dlconform.checks.stats import StatisticalViolation

    tfs.check_sample_frequencies(tf, tfs._sample, [0.8, 0.2], 7, 1e-6)

    def uniform(datasets, weights, seed):
        return tfs._sample(datasets, None, seed)

    with pytest.raises(StatisticalViolation, match="sample_from_datasets"):
        tfs.check_sample_frequencies(tf, uniform, [0.8, 0.2], 7, 1e-6)
