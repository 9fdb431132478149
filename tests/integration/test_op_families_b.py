"""The op families of issue 12 part B (pooling, convolution, losses, attention,
normalisation): their references against documented values, their parameter classes, and
their wrong twins (op_family_mutants_b.py), each caught by its op's ci-profile test with the
message while the other framework's test of the same op still holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.programs import OPS
from pytest_dlconform.programs import samples as S

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SUITE = "suites/autodiff/test_ops.py"
POOLING_CONVOLUTION_LOSSES_ATTENTION_NORMALISATION = (
    "max_pool2d", "avg_pool2d_pad", "conv2d_full", "conv_transpose2d", "cross_entropy", "nll_loss", "mse_loss",
    "huber_loss", "smooth_l1_loss", "bce_with_logits", "sdpa", "batch_norm", "group_norm", "instance_norm")
sys.path.insert(0, str(HERE))
import op_family_mutants_b as mutants  # noqa: E402  (this folder is the plugin's home)


def _ref(op: str, x: np.ndarray, **p: Any) -> np.ndarray:
    spec = OPS[op]
    ws = [np.asarray(w) for w in p.pop("_weights", [])]
    return np.asarray(spec.ref([x], p, ws))


# --------------------------------------------------------------------------- references


def test_every_nn_family_op_is_per_op_only_and_has_classes_for_its_parameters() -> None:
    for op in POOLING_CONVOLUTION_LOSSES_ATTENTION_NORMALISATION:
        assert op in OPS and not OPS[op].composable, op
        classes = S.param_classes(op)
        assert len(classes) >= 3, op
        assert {s.params for s in S.samples(op)} == set(classes), op


def test_pooling_references_follow_the_documented_output_size_and_padding() -> None:
    # tf.nn.max_pool2d's docstring: [[1..4], [5..8], [9..12]], 2x2 windows, stride 2:
    # VALID gives [[6, 8]], SAME (torch: padding 0, ceil_mode) gives [[6, 8], [10, 12]].
    x = np.arange(1.0, 13.0).reshape(1, 1, 3, 4)
    sep = {"seed": 0}
    from pytest_dlconform.programs.ops.pooling import K, separation

    r = K * separation(x.shape, 0)
    base = {"kernel": (2, 2), "stride": 2, "padding": 0, "dilation": 1, **sep}
    valid = _ref("max_pool2d", x - r, ceil_mode=False, **base)
    assert valid.tolist() == [[[[6.0, 8.0]]]]
    assert _ref("max_pool2d", x - r, ceil_mode=True, **base).tolist() == [[[[6.0, 8.0], [10.0, 12.0]]]]
    # avg pool, 3x3 input, 2x2 kernel, stride 2, ceil mode: the overhanging windows divide by
    # their real elements without count_include_pad, by the padded window with it.
    y = np.ones((1, 1, 3, 3))
    avg = {"kernel": (2, 2), "stride": 2, "padding": 1, "ceil_mode": False, "divisor_override": None}
    assert np.allclose(_ref("avg_pool2d_pad", y, count_include_pad=False, **avg), 1.0)
    assert np.allclose(_ref("avg_pool2d_pad", y, count_include_pad=True, **avg), [[[[0.25, 0.5], [0.5, 1.0]]]])
    assert np.allclose(_ref("avg_pool2d_pad", y, count_include_pad=True, **{**avg, "divisor_override": 1}),
                       [[[[1.0, 2.0], [2.0, 4.0]]]])


def test_convolution_references_on_hand_computed_cases() -> None:
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 2, 2))
    p = {"stride": 1, "padding": 0, "dilation": 2, "groups": 1, "padding_mode": "zeros", "kernel": (2, 2)}
    # dilation 2: taps (0,0), (0,2), (2,0), (2,2) of each 3x3 window.
    assert _ref("conv2d_full", x, _weights=[w], **p)[0, 0, 0, 0] == 0 + 2 + 8 + 10
    circ = _ref("conv2d_full", x, _weights=[w], **{**p, "dilation": 1, "padding": 1, "padding_mode": "circular"})
    assert circ[0, 0, 0, 0] == 15 + 12 + 3 + 0  # wraps around both axes
    # transposed: a single input entry spreads the kernel, stride 2 leaves gaps.
    t = np.zeros((1, 1, 2, 2))
    t[0, 0, 1, 1] = 1.0
    k = np.arange(1.0, 5.0).reshape(1, 1, 2, 2)
    q = {"stride": 2, "padding": 0, "output_padding": 1, "dilation": 1, "groups": 1}
    out = _ref("conv_transpose2d", t, _weights=[k], **q)
    assert out.shape == (1, 1, 5, 5) and out[0, 0, 2:4, 2:4].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert out.sum() == 10.0


def test_loss_references_match_the_documented_formulas() -> None:
    x = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
    p = {"reduction": "none", "label_smoothing": 0.0, "ignore_index": None, "weighted": False, "seed": 3}
    from pytest_dlconform.programs.ops.losses import _classes

    y = _classes(x.shape, p)
    logp = x - np.log(np.sum(np.exp(x), axis=1, keepdims=True))
    assert np.allclose(_ref("cross_entropy", x, **p), -logp[np.arange(2), y])
    smooth = _ref("cross_entropy", x, **{**p, "label_smoothing": 0.3})
    assert np.allclose(smooth, 0.7 * -logp[np.arange(2), y] + 0.1 * -logp.sum(axis=1))
    assert np.allclose(_ref("huber_loss", np.array([[3.0, 0.25]]), reduction="none", delta=1.0, c=0.0), [[2.5, 0.03125]])
    assert np.allclose(_ref("smooth_l1_loss", np.array([[3.0, 0.25]]), reduction="none", beta=0.5, c=0.0),
                       [[2.75, 0.0625]])


def test_attention_and_normalisation_references() -> None:
    x = np.zeros((1, 3, 3, 2))
    x[0, 2] = np.arange(6.0).reshape(3, 2)  # V; Q = K = 0: uniform weights over the allowed keys
    p = {"mask": None, "is_causal": True, "scale": None, "seed": 0}
    out = _ref("sdpa", x, **p)
    assert np.allclose(out[0, 0], [0, 1]) and np.allclose(out[0, 2], [2, 3])
    z = np.random.default_rng(0).standard_normal((2, 4, 3, 3))
    g = _ref("group_norm", z, num_groups=2, eps=0.0)
    assert np.allclose(g.reshape(2, 2, -1).mean(-1), 0) and np.allclose(g.reshape(2, 2, -1).var(-1), 1)
    b = _ref("batch_norm", z, eps=0.0, momentum=0.5)
    assert np.allclose(b.mean(axis=(0, 2, 3)), 0) and np.allclose(b.var(axis=(0, 2, 3)), 1)


# --------------------------------------------------------------------------- the wrong twins


def _run(ids: list[str], tmp_path: Path) -> dict[str, dict[str, Any]]:
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", *[f"{SUITE}::{i}" for i in ids], "-p", "op_family_mutants_b",
           "-p", "no:cacheprovider", "--dl-profile=ci", "-q", f"--dl-report={report}"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, env=env)
    assert report.exists(), f"no report from {' '.join(cmd)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    doc = json.loads(report.read_text())
    return {t["nodeid"].split("::", 1)[1]: t for c in doc["claims"].values() for t in c["tests"]}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    ids = [m[4] for m in mutants.MUTANTS.values()] + list(mutants.UNAFFECTED)
    return _run(ids, tmp_path_factory.mktemp("mutants_b"))


@pytest.mark.parametrize("op", sorted(mutants.MUTANTS))
def test_each_wrong_twin_is_caught_by_its_op_test(verdicts: dict[str, dict[str, Any]], op: str) -> None:
    _, _, _, what, test_id = mutants.MUTANTS[op]
    assert test_id in verdicts, f"{test_id} did not run"
    t = verdicts[test_id]
    assert t["verdict"] == "violated", f"mutant {op} ({what}) not caught by {test_id}: {t['verdict']}"
    assert "from reverse mode, but should be" in t["reason"], t["reason"]


def test_the_same_ops_in_the_other_framework_still_hold(verdicts: dict[str, dict[str, Any]]) -> None:
    for test_id in mutants.UNAFFECTED:
        assert verdicts[test_id]["verdict"] == "holds", (test_id, verdicts[test_id].get("reason"))


def test_the_twins_change_only_their_gradients() -> None:
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    x = torch.tensor(np.random.default_rng(1).standard_normal((2, 4, 4, 4)))
    kw = {"kernel_size": (2, 2), "stride": 1, "padding": 1, "dilation": 2, "ceil_mode": False}
    assert torch.equal(mutants.max_pool2d(x, **kw), F.max_pool2d(x, **kw))
    w = torch.tensor(np.random.default_rng(2).standard_normal((4, 1, 2, 2)))
    ckw = {"stride": 2, "padding": 0, "output_padding": 0, "groups": 2, "dilation": 1}
    assert torch.equal(mutants.conv_transpose2d(x, w, **ckw), F.conv_transpose2d(x, w, **ckw))
    assert torch.equal(mutants.group_norm(x, 2, 1e-5), F.group_norm(x, 2, eps=1e-5))
    logits, y = x[0, 0], torch.tensor([0, 1, 2, 3])
    assert torch.equal(mutants.cross_entropy(logits, y, label_smoothing=0.1), F.cross_entropy(logits, y, label_smoothing=0.1))
