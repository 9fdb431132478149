"""Export and wrapper checks assert documented promises only, and "not applicable" is only the
framework's documented refusal.

- ONNX: the dynamo exporter's optimiser folds a BatchNorm into the preceding Linear under
  the Linear's names; no documentation promises named initializers, so a conforming
  Linear -> BatchNorm model passes (the names are evidence), while a wrong output still fails.
- Writers: a saver that raises (state_dict(), a .keras save) or writes nothing is a
  violation (WriteFailed); a documented refusal (a Keras layer without get_config, torch.export
  on data-dependent control flow) is not applicable with a one-line reason.
- Wrappers: DDP/FSDP raising an undocumented ValueError is a violation (WrapFailed); FSDP2's
  scalar-parameter refusal is not applicable with a one-line reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks import roundtrip as rt
from pytest_dlconform.checks import usermodel as ops
from pytest_dlconform.checks.usermodel.distributed import wrap

torch = pytest.importorskip("torch")

TIMEOUT = 180.0
# The shape that failed a newcomer's first run: dense (no activation) -> batchnorm -> ...
LINEAR_BN = rt.ModelSpec(6, (rt.Layer("dense", 3), rt.Layer("batchnorm"), rt.Layer("dense", 4, "sigmoid"),
                             rt.Layer("dense", 2)), "float32", 11)


def _one_line(reason: str) -> None:
    assert "\n" not in reason and "Traceback" not in reason, reason


# =========================================================================== ONNX


@pytest.fixture(scope="module")
def onnx_suite() -> Any:
    for name in ("onnx", "onnxruntime", "onnxscript"):
        pytest.importorskip(name)
    from suites.export import test_torch_formats

    return test_torch_formats


def _onnx_case(suite: Any, tmp_path: Path, module: Any) -> tuple[rt.Artifact, list[np.ndarray], rt.Expected]:
    inputs = rt.example_inputs(LINEAR_BN, [1, 3], seed=5)
    example = torch.from_numpy(rt.example_inputs(LINEAR_BN, [2], seed=6)[0])
    art = rt.export_artifact(tmp_path / "linear-bn", "onnx", suite._onnx_writer(torch, module, example, dynamo=True))
    expected = rt.Expected([{"y": o["output_0"]} for o in suite._eager(suite._onnx_stated(torch, module), inputs)], None,
                           suite._onnx_signature(LINEAR_BN, batch=rt.DYNAMIC), tol=rt.model_tolerance(LINEAR_BN),
                           scales=rt.magnitudes(LINEAR_BN, inputs, "torch"))
    return art, inputs, expected


def test_onnx_linear_then_batchnorm_holds_and_folded_names_are_evidence(onnx_suite, tmp_path):
    module = rt.build_torch(LINEAR_BN, torch)
    art, inputs, expected = _onnx_case(onnx_suite, tmp_path, module)
    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT, fresh=False)
    loaded = trip.check(art, inputs, expected, what="ONNX of Linear -> BatchNorm")  # no false alarm
    counts = onnx_suite._note_initializers(loaded, rt.torch_state(module), True)
    # The precondition of the old false alarm: the fold keeps the Linear's names with other values.
    assert counts["initializers by a state_dict name"] > counts["of those, bitwise the state_dict tensor"], counts


def test_onnx_wrong_exported_output_still_fails(onnx_suite, tmp_path):
    module = rt.build_torch(LINEAR_BN, torch)
    _, inputs, expected = _onnx_case(onnx_suite, tmp_path, module)
    with torch.no_grad():
        module[0].bias.add_(0.25)  # the exported model now computes something else than the original
    wrong = rt.export_artifact(tmp_path / "wrong", "onnx", onnx_suite._onnx_writer(
        torch, module, torch.from_numpy(inputs[1]), dynamo=True))
    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT, fresh=False)
    with pytest.raises(rt.OutputMismatch, match=r"ONNX with a shifted bias \[same process"):
        trip.check(wrong, inputs, expected, what="ONNX with a shifted bias")


# =========================================================================== writers


class _StateDictRaises(torch.nn.Linear):
    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("state_dict exploded")


def _write(tmp_path: Path, fmt: str, model: Any, inputs: list[np.ndarray]) -> rt.Artifact:
    return rt.export_artifact(tmp_path / fmt, fmt, lambda p: ops.write_artifact(fmt, model, inputs, p))


def test_a_crashing_state_dict_is_a_violation_not_a_refusal(tmp_path):
    x = [np.ones((2, 3), np.float32)]
    with pytest.raises(rt.WriteFailed, match=r"export: write state-dict.*the writer raised RuntimeError: state_dict "
                                             r"exploded$") as info:
        _write(tmp_path, "state-dict", _StateDictRaises(3, 2), x)
    assert isinstance(info.value, AssertionError)
    assert ops.refusal_reason(ops.FORMAT_REFUSALS["state-dict"], info.value.__cause__) is None
    _one_line(str(info.value))


def test_a_writer_that_writes_nothing_is_a_violation(tmp_path):
    with pytest.raises(rt.WriteFailed, match="the writer returned without writing it") as info:
        rt.export_artifact(tmp_path / "nothing", "state-dict", lambda p: None)
    assert info.value.__cause__ is None  # nothing raised: no refusal to match, the suite re-raises it


def test_torch_export_of_data_dependent_control_flow_is_the_documented_refusal(tmp_path):
    class PythonIf(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x: Any) -> Any:
            y = self.lin(x)
            return y * 2 if y.sum() > 0 else y - 1

    with pytest.raises(rt.WriteFailed) as info:
        _write(tmp_path, "torch-export", PythonIf(), [np.ones((2, 3), np.float32)])
    reason = ops.refusal_reason(ops.FORMAT_REFUSALS["torch-export"], info.value.__cause__)
    assert reason is not None and reason.startswith("GuardOnDataDependentSymNode: Could not guard on data-dependent")
    assert "[documented: torch.export docs" in reason
    _one_line(reason)


@pytest.fixture(scope="module")
def keras() -> Any:
    return pytest.importorskip("keras")


def test_keras_save_raising_is_a_violation_and_missing_get_config_the_documented_refusal(keras, tmp_path,
                                                                                        monkeypatch):
    class Opaque:
        pass

    class NoConfig(keras.layers.Layer):
        def __init__(self, thing: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.thing = thing

        def call(self, x: Any) -> Any:
            return x * 2.0

    def model(layer: Any) -> Any:
        x = keras.Input((3,), name="x")
        return keras.Model(x, keras.layers.Dense(2)(layer(x)))

    inputs = [np.ones((2, 3), np.float32)]
    (tmp_path / "refused").mkdir()
    (tmp_path / "crash").mkdir()
    with pytest.raises(rt.WriteFailed) as info:
        _write(tmp_path / "refused", "keras", model(NoConfig(Opaque())), inputs)
    reason = ops.refusal_reason(ops.FORMAT_REFUSALS["keras"], info.value.__cause__)
    assert reason is not None and reason.startswith("NotImplementedError: Object NoConfig was created by passing "
                                                    "non-serializable argument values"), reason
    _one_line(reason)

    good = model(keras.layers.Identity())
    monkeypatch.setattr(type(good), "save", lambda self, path: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(rt.WriteFailed, match=r"the writer raised OSError: disk full") as info:
        _write(tmp_path / "crash", "keras", good, inputs)
    assert ops.refusal_reason(ops.FORMAT_REFUSALS["keras"], info.value.__cause__) is None


def test_a_refusal_needs_the_type_and_the_message():
    assert ops.refusal_reason(ops.FORMAT_REFUSALS["keras"], NotImplementedError("something else")) is None
    text = "Object X was created by passing\nnon-serializable argument values in `__init__()`,\nand therefore the " \
           "object must override `get_config()` in\norder to be serializable."
    assert ops.refusal_reason(ops.FORMAT_REFUSALS["keras"], ValueError(text)) is None  # the message, another type
    assert ops.refusal_reason(ops.FORMAT_REFUSALS["keras"], NotImplementedError(text)) is not None


# =========================================================================== DDP / FSDP


def test_ddp_raising_an_undocumented_value_error_is_a_violation(monkeypatch):
    import torch.nn.parallel

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("bucket view mismatch\nsecond line")

    monkeypatch.setattr(torch.nn.parallel, "DistributedDataParallel", boom)
    model, answer = wrap(torch.nn.Linear(3, 2), "ddp", "cpu")
    assert model is None and answer == {ops.WRAP_FAILED: "ValueError: bucket view mismatch second line"}
    with pytest.raises(ops.WrapFailed, match=r"^ddp over 2: ddp raised wrapping the model, not a documented refusal: "
                                             r"ValueError: bucket view mismatch second line$"):
        ops.wrap_verdict([answer, answer], "ddp", "ddp over 2")


def test_fsdp_scalar_parameters_are_the_documented_refusal(monkeypatch):
    import torch.distributed.fsdp

    def refuse(module: Any) -> Any:  # fully_shard's own message (torch 2.13), without a process group
        raise ValueError("fully_shard doesn't support scalar parameters. Change scale to a 1D tensor with numel "
                         "equal to 1.")

    monkeypatch.setattr(torch.distributed.fsdp, "fully_shard", refuse)
    _, answer = wrap(torch.nn.Linear(3, 2), "fsdp", "cpu")
    assert answer is not None and ops.REFUSED in answer
    reason = ops.wrap_verdict([answer, answer], "fsdp", "fsdp over 2")
    assert reason is not None and reason.startswith("ValueError: fully_shard doesn't support scalar parameters")
    _one_line(reason)
    # The same message from DDP is no refusal of DDP's: a violation.
    assert ops.refusal_reason(ops.WRAP_REFUSALS["ddp"], ValueError("fully_shard doesn't support scalar parameters")) \
        is None
