"""--dl-model end to end: bad factories are one-line usage errors (exit 4) before any test runs;
no model means quiet deselection (or "not applicable" when the claims are asked for); a model
with a deliberately broken custom layer fails exactly the claims that layer breaks."""

from __future__ import annotations

import json

import pytest

FACTORIES = '''
import numpy as np

from pytest_dlconform.api.usermodels import UserModel

NOT_CALLABLE = 3


def returns_string():
    return "a model"


def raises():
    raise RuntimeError("weights file missing")


def wrong_model_type():
    return [1, 2], lambda seed: np.zeros((2, 3), np.float32)


def inputs_not_callable():
    import torch
    return UserModel(torch.nn.Linear(3, 2), "inputs")


def rejects_inputs():
    import torch
    return torch.nn.Linear(3, 2), lambda seed: np.zeros((2, 5), np.float32)


def good():
    import torch
    return torch.nn.Linear(3, 2), lambda seed: np.random.default_rng(seed).normal(size=(4, 3)).astype(np.float32)
'''

MARKED = """
import pytest

@pytest.mark.claim("autodiff.tape.watch")
def test_unrelated():
    pass
"""


def _one_line_error(result: pytest.RunResult, *fragments: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    # pytest-benchmark (installed here) warns on stderr whenever xdist is loaded: not ours.
    err = [line for line in result.stderr.lines if line.strip() and "PytestBenchmarkWarning" not in line
           and not line.strip().startswith("warner(")]
    assert len(err) == 1, result.stderr.str()
    assert err[0].startswith("ERROR: ")
    for fragment in fragments:
        assert fragment in err[0], err[0]
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "test_unrelated" not in out  # before any test runs


@pytest.mark.parametrize(("ref", "fragments"), [
    ("nosuchmodule:make", ("--dl-model 'nosuchmodule:make' (from --dl-model)", "does not import",
                           "ModuleNotFoundError", "make it importable")),
    ("factories:missing", ("'factories:missing'", "has no attribute 'missing'", "name a factory function")),
    ("factories:NOT_CALLABLE", ("'factories:NOT_CALLABLE'", "is a int, not callable", "UserModel(model, make_inputs")),
    ("factories:returns_string", ("'factories:returns_string'", "returned a builtins.str", "UserModel(model, make_inputs")),
    ("factories:raises", ("'factories:raises'", "the factory raised RuntimeError: weights file missing", "fix the factory")),
    ("factories:wrong_model_type", ("'factories:wrong_model_type'", "the model is a builtins.list",
                                    "not a torch.nn.Module or a keras.Model")),
    ("factories:inputs_not_callable", ("make_inputs is a builtins.str, not callable",)),
    ("factories:rejects_inputs", ("'factories:rejects_inputs'", "the model rejects its example inputs (float32[2, 5])",
                                  "RuntimeError", "make make_inputs(seed) return what")),
])
def test_bad_factory_is_a_one_line_usage_error(suite, ref, fragments):
    suite.makepyfile(factories=FACTORIES, test_x=MARKED)
    _one_line_error(suite.runpytest_subprocess(f"--dl-model={ref}"), *fragments)


def test_bad_reference_syntax(suite):
    suite.makepyfile(test_x=MARKED)
    _one_line_error(suite.runpytest_subprocess("--dl-model=examples.gan"), "'examples.gan' is not a 'module:factory'")


def test_env_and_ini_registrations_are_validated_and_named(suite, monkeypatch):
    suite.makepyfile(factories=FACTORIES, test_x=MARKED)
    monkeypatch.setenv("DLCONFORM_MODEL", "factories:good,factories:raises")
    _one_line_error(suite.runpytest_subprocess(), "'factories:raises' (from environment variable DLCONFORM_MODEL)")
    monkeypatch.delenv("DLCONFORM_MODEL")
    suite.makeini("[pytest]\naddopts = -p no:cacheprovider\ndl_model =\n    factories:good\n    factories:returns_string\n")
    _one_line_error(suite.runpytest_subprocess(), "'factories:returns_string' (from ini key dl_model)")


def test_without_a_model_the_model_suite_is_deselected_or_not_applicable(suite):
    result = suite.runpytest_subprocess("--pyargs", "pytest_dlconform.suites.model")
    result.stdout.fnmatch_lines(["* deselected in *"])
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result = suite.runpytest_subprocess("--pyargs", "pytest_dlconform.suites.model", "--dl-claims=model.*")
    result.stdout.fnmatch_lines(["n/a (* tests): no model registered: pass --dl-model module:factory"])
    result.stdout.fnmatch_lines(["tests: 0 holds, 0 violated, * not applicable, 0 error"])
    assert result.ret == pytest.ExitCode.OK


BROKEN = '''
"""Each model has one deliberately broken custom layer (and is otherwise the same small MLP)."""
import numpy as np
import torch
from torch import nn


class BadSquare(torch.autograd.Function):
    """x**2 with a wrong backward: 3x instead of 2x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g


class WrongBackward(nn.Module):
    def forward(self, x):
        return BadSquare.apply(x)


class UnsavedShift(nn.Module):
    """Adds a random shift kept in a buffer that state_dict leaves out (persistent=False)."""

    def __init__(self, width):
        super().__init__()
        self.register_buffer("shift", torch.randn(width), persistent=False)

    def forward(self, x):
        return x + self.shift


class AlwaysDropout(nn.Module):
    """Dropout that ignores self.training: it drops in inference mode too."""

    def forward(self, x):
        return nn.functional.dropout(x, 0.5, training=True)


def _model(layer, device="cpu", dtype="float32"):
    net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), layer, nn.Linear(6, 2))
    return (net.to(device=device, dtype=getattr(torch, dtype)),
            lambda seed: np.random.default_rng(seed).normal(size=(4, 4)).astype(np.float32))


class BatchStatsAlways(nn.Module):
    """Normalises by the batch's own mean and spread even in inference mode (ignores training):
    each DDP rank then sees other statistics than one device on the whole batch."""

    def forward(self, x):
        return (x - x.mean(dim=0)) / (x.std(dim=0) + 1e-3)


def batch_stats(device="cpu", dtype="float32"):
    return _model(BatchStatsAlways(), device, dtype)


def wrong_backward(device="cpu", dtype="float32"):
    return _model(WrongBackward(), device, dtype)


def unsaved_buffer(device="cpu", dtype="float32"):
    return _model(UnsavedShift(6), device, dtype)


def ignores_training(device="cpu", dtype="float32"):
    return _model(AlwaysDropout(), device, dtype)
'''

BROKEN_KERAS = '''
import keras
import numpy as np


class AlwaysDropout(keras.layers.Layer):
    """Dropout that ignores `training`: it drops in inference calls too."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.gen = keras.random.SeedGenerator(1)

    def call(self, x, training=None):
        return keras.random.dropout(x, 0.5, seed=self.gen)


class ScaledGrad(keras.layers.Layer):
    """tanh with a hand-written gradient 1.5x too large (tf.custom_gradient)."""

    def call(self, x):
        import tensorflow as tf

        @tf.custom_gradient
        def op(v):
            y = tf.tanh(v)
            return y, lambda g: 1.5 * g * (1 - y * y)

        return op(x)


def _fixed32(middle):
    # dtype="float32" on every layer: the model ignores the float64 policy, so the gradient
    # claim takes its float32 path (derived rtol and f_error).
    inp = keras.Input((4,), dtype="float32")
    h = middle(keras.layers.Dense(6, dtype="float32")(inp))
    out = keras.layers.Dense(2, dtype="float32")(h)
    return keras.Model(inp, out), lambda seed: np.random.default_rng(seed).normal(size=(4, 4)).astype(np.float32)


def float32_only():
    return _fixed32(keras.layers.Activation("tanh", dtype="float32"))


def float32_wrong_gradient():
    return _fixed32(ScaledGrad(dtype="float32"))


def ignores_training():
    inp = keras.Input((4,))
    out = keras.layers.Dense(2)(AlwaysDropout()(keras.layers.Dense(6, activation="tanh")(inp)))
    return keras.Model(inp, out), lambda seed: np.random.default_rng(seed).normal(size=(4, 4)).astype(np.float32)
'''


def _verdicts(report: dict) -> dict[tuple[str, str], str]:
    out = {}
    for cid, entry in report["claims"].items():
        for test in entry["tests"]:
            out[(cid, test["params"]["model"])] = out.get((cid, test["params"]["model"]), "") + test["verdict"][0]
    return out


def test_broken_custom_layers_fail_the_matching_claims(suite):
    suite.makepyfile(broken=BROKEN)
    claims = "model.gradients.*,model.determinism.inference-idempotent,model.export.round-trip"
    args = ["--pyargs", "pytest_dlconform.suites.model", f"--dl-claims={claims}", "-k", "not export or state-dict",
            "--dl-report=report.json", "--dl-framework=torch"]
    for name in ("wrong_backward", "unsaved_buffer", "ignores_training"):
        args.append(f"--dl-model=broken:{name}")
    result = suite.runpytest_subprocess(*args)
    report = json.loads((suite.path / "report.json").read_text())
    got = _verdicts(report)
    want = {
        ("model.gradients.finite-differences", "broken:wrong_backward"): "v",
        ("model.determinism.inference-idempotent", "broken:wrong_backward"): "h",
        ("model.export.round-trip", "broken:wrong_backward"): "h",
        ("model.gradients.finite-differences", "broken:unsaved_buffer"): "h",
        ("model.determinism.inference-idempotent", "broken:unsaved_buffer"): "h",
        ("model.export.round-trip", "broken:unsaved_buffer"): "v",
        ("model.determinism.inference-idempotent", "broken:ignores_training"): "v",
        ("model.export.round-trip", "broken:ignores_training"): "v",  # its outputs are random: no round trip holds
    }
    assert {k: got.get(k) for k in want} == want, result.stdout.str()
    out = result.stdout.str()
    assert "GradientMismatch" in out and "about 1.5 times too large along its own direction" in out
    assert "OutputMismatch: state-dict round trip of broken:unsaved_buffer" in out
    assert "second call vs first" in out  # the idempotence failure names what differs


def test_keras_broken_layers_fail_the_matching_claims(suite):
    suite.makepyfile(broken_keras=BROKEN_KERAS)
    result = suite.runpytest_subprocess("--pyargs", "pytest_dlconform.suites.model", "--dl-framework=tensorflow",
                                        "--dl-claims=model.determinism.*,model.gradients.*",
                                        "--dl-model=broken_keras:ignores_training", "--dl-model=broken_keras:float32_only",
                                        "--dl-model=broken_keras:float32_wrong_gradient", "--dl-report=report.json")
    doc = json.loads((suite.path / "report.json").read_text())
    got = _verdicts(doc)
    want = {("model.determinism.seeded", "broken_keras:ignores_training"): "h",
            ("model.determinism.inference-idempotent", "broken_keras:ignores_training"): "v",
            # random outputs in inference mode: f is no function, finite differences disagree
            ("model.gradients.finite-differences", "broken_keras:ignores_training"): "v",
            ("model.gradients.finite-differences", "broken_keras:float32_only"): "h",
            ("model.gradients.finite-differences", "broken_keras:float32_wrong_gradient"): "v"}
    assert {k: got.get(k) for k in want} == want, result.stdout.str()
    result.stdout.fnmatch_lines(["*inference mode: second call vs first: output 'output_0' differs*"])
    result.stdout.fnmatch_lines(["*GradientMismatch*"])
    dtypes = {t["params"]["model"]: t["evidence"]["notes"].get("dtype")
              for t in doc["claims"]["model.gradients.finite-differences"]["tests"]}
    assert dtypes["broken_keras:float32_only"] == "float32"  # the float32 path, with its derived bound
    assert dtypes["broken_keras:ignores_training"] == "float64"  # cast through the float64 policy


def test_entry_point_models_are_registered_and_validated(suite):
    """A package declares its factories in the pytest_dlconform.models entry-point group."""
    suite.makepyfile(factories=FACTORIES, test_x=MARKED)
    info = suite.path / "shipmodels-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shipmodels\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest_dlconform.models]\nbroken = factories:raises\n")
    _one_line_error(suite.runpytest_subprocess(), "--dl-model 'factories:raises' (from entry point 'broken' of shipmodels",
                    "the factory raised RuntimeError")
    (info / "entry_points.txt").write_text("[pytest_dlconform.models]\nlinear = factories:good\n")
    result = suite.runpytest_subprocess("--pyargs", "pytest_dlconform.suites.model", "--dl-claims=model.determinism.*",
                                        "--dl-framework=torch")
    result.stdout.fnmatch_lines(["*2 passed*"])
    assert "factories:good" in result.stdout.str()  # the model is a column of the matrix


def test_layer_using_batch_statistics_in_inference_breaks_ddp_step_equivalence(suite):
    suite.makepyfile(broken=BROKEN)
    result = suite.runpytest_subprocess("--pyargs", "pytest_dlconform.suites.model", "--dl-framework=torch",
                                        "--dl-strategy=ddp", "--dl-claims=model.distributed.*,model.determinism.inference-*",
                                        "--dl-model=broken:batch_stats", "--dl-model=broken:wrong_backward",
                                        "--dl-report=report.json")
    got = _verdicts(json.loads((suite.path / "report.json").read_text()))
    assert got == {("model.distributed.step-equivalence", "broken:batch_stats"): "v",
                   ("model.distributed.step-equivalence", "broken:wrong_backward"): "h",  # DDP averages what it is given
                   ("model.determinism.inference-idempotent", "broken:batch_stats"): "h",
                   ("model.determinism.inference-idempotent", "broken:wrong_backward"): "h"}, result.stdout.str()
    result.stdout.fnmatch_lines(["*StepMismatch: ddp over 2 replicas, broken:batch_stats*single device*"])
