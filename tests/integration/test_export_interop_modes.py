"""Issue 13's export and interop oracles fail on deliberately wrong implementations, and the
coverage models hold every declared mode by construction.

Export: coverage models (every layer kind, every activation with a non-default parameter,
batch normalisation's moving statistics) are built, exported through real formats, and a
wrong loader is planted (one that drops BatchNormalization's moving variance, one that
loses a recurrent weight); the per-tensor state oracle names the tensor, the output oracle
fails too. Interop: gradients are compared per named tensor, so one bias gradient that is
entirely wrong fails even where the whole-vector comparison against the largest entry
(the old oracle) passed; a comparison with a tolerance above 0.1 still runs.
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Any

import numpy as np
import pytest
import tomllib

from pytest_dlconform.checks import crossframework as cf
from pytest_dlconform.checks import roundtrip as rt
from pytest_dlconform.checks.roundtrip import zoo
from pytest_dlconform.core import evidence

TIMEOUT = 180.0
ORT_FLOAT_ONLY = ("elu", "selu", "leaky_relu", "softplus", "gelu", "gelu_tanh")  # as suites/export/test_torch_formats.py
FORMAT_MODES = {"keras-file", "model.export", "tflite-float", "tflite-int8", "script", "trace", "dynamo=True",
                "dynamo=False", "torch.cond"}


def _claims(area: str) -> dict[str, Any]:
    text = (resources.files("pytest_dlconform.core") / "claims" / f"{area}.toml").read_text(encoding="utf-8")
    return {c["id"]: c for c in tomllib.loads(text)["claim"]}


# =========================================================================== coverage by construction


@pytest.mark.parametrize("seed", [0, 1, 7, 12345, 2**31 - 1])
def test_coverage_models_hold_every_declared_layer_activation_and_state_mode(seed):
    claims = _claims("export")
    for cid, framework in (("export.savedmodel.roundtrip", "keras"), ("export.keras.roundtrip", "keras"),
                           ("export.tflite.roundtrip", "keras"), ("export.torchscript.roundtrip", "torch"),
                           ("export.torch-export.roundtrip", "torch"), ("export.onnx.roundtrip", "torch"),
                           ("export.state-dict.roundtrip", "torch")):
        declared = set(claims[cid]["modes"]) - FORMAT_MODES
        float64 = "dtype=float64" in declared
        specs = zoo.coverage_specs(framework, seed, float64=float64, float64_without=ORT_FLOAT_ONLY)
        covered = {m for spec in specs for m in zoo.modes_of(spec, framework)}
        assert declared <= covered, f"{cid}, seed {seed}: the coverage models miss {sorted(declared - covered)}"
        assert covered <= declared | {"dtype=float32"}, f"{cid}: modes not declared {sorted(covered - declared)}"
        params = {s.activation: s.param for spec in specs for s in spec.layers if s.param is not None}
        assert params["elu"] != 1.0 and params["leaky_relu"] not in (0.01, 0.2, 0.3), params
        if framework == "torch":
            assert params["softplus"] != 1.0, params


def test_the_float64_coverage_model_keeps_out_what_onnx_runtime_lacks_in_float64():
    for seed in range(30):
        vector = zoo.coverage_specs("torch", seed, float64=True, float64_without=ORT_FLOAT_ONLY)[0]
        assert vector.dtype == "float64"
        assert not {layer.activation for layer in vector.layers} & set(ORT_FLOAT_ONLY), vector.describe()


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def keras(tf: Any) -> Any:
    return cf.keras_in_process("tensorflow")


def test_builders_compute_the_numpy_reference_and_a_wrong_gru_port_does_not(torch):
    # The torch builder ports Keras's layout (GRU gates z r h -> torch r z n); a port that
    # forgets the reordering computes something else, and the reference says so.
    for spec in zoo.coverage_specs("torch", 3, float64=True):
        spec64 = rt.ModelSpec(spec.in_features, spec.layers, "float64", spec.seed, spec.shape, spec.vocab)
        x = rt.example_inputs(spec64, [3], 5)[0]
        want = rt.numpy_forward(spec64, x, bn_eps=rt.TORCH_BN_EPS, ln_eps=rt.TORCH_LN_EPS)
        module = rt.build_torch(spec64, torch)
        rt.assert_close_outputs({"y": rt.torch_call(module, x)}, {"y": want}, cf.Tolerance(1e-12, "float64 port"),
                                what=spec64.describe())
        grus = [m for m in module.modules() if isinstance(m, torch.nn.GRU)]
        if not grus:
            continue
        gru, units = grus[0], grus[0].hidden_size
        with torch.no_grad():  # the unported gate order: Keras's z r h blocks as torch's r z n
            for w in (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0):
                w.copy_(torch.cat([w[units:2 * units], w[:units], w[2 * units:]]))
        with pytest.raises(rt.OutputMismatch, match=r"output 'y': max\|actual - expected\|"):
            rt.assert_close_outputs({"y": rt.torch_call(module, x)}, {"y": want}, cf.Tolerance(1e-12, "float64 port"),
                                    what=spec64.describe())


# =========================================================================== export: wrong loaders


def _image_spec(framework: str) -> rt.ModelSpec:
    return zoo.coverage_specs(framework, 4)[2]  # conv2d, batch normalisation, both poolings, flatten, layer norm


def test_state_oracle_names_the_moving_variance_a_keras_loader_dropped(keras, tmp_path):
    spec = _image_spec("keras")
    model = rt.build_keras(spec, keras)
    inputs = rt.example_inputs(spec, [1, 3], seed=2)
    expected = rt.Expected([{"output_0": np.asarray(model(x, training=False))} for x in inputs], rt.keras_state(model),
                           rt.keras_signature(model))
    art = rt.export_artifact(tmp_path / "k", "keras", lambda p: model.save(str(p)))
    loaded = rt.load(art.path, "keras")
    rt.check_loaded([loaded.run(x) for x in inputs], loaded.state(), loaded.signature(), expected, what="good", where="here")
    bn = next(layer for layer in loaded.model.layers if layer.name.startswith("batchnorm"))
    bn.moving_variance.assign(np.ones(bn.moving_variance.shape, dtype=spec.dtype))  # what a loader that drops it leaves
    with pytest.raises(rt.StateMismatch, match=rf"1 of {len(expected.state)} state entries differ from the original's: "
                                               rf"{bn.name}/moving_variance: max abs difference"):
        rt.assert_same_state(loaded.state(), expected.state, what=".keras loader without moving variance")
    with pytest.raises(rt.OutputMismatch, match="differs from the original's"):
        rt.check_loaded([loaded.run(x) for x in inputs], loaded.state(), loaded.signature(), expected,
                        what=".keras loader without moving variance", where="same process")


def test_state_dict_without_batchnorm2d_running_var_fails_here_and_in_a_fresh_interpreter(torch, tmp_path):
    spec = _image_spec("torch")
    module = rt.build_torch(spec, torch)
    inputs = rt.example_inputs(spec, [1, 3], seed=2)
    state = rt.torch_state(module)
    expected = rt.Expected([{"output_0": rt.torch_call(module, x)} for x in inputs], state, {"keys": sorted(state)})
    (key,) = [k for k in state if k.endswith("running_var")]

    def export(name: str, drop: bool) -> rt.Artifact:
        sd = {k: v.clone() for k, v in module.state_dict().items()}
        if drop:
            sd[key] = torch.ones_like(sd[key])  # the default a loader that drops the buffer leaves behind
        return rt.export_artifact(tmp_path / name, "state-dict", lambda p: torch.save(sd, str(p)))

    trip = rt.RoundTrip(tmp_path / "trip", TIMEOUT)
    with pytest.raises(rt.OutputMismatch, match=r"same process, batch 0 .*differs from the original's"):
        trip.check(export("dropped", True), inputs, expected, what="state_dict without running_var", spec=spec)
    with pytest.raises(rt.StateMismatch, match=rf"{key.replace('.', '[.]')}: max abs difference"):
        rt.assert_same_state(rt.torch_state_from(torch.load(str(tmp_path / "dropped" / "state_dict.pt"))), state,
                             what="state_dict without running_var")
    trip.check(export("good", False), inputs, expected, what="state_dict, altered later", spec=spec)
    good = rt.open_artifact(tmp_path / "good")
    sd = torch.load(str(good.main), weights_only=True)
    sd[key].fill_(1.0)
    torch.save(sd, str(good.main))
    rt.reseal(good.path)
    with pytest.raises(rt.OutputMismatch, match=r"state_dict, altered later \[fresh interpreter"):
        trip.finish()


def test_torchscript_oracle_names_a_recurrent_weight_the_loader_lost(torch, tmp_path):
    spec = zoo.coverage_specs("torch", 4)[1]  # embedding, conv1d, poolings, LSTM, GRU
    module = rt.build_torch(spec, torch)
    inputs = rt.example_inputs(spec, [2], seed=3)
    scripted = torch.jit.script(module)
    expected = rt.Expected([{"output_0": rt.torch_call(module, x)} for x in inputs], rt.torch_state(module),
                           rt.torchscript_signature(scripted))
    art = rt.export_artifact(tmp_path / "ts", "torchscript", lambda p: torch.jit.save(scripted, str(p)))
    altered = torch.jit.load(str(art.main))
    key = next(k for k, m in module.named_modules() if isinstance(m, torch.nn.LSTM)) + ".weight_hh_l0"
    with torch.no_grad():
        altered.state_dict()[key].zero_()  # a loader that drops the recurrent kernel
    torch.jit.save(altered, str(art.main))
    rt.reseal(art.path)
    loaded = rt.load(art.path, "torchscript")
    with pytest.raises(rt.StateMismatch, match=rf"{key.replace('.', '[.]')}: max abs difference"):
        rt.assert_same_state(loaded.state(), expected.state, what="TorchScript without the LSTM's recurrent kernel")
    with pytest.raises(rt.OutputMismatch, match="differs from the original's"):
        rt.assert_same_outputs(loaded.run(inputs[0]), expected.outputs[0], what="TorchScript without the LSTM's kernel")


def test_tflite_float_oracle_catches_a_model_converted_from_other_weights(keras, tf, tmp_path):
    spec = _image_spec("keras")
    model = rt.build_keras(spec, keras)
    other = rt.build_keras(rt.ModelSpec(spec.in_features, spec.layers, spec.dtype, spec.seed + 1, spec.shape), keras)
    inputs = rt.example_inputs(spec, [2], seed=1)
    blob = tf.lite.TFLiteConverter.from_keras_model(other).convert()
    art = rt.export_artifact(tmp_path / "tfl", "tflite", lambda p: p.write_bytes(blob))
    expected = rt.Expected([{"output_0": np.asarray(model(x, training=False))} for x in inputs], None, None,
                           tol=rt.model_tolerance(spec), scales=rt.magnitudes(spec, inputs, "keras"))
    loaded = rt.load(art.path, "tflite")
    with pytest.raises(rt.OutputMismatch, match=r"max\|actual - expected\| / max\(max\|expected\|, magnitude\)"):
        rt.check_loaded([loaded.run(x) for x in inputs], {}, {}, expected, what="TFLite of other weights", where="here")


# =========================================================================== interop: per-tensor gradients


def test_gradient_magnitudes_bound_every_true_gradient(torch):
    for seed in (0, 1):
        for case in cf.coverage_batch(seed):
            result = cf.torch_run(torch, case, "float64")
            mags = cf.gradient_magnitudes(case, "float64")
            assert set(mags) == {k for k in result if k.startswith("grad/")}
            for key, m in mags.items():
                assert np.all(np.abs(result[key]) <= m * (1 + 1e-9) + 1e-300), f"{key}: |gradient| above its terms' sum"


def test_one_bias_gradient_entirely_wrong_fails_per_tensor_where_the_whole_vector_passed():
    rng = np.random.default_rng(0)
    kernel, bias = rng.uniform(-1, 1, (6, 4)), rng.uniform(-1, 1, 4) * 1e-7
    expected = {"grad/0.kernel": kernel, "grad/0.bias": bias}
    wrong = {"grad/0.kernel": kernel.copy(), "grad/0.bias": -bias}  # the bias gradient has the wrong sign
    tol = cf.Tolerance(1e-5, "float32-level")
    # The old oracle: every gradient as one vector, against the largest entry of all: it passes.
    old = max(np.max(np.abs(wrong[k] - expected[k])) for k in expected) / max(np.max(np.abs(v)) for v in expected.values())
    assert old <= tol.rtol
    with pytest.raises(cf.ModelMismatch, match=r"gradients: grad/0\.bias: .* tensors outside their bound: \['grad/0\.bias'\]"):
        cf.compare(wrong, expected, tol, tol, what="port", grad_scales={"grad/0.kernel": 1.0, "grad/0.bias": 1e-7})
    cf.compare({k: v.copy() for k, v in expected.items()}, expected, tol, tol, what="port",
               grad_scales={"grad/0.kernel": 1.0, "grad/0.bias": 1e-7})


def test_same_model_fails_a_zeroed_bias_gradient_of_real_frameworks(tf, keras, torch):
    case = cf.Case(cf.Architecture((4,), (cf.Layer("dense", units=5, activation="tanh"), cf.Layer("dense", units=3))),
                   batch=6, training=False, seed=5, logit_scale=8.0)
    tf_result, torch_result = cf.tf_run(tf, keras, case, "float32"), cf.torch_run(torch, case, "float32")
    cf.check_same_model(tf_result, torch_result, case, "float32")
    torch_result["grad/0.bias"] = np.zeros_like(torch_result["grad/0.bias"])
    with pytest.raises(cf.ModelMismatch, match=r"tensorflow vs torch: gradients: grad/0\.bias: .*worst in grad/0\.bias"):
        cf.check_same_model(tf_result, torch_result, case, "float32")


def test_a_large_tolerance_still_judges_and_is_counted():
    loose = cf.Tolerance(2 * cf.UNJUDGED_RTOL, "ill-conditioned")
    with evidence.recording() as recorder:
        cf.compare({"logits": np.ones(3) * 1.1}, {"logits": np.ones(3)}, loose, loose, what="x")  # 0.1 < 0.2: holds
        with pytest.raises(cf.ModelMismatch, match=r"x: logits"):
            cf.compare({"logits": np.zeros(3)}, {"logits": np.ones(3)}, loose, loose, what="x")
    assert recorder.notes[cf.LOOSE_NOTE] == 2


def test_coverage_batch_forces_every_same_model_mode():
    declared = set(_claims("interop")["interop.same-model"]["modes"])
    for seed in (0, 3, 99, 2**31 - 1):
        covered = {m for k, dtype in enumerate(cf.DTYPES)
                   for case in cf.coverage_batch(seed + k, cf.activations_for(dtype)) for m in cf.case_modes(case, dtype)}
        assert covered == declared, (seed, sorted(declared - covered), sorted(covered - declared))


def test_onnx_initializers_by_name_catch_an_altered_batchnorm_buffer(torch, tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import numpy_helper

    spec = _image_spec("torch")
    module = rt.build_torch(spec, torch)
    example = torch.from_numpy(rt.example_inputs(spec, [2], 1)[0])
    art = rt.export_artifact(tmp_path / "o", "onnx", lambda p: torch.onnx.export(
        module, (example,), str(p), input_names=["x"], output_names=["y"], dynamo=False,
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, verbose=False))
    state = rt.torch_state(module)
    (key,) = [k for k in state if k.endswith("running_mean")]
    model = onnx.load(str(art.main))
    init = next(i for i in model.graph.initializer if i.name == key)
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) + 0.25, key))  # a wrong buffer under its own name
    onnx.save(model, str(art.main))
    rt.reseal(art.path)
    stored = rt.load(art.path, "onnx").initializers()
    named = {k: v for k, v in stored.items() if k in state}
    with pytest.raises(rt.StateMismatch, match=rf"{key.replace('.', '[.]')}: max abs difference 2\.500e-01"):
        rt.assert_same_state(named, {k: state[k] for k in named}, what="ONNX initializers by name")
