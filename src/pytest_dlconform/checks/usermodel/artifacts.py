"""A user's model in its export formats: write each artifact, load it with the format's own
loader (in this process or a fresh interpreter) and run it.

Importing this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .adapters import KerasOps, TorchOps, _np

TORCH_FORMATS = ("state-dict", "torchscript", "torch-export", "onnx")
KERAS_FORMATS = ("keras", "savedmodel", "keras-export", "tflite")
BITWISE_FORMATS = ("state-dict", "keras")  # the same code and weights run again
NO_NAMED_STATE = ("onnx", "tflite", "keras-export")  # optimisers fold/rename constants: outputs only


def write_artifact(fmt: str, model: Any, inputs: Sequence[np.ndarray], path: Any) -> None:
    """Write ``model`` in ``fmt`` at ``path`` (the roundtrip MAIN_FILE inside the artifact folder)."""
    if fmt in TORCH_FORMATS:
        import torch

        ops = TorchOps()
        model.eval()
        args = tuple(ops.tensors(model, inputs))
        if fmt == "state-dict":
            torch.save(model.state_dict(), str(path))
        elif fmt == "torchscript":
            torch.jit.save(torch.jit.trace(model, args, check_trace=False), str(path))
        elif fmt == "torch-export":
            torch.export.save(torch.export.export(model, args), str(path))
        else:
            torch.onnx.export(model, args, str(path), verbose=False)
        return
    tf = KerasOps().tf
    if fmt == "keras":
        model.save(str(path))
    elif fmt == "keras-export":
        model.export(str(path), verbose=False)
    elif fmt == "savedmodel":
        tf.saved_model.save(servable(model, inputs), str(path))
    else:  # tflite, converted from model.export's SavedModel
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            model.export(tmp + "/sm", verbose=False)
            blob = tf.lite.TFLiteConverter.from_saved_model(tmp + "/sm").convert()
        path.write_bytes(blob)


def servable(model: Any, inputs: Sequence[np.ndarray]) -> Any:
    """A tf.Module for tf.saved_model.save: ``serve`` (inference, the serving signature) and
    every variable under ``state`` by its Keras layer/variable name."""
    import tensorflow as tf

    specs = [tf.TensorSpec([None, *a.shape[1:]], tf.as_dtype(a.dtype), name=n)
             for n, a in zip(input_names(model, len(inputs)), inputs)]
    ops = KerasOps()

    class Servable(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="servable")
            self.model = model
            self.state = KerasOps.named(model)

        @tf.function(input_signature=specs, autograph=False)
        def serve(self, *args: Any) -> Any:
            return ops.call(self.model, list(args), training=False)

    return Servable()


def input_names(model: Any, count: int) -> list[str]:
    """The names a Keras model's serving signatures give its inputs (its Input layers' names):
    signatures take inputs by name, and neither their order nor TFLite's tensor indices are
    the model's positional order."""
    names = [str(getattr(t, "name", "") or "") for t in getattr(model, "inputs", None) or []]
    if len(names) != count or len(set(names)) != count or not all(names):
        return [f"input_{i}" for i in range(count)]
    return names


def load_and_run(fmt: str, path: str, inputs: Sequence[np.ndarray], ref: str, seed: int,
                 device: str = "cpu", names: Sequence[str] | None = None
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    """Load an artifact with the format's own loader and run it: (outputs, named state or None).

    The same code runs here and in the fresh interpreter (:func:`fresh_main`). A state_dict
    needs the model's code: the factory builds a model with other random weights (``seed``),
    then every entry must come from the file (``strict=True``)."""
    if fmt == "state-dict":
        import torch

        from .factory import call_factory, resolve

        torch.manual_seed(seed)
        model = call_factory(resolve(ref), device=device, dtype="float32").model
        model.load_state_dict(torch.load(path, weights_only=True, map_location=device), strict=True)
        ops = TorchOps()
        return ops.forward(model, inputs, training=False), ops.state(model)
    if fmt == "torchscript":
        import torch

        module = torch.jit.load(path, map_location=device)
        ops = TorchOps()
        return ops.forward(module, inputs, training=False), ops.state(module)
    if fmt == "torch-export":
        import torch

        program = torch.export.load(path)
        ops = TorchOps()
        with torch.no_grad():
            outs = ops.outputs(program.module()(*ops.tensors(program.module(), inputs)))
        state = {k: _np(v) for k, v in program.state_dict.items()}
        return {k: _np(v) for k, v in outs.items()}, state
    if fmt == "onnx":
        import onnxruntime

        sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: _onnx_feed(a, i.type) for i, a in zip(sess.get_inputs(), inputs)}
        names = [o.name for o in sess.get_outputs()]
        return {f"output_{j}": np.asarray(v) for j, v in enumerate(sess.run(names, feeds))}, None
    if fmt == "keras":
        import keras

        model = keras.models.load_model(path)
        keras_ops = KerasOps()
        return keras_ops.forward(model, inputs, training=False), keras_ops.state(model)
    if fmt in ("savedmodel", "keras-export"):
        import tensorflow as tf

        obj = tf.saved_model.load(path)
        fn = obj.signatures["serving_default"]
        from ..roundtrip import tf_signature

        sig = tf_signature(fn)["inputs"]
        names = list(names or sig)
        outs = fn(**{n: tf.constant(a, dtype=sig[n][0]) for n, a in zip(names, inputs)})
        outs = {k: np.asarray(v.numpy()) for k, v in sorted(outs.items())}
        named: dict[str, np.ndarray] | None = None
        if fmt == "savedmodel":
            named = {str(k): np.asarray(v.numpy()) for k, v in obj.state.items()}
        return {f"output_{j}": v for j, v in enumerate(outs.values())}, named
    if fmt == "tflite":
        import tensorflow as tf

        interp = tf.lite.Interpreter(model_path=path)
        runner = interp.get_signature_runner("serving_default")
        details = runner.get_input_details()
        names = list(names or sorted(details))
        outs = runner(**{n: a.astype(details[n]["dtype"]) for n, a in zip(names, inputs)})
        return {f"output_{j}": np.asarray(v) for j, (_, v) in enumerate(sorted(outs.items()))}, None
    raise ValueError(f"unknown format {fmt!r}")


def _onnx_feed(a: np.ndarray, type_name: str) -> np.ndarray:
    want = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
            "tensor(int32)": np.int32}.get(type_name)
    return a.astype(want) if want is not None else a


def fresh_main(job_path: str) -> list[dict[str, Any]]:
    """Runs in the fresh interpreter: load every queued artifact, write what came back."""
    import json
    from pathlib import Path

    from ..roundtrip import _key, open_artifact

    report = []
    for entry in json.loads(Path(job_path).read_text(encoding="utf-8")):
        art = open_artifact(entry["artifact"], entry["format"])  # the seal first: never load a half-written file
        # A serving process has the model's package imported: custom Keras layers register
        # themselves, custom pytree nodes (torch.export output types) too.
        from .factory import resolve

        resolve(entry["ref"])
        inputs = [np.load(p) for p in entry["inputs"]]
        outs, state = load_and_run(entry["format"], str(art.main), inputs, entry["ref"], entry["seed"],
                                   names=entry.get("names"))
        # Arrays typed Any: numpy's stubs read **arrays as a candidate for savez's allow_pickle (numpy >= 2.1),
        # and spelling that keyword out would save it as an array on older numpy (the tfx and tfjs envs).
        arrays: dict[str, Any] = dict(outs)
        np.savez(Path(entry["out"]) / "outputs.npz", **arrays)
        named: dict[str, Any] = {_key(k): v for k, v in (state or {}).items()}
        np.savez(Path(entry["out"]) / "state.npz", **named)
        report.append({"has_state": state is not None})
    return report
