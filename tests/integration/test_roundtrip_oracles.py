"""The round-trip oracles against real artifacts whose weights or buffers were altered after export.

Each test exports a real artifact with the framework, records what the original gives,
then plants a change in the file the way a broken exporter or loader would (a weight, a
running statistic, a counter, a stored int8 value, a fixed batch dimension), re-seals it
so that the seal does not catch it first, and shows that the oracle fails with a message
that names what differs: in this process and, where the suite loads in a fresh
interpreter, there too.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks import roundtrip as rt

SPEC32 = rt.ModelSpec(5, (rt.Layer("dense", 7, "tanh"), rt.Layer("batchnorm"), rt.Layer("dense", 3)), "float32", 21)
SPEC64 = rt.ModelSpec(4, (rt.Layer("dense", 6, "relu"), rt.Layer("batchnorm"), rt.Layer("layernorm"),
                          rt.Layer("dense", 2, "sigmoid")), "float64", 8)
TIMEOUT = 180.0


def _inputs(spec: rt.ModelSpec) -> list[np.ndarray]:
    return rt.example_inputs(spec, [1, 4], seed=7)


def _replace_tree(art: rt.Artifact, source: Path) -> None:
    """Put another export's files where the artifact's were, then re-seal (a planted change)."""
    for p in art.path.iterdir():
        if p.name != rt.SEAL:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    for p in source.iterdir():
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, art.path / p.name)
    rt.reseal(art.path)


def _fails_fresh(trip: rt.RoundTrip, error: type[AssertionError], match: str) -> None:
    with pytest.raises(error, match=match):
        trip.finish()


# =========================================================================== torch


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


def _torch_expected(torch: Any, module: Any, inputs: list[np.ndarray], signature: Any) -> rt.Expected:
    with torch.no_grad():
        outs = [{"output_0": module(torch.from_numpy(x)).numpy()} for x in inputs]
    return rt.Expected(outs, rt.torch_state(module), signature)


def test_torchscript_oracles_catch_an_altered_weight_and_an_altered_counter(torch, tmp_path):
    module = rt.build_torch(SPEC32, torch)
    inputs = _inputs(SPEC32)
    scripted = torch.jit.script(module)
    expected = _torch_expected(torch, module, inputs, rt.torchscript_signature(scripted))

    def export(name: str, change: Callable[[Any], None]) -> rt.Artifact:
        art = rt.export_artifact(tmp_path / name, "torchscript", lambda p: torch.jit.save(scripted, str(p)))
        altered = torch.jit.load(str(art.main))
        with torch.no_grad():
            change(altered)
        torch.jit.save(altered, str(art.main))
        rt.reseal(art.path)
        return art

    weight = export("weight", lambda m: m.state_dict()["0.weight"][1, 2].add_(1e-3))
    counter = export("counter", lambda m: m.state_dict()["2.num_batches_tracked"].add_(1))  # no effect on outputs
    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT)
    with pytest.raises(rt.OutputMismatch, match=r"same process.*output 'output_0' differs from the original's"):
        trip.check(weight, inputs, expected, what="TorchScript with an altered weight")
    with pytest.raises(rt.StateMismatch, match=r"2\.num_batches_tracked: max abs difference 1\.000e\+00"):
        trip.check(counter, inputs, expected, what="TorchScript with an altered counter")
    # Fresh interpreter: queue a good artifact, alter it after the same-process check.
    good = rt.export_artifact(tmp_path / "good", "torchscript", lambda p: torch.jit.save(scripted, str(p)))
    trip.check(good, inputs, expected, what="TorchScript, altered later")
    altered = torch.jit.load(str(good.main))
    with torch.no_grad():
        altered.state_dict()["2.running_var"].mul_(1.5)
    torch.jit.save(altered, str(good.main))
    rt.reseal(good.path)
    _fails_fresh(trip, rt.OutputMismatch, r"TorchScript, altered later \[fresh interpreter, batch 0")


def test_torchscript_training_flag_is_part_of_the_signature(torch, tmp_path):
    module = rt.build_torch(SPEC32, torch)
    expected = rt.torchscript_signature(torch.jit.script(module))
    left_in_train_mode = torch.jit.script(module.train())
    art = rt.export_artifact(tmp_path / "train", "torchscript", lambda p: torch.jit.save(left_in_train_mode, str(p)))
    with pytest.raises(rt.SignatureMismatch, match=r"training\.\S+ is True, but should be False"):
        rt.assert_same_signature(rt.load(art.path, "torchscript").signature(), expected, what="exported in train mode")


def test_state_dict_oracles_catch_an_altered_running_mean_and_a_dropped_counter(torch, tmp_path):
    module = rt.build_torch(SPEC64, torch)
    inputs = _inputs(SPEC64)
    state = rt.torch_state(module)
    expected = _torch_expected(torch, module, inputs, {"keys": sorted(state)})

    def export(name: str, change: Callable[[dict[str, Any]], None]) -> rt.Artifact:
        sd = {k: v.clone() for k, v in module.state_dict().items()}
        change(sd)
        return rt.export_artifact(tmp_path / name, "state-dict", lambda p: torch.save(sd, str(p)))

    mean = export("mean", lambda sd: sd["2.running_mean"].add_(0.25))
    with pytest.raises(rt.OutputMismatch, match="differs from the original's"):
        rt.RoundTrip(tmp_path / "t1", TIMEOUT, fresh=False).check(mean, inputs, expected, what="running_mean", spec=SPEC64)
    # A file without the counter loads even with strict=True (BatchNorm accepts checkpoints
    # older than num_batches_tracked and resets it to 0): only the state oracle notices.
    dropped = export("dropped", lambda sd: sd.pop("2.num_batches_tracked"))
    trip = rt.RoundTrip(tmp_path / "t2", TIMEOUT)
    with pytest.raises(rt.StateMismatch, match=r"same process\]: 1 of 11 state entries differ .*2\.num_batches_tracked"):
        trip.check(dropped, inputs, expected, what="state_dict without its counter", spec=SPEC64)
    trip.check(export("good", lambda sd: None), inputs, expected, what="state_dict, altered later", spec=SPEC64)
    good = rt.open_artifact(tmp_path / "good")
    sd = torch.load(str(good.main), weights_only=True)
    sd["0.weight"][0, 0] += 1e-9
    torch.save(sd, str(good.main))
    rt.reseal(good.path)
    _fails_fresh(trip, rt.OutputMismatch, r"state_dict, altered later \[fresh interpreter")


def test_a_loader_that_raises_on_a_sealed_artifact_is_a_violation_not_a_harness_error(torch, tmp_path):
    """A state_dict saved without BatchNorm's running statistics (a saver that drops buffers)
    makes load_state_dict(strict=True) raise: the round trip does not load, which is a
    conformance result (LoadFailed, an AssertionError), with the framework's words."""
    module = rt.build_torch(SPEC64, torch)
    sd = {k: v for k, v in module.state_dict().items() if "running_" not in k}
    art = rt.export_artifact(tmp_path / "no-buffers", "state-dict", lambda p: torch.save(sd, str(p)))
    message = (r"step 'load state-dict' on .*: the framework's loader raised RuntimeError: "
               r"Error\(s\) in loading state_dict(.|\n)*Missing key\(s\)(.|\n)*running_mean")
    with pytest.raises(rt.LoadFailed, match=message) as info:
        rt.load(art.path, "state-dict", SPEC64)
    assert isinstance(info.value, AssertionError) and not isinstance(info.value, rt.ArtifactError)
    from pytest_dlconform.report.outcomes import classify  # the verdict pytest's report gets

    assert classify(info.value) == "violated"


def test_torch_export_oracles_catch_an_altered_weight_and_a_fixed_batch(torch, tmp_path):
    module = rt.build_torch(SPEC32, torch)
    inputs = _inputs(SPEC32)
    example = torch.from_numpy(rt.example_inputs(SPEC32, [3], seed=1)[0])
    program = torch.export.export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    expected = _torch_expected(torch, module, inputs, rt.export_signature(program))
    art = rt.export_artifact(tmp_path / "weight", "torch-export", lambda p: torch.export.save(program, str(p)))
    altered = torch.export.load(str(art.main))
    with torch.no_grad():
        altered.state_dict["3.bias"].add_(1e-3)
    torch.export.save(altered, str(art.main))
    rt.reseal(art.path)
    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT, fresh=False)
    with pytest.raises(rt.OutputMismatch, match="differs from the original's"):
        trip.check(art, inputs, expected, what="torch.export with an altered bias")
    static = torch.export.export(module, (example,))  # no Dim: the batch of the example is baked in
    fixed = rt.export_artifact(tmp_path / "static", "torch-export", lambda p: torch.export.save(static, str(p)))
    with pytest.raises(rt.SignatureMismatch, match=r"inputs\[0\]\[1\]\[0\] is 3, but should be \[0, 'int_oo'\]"):
        rt.assert_same_signature(rt.load(fixed.path, "torch-export").signature(), expected.signature, what="static batch")


def test_onnx_oracles_catch_an_altered_initializer_and_a_fixed_batch(torch, tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from onnx import numpy_helper

    module = rt.build_torch(SPEC32, torch)
    inputs = _inputs(SPEC32)
    example = torch.from_numpy(rt.example_inputs(SPEC32, [3], seed=1)[0])
    with torch.no_grad():
        outs = [{"y": module(torch.from_numpy(x)).numpy()} for x in inputs]
    sig = {"inputs": [["x", "tensor(float)", ["batch", 5]]], "outputs": [["y", "tensor(float)", ["batch", 3]]]}
    expected = rt.Expected(outs, None, sig, tol=rt.model_tolerance(SPEC32), scales=rt.magnitudes(SPEC32, inputs, "torch"))

    def export(name: str, **kwargs: Any) -> rt.Artifact:
        return rt.export_artifact(tmp_path / name, "onnx", lambda p: torch.onnx.export(
            module, (example,), str(p), input_names=["x"], output_names=["y"], verbose=False, **kwargs))

    art = export("weight", dynamic_shapes=({0: "batch"},))
    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT)
    trip.check(art, inputs, expected, what="ONNX, altered later")  # good as exported
    model = onnx.load(str(art.main))
    biggest = max(model.graph.initializer, key=lambda t: numpy_helper.to_array(t).size)
    arr = numpy_helper.to_array(biggest).copy()
    arr.flat[0] += 0.5
    biggest.CopyFrom(numpy_helper.from_array(arr, biggest.name))
    for p in art.path.iterdir():
        if p.name != rt.SEAL:
            p.unlink()
    onnx.save(model, str(art.main))
    rt.reseal(art.path)
    with pytest.raises(rt.OutputMismatch, match=r"same process.*max\|actual - expected\|.*but should be <="):
        rt.check_loaded([rt.load(art.path, "onnx").run(x) for x in inputs], {}, sig, expected, what="ONNX altered",
                        where="same process")
    _fails_fresh(trip, rt.OutputMismatch, r"ONNX, altered later \[fresh interpreter")
    fixed = export("static")
    with pytest.raises(rt.SignatureMismatch, match=r"inputs\[0\]\[2\]\[0\] is 3, but should be 'batch'"):
        rt.assert_same_signature(rt.load(fixed.path, "onnx").signature(), sig, what="no dynamic_shapes")


# =========================================================================== TensorFlow


@pytest.fixture(scope="module")
def tf() -> Any:
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    return tf


def test_savedmodel_oracles_catch_an_altered_moving_variance(tf, tmp_path):
    import keras

    model = rt.build_keras(SPEC64, keras)
    servable = rt.servable_module(tf, model, SPEC64)
    inputs = _inputs(SPEC64)
    expected = rt.Expected([{"y": servable.serve(x)["y"].numpy()} for x in inputs],
                           {k: v.numpy() for k, v in servable.state.items()},
                           {"serving_default": {"inputs": {"x": ["float64", [None, 4]]},
                                                "outputs": {"y": ["float64", [None, 2]]}}})

    def save(path: Any) -> None:
        tf.saved_model.save(servable, str(path), signatures={"serving_default": servable.serve})

    art = rt.export_artifact(tmp_path / "sm", "savedmodel", save)
    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT)
    trip.check(art, inputs, expected, what="SavedModel, altered later")
    servable.state["batchnorm_1/moving_variance"].assign(servable.state["batchnorm_1/moving_variance"] * 2.0)
    save(tmp_path / "altered")
    _replace_tree(art, tmp_path / "altered")
    with pytest.raises(rt.OutputMismatch, match=r"differs from the original's"):
        rt.RoundTrip(tmp_path / "t2", TIMEOUT, fresh=False).check(art, inputs, expected, what="SavedModel altered")
    loaded = rt.load(art.path, "savedmodel")
    with pytest.raises(rt.StateMismatch, match=r"batchnorm_1/moving_variance: max abs difference"):
        rt.assert_same_state(loaded.state(), expected.state, what="SavedModel altered")
    _fails_fresh(trip, rt.OutputMismatch, r"SavedModel, altered later \[fresh interpreter")


def test_keras_file_oracles_catch_an_altered_moving_mean_and_a_fixed_batch_signature(tf, tmp_path):
    import keras

    model = rt.build_keras(SPEC32, keras)
    inputs = _inputs(SPEC32)
    expected = rt.Expected([{"output_0": np.asarray(model(x, training=False))} for x in inputs], rt.keras_state(model),
                           rt.keras_signature(model))
    art = rt.export_artifact(tmp_path / "k", "keras", lambda p: model.save(str(p)))
    altered = keras.models.load_model(str(art.main))
    bn = altered.get_layer("batchnorm_1")
    bn.moving_mean.assign(bn.moving_mean + 0.125)
    art.main.unlink()
    altered.save(str(art.main))
    rt.reseal(art.path)
    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT, fresh=False)
    with pytest.raises(rt.OutputMismatch, match="differs from the original's"):
        trip.check(art, inputs, expected, what=".keras with an altered moving mean")
    with pytest.raises(rt.StateMismatch, match=r"batchnorm_1/moving_mean"):
        rt.assert_same_state(rt.load(art.path, "keras").state(), expected.state, what="state")
    fixed = keras.Model(*_fixed_batch_io(keras, SPEC32, model))
    with pytest.raises(rt.SignatureMismatch, match=r"inputs\[0\]\[1\]\[0\] is 2, but should be None"):
        rt.assert_same_signature(rt.keras_signature(fixed), expected.signature, what="batch fixed at 2")


def _fixed_batch_io(keras: Any, spec: rt.ModelSpec, model: Any) -> tuple[Any, Any]:
    inp = keras.Input((spec.in_features,), batch_size=2, dtype=spec.dtype, name="x")
    return inp, model(inp)


def _tamper_tflite(tf: Any, art: rt.Artifact, pick: Callable[[dict[str, Any]], bool],
                   change: Callable[[np.ndarray], np.ndarray]) -> str:
    """Overwrite one constant tensor's bytes inside the flatbuffer, in place."""
    blob = art.main.read_bytes()
    interp = tf.lite.Interpreter(model_content=blob)
    for d in interp.get_tensor_details():
        if not pick(d):
            continue
        try:
            data = np.asarray(interp.get_tensor(d["index"]))
        except ValueError:
            continue
        raw = data.tobytes()
        at = blob.find(raw)
        if data.size >= 16 and at >= 0 and blob.find(raw, at + 1) < 0:
            new = np.ascontiguousarray(change(data.copy()).astype(data.dtype)).tobytes()
            art.main.write_bytes(blob[:at] + new + blob[at + len(raw):])
            rt.reseal(art.path)
            return str(d["name"])
    raise AssertionError("no constant tensor to tamper with")


def test_tflite_oracles_catch_altered_float_and_int8_weights(tf, tmp_path):
    import keras

    spec = rt.ModelSpec(32, (rt.Layer("dense", 40, "relu"), rt.Layer("dense", 3, "tanh")), "float32", 5)
    model = rt.build_keras(spec, keras)
    inputs = _inputs(spec)
    want = [{"output_0": np.asarray(model(x, training=False))} for x in inputs]
    sig = {"inputs": {"x": ["float32", [-1, 32]]}, "outputs": {"output_0": ["float32", [-1, 3]]}}

    def convert(quantise: bool) -> bytes:
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        if quantise:
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
        return conv.convert()

    flt = rt.export_artifact(tmp_path / "float", "tflite", lambda p: p.write_bytes(convert(False)))
    expected = rt.Expected(want, None, sig, tol=rt.model_tolerance(spec), scales=rt.magnitudes(spec, inputs, "keras"))
    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT)
    trip.check(flt, inputs, expected, what="TFLite float, altered later")
    _tamper_tflite(tf, flt, lambda d: np.dtype(d["dtype"]) == np.float32 and len(d["shape"]) == 2, lambda a: -a)
    with pytest.raises(rt.OutputMismatch, match=r"max\|actual - expected\|.*but should be <="):
        rt.RoundTrip(tmp_path / "t2", TIMEOUT, fresh=False).check(flt, inputs, expected, what="TFLite float altered")
    _fails_fresh(trip, rt.OutputMismatch, r"TFLite float, altered later \[fresh interpreter")

    q8 = rt.export_artifact(tmp_path / "int8", "tflite", lambda p: p.write_bytes(convert(True)))
    assert rt.assert_int8_weights(spec, rt.load(q8.path, "tflite").int8_weights(), min_elements=1024, what="as converted") == [0]
    name = _tamper_tflite(tf, q8, lambda d: np.dtype(d["dtype"]) == np.int8, lambda a: np.where(a == 127, -127, a))
    with pytest.raises(rt.QuantisedWeightsMismatch, match=rf"layer dense_0 \({name}\): .*steps away"):
        rt.assert_int8_weights(spec, rt.load(q8.path, "tflite").int8_weights(), min_elements=1024, what="int8 altered")
