"""Loaders: one per format (:data:`FORMATS`), the same code in this process and in a fresh
one. Each gives the outputs for an input, the named state the artifact carries, and its
signature; :func:`load` verifies the seal first."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .artifacts import open_artifact
from .builders import build_torch
from .errors import ArtifactError, LoadFailed
from .models import ModelSpec


class Loaded(Protocol):
    def run(self, x: np.ndarray) -> dict[str, np.ndarray]: ...

    def state(self) -> dict[str, np.ndarray]: ...

    def signature(self) -> dict[str, Any]: ...


def load(artifact_path: str | os.PathLike[str], fmt: str, spec: ModelSpec | None = None,
         device: str | None = None) -> Loaded:
    """Verify the seal, then open the artifact with the format's own loader.

    ``device``: where a torch model is rebuilt or mapped (default: the device it was
    saved from; a state_dict's model is built on the CPU)."""
    art = open_artifact(artifact_path, fmt)
    try:
        return _LOADERS[fmt](art.main, spec, device)
    except ArtifactError:
        raise
    except Exception as exc:  # the framework's loader on a verified artifact: a conformance result
        raise LoadFailed(f"round-trip step 'load {fmt}' on {art.main}: the framework's loader raised "
                         f"{type(exc).__name__}: {exc}") from exc


def _np_outputs(outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {str(k): np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in outputs.items()}


def tf_signature(fn: Any) -> dict[str, Any]:
    """Inputs and outputs of a concrete function or a loaded signature: name -> [dtype, shape]."""
    import tensorflow as tf

    def entry(t: Any) -> list[Any]:
        return [t.dtype.name, t.shape.as_list() if t.shape.rank is not None else None]

    specs = [s for s in tf.nest.flatten(fn.structured_input_signature) if isinstance(s, tf.TensorSpec)]
    outputs = fn.structured_outputs
    outs = outputs.items() if isinstance(outputs, Mapping) else enumerate(tf.nest.flatten(outputs))
    return {"inputs": {s.name: entry(s) for s in specs}, "outputs": {str(k): entry(v) for k, v in outs}}


def tf_signatures(obj: Any) -> dict[str, Any]:
    return {name: tf_signature(fn) for name, fn in sorted(obj.signatures.items())}


class _SavedModel:
    def __init__(self, path: Path, spec: ModelSpec | None, device: str | None = None) -> None:
        import tensorflow as tf

        self.tf, self.obj = tf, tf.saved_model.load(str(path))

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        fn = self.obj.signatures["serving_default"]
        (name,) = tf_signature(fn)["inputs"]
        return _np_outputs(fn(**{name: self.tf.constant(x)}))

    def state(self) -> dict[str, np.ndarray]:
        holder = getattr(self.obj, "state", None)
        if holder is not None:  # our servable: variables by Keras path
            return {str(k): v.numpy() for k, v in holder.items()}
        return {v.name.removesuffix(":0"): v.numpy() for v in getattr(self.obj, "variables", [])}

    def signature(self) -> dict[str, Any]:
        return tf_signatures(self.obj)


class _Keras:
    def __init__(self, path: Path, spec: ModelSpec | None, device: str | None = None) -> None:
        import keras

        self.model = keras.models.load_model(str(path))

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"output_0": np.asarray(self.model(x, training=False))}

    def state(self) -> dict[str, np.ndarray]:
        return keras_state(self.model)

    def signature(self) -> dict[str, Any]:
        return keras_signature(self.model)


def keras_state(model: Any) -> dict[str, np.ndarray]:
    """Every layer's variables as "layer name/variable name", and the optimizer's variables
    (iterations, slots) by path if compiled.

    Not by ``Variable.path``: a Dropout layer's SeedGenerator is auto-named from a
    process-wide counter (``seed_generator_N/seed_generator_state``), so its path after
    loading depends on how many generators the loading process made before. The
    generators' states are left out (see :func:`keras_rng_state`): ``.keras`` files do
    not store them, a loaded Dropout restarts its random stream at its seed.
    """
    out = {}
    for layer in model.layers:
        for v in layer.variables:
            if v.name != SEED_STATE:
                out[f"{layer.name}/{v.name}"] = np.asarray(v.numpy())
    optimizer = getattr(model, "optimizer", None)
    for v in getattr(optimizer, "variables", None) or []:
        out[f"optimizer/{v.path}"] = np.asarray(v.numpy())
    return out


SEED_STATE = "seed_generator_state"


def keras_rng_state(model: Any) -> dict[str, np.ndarray]:
    """The random-number state of each layer's SeedGenerator (Dropout), by layer name."""
    return {f"{layer.name}/{v.name}": np.asarray(v.numpy()) for layer in model.layers for v in layer.variables
            if v.name == SEED_STATE}


def keras_signature(model: Any) -> dict[str, Any]:
    def entry(t: Any) -> list[Any]:
        return [str(t.dtype), list(t.shape)]

    return {"inputs": [entry(t) for t in model.inputs], "outputs": [entry(t) for t in model.outputs]}


class _TFLite:
    def __init__(self, path: Path, spec: ModelSpec | None, device: str | None = None) -> None:
        import warnings

        import tensorflow as tf

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.interpreter = tf.lite.Interpreter(model_path=str(path))
        self.warnings = [str(w.message).strip() for w in caught]
        self.runner = self.interpreter.get_signature_runner("serving_default")

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        (name,) = self.runner.get_input_details()
        return {k: np.asarray(v) for k, v in self.runner(**{name: x}).items()}

    def state(self) -> dict[str, np.ndarray]:
        return {}  # TFLite keeps no named state; its constants are checked through the outputs

    def signature(self) -> dict[str, Any]:
        def entry(d: Mapping[str, Any]) -> list[Any]:
            return [np.dtype(d["dtype"]).name, [int(s) for s in d["shape_signature"]]]

        return {"inputs": {k: entry(v) for k, v in self.runner.get_input_details().items()},
                "outputs": {k: entry(v) for k, v in self.runner.get_output_details().items()}}

    def int8_weights(self) -> list[Int8Tensor]:
        """Every int8 tensor with its quantisation parameters, as stored in the model."""
        out = []
        for d in self.interpreter.get_tensor_details():
            if np.dtype(d["dtype"]) != np.int8:
                continue
            q = d["quantization_parameters"]
            out.append(Int8Tensor(d["name"], np.asarray(self.interpreter.get_tensor(d["index"])),
                                  np.asarray(q["scales"], np.float64), np.asarray(q["zero_points"]),
                                  int(q["quantized_dimension"])))
        return out


@dataclass(frozen=True)
class Int8Tensor:
    name: str
    values: np.ndarray  # int8, as stored (a fully connected kernel is [out, in])
    scales: np.ndarray
    zero_points: np.ndarray
    axis: int


class _TorchModule:
    """TorchScript and state_dict artifacts: a torch.nn.Module comes back."""

    def __init__(self, module: Any) -> None:
        import torch

        self.torch, self.module = torch, module

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"output_0": torch_call(self.module, x)}

    def state(self) -> dict[str, np.ndarray]:
        return torch_state(self.module)

    def signature(self) -> dict[str, Any]:
        return torchscript_signature(self.module) if hasattr(self.module, "code") else {"keys": sorted(self.module.state_dict())}


def torch_device(module: Any) -> str:
    """The device of a module's first parameter or buffer (where its inputs must go)."""
    for t in list(module.parameters()) + list(module.buffers()):
        return str(t.device)
    return "cpu"


def torch_call(module: Any, x: np.ndarray) -> np.ndarray:
    """The module's inference output for a numpy input, on the module's device, as numpy."""
    import torch

    with torch.no_grad():
        out = module(torch.from_numpy(np.ascontiguousarray(x)).to(torch_device(module)))
    return out.detach().cpu().numpy()


def torch_state(module: Any) -> dict[str, np.ndarray]:
    return torch_state_from(module.state_dict())


def torch_state_from(state: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {str(k): v.detach().cpu().numpy().copy() for k, v in state.items()}


def torchscript_signature(module: Any) -> dict[str, Any]:
    """The forward schema and the training flag of every submodule (both are saved)."""
    flags = {name or "<root>": bool(m.training) for name, m in module.named_modules()}
    return {"forward": str(module.forward.schema).split("(", 1)[1], "training": flags}


def _torchscript(path: Path, spec: ModelSpec | None, device: str | None = None) -> _TorchModule:
    import torch

    return _TorchModule(torch.jit.load(str(path), map_location=device))


def _state_dict(path: Path, spec: ModelSpec | None, device: str | None = None) -> _TorchModule:
    import torch

    if spec is None:
        raise ArtifactError("load state-dict", path, "a state_dict needs the model's code: pass the ModelSpec")
    state = torch.load(str(path), weights_only=True, map_location=device or "cpu")
    module = build_torch(dataclasses.replace(spec, seed=spec.seed + 1), torch).to(device or "cpu")
    module.load_state_dict(state, strict=True)  # a fresh model with other weights: all must come from the file
    return _TorchModule(module.eval())


class _TorchExport:
    def __init__(self, path: Path, spec: ModelSpec | None, device: str | None = None) -> None:
        import torch

        self.torch, self.program = torch, torch.export.load(str(path))
        self.module = self.program.module()

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        return {"output_0": torch_call(self.module, x)}

    def state(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in self.program.state_dict.items()}

    def signature(self) -> dict[str, Any]:
        return export_signature(self.program)


def export_signature(program: Any) -> dict[str, Any]:
    """User inputs (dtype, shape with dynamic dims as their value ranges) of an ExportedProgram."""
    ranges = {str(k): [_bound(v.lower), _bound(v.upper)] for k, v in program.range_constraints.items()}
    user = set(program.graph_signature.user_inputs)
    inputs = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user:
            val = node.meta["val"]
            dims = [ranges.get(str(d), str(d)) if not isinstance(d, int) else d for d in val.shape]
            inputs.append([str(val.dtype), dims])
    return {"inputs": inputs, "buffers": sorted(program.graph_signature.buffers)}


def _bound(v: Any) -> Any:
    text = str(v)  # sympy bounds; "int_oo"/"oo" for unbounded
    return int(text) if text.lstrip("-").isdigit() else text


class _Onnx:
    def __init__(self, path: Path, spec: ModelSpec | None, device: str | None = None) -> None:
        import onnxruntime

        self.path = str(path)
        self.session = onnxruntime.InferenceSession(self.path, providers=["CPUExecutionProvider"])

    def run(self, x: np.ndarray) -> dict[str, np.ndarray]:
        (inp,) = self.session.get_inputs()
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(None, {inp.name: x})))

    def state(self) -> dict[str, np.ndarray]:
        return {}  # the exporter's optimiser may fold and rename initializers; see :meth:`initializers`

    def initializers(self) -> dict[str, np.ndarray]:
        """Every initializer by name, as stored. Their names are not documented: the dynamo
        exporter's optimiser can fold a BatchNorm into the preceding Linear and keep the
        Linear's state_dict names for the folded tensors, so a name proves nothing."""
        import onnx
        from onnx import numpy_helper

        return {i.name: numpy_helper.to_array(i) for i in onnx.load(self.path).graph.initializer}

    def signature(self) -> dict[str, Any]:
        def entry(a: Any) -> list[Any]:
            return [a.name, a.type, list(a.shape)]

        return {"inputs": [entry(a) for a in self.session.get_inputs()],
                "outputs": [entry(a) for a in self.session.get_outputs()]}


_LOADERS: dict[str, Callable[[Path, ModelSpec | None, str | None], Loaded]] = {
    "savedmodel": _SavedModel,
    "keras-export": _SavedModel,
    "keras": _Keras,
    "tflite": _TFLite,
    "torchscript": _torchscript,
    "torch-export": _TorchExport,
    "onnx": _Onnx,
    "state-dict": _state_dict,
}
