"""The TF.js oracles (checks/tfjs.py) against real converted models that were altered, and the harness's errors.

The tests that convert need the tfjs environment (``tox -e tfjs``: tensorflowjs beside
tensorflow 2.19, @tensorflow/tfjs in js/tfjs-runner); in the main environment they skip
with the exact reason, and there the "not applicable" reason itself is checked. Run them
with: ``.tox/tfjs/bin/python -m pytest tests/integration/test_tfjs_oracle.py -p no:cacheprovider``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks import roundtrip as rt
from pytest_dlconform.checks import tfjs
from pytest_dlconform.frameworks import HarnessError
from pytest_dlconform.programs import Op, Program

SPEC = rt.ModelSpec(5, (rt.Layer("dense", 7, "relu"), rt.Layer("batchnorm"), rt.Layer("dense", 4, "elu"),
                        rt.Layer("layernorm"), rt.Layer("dense", 3, "sigmoid")), "float32", 21)
TIMEOUT = 120.0
REASON = tfjs.unavailable()
needs_tfjs = pytest.mark.skipif(REASON is not None, reason=f"needs the tfjs environment (`tox -e tfjs`): {REASON}")


@pytest.mark.skipif(importlib.util.find_spec("tensorflowjs") is not None, reason="tensorflowjs is installed here")
def test_main_environment_reason_names_the_env_to_run():
    assert REASON is not None and "tox -e tfjs" in REASON and "tensorflowjs" in REASON, REASON


def test_runner_missing_node_modules_is_named(tmp_path, monkeypatch):
    if importlib.util.find_spec("tensorflowjs") is None:
        pytest.skip("tensorflowjs is not installed here: unavailable() names the missing converter before the runner")
    monkeypatch.setenv("DLCONFORM_TFJS_RUNNER", str(tmp_path))
    reason = tfjs.unavailable()
    assert reason is not None and "npm ci --prefix" in reason and str(tmp_path) in reason, reason


# ----------------------------------------------------------------------------- real conversions


@pytest.fixture(scope="module")
def converted(tmp_path_factory: Any) -> dict[str, Any]:
    """A tf_keras model of SPEC converted to a layers model (float32 and uint8), with TensorFlow's outputs."""
    if REASON is not None:
        pytest.skip(f"needs the tfjs environment (`tox -e tfjs`): {REASON}")
    import tf_keras

    root = tmp_path_factory.mktemp("tfjs")
    model = rt.build_keras(SPEC, tf_keras)
    model.save(root / "m.h5")
    for q in ("float32", "uint8"):
        tfjs.convert(["--input_format=keras", "--output_format=tfjs_layers_model",
                      *([f"--quantize_{q}=*"] if q != "float32" else []), str(root / "m.h5"), str(root / q)])
    inputs = rt.example_inputs(SPEC, [1, 4], seed=3)
    return {"root": root, "inputs": inputs, "want": [np.asarray(model(x, training=False)) for x in inputs],
            "out": model.output_names[0]}


def _copy(converted: dict[str, Any], q: str, tmp_path: Path) -> Path:
    dst = tmp_path / q
    shutil.copytree(converted["root"] / q, dst)
    return dst


def _run(folder: Path, converted: dict[str, Any], tmp_path: Path) -> tfjs.NodeModel:
    got, _ = tfjs.run_node([("m", folder, "layers-model", "x", converted["inputs"])], tmp_path / "node", timeout=TIMEOUT)
    assert got["m"].error is None, got["m"].error
    return got["m"]


def _alter_weight(folder: Path, name: str, factor: float) -> None:
    """Scale the first float32 value of one weight inside the .bin file, as a broken writer would."""
    doc = json.loads((folder / "model.json").read_text())
    (group,) = doc["weightsManifest"]
    offset = 0
    for w in group["weights"]:
        if w["name"] == name:
            break
        offset += 4 * int(np.prod(w["shape"]))
    path = folder / group["paths"][0]
    data = bytearray(path.read_bytes())
    v = np.frombuffer(bytes(data[offset:offset + 4]), "<f4")[0]
    data[offset:offset + 4] = np.float32(v * factor if v != 0 else 0.5).tobytes()
    path.write_bytes(bytes(data))


@needs_tfjs
def test_unaltered_conversion_holds(converted, tmp_path):
    result = _run(converted["root"] / "float32", converted, tmp_path)
    tfjs.assert_weights(result.weights, tfjs.keras2_names(SPEC), what="unaltered")
    for out, y, m in zip(result.outputs, converted["want"], rt.magnitudes(SPEC, converted["inputs"], "keras")):
        rt.assert_close_outputs(out, {converted["out"]: y}, rt.model_tolerance(SPEC), scale=m, what="unaltered")


@needs_tfjs
def test_weights_file_altered_after_conversion_fails_the_claim(converted, tmp_path):
    folder = _copy(converted, "float32", tmp_path)
    _alter_weight(folder, "dense_0/kernel", 1.1)  # 1.01 already fails the weights; outputs only just (8.1e-5 > 7.8e-5)
    result = _run(folder, converted, tmp_path)
    with pytest.raises(tfjs.TfjsMismatch,
                       match=r"1 of 12 weights differ from the originals: dense_0/kernel: max \|tfjs - original\|"):
        tfjs.assert_weights(result.weights, tfjs.keras2_names(SPEC), what="altered")
    with pytest.raises(rt.OutputMismatch, match="should be <="):
        for out, y, m in zip(result.outputs, converted["want"], rt.magnitudes(SPEC, converted["inputs"], "keras")):
            rt.assert_close_outputs(out, {converted["out"]: y}, rt.model_tolerance(SPEC), scale=m, what="altered")


@needs_tfjs
def test_moving_statistic_altered_fails_by_name(converted, tmp_path):
    folder = _copy(converted, "float32", tmp_path)
    _alter_weight(folder, "batchnorm_1/moving_variance", 1.5)
    result = _run(folder, converted, tmp_path)
    with pytest.raises(tfjs.TfjsMismatch, match="batchnorm_1/moving_variance"):
        tfjs.assert_weights(result.weights, tfjs.keras2_names(SPEC), what="altered statistic")


@needs_tfjs
def test_uint8_bounds_hold_and_catch_a_two_step_error(converted, tmp_path):
    names = tfjs.keras2_names(SPEC)
    result = _run(converted["root"] / "uint8", converted, tmp_path)
    worst = tfjs.assert_weights(result.weights, names, what="uint8", quantisation="uint8")
    assert 0.3 < worst <= 1.0, worst  # rounding uses up to half a step: the bound is tight
    dparams = tfjs.parameter_bounds(SPEC, "uint8")
    for x, out, y in zip(converted["inputs"], result.outputs, converted["want"]):
        rt.assert_within_bound(out[converted["out"]], y, tfjs.propagated_bound(SPEC, x, dparams, rtol=1e-6), what="uint8")
    # A dequantised weight two steps off: the per-weight bound names it.
    bad = dict(result.weights)
    w = names["dense_2/kernel"].astype(np.float64)
    bad["dense_2/kernel"] = (bad["dense_2/kernel"] + 2 * (w.max() - w.min()) / 255).astype(np.float32)
    with pytest.raises(tfjs.TfjsMismatch, match="dense_2/kernel"):
        tfjs.assert_weights(bad, names, what="uint8 two steps", quantisation="uint8")
    # A manifest whose scale is not (max - min) / 255.
    manifest = tfjs.read_manifest(converted["root"] / "uint8")
    manifest["dense_0/kernel"] = {**manifest["dense_0/kernel"],
                                  "quantization": {**manifest["dense_0/kernel"]["quantization"], "scale": 0.5}}
    with pytest.raises(tfjs.TfjsMismatch, match=r"uint8 scale 0\.5"):
        tfjs.assert_manifest_quantised(manifest, names, quantisation="uint8", what="manifest")


def test_propagated_bound_is_tight_and_fails_beyond_it():
    """Pure numpy (runs everywhere): the worst-case perturbation within the per-weight bounds
    reaches the output bound, and five times it exceeds the bound. The worst case equals the bound
    in exact arithmetic; float64 evaluates the two sides in different orders (the bound through
    |h| @ dW, the perturbed model through h @ (W + dW sign h)), so a tie can come out an ulp above
    (seen on an AVX-512 machine: ratio 1 + 1 ulp). The perturbation is 1 - 1e-9 bounds: 1e-9 is
    ~1e6 x the float64 rounding of errors of this size (|a - e| ~ 1e-2 of values ~ 1), so the
    ratio stays below 1 on every evaluation order and above 0.999 if the bound is tight."""
    spec = rt.ModelSpec(5, (rt.Layer("dense", 6, "relu"), rt.Layer("dense", 3)), "float32", 4)
    x = rt.example_inputs(spec, [1], seed=5)[0]
    dparams = tfjs.parameter_bounds(spec, "uint8")
    dparams[0] = {k: np.zeros_like(v) for k, v in dparams[0].items()}  # only the last layer is perturbed
    bound = tfjs.propagated_bound(spec, x, dparams, rtol=0.0)
    (p1, p2) = rt.parameters(spec)
    h = np.maximum(x.astype(np.float64) @ p1["kernel"] + p1["bias"], 0.0)
    exact = h @ p2["kernel"] + p2["bias"]

    def perturbed(k: float) -> np.ndarray:  # every kernel and bias entry moved by k bounds, signs aligned
        return h @ (p2["kernel"] + k * dparams[1]["kernel"] * np.sign(h).T) + p2["bias"] + k * dparams[1]["bias"]

    ratio = rt.assert_within_bound(perturbed(1 - 1e-9), exact, bound, what="1 - 1e-9 x the per-weight bound")
    assert ratio > 0.999, ratio
    with pytest.raises(rt.QuantisationBoundExceeded, match="should be <= the quantisation bound"):
        rt.assert_within_bound(perturbed(5.0), exact, bound, what="5x the per-weight bound")


@needs_tfjs
def test_converter_refusal_names_the_op(tmp_path):
    import tensorflow as tf

    mod = tf.Module()
    mod.f = tf.function(lambda x: {"y": tf.math.lgamma(x)}, input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    tf.saved_model.save(mod, str(tmp_path / "sm"), signatures={"serving_default": mod.f})
    with pytest.raises(tfjs.ConverterRefused) as info:
        tfjs.convert(["--input_format=tf_saved_model", "--output_format=tfjs_graph_model",
                      str(tmp_path / "sm"), str(tmp_path / "g")])
    assert info.value.ops == ["Lgamma"] and "Unsupported Ops" in info.value.message, (info.value.ops, info.value.message)


@needs_tfjs
def test_node_failures_are_harness_errors_with_stderr(converted, tmp_path):
    folder = _copy(converted, "float32", tmp_path)
    (folder / "group1-shard1of1.bin").unlink()  # the runner cannot read the weights: it exits non-zero
    with pytest.raises(HarnessError, match=r"exited with code 1; stderr: .*ENOENT.*group1-shard1of1\.bin"):
        tfjs.run_node([("m", folder, "layers-model", "x", converted["inputs"])], tmp_path / "node", timeout=TIMEOUT)
    with pytest.raises(HarnessError, match=r"did not finish within 0\.05 s and was killed"):
        tfjs.run_node([("m", converted["root"] / "float32", "layers-model", "x", converted["inputs"])],
                      tmp_path / "node2", timeout=0.05)


@needs_tfjs
def test_what_tfjs_refuses_is_reported_per_model(converted, tmp_path):
    folder = _copy(converted, "float32", tmp_path)
    doc = json.loads((folder / "model.json").read_text())
    doc["modelTopology"]["model_config"]["config"]["layers"][1]["class_name"] = "NoSuchLayer"
    (folder / "model.json").write_text(json.dumps(doc))
    got, _ = tfjs.run_node([("m", folder, "layers-model", "x", converted["inputs"])], tmp_path / "node", timeout=TIMEOUT)
    assert got["m"].error is not None and "NoSuchLayer" in got["m"].error, got["m"].error


# ------------------------------------------------------------------ one-op programs of the op library


def _library_run(tmp_path: Path, saved_program: Any, inputs: list[np.ndarray]) -> tfjs.NodeModel:
    """``saved_program`` saved and converted as the suite does, run in TF.js on ``inputs``."""
    import tensorflow as tf

    tfjs.save_program(tf, saved_program, tmp_path / "sm")
    tfjs.convert(["--input_format=tf_saved_model", "--output_format=tfjs_graph_model",
                  str(tmp_path / "sm"), str(tmp_path / "g")])
    got, _ = tfjs.run_node([("p", tmp_path / "g", "graph-model", "x", [tfjs.pack_inputs(inputs)])],
                           tmp_path / "node", timeout=TIMEOUT)
    assert got["p"].error is None, got["p"].error
    return got["p"]


# x - y with a broadcast second input: the packing (split, reshape) must keep the order
_SUB = Program(((3, 4), (4,)), (Op("sub", (), (0, 1)),))
_INPUTS = [np.arange(12.0).reshape(3, 4) / 8 - 0.7, np.array([0.25, -1.5, 2.0, 0.125])]


@needs_tfjs
def test_library_program_converts_packed_and_holds(tmp_path):
    result = _library_run(tmp_path, _SUB, _INPUTS)
    tfjs.assert_program_output(result.outputs[0], _SUB, _INPUTS, what="sub")


@needs_tfjs
@pytest.mark.parametrize("wrong", [
    Program(((3, 4), (4,)), (Op("add", (), (0, 1)),)),  # another op
    Program(((4,), (3, 4)), (Op("sub", (), (0, 1)),)),  # the packed inputs taken in the wrong order
])
def test_library_program_wrong_model_fails_against_the_reference(tmp_path, wrong):
    inputs = _INPUTS if wrong.input_shapes == _SUB.input_shapes else _INPUTS[::-1]
    result = _library_run(tmp_path, wrong, inputs)
    with pytest.raises(AssertionError, match=r"sub vs float64 reference: max\|actual - expected\| = .* but should be <="):
        tfjs.assert_program_output(result.outputs[0], _SUB, _INPUTS, what="sub")


def test_library_program_output_of_another_size_fails():
    with pytest.raises(tfjs.TfjsMismatch, match=r"sub: output of 4 values, but should have 12 \(shape \(3, 4\)\)"):
        tfjs.assert_program_output({"y": np.zeros(4)}, _SUB, _INPUTS, what="sub")
    with pytest.raises(tfjs.TfjsMismatch, match=r"sub: the model has no output 'y'"):
        tfjs.assert_program_output({"z": np.zeros(12)}, _SUB, _INPUTS, what="sub")


def test_library_program_bound_rejects_zeros_a_nan_and_a_sign_flip():
    reference = _SUB.numpy(_INPUTS)
    for wrong in (np.zeros_like(reference), np.where(np.arange(12).reshape(3, 4) == 5, np.nan, reference), -reference):
        with pytest.raises(AssertionError, match="sub vs float64 reference"):
            tfjs.assert_program_output({"y": wrong}, _SUB, _INPUTS, what="sub")
    tfjs.assert_program_output({"y": reference.astype(np.float32)}, _SUB, _INPUTS, what="sub")


def test_a_tensor_without_a_size_is_the_models_error_not_a_crash(tmp_path, monkeypatch):
    """@tensorflow/tfjs 4.22's cumprod with axis -1 returns shape [NaN, 2] (JSON [null, 2])
    and no data: the runner's result is parsed into that model's error, which the suites
    report as TfjsMismatch, instead of a TypeError in the harness."""
    doc = {"tfjs": "4.22.0", "backend": "cpu", "models": [
        {"id": "bad", "outputs": [[{"name": "y", "dtype": "float32", "shape": [None, 2], "data": ""}]], "weights": []},
        {"id": "short", "outputs": [[{"name": "y", "dtype": "float32", "shape": [2], "data": "AACAPw=="}]], "weights": []},
        {"id": "good", "outputs": [[{"name": "y", "dtype": "float32", "shape": [1], "data": "AACAPw=="}]], "weights": []},
    ]}

    class Done:
        returncode = 0

        def communicate(self, timeout: float | None = None) -> tuple[str, str]:
            (tmp_path / "node" / "tfjs-result.json").write_text(json.dumps(doc))
            return "", ""

    monkeypatch.setattr(tfjs.subprocess, "Popen", lambda *a, **k: Done())
    got, _ = tfjs.run_node([], tmp_path / "node", timeout=TIMEOUT)
    assert got["bad"].error == "it returned output 'y' with shape [None, 2] (an axis without a size), not a tensor"
    assert got["short"].error == "it returned output 'y' of shape [2] with data of another size"
    assert got["good"].error is None and got["good"].outputs[0]["y"].tolist() == [1.0]
