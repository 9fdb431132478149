"""The model suite on models nobody here wrote the suite for, end to end: each planted cause
gets its one-line hint in the failure, a refusal is a one-line "not applicable", a diagnosis
blames no side it could not check, the factory's own loss is the one the training claims use,
and `dlconform model` runs only the model suites with pytest's exit status."""

from __future__ import annotations

import json
import sys

import pytest

TORCH_MODELS = '''
import os

import numpy as np
import torch
from torch import nn

from pytest_dlconform.api.usermodels import UserModel


def _x(seed):
    return np.random.default_rng(seed).normal(size=(4, 4)).astype(np.float32)


class PlainScale(nn.Module):
    """A random scale kept as a plain tensor attribute (it should be a buffer)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.scale = torch.rand(2) + 0.5

    def forward(self, x):
        return self.lin(x) * self.scale


def plain_scale():
    return PlainScale(), _x


def unseeded():
    net = nn.Linear(4, 2)
    with torch.no_grad():
        net.weight.copy_(torch.from_numpy(np.random.normal(size=(2, 4))))  # numpy's global generator
    return net, _x


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class CustomFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        return Square.apply(self.lin(x))


def custom_function():
    return CustomFunction(), _x


class EvalDropout(nn.Module):
    def forward(self, x):
        return nn.functional.dropout(x, 0.5, training=True)  # ignores self.training


def eval_dropout():
    return nn.Sequential(nn.Linear(4, 3), EvalDropout(), nn.Linear(3, 2)), _x


def classifier():
    def loss(outputs, targets):
        with open(os.environ["LOSS_LOG"], "a") as fh:
            fh.write(f"{os.environ.get('PYTEST_CURRENT_TEST', 'rank').split(' ')[0]} {targets.dtype}\\n")
        return nn.functional.cross_entropy(outputs, targets)

    def targets(seed):
        return np.random.default_rng(seed).integers(0, 3, size=4)

    return UserModel(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)), _x, targets, loss)
'''

KERAS_MODELS = '''
import keras
import numpy as np
import tensorflow as tf


@keras.saving.register_keras_serializable(package="tests_diagnostics")
class RawScale(keras.layers.Layer):
    """State in a raw tf.Variable: Keras does not track it, so no .keras file holds it."""

    def build(self, shape):
        self.s = tf.Variable(tf.random.uniform([shape[-1]], 0.5, 1.5, dtype=self.variable_dtype), name="s")

    def call(self, x):
        return x * self.s


def raw_variable():
    inp = keras.Input((4,))
    model = keras.Model(inp, keras.layers.Dense(2)(RawScale(name="gate")(keras.layers.Dense(3)(inp))))
    return model, lambda seed: np.random.default_rng(seed).normal(size=(4, 4)).astype(np.float32)
'''


def _failures(report: dict) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for cid, entry in report["claims"].items():
        for test in entry["tests"]:
            out.setdefault((cid, test["params"]["model"]), []).append(test)
    return out


def test_torch_planted_causes_get_their_hints_and_one_line_reasons(suite):
    suite.makepyfile(planted=TORCH_MODELS)
    models = ("plain_scale", "unseeded", "custom_function", "eval_dropout")
    result = suite.runpytest_subprocess(
        "--pyargs", "pytest_dlconform.suites.model", "--dl-framework=torch", "-p", "no:randomly",
        "--dl-claims=model.determinism.seeded,model.export.round-trip", "-k", "same_seed or state-dict or torchscript",
        "-rs", "--dl-report=report.json", *[f"--dl-model=planted:{m}" for m in models])
    out = result.stdout.str()
    tests = _failures(json.loads((suite.path / "report.json").read_text()))

    def verdicts(claim, model):  # by export format ("" for a claim without formats)
        def fmt(test):
            return next((f for f in ("state-dict", "torchscript") if f in json.dumps(test)), "")
        return {fmt(t): t["verdict"] for t in tests[(claim, f"planted:{model}")]}

    assert verdicts("model.export.round-trip", "plain_scale")["state-dict"] == "violated", out
    assert ("hint: the model keeps tensor 'scale' outside its state_dict; register it with register_buffer") in out
    assert "cannot tell which side is wrong: the model has state the float64 rebuild could not copy (scale" in out
    assert verdicts("model.determinism.seeded", "unseeded") == {"": "violated"}, out
    assert "hint: two builds under the same seed differ: the factory draws from a random generator" in out
    assert verdicts("model.determinism.seeded", "plain_scale") == {"": "holds"}  # torch.rand is seeded
    # TorchScript cannot save a custom autograd Function: "not applicable", its reason one line, no stack trace
    assert verdicts("model.export.round-trip", "custom_function")["torchscript"] == "not applicable", out
    reason = next(line for line in out.splitlines() if "Could not export Python function call 'Square'" in line)
    assert ".py(" not in reason and "(88): _run_code" not in reason and "_trace.py" not in out
    # an eval-mode dropout bug is the original's, not the format's
    assert verdicts("model.export.round-trip", "eval_dropout")["state-dict"] == "violated"
    dropout = [line for line in out.splitlines() if line.startswith("E ") and "round trip of planted:eval_dropout" in line]
    assert dropout and all("the original model itself is not deterministic in inference mode" in line
                           and "promises bitwise equality" not in line for line in dropout), dropout


def test_the_factorys_loss_is_the_training_claims_loss(suite, tmp_path, monkeypatch):
    log = tmp_path / "loss.log"
    monkeypatch.setenv("LOSS_LOG", str(log))
    suite.makepyfile(planted=TORCH_MODELS)
    result = suite.runpytest_subprocess(
        "--pyargs", "pytest_dlconform.suites.model", "--dl-framework=torch", "--dl-strategy=ddp", "-p", "no:randomly",
        "--dl-claims=model.determinism.seeded,model.precision.*,model.distributed.*", "--dl-model=planted:classifier")
    assert result.ret == 0, result.stdout.str()
    calls: dict[str, int] = {}
    dtypes = set()
    for line in log.read_text().splitlines():
        where, dtype = line.split(" ", 1)
        key = where.rsplit("::", 1)[-1].split("[")[0]
        calls[key] = calls.get(key, 0) + 1
        dtypes.add(dtype)
    assert dtypes == {"torch.int64"}  # class labels stay integer for cross-entropy
    assert calls.get("test_same_seed_same_model_outputs_and_gradients", 0) >= 2, calls
    assert calls.get("test_low_precision_run_within_its_bound", 0) >= 2, calls
    assert calls.get("test_loss_scaled_step_equals_unscaled_step", 0) >= 2, calls
    assert calls.get("test_one_step_equals_single_device", 0) >= 1, calls


def test_keras_raw_variable_does_not_blame_the_original(suite):
    suite.makepyfile(planted_keras=KERAS_MODELS)
    result = suite.runpytest_subprocess(
        "--pyargs", "pytest_dlconform.suites.model", "--dl-framework=tensorflow", "-p", "no:randomly",
        "--dl-claims=model.export.round-trip", "-k", "not keras-export and not tflite and not savedmodel",
        "--dl-model=planted_keras:raw_variable")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "cannot tell which side is wrong: the model has state the float64 rebuild could not copy (gate.s" in out
    assert "hint: the model keeps tf.Variable 'gate.s' outside its weights" in out
    assert "the original 8" not in out and "x the bound" not in out


def test_dlconform_model_runs_only_the_model_suites_with_pytests_status(suite):
    suite.makepyfile(planted=TORCH_MODELS)
    cmd = [sys.executable, "-m", "pytest_dlconform.cli", "model", "planted:plain_scale", "--collect-only", "-q",
           "--dl-framework=torch"]
    result = suite.run(*cmd)
    ids = [line for line in result.stdout.lines if "::" in line]
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    files = {"test_compile.py", "test_determinism.py", "test_distributed.py", "test_export.py", "test_gradients.py",
             "test_precision.py"}  # suites/model's, and nothing of the framework suites
    assert ids and all(i.split("::")[0].rsplit("/", 1)[-1] in files and "planted:plain_scale" in i for i in ids), ids
    assert len(ids) == 12  # 2 determinism, gradients, compile, 4 export formats, 2 precision, ddp, fsdp
    result = suite.run(*cmd, "-k", "no_such_test")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result = suite.run(sys.executable, "-m", "pytest_dlconform.cli", "model", "planted")
    assert result.ret == 4 and "is not MODULE:FACTORY" in result.stderr.str()
