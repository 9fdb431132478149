"""The model claims' failure hints, one-line refusals and float64 diagnosis, on small models
written here (torch and Keras), each with one planted cause: every hint appears for its cause
and for no clean model, a custom autograd Function's TorchScript refusal is one line, and a
reference that could not copy the model's state blames neither side."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.checks import usermodel as ops
from pytest_dlconform.checks.numerics import Tolerance
from pytest_dlconform.checks.usermodel import hints

torch = pytest.importorskip("torch")
nn = torch.nn


# ---------------------------------------------------------------- torch models


class PlainScale(nn.Module):
    """A tensor attribute that should be a buffer: state_dict never sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.scale = torch.full((2,), 2.0)

    def forward(self, x):
        return self.lin(x) * self.scale


class Clean(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("scale", torch.ones(2))
        self.register_buffer("hidden", torch.ones(2), persistent=False)

    def forward(self, x):
        return self.lin(x) * self.scale * self.hidden


class BatchNormAlways(nn.Module):
    """Normalises by the batch's own statistics in eval too."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        h = self.lin(x)
        return (h - h.mean(dim=0)) / (h.std(dim=0) + 1e-3)


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
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        return Square.apply(self.lin(x))


def _x(rows=6):
    return [np.random.default_rng(0).normal(size=(rows, 3)).astype(np.float32)]


def test_torch_tensor_attribute_outside_state_dict_is_hinted():
    found = hints.untracked_state(PlainScale(), "torch")
    assert found == ["hint: the model keeps tensor 'scale' outside its state_dict; register it with register_buffer "
                     "(or make it an nn.Parameter if it is trained)"]
    assert hints.untracked_state(Clean(), "torch") == []
    nested = nn.Sequential(nn.Linear(3, 3), PlainScale())
    assert hints.untracked_names(nested, "torch") == ["1.scale"]


def test_batch_statistics_in_eval_are_hinted():
    fw = ops.TorchOps()
    found = hints.batch_dependence(fw, BatchNormAlways(), _x())
    assert len(found) == 1 and found[0].startswith("hint: in inference mode the outputs of a row depend on the other rows")
    assert hints.batch_dependence(fw, Clean(), _x()) == []
    assert hints.batch_dependence(fw, nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)), _x()) == []  # running stats


def test_hinting_appends_one_line_per_hint_to_the_failure_and_keeps_its_type():
    class Mismatch(AssertionError):
        pass

    finders = (lambda: hints.untracked_state(PlainScale(), "torch"), lambda: 1 / 0)
    with pytest.raises(Mismatch) as info, hints.hinting(*finders):
        raise Mismatch("state-dict round trip: output 'output_0' differs")
    lines = str(info.value).splitlines()
    assert lines[0] == "state-dict round trip: output 'output_0' differs"
    assert lines[1:] == hints.untracked_state(PlainScale(), "torch")  # the finder that raised added nothing
    with hints.hinting(lambda: ["hint: never shown"]):
        pass  # no failure: no finder runs


def test_custom_autograd_function_torchscript_refusal_is_one_line(tmp_path):
    model = CustomFunction()
    try:
        ops.write_artifact("torchscript", model, _x(), tmp_path / "m.pt")
    except RuntimeError as exc:
        reason = ops.refusal_reason(ops.FORMAT_REFUSALS["torchscript"], exc)
    else:
        pytest.fail("torch.jit.save saved a traced torch.autograd.Function: the refusal this test pins is gone")
    assert reason is not None and "\n" not in reason
    assert reason.startswith("RuntimeError: Could not export Python function call 'Square'")
    assert ".py(" not in reason and "apply" not in reason.split("[documented")[0]  # no stack frame
    assert len(reason) < 600


def test_one_line_reason_drops_stack_frames():
    text = "Could not export.\n/x/torch/autograd/function.py(625): apply\n  File \"m.py\", line 3, in f\nend"
    assert ops.one_line_reason(text) == "Could not export. end"


def test_reference_that_could_not_copy_the_state_blames_neither_side():
    tol = Tolerance(1e-6, "test bound")
    sides = {"the original": {"y": np.ones(3)}, "the artifact": {"y": np.ones(3) * 2}}
    blamed = ops.reference_diagnosis(sides, {"y": np.ones(3) * 2}, tol)
    assert "the original 5.00e-01" in blamed
    unsure = ops.reference_diagnosis(sides, {"y": np.ones(3) * 2}, tol, uncopied=["gate.s"])
    assert unsure.startswith("cannot tell which side is wrong: the model has state the float64 rebuild could not "
                             "copy (gate.s")
    assert "the original" not in unsure


# ---------------------------------------------------------------- keras models


def _keras():
    return pytest.importorskip("keras"), pytest.importorskip("tensorflow")


def test_keras_raw_tf_variable_outside_weights_is_hinted():
    keras, tf = _keras()

    class RawScale(keras.layers.Layer):
        def build(self, shape):
            self.s = tf.Variable(tf.ones(shape[-1]) * 2.0, name="s")

        def call(self, x):
            return x * self.s

    inp = keras.Input((3,))
    model = keras.Model(inp, RawScale(name="gate")(keras.layers.Dense(3)(inp)))
    assert hints.untracked_names(model, "tensorflow") == ["gate.s"]
    assert hints.untracked_state(model, "tensorflow")[0].startswith(
        "hint: the model keeps tf.Variable 'gate.s' outside its weights")
    clean = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3), keras.layers.BatchNormalization(),
                              keras.layers.Dropout(0.2, seed=1)])
    assert hints.untracked_state(clean, "tensorflow") == []


def test_keras_incomplete_get_config_is_hinted():
    keras, _ = _keras()

    class Forgets(keras.layers.Layer):
        def __init__(self, factor, **kw):
            super().__init__(**kw)
            self.factor = factor

        def get_config(self):
            return super().get_config()  # factor left out: from_config cannot call __init__

        def call(self, x):
            return x * self.factor

    class Defaults(keras.layers.Layer):
        def __init__(self, factor=1.0, **kw):
            super().__init__(**kw)
            self.factor = factor

        def get_config(self):
            return super().get_config()  # factor left out: rebuilt with the default

        def call(self, x):
            return x * self.factor

    class Complete(Defaults):
        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    inp = keras.Input((3,))
    h = Forgets(2.0, name="forgets")(inp)
    h = Defaults(3.0, name="defaults")(h)
    model = keras.Model(inp, Complete(4.0, name="complete")(h))
    found = hints.config_roundtrip(model)
    assert len(found) == 2, found
    assert found[0].startswith("hint: layer 'forgets' (") and "does not rebuild from its get_config() (TypeError" in found[0]
    assert "rebuilt by from_config(get_config()) has factor=1.0, the original 3.0; add 'factor'" in found[1]
