"""Meta-tests for the tf.nn suite (suites/modules/test_tf_nn.py, _tf_nn_reference.py): the references
reproduce values the docstrings print and naive loops, and the suite's own record functions, fed a
fake ``tf`` whose functions are deliberately wrong numpy implementations (a sign flip, a wrong
padding offset, average pooling counting the padding, a dropped Stirling term, a wrong tie rule, a
NaN), fail with a message naming the function and case.

No framework: the fake ``tf.nn`` is numpy.
"""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import ToleranceExceeded
from pytest_dlconform.suites.modules import _tf_nn_reference as ref
from pytest_dlconform.suites.modules import test_tf_nn as suite


def fake_tf(**nn: Any) -> Any:
    return SimpleNamespace(nn=SimpleNamespace(**nn), constant=lambda x, *a, **k: np.asarray(x),
                           float64=np.float64, as_dtype=lambda d: d)


# ----------------------------------------------------------------------------- references


def test_conv_matches_naive_loops_with_tf_same_padding() -> None:
    x, w = suite.vals((1, 6, 2), 1), suite.vals((3, 2, 1), 2)
    # SAME, stride 2: out = 3, pad_total = max((3-1)*2 + 3 - 6, 0) = 1, pad_before = 0
    xp = np.pad(x, [(0, 0), (0, 1), (0, 0)])
    naive = np.array([[[sum(xp[0, 2 * o + k] @ w[k] for k in range(3))[0]] for o in range(3)]])
    np.testing.assert_allclose(ref.conv(x, w, [2], "SAME"), naive, rtol=1e-14)
    assert ref.out_and_pad(6, 3, 2, 1, "SAME") == (3, 0, 1)
    assert ref.out_and_pad(7, 3, 1, 2, "VALID") == (3, 0, 0)


def test_conv_transpose_is_the_adjoint_of_conv() -> None:
    x, w = suite.vals((1, 5, 4, 2), 3), suite.vals((3, 2, 2, 3), 4)
    for s, p in [(1, "SAME"), (2, "SAME"), (2, "VALID")]:
        y = ref.conv(x, w, [s, s], p)
        dy = suite.vals(y.shape, 5)
        back = ref.conv_transpose(dy, w, list(x.shape), [s, s], p)  # the same filter tensor
        assert math.isclose(float(np.sum(y * dy)), float(np.sum(x * back)), rel_tol=1e-12)


def test_documented_examples() -> None:
    y, seg = ref.isotonic(np.array([3.0, 1.0, 2.0]), True)
    np.testing.assert_allclose(y, [3.0, 1.5, 1.5])
    assert seg.tolist() == [0, 1, 1]
    y, seg = ref.isotonic(np.array([1.0, 3.0, 4.0]), True)
    np.testing.assert_allclose(y, [8 / 3] * 3)
    assert seg.tolist() == [0, 0, 0]
    labels, lens = ref.collapse_repeated(np.array([[1, 1, 2, 2, 1], [1, 2, 3, 4, 5]]), np.array([5, 5]))
    assert labels.tolist() == [[1, 2, 1, 0, 0], [1, 2, 3, 4, 5]] and lens.tolist() == [3, 5]
    a, b, blank = 0, 1, 2  # "A B B * B * B" -> "A B B B" (merge) / "A B B B B"
    path = [a, b, b, blank, b, blank, b]
    assert ref.ctc_collapse(path, blank, True) == (a, b, b, b)
    assert ref.ctc_collapse(path, blank, False) == (a, b, b, b, b)
    assert ref.in_top_k(np.array([1]), np.array([[0.5, 0.7, 0.7, 0.1]]), 1).tolist() == [True]


def test_ctc_exhaustive_probabilities_sum_to_one() -> None:
    lg = suite.vals((3, 3), 6)
    probs = ref.ctc_label_logprobs(lg, 2)
    assert math.isclose(sum(math.exp(v) for v in probs.values()), 1.0, rel_tol=1e-12)


def test_space_to_batch_follows_the_documented_example() -> None:
    x = np.arange(1, 5, dtype=float).reshape(1, 2, 2, 1)  # docstring: [[[[1], [2]], [[3], [4]]]] -> [4, 1, 1, 1]
    assert ref.space_to_batch(x, [2, 2], [[0, 0], [0, 0]]).ravel().tolist() == [1, 2, 3, 4]
    assert np.array_equal(ref.depth_to_space(ref.space_to_depth(suite.vals((1, 4, 4, 2), 7), 2), 2), suite.vals((1, 4, 4, 2), 7))


# ----------------------------------------------------------------------------- wrong twins through the suite's records


def test_conv1d_record_fails_a_sign_flip_and_swapped_same_padding() -> None:
    def flipped(x: Any, w: Any, stride: int, padding: str, dilations: int) -> Any:
        return -ref.conv(np.asarray(x), np.asarray(w), [stride], padding, [dilations])

    with pytest.raises(ToleranceExceeded, match="conv1d stride=1 padding=SAME"):
        suite.RECORDS["conv1d"](fake_tf(conv1d=flipped))

    def swapped(x: Any, w: Any, stride: int, padding: str, dilations: int) -> Any:  # SAME's extra pad before, not after
        x = np.asarray(x)
        if padding == "VALID":
            return ref.conv(x, np.asarray(w), [stride], padding, [dilations])
        _, before, after = ref.out_and_pad(x.shape[1], 3, stride, dilations, "SAME")
        return ref.conv(np.pad(x, [(0, 0), (after, before), (0, 0)]), np.asarray(w), [stride], "VALID", [dilations])

    with pytest.raises(ToleranceExceeded, match="conv1d stride=2 padding=SAME"):
        suite.RECORDS["conv1d"](fake_tf(conv1d=swapped))


def test_avg_pool_record_fails_when_padding_is_counted() -> None:
    def counting(x: Any, k: Any, s: Any, p: str) -> Any:
        x = np.asarray(x)
        win, _ = ref.windows(x, [k] * 2 if np.isscalar(k) else k, [s] * 2, [1, 1], p, 0.0)
        return win.reshape((-1, *win.shape[2:])).mean(axis=0)

    with pytest.raises(ToleranceExceeded, match="avg_pool ksize=3 strides=2 padding=SAME"):
        suite.RECORDS["avg_pool"](fake_tf(avg_pool=counting))


def test_log_poisson_record_fails_without_the_stirling_term() -> None:
    def no_stirling(z: Any, c: Any, compute_full_loss: bool = False) -> Any:
        return ref.log_poisson(np.asarray(z), np.asarray(c), False)

    with pytest.raises(ToleranceExceeded, match="compute_full_loss=True"):
        suite.RECORDS["log_poisson_loss"](fake_tf(log_poisson_loss=no_stirling))


def test_in_top_k_record_fails_a_strict_tie_rule_and_nan_rows() -> None:
    def topk_order(targets: Any, pred: Any, k: int) -> Any:  # TopK's tie handling: index order breaks ties
        return np.array([t in np.argsort(-np.nan_to_num(r, nan=-np.inf), kind="stable")[:k] for t, r in zip(targets, pred)])

    with pytest.raises(ToleranceExceeded, match="in_top_k k="):
        suite.RECORDS["in_top_k"](fake_tf(in_top_k=topk_order))


def test_isotonic_record_fails_a_sign_flip_and_a_nan() -> None:
    def wrong(x: Any, decreasing: bool = True, axis: int = -1) -> Any:
        x = np.moveaxis(np.asarray(x), axis, -1)
        out = [ref.isotonic(r, not decreasing) for r in x]
        return np.moveaxis(np.stack([o[0] for o in out]), -1, axis), np.moveaxis(np.stack([o[1] for o in out]), -1, axis)

    with pytest.raises(ToleranceExceeded, match="isotonic_regression decreasing=True"):
        suite.RECORDS["isotonic_regression"](fake_tf(isotonic_regression=wrong))

    def nan(x: Any, decreasing: bool = True, axis: int = -1) -> Any:
        y, seg = (np.stack(v) for v in zip(*[ref.isotonic(r, decreasing) for r in np.asarray(x)]))
        y[0, 0] = np.nan
        return y, seg

    with pytest.raises(ToleranceExceeded, match="isotonic_regression"):
        suite.RECORDS["isotonic_regression"](fake_tf(isotonic_regression=nan))


def test_l2_normalize_record_fails_epsilon_added_instead_of_max() -> None:
    def added(x: Any, axis: Any = -1, epsilon: float = 1e-12) -> Any:
        x = np.asarray(x)
        return x / np.sqrt(np.sum(x * x, axis=axis, keepdims=True) + epsilon)

    with pytest.raises(ToleranceExceeded, match="l2_normalize"):
        suite.RECORDS["l2_normalize"](fake_tf(l2_normalize=added))


def test_lrn_record_fails_a_one_sided_window() -> None:
    def one_sided(x: Any, depth_radius: int, bias: float, alpha: float, beta: float) -> Any:
        x = np.asarray(x, np.float64)
        sq = np.stack([np.sum(x[..., d:d + depth_radius + 1] ** 2, axis=-1) for d in range(x.shape[-1])], axis=-1)
        return x / (bias + alpha * sq) ** beta

    with pytest.raises(ToleranceExceeded, match="lrn r="):
        suite.RECORDS["lrn"](fake_tf(lrn=one_sided))


def test_table_lists_every_function_once() -> None:
    assert len(set(suite.LISTED)) == len(suite.LISTED) == 64
    assert not set(suite.RECORDS) & set(suite.OUT_OF_SCOPE)
    assert set(suite.RECORDS) | set(suite.OUT_OF_SCOPE) == set(suite.LISTED)
    assert not list(itertools.filterfalse(lambda n: n in suite.LISTED, suite.RECORDS))
