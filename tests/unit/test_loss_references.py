"""Meta-tests for the loss suites' references and checks (suites/modules/test_losses.py,
_loss_reference.py): the covering arrays cover every pair, the references reproduce values the
docstrings print, and each check fails a deliberately wrong implementation (a dropped term, a
wrong denominator, a sign flip, a NaN, the real bugs the mutants model) with a message naming
the case.

No framework: the wrong implementations are numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_dlconform.api import ToleranceExceeded, assert_close
from pytest_dlconform.suites.modules import _loss_reference as ref
from pytest_dlconform.suites.modules import test_losses as tl
from pytest_dlconform.suites.modules._optim_reference import uncovered


def _row(name: str, **want):
    """The first covering row of ``name`` with the given option values."""
    for row in tl.COVERING.get(name, tl.KERAS_COVERING.get(name, [])):
        if all(row.get(k) == v for k, v in want.items()):
            return dict(row)
    raise LookupError(f"no covering row of {name} with {want}")


def _torch_case(name: str, **want):
    info = tl.BY_NAME[name]
    row = _row(name, **want)
    inputs, kw, p = info.make(tl._rng(name, row), row)
    good, _ = ref.reduce(p, row["reduction"], len(inputs[0]) if np.ndim(inputs[0]) > 1 else 1)
    return info, row, inputs, kw, p, np.asarray(good)


@pytest.mark.parametrize("info", tl.TORCH_LOSSES + tl.KERAS_LOSSES, ids=lambda i: i.name)
def test_covering_arrays_cover_every_pair(info):
    rows = (tl.COVERING if info in tl.TORCH_LOSSES else tl.KERAS_COVERING)[info.name]
    assert not uncovered(rows, info.factors, info.valid)
    assert all(info.valid(r) for r in rows)


def test_cross_entropy_reference_matches_the_hand_computed_weighted_mean():
    # Two samples, 3 classes, sample 2 ignored; weight w; label smoothing 0.3.
    x = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]])
    t = np.array([1, 2])
    w = np.array([0.5, 2.0, 1.0])
    eps = 0.3
    logp = x[0] - math.log(sum(math.exp(v) for v in x[0]))
    q = (1 - eps) * np.eye(3)[1] + eps / 3
    l0 = -float(np.sum(w * q * logp))
    p = ref.cross_entropy(x, t, w, ignore_index=2, label_smoothing=eps)
    assert p.loss[1] == 0.0 and math.isclose(p.loss[0], l0, rel_tol=1e-14)
    assert p.denominator == 2.0  # w[1]; the ignored sample counts nothing
    mean, _ = ref.reduce(p, "mean")
    assert math.isclose(float(mean), l0 / 2.0, rel_tol=1e-14)


def test_ctc_reference_matches_enumerated_alignments():
    # T = 3 frames, target [1]: the alignments are every path of {0, 1} over 3 frames that collapses to [1].
    rng = np.random.default_rng(0)
    lp = ref.log_softmax(rng.normal(size=(3, 1, 2)), 2)
    paths = [(0, 0, 1), (0, 1, 0), (1, 0, 0), (0, 1, 1), (1, 1, 0), (1, 1, 1)]
    want = -math.log(sum(math.exp(sum(lp[t, 0, s] for t, s in enumerate(path))) for path in paths))
    got = ref.ctc(lp, [[1]], [3]).loss[0]
    assert math.isclose(got, want, rel_tol=1e-13)
    assert ref.ctc(lp, [[1, 1, 1]], [3]).loss[0] == math.inf  # repeats need blanks: infeasible
    assert ref.ctc(lp, [[1, 1, 1]], [3], zero_infinity=True).loss[0] == 0.0


def test_keras_references_reproduce_the_docstring_examples():
    y = np.array([[[[1.0], [1.0]], [[0.0], [0.0]]], [[[1.0], [1.0]], [[0.0], [0.0]]]])
    p = np.array([[[[0.0], [1.0]], [[0.0], [1.0]]], [[[0.4], [0.0]], [[0.0], [0.9]]]])
    np.testing.assert_allclose(ref.k_dice(y, p, axis=(1, 2, 3)), [0.5, 0.75757575], rtol=1e-6)
    np.testing.assert_allclose(ref.k_dice(y, p), 0.6164384, rtol=1e-6)
    cf = ref.k_categorical_focal_crossentropy(np.array([[0, 1, 0], [0, 0, 1.0]]),
                                              np.array([[0.05, 0.9, 0.05], [0.1, 0.85, 0.05]]))
    np.testing.assert_allclose(cf, [2.63401289e-04, 6.75912094e-01], rtol=1e-6)


# ----------------------------------------------------------------- wrong implementations


def test_torch_check_fails_cross_entropy_mean_over_n_instead_of_weights():
    """The bug class of the issue: a weighted mean with ignored targets divided by the number of
    targets instead of the sum of the non-ignored targets' weights."""
    info, row, inputs, _, p, _ = _torch_case("CrossEntropyLoss", reduction="mean", weight=True,
                                             ignore_index="present", target="index")
    wrong = np.asarray(p.loss.sum() / p.loss.size)
    with pytest.raises(ToleranceExceeded, match=r"CrossEntropyLoss\[reduction=mean,weight=True.*documented formula"):
        tl.compare_torch_output(info, row, "module", wrong, inputs, p)


def test_torch_check_fails_label_smoothing_ignored():
    info, row, inputs, kw, p, _ = _torch_case("CrossEntropyLoss", label_smoothing=0.2, target="index")
    wrong_p = ref.cross_entropy(inputs[0], inputs[1], kw["weight"], kw.get("ignore_index", -100), 0.0)
    wrong, _ = ref.reduce(wrong_p, row["reduction"])
    with pytest.raises(ToleranceExceeded, match="CrossEntropyLoss"):
        tl.compare_torch_output(info, row, "functional", np.asarray(wrong), inputs, p)


def test_torch_check_fails_ignored_targets_counted():
    info, row, inputs, kw, p, _ = _torch_case("NLLLoss", reduction="sum", ignore_index="present")
    wrong, _ = ref.reduce(ref.nll(inputs[0], inputs[1], kw["weight"]), "sum")
    with pytest.raises(ToleranceExceeded, match="NLLLoss"):
        tl.compare_torch_output(info, row, "module", np.asarray(wrong), inputs, p)


@pytest.mark.parametrize("name,want,wrong", [
    ("HuberLoss", {"delta": 0.3}, lambda x, y, row: ref.huber(x, y, 1.0)),
    ("SmoothL1Loss", {"beta": 0.0}, lambda x, y, row: ref.smooth_l1(x, y, 1.0)),
    ("KLDivLoss", {"reduction": "batchmean"}, lambda x, y, row: ref.Pointwise(
        ref.kl_div(x, y, row["log_target"]).loss, float(x.shape[0]), np.zeros(1))),
    ("BCEWithLogitsLoss", {"pos_weight": True}, lambda x, y, row: ref.bce_with_logits(x, y)),
    ("TripletMarginLoss", {"swap": True}, lambda a, pos, row: None),
])
def test_torch_check_fails_a_dropped_option(name, want, wrong):
    info, row, inputs, _kw, p, good = _torch_case(name, **want)
    if name == "TripletMarginLoss":
        wp = ref.triplet_margin(*inputs, margin=row["margin"], p=row["p"], eps=row["eps"], swap=False)
    elif name == "KLDivLoss":  # batchmean read as the mean over every element
        wp = ref.Pointwise(p.loss, float(p.loss.size), p.magnitude)
        bad = np.asarray(p.loss.sum() / p.loss.size)
        with pytest.raises(ToleranceExceeded, match=name):
            tl.compare_torch_output(info, row, "module", bad, inputs, p)
        return
    else:
        wp = wrong(inputs[0], inputs[1], row)
    bad, _ = ref.reduce(wp, row["reduction"], len(inputs[0]))
    if name == "TripletMarginLoss" and np.array_equal(bad, good):
        pytest.fail("the swap row's inputs do not exercise swap")
    with pytest.raises(ToleranceExceeded, match=name):
        tl.compare_torch_output(info, row, "module", np.asarray(bad), inputs, p)


def test_torch_check_fails_ctc_mean_not_divided_by_target_lengths():
    info, row, inputs, _kw, p, good = _torch_case("CTCLoss", reduction="mean", zero_infinity=True)
    wrong = np.asarray(good * float(np.mean(inputs[3])))  # the mean of the undivided losses, roughly
    with pytest.raises(ToleranceExceeded, match="CTCLoss"):
        tl.compare_torch_output(info, row, "module", wrong, inputs, p)


@pytest.mark.parametrize("planted", ["sign", "zeros", "nan", "one-ulp-scaled-1e-10"])
def test_torch_check_fails_sign_zero_nan_and_a_tiny_scaling(planted):
    info, row, inputs, _, p, good = _torch_case("GaussianNLLLoss", reduction="none", full=True)
    bad = {"sign": -good, "zeros": np.zeros_like(good), "nan": np.where(np.arange(good.size).reshape(good.shape) == 0,
                                                                         np.nan, good),
           "one-ulp-scaled-1e-10": good * (1 + 1e-10)}[planted]
    with pytest.raises(ToleranceExceeded, match="GaussianNLLLoss"):
        tl.compare_torch_output(info, row, "module", bad, inputs, p)


def test_torch_check_fails_a_wrong_output_shape():
    info, row, inputs, _, p, good = _torch_case("MSELoss", reduction="none")
    with pytest.raises(AssertionError, match=r"output shape"):
        tl.compare_torch_output(info, row, "module", good.reshape(-1)[:-1], inputs, p)


def test_gradient_check_fails_a_sign_flip_and_a_wrong_denominator():
    row = _row("CrossEntropyLoss", reduction="mean", weight=True, ignore_index="present")
    inputs, kw, _ = tl.BY_NAME["CrossEntropyLoss"].make(tl._rng("CrossEntropyLoss", row), row)
    want = ref.cross_entropy_grad(inputs[0], inputs[1], "mean", kw["weight"], kw.get("ignore_index", -100),
                                  kw["label_smoothing"])
    tl.compare_gradient("CrossEntropyLoss", row, inputs, kw, want)  # the reference itself passes
    with pytest.raises(ToleranceExceeded, match="analytic gradient"):
        tl.compare_gradient("CrossEntropyLoss", row, inputs, kw, -want)
    with pytest.raises(ToleranceExceeded, match="analytic gradient"):
        tl.compare_gradient("CrossEntropyLoss", row, inputs, kw, want * 0.9)


def _keras_case(name: str, **want):
    info = tl.KERAS_BY_NAME[name]
    row = _row(name, **want)
    y, p = info.make(tl._rng(name, row), row)
    per_sample, good, tol = tl.keras_expected(info, row, y, p)
    return info, row, y, p, per_sample, good, tol


def test_keras_check_fails_mean_with_sample_weight_over_the_count():
    info, row, _y, _p, per_sample, good, tol = _keras_case("MeanSquaredError", reduction="mean_with_sample_weight",
                                                         sample_weight="per-sample")
    wrong = ref.keras_reduce(per_sample, "mean", tl._sample_weight("per-sample", per_sample.shape))
    assert_close(good, good, tol, what="the reference itself")
    with pytest.raises(ToleranceExceeded, match="mean_with_sample_weight"):
        assert_close(wrong, good, tol, what=f"{tl._case_id(info.name, row)}")


def test_keras_check_fails_label_smoothing_over_the_last_axis():
    """The real bug found here: CategoricalCrossentropy(axis=1) smooths with C = the last axis's size."""
    info, row, y, p, _per_sample, good, tol = _keras_case("CategoricalCrossentropy", label_smoothing=0.2, axis=1,
                                                         reduction=None)
    ys = y * 0.8 + 0.2 / y.shape[-1]
    logp = ref.log_softmax(p, 1) if row["from_logits"] else np.log(ref._clip(p / p.sum(1, keepdims=True)))
    wrong = ref.keras_reduce(-np.sum(ys * logp, axis=1), None, tl._sample_weight(row["sample_weight"], good.shape))
    with pytest.raises(ToleranceExceeded, match="CategoricalCrossentropy"):
        assert_close(wrong, good, tol, what=tl._case_id(info.name, row))


def test_keras_check_fails_tversky_with_alpha_and_beta_swapped():
    info, row, y, p, _per_sample, good, tol = _keras_case("Tversky", alpha=0.7, beta=0.2, axis="per-sample")
    axis = tl.DICE_AXES["per-sample"]
    wrong_ps = ref.k_tversky(y, p, alpha=0.2, beta=0.7, axis=axis)
    wrong = ref.keras_reduce(wrong_ps, row["reduction"], tl._sample_weight(row["sample_weight"], wrong_ps.shape))
    with pytest.raises(ToleranceExceeded, match="Tversky"):
        assert_close(wrong, good, tol, what=tl._case_id(info.name, row))


def test_keras_check_fails_log_cosh_with_a_float32_log2():
    info, row, y, p, _per_sample, good, tol = _keras_case("LogCosh", reduction="sum")
    x = p - y
    wrong_ps = np.mean(x + np.logaddexp(0.0, -2 * x) - float(np.float32(math.log(2.0))), axis=-1)
    wrong = ref.keras_reduce(wrong_ps, "sum", tl._sample_weight(row["sample_weight"], wrong_ps.shape))
    with pytest.raises(ToleranceExceeded, match="LogCosh"):
        assert_close(wrong, good, tol, what=tl._case_id(info.name, row))


def test_keras_dice_epsilon_floor_is_not_blind():
    """The floor that admits keras.config.epsilon() in Dice's denominator still fails a dice that
    drops the factor 2 of the intersection or adds 1e-4 to the denominator."""
    info, row, y, p, per_sample, good, tol = _keras_case("Dice", axis="per-sample", reduction=None)
    axis = tl.DICE_AXES["per-sample"]
    sw = tl._sample_weight(row["sample_weight"], per_sample.shape)
    for wrong_ps in (1 - np.sum(y * p, axis=axis) / (np.sum(y, axis=axis) + np.sum(p, axis=axis)),
                     1 - 2 * np.sum(y * p, axis=axis) / (np.sum(y, axis=axis) + np.sum(p, axis=axis) + 1e-4)):
        with pytest.raises(ToleranceExceeded, match="Dice"):
            assert_close(ref.keras_reduce(wrong_ps, None, sw), good, tol, what=tl._case_id(info.name, row))


def test_elementwise_gradient_check_fails_a_clamp_that_blocks_the_var_gradient():
    """GaussianNLLLoss documents that var's clamp is transparent to autograd: a var gradient that is 0
    where var < eps (a clamp with gradient) fails, naming the case and 'var'."""
    name = "GaussianNLLLoss"
    row = _row(name, var="same", eps=1e-6)
    inputs, kw, _ = tl.BY_NAME[name].make(tl._rng(name, row), row)
    gx, gv = ref.gaussian_nll_grads(inputs[0], inputs[1], inputs[2], kw["eps"])
    scale = float(np.size(inputs[0])) if row["reduction"] == "mean" else 1.0
    tl.compare_elementwise_gradient(name, row, inputs, kw, [gx / scale, gv / scale])  # the reference passes
    blocked = np.where(inputs[2] < kw["eps"], 0.0, gv) / scale
    with pytest.raises(ToleranceExceeded, match=r"GaussianNLLLoss.*/ d var"):
        tl.compare_elementwise_gradient(name, row, inputs, kw, [gx / scale, blocked])


def test_elementwise_gradient_check_fails_huber_without_the_delta_clip():
    name = "HuberLoss"
    row = _row(name, delta=0.3)
    inputs, kw, _ = tl.BY_NAME[name].make(tl._rng(name, row), row)
    scale = float(np.size(inputs[0])) if row["reduction"] == "mean" else 1.0
    with pytest.raises(ToleranceExceeded, match="HuberLoss"):
        tl.compare_elementwise_gradient(name, row, inputs, kw, [(inputs[0] - inputs[1]) / scale])


def test_keras_circle_reference_matches_the_papers_pairwise_sum():
    """k_circle is the paper's log(1 + sum_n sum_p exp(...)): checked against the plain double sum
    (no logsumexp), and remove_diagonal drops exactly the self-pairs."""
    rng = np.random.default_rng(3)
    y, p = tl._k_circle(rng, {})
    g, m = 4.0, 0.25
    s = p @ p.T
    want = []
    for i in range(len(y)):
        total = 0.0
        for j in range(len(y)):
            for k in range(len(y)):
                if y[j] == y[i] and j != i and y[k] != y[i]:
                    an, ap = max(s[i, k] + m, 0.0), max(1 + m - s[i, j], 0.0)
                    total += math.exp(g * an * (s[i, k] - m)) * math.exp(-g * ap * (s[i, j] - 1 + m))
        want.append(math.log1p(total))
    np.testing.assert_allclose(ref.k_circle(y, p, gamma=g, margin=m), want, rtol=1e-12)
    assert not np.allclose(ref.k_circle(y, p, gamma=g, margin=m, remove_diagonal=False), want)


def test_keras_check_fails_circle_with_distance_for_similarity_or_a_wrong_margin():
    """The Circle check fails the paper's formula with the margin replaced by 1 - m (the roles of
    Delta_p = 1 - m and Delta_n = m swapped) and one on embeddings left at half length (dot
    products, not cosine similarities)."""
    info, row, y, p, per_sample, good, tol = _keras_case("Circle", reduction="sum")
    opts = tl._keras_options(info, row)
    sw = tl._sample_weight(row["sample_weight"], per_sample.shape)
    swapped = ref.k_circle(y, p, gamma=opts["gamma"], margin=1 - opts["margin"],
                           remove_diagonal=opts["remove_diagonal"])
    for wrong_ps in (swapped, ref.k_circle(y, p * 0.5, **opts)):
        with pytest.raises(ToleranceExceeded, match="Circle"):
            assert_close(ref.keras_reduce(wrong_ps, "sum", sw), good, tol, what=tl._case_id(info.name, row))


def test_keras_reduce_none_string_and_wrong_denominators_fail():
    """The Loss-subclass check's reference: "none" is no aggregation like None, and a
    sum_over_batch_size that divides by the weights' sum (or mean_with_sample_weight by the count)
    is rejected by the subclass test's tolerance."""
    rng = np.random.default_rng(1)
    per = rng.uniform(0.1, 2.0, size=(5, 3))
    sw = tl._sample_weight("per-sample", per.shape)
    np.testing.assert_array_equal(ref.keras_reduce(per, "none", sw), ref.keras_reduce(per, None, sw))
    tol = tl.tolerance("float64", ops=4, reduction=per.size, magnitude=10.0)
    good = ref.keras_reduce(per, "sum_over_batch_size", sw)
    with pytest.raises(ToleranceExceeded, match="sum_over_batch_size"):
        assert_close(np.sum(per * sw) / np.sum(np.broadcast_to(sw, per.shape)), good, tol, what="sum_over_batch_size")
    good = ref.keras_reduce(per, "mean_with_sample_weight", sw)
    with pytest.raises(ToleranceExceeded, match="mean_with_sample_weight"):
        assert_close(np.sum(per * sw) / per.size, good, tol, what="mean_with_sample_weight")
