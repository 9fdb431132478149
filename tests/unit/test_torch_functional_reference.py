"""Meta-tests for suites/modules/test_torch_functional.py and _torch_functional_reference.py: the
table names every listed function and the claim declares exactly the table's modes, the references
reproduce values their docstrings print, and each check fails a deliberately wrong implementation
(a sign flip, a half-pixel shift, a wrong cubic coefficient, a wrong padding rule, a dropped
accumulation, a NaN) with a message naming the case.

No framework: the wrong implementations are numpy.
"""

from __future__ import annotations

import sys
from importlib import resources

import numpy as np
import pytest

from pytest_dlconform.api import ToleranceExceeded
from pytest_dlconform.suites.modules import _torch_functional_reference as ref
from pytest_dlconform.suites.modules import test_torch_functional as tf_

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RNG = np.random.default_rng(7)


def _claim() -> dict:
    text = resources.files("pytest_dlconform.core.claims").joinpath("modules.torch-functional.toml").read_text()
    (claim,) = tomllib.loads(text)["claim"]
    return claim


def test_table_names_every_function_and_the_claim_its_modes():
    missing = [n for n in tf_.FUNCTIONS if n not in tf_.RECORD_IDS and n not in tf_.OUT_OF_SCOPE]
    assert missing == []
    declared = set(_claim()["modes"])
    table = {m for r in tf_.RECORDS for m in (r.name, *r.modes)} | {"table-complete"}
    assert declared == table


def test_close_fails_a_sign_flip_in_softshrink():
    x = RNG.uniform(-3, 3, 50)
    wrong = np.where(x > 0.5, x + 0.5, np.where(x < -0.5, x - 0.5, 0.0))  # the shift's sign flipped
    with pytest.raises(ToleranceExceeded, match="softshrink twin"):
        tf_._close(wrong, ref.softshrink(x, 0.5), "softshrink twin", magnitude=3.0)


def test_close_fails_a_nan():
    x = RNG.uniform(-3, 3, 10)
    wrong = ref.sigmoid(x)
    wrong[3] = np.nan
    with pytest.raises(AssertionError, match="sigmoid twin"):
        tf_._close(wrong, ref.sigmoid(x), "sigmoid twin", ops=3)


def test_interpolate_reference_tells_nearest_exact_from_nearest():
    x = RNG.uniform(-3, 3, (1, 1, 5))
    legacy = ref.interpolate(x, (3,), "nearest", False)  # the mutant's half-pixel bug
    with pytest.raises(AssertionError, match="nearest-exact twin"):
        tf_._equal(legacy, ref.interpolate(x, (3,), "nearest-exact", False), "nearest-exact twin")
    # docstring semantics by hand: 5 -> 3, nearest-exact picks floor((i + 0.5) * 5/3) = 0, 2, 4
    np.testing.assert_array_equal(ref.interpolate(x, (3,), "nearest-exact", False)[0, 0], x[0, 0, [0, 2, 4]])
    np.testing.assert_array_equal(legacy[0, 0], x[0, 0, [0, 1, 3]])


def test_bicubic_reference_fails_a_wrong_coefficient():
    x = RNG.uniform(-3, 3, (1, 1, 5, 4))
    good = ref.interpolate(x, (7, 9), "bicubic", False)
    saved = ref._cubic.__defaults__
    try:
        ref._cubic.__defaults__ = (-0.5,)  # Keys' A = -0.5 instead of torch's documented -0.75
        wrong = ref.interpolate(x, (7, 9), "bicubic", False)
    finally:
        ref._cubic.__defaults__ = saved
    with pytest.raises(ToleranceExceeded, match="bicubic twin"):
        tf_._close(wrong, good, "bicubic twin", ops=8, reduction=16, magnitude=3 * 2.25)


def test_linear_align_corners_matters_and_rows_sum_to_one():
    a = ref.interp_matrix(4, 7, "linear", True)
    b = ref.interp_matrix(4, 7, "linear", False)
    np.testing.assert_allclose(a.sum(1), 1.0)
    np.testing.assert_allclose(b.sum(1), 1.0)
    assert np.abs(a - b).max() > 0.1
    np.testing.assert_allclose(a[[0, -1]], np.eye(4)[[0, -1]])  # corners align


def test_grid_sample_reference_tells_reflection_from_border():
    x = RNG.uniform(-3, 3, (1, 1, 4, 5))
    grid = np.array([[[[1.3, -1.2], [-1.25, 0.4]]]])
    refl = ref.grid_sample(x, grid, "bilinear", "reflection", False)
    border = ref.grid_sample(x, grid, "bilinear", "border", False)
    with pytest.raises(ToleranceExceeded, match="reflection twin"):
        tf_._close(border, refl, "reflection twin", ops=12, reduction=4, magnitude=3.0)
    zeros = ref.grid_sample(x, np.array([[[[5.0, 5.0]]]]), "bilinear", "zeros", True)
    assert zeros.item() == 0.0  # fully outside: zero padding


def test_adaptive_bins_fail_a_floor_end():
    good = ref.adaptive_bins(7, 3)
    assert good == [(0, 3), (2, 5), (4, 7)]
    wrong = [((i * 7) // 3, ((i + 1) * 7) // 3) for i in range(3)]  # end floored: windows miss elements
    assert wrong != good


def test_channel_shuffle_reference_matches_the_docstring_and_fails_the_transpose():
    x = np.arange(1, 17, dtype=np.float64).reshape(1, 4, 2, 2)
    np.testing.assert_array_equal(ref.channel_shuffle(x, 2)[0, :, 0, 0], [1, 9, 5, 13])
    y = RNG.uniform(-3, 3, (2, 6, 1, 1))
    wrong = y.reshape(2, 6 // 3, 3, 1, 1).swapaxes(1, 2).reshape(2, 6, 1, 1)  # groups and size swapped
    with pytest.raises(AssertionError, match="shuffle twin"):
        tf_._equal(wrong, ref.channel_shuffle(y, 3), "shuffle twin")


def test_fold_reference_fails_a_dropped_accumulation():
    cols = RNG.uniform(-3, 3, (1, 4, 16))
    good = ref.fold(cols, (5, 5), 2)
    wrong = np.zeros_like(good)
    blocks = cols.reshape(1, 1, 2, 2, 4, 4)
    for i in range(2):
        for j in range(2):
            wrong[:, :, i:i + 4, j:j + 4] = blocks[:, :, i, j]  # overwrites instead of summing overlaps
    with pytest.raises(ToleranceExceeded, match="fold twin"):
        tf_._close(wrong, good, "fold twin", reduction=4, magnitude=12.0)
    np.testing.assert_array_equal(ref.unfold(ref.fold(np.ones((1, 4, 1)), (2, 2), 2), 2), np.ones((1, 4, 1)))


def test_lrn_reference_fails_a_shifted_window():
    x = RNG.uniform(-3, 3, (1, 5, 2))
    good = ref.local_response_norm(x, 2, 0.5, 0.75, 1.0)
    sq = x * x
    wrong = np.stack([x[:, c] / (1 + 0.5 / 2 * sq[:, c:c + 2].sum(1)) ** 0.75 for c in range(5)], 1)  # window ahead
    with pytest.raises(ToleranceExceeded, match="lrn twin"):
        tf_._close(wrong, good, "lrn twin", ops=6, reduction=2)


def test_embedding_bag_reference_excludes_padding_and_empty_bag_is_zero():
    w = RNG.uniform(-3, 3, (5, 2))
    idx, offs = np.array([1, 4, 2, 3]), np.array([0, 2, 2])
    got = ref.embedding_bag(idx, w, offs, "mean", None, False, 4)
    np.testing.assert_array_equal(got[0], w[1])  # the padding entry neither summed nor counted
    np.testing.assert_array_equal(got[1], 0.0)  # empty bag
    with_pad = ref.embedding_bag(idx, w, offs, "mean", None, False, None)  # the mutant's bug
    with pytest.raises(ToleranceExceeded, match="padding twin"):
        tf_._close(with_pad, got, "padding twin", ops=2, reduction=3, magnitude=27.0)


def test_alpha_dropout_parameters_keep_zero_mean_unit_variance():
    p = 0.3
    a, b, ap = ref.alpha_dropout_params(p)
    mean_z = p * ap  # z = x * mask + a' (1 - mask), x ~ N(0, 1)
    var_z = (1 - p) + p * ap * ap - mean_z * mean_z
    assert abs(a * mean_z + b) < 1e-15
    assert abs(a * a * var_z - 1) < 1e-14
    assert abs(ap + 1.7580993408473766) < 1e-15


def test_max_unpool_and_pixel_shuffle_references_by_hand():
    vals, idx = np.array([[[5.0, 7.0]]]), np.array([[[1, 2]]])
    np.testing.assert_array_equal(ref.max_unpool(vals, idx, (4,)), [[[0, 5, 7, 0]]])
    x = np.arange(4.0).reshape(4, 1, 1)
    np.testing.assert_array_equal(ref.pixel_shuffle(x, 2), [[[0, 1], [2, 3]]])
    np.testing.assert_array_equal(ref.pixel_unshuffle(ref.pixel_shuffle(x, 2), 2), x)


def test_attention_reference_by_hand_and_fails_a_missing_scale():
    e, heads = 4, 2
    q, k, v = (RNG.uniform(-1, 1, (3, 1, e)) for _ in range(3))
    eye = np.eye(e)
    out, w = ref.multi_head_attention(q, k, v, heads, eye, eye, eye, None, eye, None, average=False)
    d = e // heads
    for h in range(heads):
        s = q[:, 0, h * d:(h + 1) * d] @ k[:, 0, h * d:(h + 1) * d].T / np.sqrt(d)
        p = np.exp(s) / np.exp(s).sum(1, keepdims=True)
        np.testing.assert_allclose(w[0, h], p, rtol=1e-14)
        np.testing.assert_allclose(out[:, 0, h * d:(h + 1) * d], p @ v[:, 0, h * d:(h + 1) * d], rtol=1e-13)
    unscaled, _ = ref.multi_head_attention(q * np.sqrt(d), k, v, heads, eye, eye, eye, None, eye, None)  # no 1/sqrt(d)
    with pytest.raises(ToleranceExceeded, match="attention twin"):
        tf_._close(unscaled, out, "attention twin", ops=12, reduction=18, magnitude=4.0)
    mask = np.array([[False, True, False]] * 3)
    _, wm = ref.multi_head_attention(q, k, v, heads, eye, eye, eye, None, eye, None, attn_mask=mask)
    assert (wm[0, :, 1] == 0).all()  # True: not allowed to attend
