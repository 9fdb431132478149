"""Meta-tests for suites/data/test_tfdata_api.py's references and checks: each reference
reproduces values its docstring prints or a hand-computed case, and each check fails a
deliberately wrong implementation (modelled in Python) with a message naming the case.

No framework: the wrong implementations are Python and numpy.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import numpy as np
import pytest

from pytest_dlconform.suites.data import test_tfdata_api as api


def test_assert_sequence_names_the_first_difference():
    api.assert_sequence([1, 2, 3], [1, 2, 3], what="ok")
    with pytest.raises(AssertionError, match=r"filter: 2 elements \[1, 3\], but should be 2 elements \[1, 2\] "
                                             r"\(first difference at position 1\)"):
        api.assert_sequence([1, 3], [1, 2], what="filter")


def test_assert_same_multiset_catches_a_lost_or_repeated_element():
    api.assert_same_multiset([3, 1, 2], [1, 2, 3], what="ok")
    with pytest.raises(AssertionError, match=r"snapshot: not the same elements; missing \{2: 1\}, extra \{1: 1\}"):
        api.assert_same_multiset([1, 1, 3], [1, 2, 3], what="snapshot")


def test_assert_interleaved_accepts_any_interleaving_but_not_reordering_within_a_file():
    files = [[b"a0", b"a1", b"a2"], [b"b0", b"b1"]]
    api.assert_interleaved([b"a0", b"b0", b"a1", b"b1", b"a2"], files, what="ok")
    api.assert_interleaved([b"b0", b"b1", b"a0", b"a1", b"a2"], files, what="ok")
    with pytest.raises(AssertionError, match=r"reads: file 0's records come as \[b'a1', b'a0', b'a2'\], out of their file order"):
        api.assert_interleaved([b"a1", b"b0", b"a0", b"b1", b"a2"], files, what="reads")
    with pytest.raises(AssertionError, match="missing"):  # a parallel reader that drops a file's last record
        api.assert_interleaved([b"a0", b"b0", b"a1", b"b1"], files, what="reads")


def test_ref_counter_reproduces_the_docstring():
    assert api.ref_counter(0, 1, 5) == [0, 1, 2, 3, 4]
    assert api.ref_counter(2, 5, 5) == [2, 7, 12, 17, 22]
    assert api.ref_counter(10, -1, 5) == [10, 9, 8, 7, 6]
    wrong = [2 + i * 5 for i in range(1, 6)]  # a counter that skips its start
    with pytest.raises(AssertionError, match="first difference at position 0"):
        api.assert_sequence(wrong, api.ref_counter(2, 5, 5), what="counter(start=2, step=5)")


def test_ref_sparse_batch_reproduces_the_docstring_and_catches_a_wrong_dense_shape():
    rows = [np.array([1, 2, 3]), np.array([4, 5]), np.array([6, 7, 8, 9])]
    assert api.ref_sparse_batch(rows, 2, [6]) == [
        ([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]], [1, 2, 3, 4, 5], [2, 6]),
        ([[0, 0], [0, 1], [0, 2], [0, 3]], [6, 7, 8, 9], [1, 6])]
    two_d = api.ref_sparse_batch([np.array([[1, 2], [3, 4]])], 2, [3, 2])
    assert two_d == [([[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1]], [1, 2, 3, 4], [1, 3, 2])]

    def wrong(rows, batch, row_shape):  # the nominal batch size instead of the effective one
        return [(i, v, [batch, *row_shape]) for i, v, _ in api.ref_sparse_batch(rows, batch, row_shape)]

    with pytest.raises(AssertionError, match="first difference at position 1"):
        api.assert_sequence(wrong(rows, 2, [6]), api.ref_sparse_batch(rows, 2, [6]), what="sparse_batch")


def test_check_fingerprints_catches_a_fingerprint_blind_to_content():
    good = [("range(3)", 1, [0, 1, 2]), ("range(3) again", 1, [0, 1, 2]), ("range(4)", 2, [0, 1, 2, 3])]
    assert api.check_fingerprints(good, what="ok") == 1
    # a fingerprint of the graph shape only (the constants left out): equal for different data
    blind = [("from_tensor_slices([1, 2])", 7, [1, 2]), ("from_tensor_slices([2, 1])", 7, [2, 1])]
    with pytest.raises(AssertionError, match=r"from_tensor_slices\(\[1, 2\]\) and from_tensor_slices\(\[2, 1\]\) share the "
                                             r"fingerprint 0x7 but produce different elements"):
        api.check_fingerprints(blind, what="fingerprints")


def test_check_epochs_catches_rerandomize_ignored_either_way():
    api.check_epochs([[1, 2], [1, 2]], False, what="ok")
    api.check_epochs([[1, 2], [3, 4]], True, what="ok")
    with pytest.raises(AssertionError, match=r"epoch 1 repeats epoch 0 .* with rerandomize_each_iteration=True"):
        api.check_epochs([[1, 2], [1, 2], [5, 6]], True, what="random(seed=4)")
    with pytest.raises(AssertionError, match=r"epoch 1 gives \[3, 4\]..., not epoch 0's \[1, 2\]"):
        api.check_epochs([[1, 2], [3, 4]], False, what="random(seed=4)")


def test_check_resampled_catches_the_initial_distribution_and_a_zero_class():
    rng = np.random.default_rng(0)
    target = [0.2, 0.3, 0.5]
    api.check_resampled(rng.choice(3, size=2000, p=target).tolist(), target, alpha=api.RESAMPLE_ALPHA, what="ok")
    # a resampler that ignores the target (issue 28598's symptom): the initial distribution comes out
    initial = rng.choice(3, size=2000, p=[0.5, 0.375, 0.125]).tolist()
    with pytest.raises(AssertionError, match="rejection_resample: category 0"):
        api.check_resampled(initial, target, alpha=api.RESAMPLE_ALPHA, what="rejection_resample")
    with pytest.raises(AssertionError, match=r"classes \[2\] have target probability 0 but came \[1\] times"):
        api.check_resampled([0, 1] * 500 + [2], [0.5, 0.5, 0.0], alpha=api.RESAMPLE_ALPHA, what="rejection_resample")


def test_crc32c_matches_the_standard_check_value_and_tfrecord_framing():
    assert api.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    assert api.crc32c(b"") == 0
    framed = api.tfrecord_bytes([b"abc"])
    length, = struct.unpack("<Q", framed[:8])
    assert length == 3 and framed[12:15] == b"abc" and len(framed) == 8 + 4 + 3 + 4
    c = api.crc32c(b"abc")
    assert struct.unpack("<I", framed[15:])[0] == (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert api.masked_crc32c(b"abc") != api.crc32c(b"abc")  # the unmasked CRC is a wrong writer


def test_compress_round_trips_with_the_standard_library():
    data = b"the cow\njumped over\n"
    assert zlib.decompress(api.compress(data, "ZLIB")) == data
    assert gzip.decompress(api.compress(data, "GZIP")) == data
    assert api.compress(data, "") == data


def test_ref_text_lines_and_fixed_length_reproduce_the_docstrings():
    assert api.ref_text_lines(b"the cow\njumped over\nthe moon\n") == [b"the cow", b"jumped over", b"the moon"]
    assert api.ref_text_lines(b"a\n\nb") == [b"a", b"", b"b"]  # an empty line is a line; no final newline
    assert api.ref_fixed_length(b"HEADER012345FOOTER", 2, 6, 6) == [b"01", b"23", b"45"]
    # a reader that keeps the footer as records
    wrong = [b"01", b"23", b"45", b"FO", b"OT", b"ER"]
    with pytest.raises(AssertionError, match=r"6 elements .* but should be 3 elements"):
        api.assert_sequence(wrong, api.ref_fixed_length(b"HEADER012345FOOTER", 2, 6, 0 + 6), what="footer")
    # a reader that keeps the trailing newline
    with pytest.raises(AssertionError, match="position 0"):
        api.assert_sequence([b"the cow\n"], api.ref_text_lines(b"the cow\n"), what="TextLineDataset")


def test_spec_model_of_value_and_its_check():
    value = {"a": np.zeros((4, 3)), "b": (np.arange(4, dtype=np.int32), np.array([b"x"] * 4))}
    want = {"a": ("tensor", (3,), "float64"), "b": (("tensor", (), "int32"), ("tensor", (), "string"))}
    assert api.spec_model_of_value(value) == want
    assert api.spec_model_of_value(value, batch=None)["a"] == ("tensor", (None, 3), "float64")
    assert api.spec_model_of_value(value, batch=2)["b"][0] == ("tensor", (2,), "int32")
    # a batch with drop_remainder=True that leaves the batch dimension unknown
    with pytest.raises(AssertionError, match=r"batch: element_spec .*\(None, 3\).*, but should be .*\(2, 3\)"):
        api.assert_spec_model(api.spec_model_of_value(value, batch=None), api.spec_model_of_value(value, batch=2),
                              what="batch")
