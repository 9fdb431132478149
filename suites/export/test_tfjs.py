"""export: TensorFlow.js — the real converter, then @tensorflow/tfjs in Node.js.

Runs where the converter is installed (``tox -e tfjs``: tensorflow 2.19, tensorflowjs 4.22)
and ``js/tfjs-runner`` has its node_modules; elsewhere every test reports "not applicable"
with the exact missing half. Each property converts all its examples first and loads them
in one Node.js child at the end (a Node start and a tfjs import per test, not per model).
The error model is in checks/tfjs.py and docs/tfjs-tfx.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dlconform.api import evidence, not_applicable, tfjs
from pytest_dlconform.api import roundtrip as rt
from pytest_dlconform.api.programs import ProgramCase, Sample, documented_limit, op_names, sample_cases, samples

BATCHES = st.lists(st.integers(1, 6), min_size=1, max_size=3)
SEEDS = st.integers(0, 2**32 - 1)
QUANTISATIONS = ("float16", "uint8")
# The dense stacks' activations (rt.model_specs' default); TF.js's CPU backend has no tanh in
# its fused matmul kernel (test_graph_model_with_fused_tanh), so graph models go without it.
LAYERS_ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid", "elu")
GRAPH_ACTIVATIONS = tuple(a for a in LAYERS_ACTIVATIONS if a != "tanh")


def _ready(tf: Any) -> None:
    reason = tfjs.unavailable()
    if reason:
        not_applicable(f"{reason} (this environment has tensorflow {tf.__version__}; tensorflowjs 4.22 needs "
                       "tensorflow-decision-forests, whose newest release pins tensorflow==2.19.0)")


@dataclass
class Case:
    """One converted model awaiting Node.js: what it must predict and carry."""

    id: str
    folder: Path
    format: str  # layers-model | graph-model
    inputs: list[np.ndarray]
    check: Callable[[tfjs.NodeModel], None]
    what: str


@dataclass
class Batch:
    workdir: Path
    timeout: float
    cases: list[Case] = field(default_factory=list)

    def add(self, case: Case) -> None:
        self.cases.append(case)

    def finish(self, input_name: str = "x") -> None:
        got, info = tfjs.run_node([(c.id, c.folder, c.format, input_name, c.inputs) for c in self.cases],
                                  self.workdir, timeout=self.timeout)
        evidence.note(tfjs_version=info["tfjs"], tfjs_backend=info["backend"], node_seconds=info["node_s"],
                      models_in_node=len(self.cases))
        for c in self.cases:
            result = got[c.id]
            if result.error is not None:
                raise tfjs.TfjsMismatch(f"{c.what}: @tensorflow/tfjs {info['tfjs']} could not load or run the "
                                        f"converted {c.format}: {result.error}")
            c.check(result)


def _tol(spec: rt.ModelSpec, device: str) -> Any:
    return rt.model_tolerance(spec, device=device, framework="tensorflow")


def _coverage_spec(seed: int, activations: Sequence[str]) -> rt.ModelSpec:
    """One dense stack holding, by construction, every activation of ``activations`` and each
    layer kind the claim names after a hidden dense layer (batch normalisation with its moving
    statistics, layer normalisation, dropout); the seed picks the widths and the order only."""
    rng = np.random.default_rng(seed)
    acts = [a for a in activations if a != "linear"]
    rng.shuffle(acts)
    extras = ["batchnorm", "layernorm", "dropout"]
    layers: list[rt.Layer] = []
    for i, act in enumerate(acts):
        layers.append(rt.Layer("dense", int(rng.integers(3, 9)), act))
        if i < len(extras):
            layers.append(rt.Layer(extras[i], rate=0.5 if extras[i] == "dropout" else 0.0))
    layers.append(rt.Layer("dense", int(rng.integers(1, 5)), "linear"))
    return rt.ModelSpec(int(rng.integers(2, 7)), tuple(layers), "float32", seed)


def _covered(specs: list[rt.ModelSpec], fmt: str) -> None:
    """After every check of the test passed: the format in each quantisation, and what the models hold."""
    evidence.covers(fmt, *(f"{fmt}/{q}" for q in QUANTISATIONS))
    for spec in specs:
        evidence.covers(*rt.modes_of(spec, "keras"))


# --------------------------------------------------------------------------- layers format


def _layers_checks(spec: rt.ModelSpec, inputs: list[np.ndarray], want: list[np.ndarray], out_name: str,
                   quantisation: str | None, folder: Path, device: str, what: str) -> Callable[[tfjs.NodeModel], None]:
    names = tfjs.keras2_names(spec)

    def check(result: tfjs.NodeModel) -> None:
        tfjs.assert_weights(result.weights, names, what=what, quantisation=quantisation)
        if quantisation:
            tfjs.assert_manifest_quantised(tfjs.read_manifest(folder), names, quantisation=quantisation, what=what)
            dparams = tfjs.parameter_bounds(spec, quantisation)
        for x, y, out, m in zip(inputs, want, result.outputs, rt.magnitudes(spec, inputs, "keras")):
            if quantisation is None:
                rt.assert_close_outputs(out, {out_name: y}, _tol(spec, device), scale=m, what=what,
                                        name="tfjs layers model vs tf_keras")
            else:
                bound = tfjs.propagated_bound(spec, x, dparams, rtol=_tol(spec, device).rtol)
                rt.assert_within_bound(out[out_name], y, bound, what=what, name=f"tfjs {quantisation} error / bound")
    return check


@pytest.mark.claim("export.tfjs.roundtrip")
def test_layers_model_from_keras_predicts_and_keeps_weights(tf, tmp_path, dl_settings, dl_device, dl_seed):
    """tf_keras model (HDF5, the converter's `keras` input) -> tfjs_layers_model, plain and quantised:
    the coverage stack (every activation and layer kind), then generated stacks."""
    _ready(tf)
    import tf_keras

    batch = Batch(tmp_path / "node", dl_settings.timeout)
    counter = iter(range(10**6))
    specs: list[rt.ModelSpec] = []

    def one(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        k = next(counter)
        specs.append(spec)
        model = rt.build_keras(spec, tf_keras)
        inputs = rt.example_inputs(spec, batches, seed)
        want = [np.asarray(model(x, training=False)) for x in inputs]
        h5 = tmp_path / f"m{k}.h5"
        model.save(h5)
        for q in (None, *QUANTISATIONS):
            folder = tmp_path / f"m{k}-layers-{q or 'float32'}"
            tfjs.convert(["--input_format=keras", "--output_format=tfjs_layers_model",
                          *([f"--quantize_{q}=*"] if q else []), str(h5), str(folder)])
            what = f"tfjs layers model ({q or 'float32'}) of tf_keras {spec.describe()}"
            batch.add(Case(f"{k}-{q}", folder, "layers-model", inputs,
                           _layers_checks(spec, inputs, want, model.output_names[0], q, folder, dl_device, what), what))

    one(_coverage_spec(dl_seed, LAYERS_ACTIVATIONS), [1, 4], dl_seed)

    @settings(rt.examples(4), deadline=None)  # each example converts three models: seconds, not ms
    @given(spec=rt.model_specs(dtypes=("float32",), activations=LAYERS_ACTIVATIONS), batches=BATCHES, seed=SEEDS)
    def prop(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        one(spec, batches, seed)

    prop()
    batch.finish()
    _covered(specs, "layers-model")


@pytest.mark.claim("export.tfjs.roundtrip")
def test_layers_model_from_keras3_file_loads(tf, tmp_path, dl_settings, dl_device):
    """Keras 3 `.keras` file (the converter's `keras_keras` input) -> tfjs_layers_model."""
    _ready(tf)
    import keras

    spec = rt.ModelSpec(5, (rt.Layer("dense", 7, "relu"), rt.Layer("batchnorm"), rt.Layer("dense", 3)), "float32", 11)
    model = rt.build_keras(spec, keras)
    src = tmp_path / "k3"
    src.mkdir()
    model.save(src / "model.keras")  # the converter unpacks the archive next to the file
    folder = tmp_path / "k3-layers"
    tfjs.convert(["--input_format=keras_keras", "--output_format=tfjs_layers_model", str(src / "model.keras"), str(folder)])
    inputs = rt.example_inputs(spec, [3], seed=2)
    want = [np.asarray(model(x, training=False)) for x in inputs]
    what = f"tfjs layers model of Keras 3 {spec.describe()}"
    batch = Batch(tmp_path / "node", dl_settings.timeout)

    def check(result: tfjs.NodeModel) -> None:
        for y, out, m in zip(want, result.outputs, rt.magnitudes(spec, inputs, "keras")):
            rt.assert_close_outputs({"y": next(iter(out.values()))}, {"y": y}, _tol(spec, dl_device), scale=m, what=what)

    batch.add(Case("k3", folder, "layers-model", inputs, check, what))
    batch.finish()
    evidence.covers("keras3-file")


# --------------------------------------------------------------------------- graph format

_DENSE_CONST = re.compile(r"/(dense_\d+)_1/.*ReadVariableOp$")


def _graph_dense_weights(loaded: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The dense kernels and biases among a graph model's constants, by Keras layer name."""
    out = {}
    for name, value in loaded.items():
        m = _DENSE_CONST.search(name)
        if m:
            out[f"{m.group(1)}/{'kernel' if value.ndim == 2 else 'bias'}"] = value
    return out


def _graph_checks(spec: rt.ModelSpec, inputs: list[np.ndarray], want: list[np.ndarray], quantisation: str | None,
                  folder: Path, device: str, what: str) -> Callable[[tfjs.NodeModel], None]:
    dense = {k: v for k, v in tfjs.keras2_names(spec).items() if k.startswith("dense_")}

    def check(result: tfjs.NodeModel) -> None:
        tfjs.assert_weights(_graph_dense_weights(result.weights), dense, what=what, quantisation=quantisation)
        if quantisation:
            manifest = {f"{m.group(1)}/{'kernel' if len(w['shape']) == 2 else 'bias'}": w
                        for n, w in tfjs.read_manifest(folder).items() if (m := _DENSE_CONST.search(n))}
            tfjs.assert_manifest_quantised(manifest, dense, quantisation=quantisation, what=what)
            dparams = [{k: (v if layer.kind == "dense" else np.zeros_like(v)) for k, v in p.items()}
                       for layer, p in zip(spec.layers, tfjs.parameter_bounds(spec, quantisation))]
        for x, y, out, m in zip(inputs, want, result.outputs, rt.magnitudes(spec, inputs, "keras")):
            if quantisation is None:
                rt.assert_close_outputs(out, {"y": y}, _tol(spec, device), scale=m, what=what,
                                        name="tfjs graph model vs saved graph")
            else:
                bound = tfjs.propagated_bound(spec, x, dparams, rtol=_tol(spec, device).rtol)
                rt.assert_within_bound(out["y"], y, bound, what=what, name=f"tfjs graph {quantisation} error / bound")
    return check


def _savedmodel(tf: Any, spec: rt.ModelSpec, path: Path) -> tuple[Any, Any]:
    import keras

    model = rt.build_keras(spec, keras)
    servable = rt.servable_module(tf, model, spec)
    tf.saved_model.save(servable, str(path), signatures={"serving_default": servable.serve})
    return model, servable


@pytest.mark.claim("export.tfjs.roundtrip")
def test_graph_model_from_savedmodel_predicts_and_keeps_weights(tf, tmp_path, dl_settings, dl_device, dl_seed):
    """SavedModel (a tf.Module with a Keras 3 model and state) -> tfjs_graph_model, plain and quantised:
    the coverage stack (every activation but tanh, every layer kind), then generated stacks."""
    _ready(tf)
    batch = Batch(tmp_path / "node", dl_settings.timeout)
    counter = iter(range(10**6))
    specs: list[rt.ModelSpec] = []

    def one(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        k = next(counter)
        specs.append(spec)
        _, servable = _savedmodel(tf, spec, tmp_path / f"sm{k}")
        inputs = rt.example_inputs(spec, batches, seed)
        want = [servable.serve(x)["y"].numpy() for x in inputs]
        for q in (None, *QUANTISATIONS):
            folder = tmp_path / f"sm{k}-graph-{q or 'float32'}"
            # Quantise the dense kernels and biases (the spec's parameters, one to one); grappler
            # folds normalisation into new constants, which the error model cannot name.
            tfjs.convert(["--input_format=tf_saved_model", "--output_format=tfjs_graph_model",
                          "--signature_name=serving_default",
                          *([f"--quantize_{q}=*ReadVariableOp"] if q else []), str(tmp_path / f"sm{k}"), str(folder)])
            what = f"tfjs graph model ({q or 'float32'}) of SavedModel {spec.describe()}"
            batch.add(Case(f"{k}-{q}", folder, "graph-model", inputs,
                           _graph_checks(spec, inputs, want, q, folder, dl_device, what), what))

    one(_coverage_spec(dl_seed, GRAPH_ACTIVATIONS), [1, 4], dl_seed)

    @settings(rt.examples(4), deadline=None)  # each example converts three models: seconds, not ms
    @given(spec=rt.model_specs(dtypes=("float32",), activations=GRAPH_ACTIVATIONS), batches=BATCHES, seed=SEEDS)
    def prop(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        one(spec, batches, seed)

    prop()
    batch.finish()
    _covered(specs, "graph-model")


@pytest.mark.claim("export.tfjs.roundtrip")
def test_graph_model_with_fused_tanh(tf, tmp_path, dl_settings, dl_device):
    """Dense(tanh) in a SavedModel: grappler fuses MatMul+BiasAdd+Tanh into _FusedMatMul."""
    _ready(tf)
    spec = rt.ModelSpec(4, (rt.Layer("dense", 6, "tanh"), rt.Layer("dense", 2)), "float32", 3)
    _, servable = _savedmodel(tf, spec, tmp_path / "sm")
    folder = tmp_path / "graph"
    tfjs.convert(["--input_format=tf_saved_model", "--output_format=tfjs_graph_model", str(tmp_path / "sm"), str(folder)])
    inputs = rt.example_inputs(spec, [3], seed=4)
    want = [servable.serve(x)["y"].numpy() for x in inputs]
    what = f"tfjs graph model of SavedModel {spec.describe()}"
    batch = Batch(tmp_path / "node", dl_settings.timeout)
    batch.add(Case("tanh", folder, "graph-model", inputs, _graph_checks(spec, inputs, want, None, folder, dl_device, what), what))
    batch.finish()
    evidence.covers("graph-model/fused-tanh")


# --------------------------------------------------------------------------- tf.functions, op by op


def _convert_graph(saved: Path, folder: Path) -> float:
    return tfjs.convert(["--input_format=tf_saved_model", "--output_format=tfjs_graph_model", str(saved), str(folder)])


def _refused_message(refused: Any) -> str:
    return " ".join(refused.message.split())  # one line: the converter lists the ops on their own lines


#: Every op of the op library (a view over its records): each parameter class, on
#: unit-magnitude inputs (the "unit" regime; extreme magnitudes are the low-precision
#: suite's), as a tf.function of the op's TensorFlow expression.
LIBRARY = op_names()


def _library_case(data: st.DataObject, sample: Sample) -> ProgramCase:
    case = data.draw(sample_cases(sample), label=f"{sample.op} {sample.params.label}")
    return ProgramCase(case.program, [x.astype(np.float32).astype(np.float64) for x in case.inputs])


@pytest.mark.claim("export.tfjs.roundtrip")
@pytest.mark.parametrize("op", LIBRARY)
def test_library_op_converts_and_predicts(tf, tmp_path, dl_settings, dl_device, op):
    """Each parameter class of a library op, as a tf.function of its TensorFlow expression
    (the program's inputs packed into one float32 vector ``x``, split and reshaped inside:
    ``tfjs.save_program``): converted to a graph model, run in TF.js, and within the float32
    error bound of the float64 reference at the same float32 inputs
    (``tfjs.assert_program_output``); or the converter refuses it, naming the TensorFlow op,
    or TF.js's documentation excludes the drawn parameters (the record's
    ``documented_limits``, quoted): not applicable for the op, after every other class is
    checked."""
    _ready(tf)
    classes = list(dict.fromkeys(s.params for s in samples(op)))
    batch = Batch(tmp_path / "node", dl_settings.timeout)
    refused: dict[str, str] = {}
    checked: list[str] = []

    def add(k: int, case: ProgramCase) -> None:
        label = classes[k].label
        limit = documented_limit("tfjs", op, case.program.ops[0].kwargs)
        if limit is not None:  # TF.js documents these parameters as unsupported: nothing to check
            refused[label] = f"TF.js documents it as unsupported ({limit})"
            return
        saved, folder = tmp_path / f"sm{k}", tmp_path / f"graph{k}"
        tfjs.save_program(tf, case.program, saved)
        try:
            _convert_graph(saved, folder)
        except tfjs.ConverterRefused as exc:
            refused[label] = f"{', '.join(exc.ops)}: {_refused_message(exc)}"
            return
        what = f"tfjs graph model of {op} [{label}] {case!r}"

        def check(result: tfjs.NodeModel) -> None:
            tfjs.assert_program_output(result.outputs[0], case.program, case.inputs, what=what)
            checked.append(label)

        batch.add(Case(f"{op}-{k}", folder, "graph-model", [tfjs.pack_inputs(case.inputs)], check, what))

    @rt.examples(1)
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        batch.cases.clear()  # one example; a rerun starts over
        refused.clear()
        for k, cls in enumerate(classes):
            add(k, _library_case(data, Sample(op, cls, "unit")))

    prop()
    if batch.cases:
        batch.finish()
    evidence.note(classes_checked=checked, classes_refused=refused)
    if refused:
        reasons = "; ".join(f"{why} (classes {', '.join(c for c, w in refused.items() if w == why)})"
                            for why in dict.fromkeys(refused.values()))
        not_applicable(f"the TensorFlow.js converter refuses {op}, or TF.js documents it as unsupported, in "
                       f"{len(refused)} of {len(classes)} parameter classes: {reasons}; the other {len(checked)} "
                       "converted and predicted within the float32 bound")
    evidence.covers("tf.function")


#: TensorFlow functions the op library has no op for, each as a function of a (5, 6) float32
#: batch: name -> (function, input low, input high, elementary ops, reduction length).
TF_FUNCTIONS: dict[str, tuple[Callable[[Any, Any], Any], float, float, int, int]] = {
    "matmul+relu": (lambda tf, x: tf.nn.relu(tf.matmul(x, tf.transpose(x))), -2, 2, 2, 6),
    "expm1": (lambda tf, x: tf.math.expm1(x), -2, 2, 1, 1),
    "log1p": (lambda tf, x: tf.math.log1p(x), 0, 3, 1, 1),
    "atan2": (lambda tf, x: tf.math.atan2(x, tf.reverse(x, [1]) + 0.5), -2, 2, 2, 1),
    "top_k": (lambda tf, x: tf.math.top_k(x, k=3).values, -2, 2, 1, 1),
    "erfc": (lambda tf, x: tf.math.erfc(x), -2, 2, 1, 1),
    "lgamma": (lambda tf, x: tf.math.lgamma(x), 0.5, 4, 1, 1),
    "xlogy": (lambda tf, x: tf.math.xlogy(x, x + 3.0), 0, 2, 2, 1),
    "matrix_inverse": (lambda tf, x: tf.linalg.inv(tf.matmul(x[:, :4], x[:, :4], transpose_a=True) + 4 * tf.eye(4)), -1, 1, 4, 4),
}


@pytest.mark.claim("export.tfjs.roundtrip")
@pytest.mark.parametrize("op", sorted(TF_FUNCTIONS))
def test_tf_function_op_converts_and_predicts(tf, tmp_path, dl_settings, dl_device, op):
    """A tf.function of one op, saved as a SavedModel: converted, or refused per op with the converter's words."""
    _ready(tf)
    from pytest_dlconform.api import combined, tolerance

    fn, lo, hi, ops, red = TF_FUNCTIONS[op]
    mod = tfjs.save_function(tf, lambda x: fn(tf, x), [None, 6], tmp_path / "sm")
    folder = tmp_path / "graph"
    try:
        seconds = _convert_graph(tmp_path / "sm", folder)
    except tfjs.ConverterRefused as refused:
        evidence.note(refused_ops=refused.ops, converter_message=refused.message)
        not_applicable(f"the TensorFlow.js converter refuses {op} ({', '.join(refused.ops)}): {_refused_message(refused)}")
    evidence.note(convert_seconds=round(seconds, 3))
    x = np.random.default_rng(7).uniform(lo, hi, (5, 6)).astype(np.float32)
    want = np.asarray(mod.f(x)["y"])
    one = tolerance("float32", ops=ops, reduction=red)
    tol = combined(one, one)
    what = f"tfjs graph model of tf.function {op}"
    batch = Batch(tmp_path / "node", dl_settings.timeout)

    def check(result: tfjs.NodeModel) -> None:
        rt.assert_close_outputs(result.outputs[0], {"y": want}, tol, what=what, name=f"tfjs {op} vs tensorflow")

    batch.add(Case(op, folder, "graph-model", [x], check, what))
    batch.finish()
    evidence.covers("tf.function")
