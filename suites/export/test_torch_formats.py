"""export: torch formats — TorchScript, torch.export, ONNX (with ONNX Runtime), state_dict.

Each property runs its hypothesis examples inside the test (an inner ``@given``), so that
all artifacts of one test are loaded back in one fresh interpreter at the end.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import evidence, not_applicable
from pytest_dlconform.api import roundtrip as rt

BATCHES = st.lists(st.integers(1, 6), min_size=1, max_size=3)
SEEDS = st.integers(0, 2**32 - 1)


def _eager(module: Any, inputs: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    return [{"output_0": rt.torch_call(module, x)} for x in inputs]


def _onnx_stated(torch: Any, module: Any) -> Any:
    """The module as an ONNX graph can state it: the ONNX operator specs type a normalisation's
    ``epsilon`` as a float attribute (32-bit), so a float64 model exported with eps = 1e-5 runs
    with float32(1e-5) = 9.99999974737875e-06. Against the module's own eps, ONNX Runtime's
    float64 BatchNormalization differs by 3e-13 (2700 u; explore seed 20261201, 234 u of the
    output scale after a Linear), and by 3 u against this copy. An exporter that drops eps
    (0 for 1e-5) still differs by ~1e-5 relative, far outside the tolerance."""
    import copy

    norms = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.LayerNorm, torch.nn.GroupNorm)
    stated = copy.deepcopy(module)
    for m in stated.modules():
        if isinstance(m, norms):
            m.eps = float(np.float32(m.eps))
    return stated


def _example(torch: Any, module: Any, spec: rt.ModelSpec, batch: int, seed: int) -> Any:
    """The example input an exporter traces with, on the module's device."""
    return torch.from_numpy(rt.example_inputs(spec, [batch], seed)[0]).to(rt.torch_device(module))


def _coverage(seed: int, *, float64_without: tuple[str, ...] = ()) -> list[rt.ModelSpec]:
    """Every torch layer kind and activation (non-default parameters), by construction: three
    models, the dense one in float64."""
    return rt.coverage_specs("torch", seed, float64=True, float64_without=float64_without)


def _covered(specs: list[rt.ModelSpec], *formats: str) -> None:
    """Record the modes the coverage models exercised (after every check of the test passed)."""
    for spec in specs:
        evidence.covers(*formats, *rt.modes_of(spec, "torch"))


def _deprecations(caught: list[warnings.WarningMessage]) -> list[str]:
    return sorted({str(w.message).strip().splitlines()[0] for w in caught if "deprecat" in str(w.message).lower()})


# --------------------------------------------------------------------------- TorchScript


@pytest.mark.claim("export.torchscript.roundtrip")
def test_torchscript_keeps_outputs_buffers_schema_and_training_mode(torch, tmp_path, dl_settings, dl_seed):
    trip = rt.RoundTrip(tmp_path, dl_settings.timeout)

    def one(spec: rt.ModelSpec, batches: list[int], seed: int, how: str = "script") -> None:
        module = rt.build_torch(spec, torch)
        inputs = rt.example_inputs(spec, batches, seed)
        what = f"TorchScript ({how}) of {spec.describe()}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if how == "script":
                scripted = torch.jit.script(module)
            else:  # tracing records the operations one example runs, in the mode the module is in (eval)
                scripted = torch.jit.trace(module, (_example(torch, module, spec, 2, seed + 1),))
            expected = rt.Expected(_eager(module, inputs), rt.torch_state(module), rt.torchscript_signature(scripted))
            art = rt.export_artifact(trip.path("torchscript"), "torchscript", lambda p: torch.jit.save(scripted, str(p)))
            loaded = trip.check(art, inputs, expected, what=what, device=rt.torch_device(module))
        evidence.note(deprecations=_deprecations(caught))
        # dropout in training mode draws random masks; a traced module keeps the eval-mode graph
        if not spec.has_dropout and how == "script":
            _same_training_step(torch, module, loaded.module, inputs[0], what)

    coverage = _coverage(dl_seed)
    for spec in coverage:  # every layer kind and activation, by construction, scripted and traced
        one(spec, [1, 3], dl_seed, "script")
        one(spec, [1, 3], dl_seed, "trace")

    @rt.examples(3)
    @given(spec=rt.model_specs(), batches=BATCHES, seed=SEEDS)
    def prop(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        one(spec, batches, seed)

    prop()
    trip.finish()
    _covered(coverage, "script", "trace")


def _same_training_step(torch: Any, original: Any, loaded: Any, x: np.ndarray, what: str) -> None:
    """In train mode both use batch statistics and update running ones (and the counter) alike."""
    if x.shape[0] < 2 and any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in original.modules()):
        # BatchNorm refuses a training batch of one
        x = np.concatenate([x, x[::-1] if x.dtype.kind == "i" else x[::-1] * 0.5])
    original.train(), loaded.train()
    try:
        got, want = rt.torch_call(loaded, x), rt.torch_call(original, x)
    finally:
        original.eval(), loaded.eval()
    rt.assert_same_outputs({"y": got}, {"y": want}, what=f"{what}: training-mode forward",
                           name="training-mode outputs bitwise")
    rt.assert_same_state(rt.torch_state(loaded), rt.torch_state(original), what=f"{what}: buffers after a training-mode forward")


# --------------------------------------------------------------------------- torch.export


@pytest.mark.claim("export.torch-export.roundtrip")
def test_torch_export_keeps_outputs_state_and_dynamic_batch(torch, tmp_path, dl_settings, dl_seed):
    trip = rt.RoundTrip(tmp_path, dl_settings.timeout)

    @rt.examples(1)
    @given(spec=rt.model_specs(), batches=BATCHES, seed=SEEDS, example_batch=st.integers(2, 5))
    def prop(spec: rt.ModelSpec, batches: list[int], seed: int, example_batch: int) -> None:
        module = rt.build_torch(spec, torch)
        inputs = rt.example_inputs(spec, batches, seed)
        example = _example(torch, module, spec, example_batch, seed + 1)
        program = torch.export.export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
        expected = rt.Expected(_eager(module, inputs), rt.torch_state(module), rt.export_signature(program))
        art = rt.export_artifact(trip.path("torch-export"), "torch-export", lambda p: torch.export.save(program, str(p)))
        loaded = trip.check(art, inputs, expected, what=f"torch.export of {spec.describe()}")
        wrong = torch.zeros(1, spec.in_features + 1, dtype=example.dtype, device=example.device)
        # The static dimension is enforced by the module's input guards, which raise AssertionError
        # (torch/export/_unlift.py: torch._assert(..., "Guard failed: <input>.size()[1] == <n>")).
        with pytest.raises(AssertionError, match=rf"Guard failed: \w+\.size\(\)\[1\] == {spec.in_features}\b"):
            loaded.module(wrong)

    coverage = _coverage(dl_seed)
    for spec in coverage:  # every layer kind and activation, by construction
        module = rt.build_torch(spec, torch)
        inputs = rt.example_inputs(spec, [1, 3], dl_seed)
        example = _example(torch, module, spec, 2, dl_seed + 1)
        program = torch.export.export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
        expected = rt.Expected(_eager(module, inputs), rt.torch_state(module), rt.export_signature(program))
        art = rt.export_artifact(trip.path("torch-export"), "torch-export",
                                 lambda p, program=program: torch.export.save(program, str(p)))
        trip.check(art, inputs, expected, what=f"torch.export of {spec.describe()}")
    prop()
    trip.finish()
    _covered(coverage)


@pytest.mark.claim("export.torch-export.roundtrip")
def test_torch_export_needs_torch_cond_for_data_dependent_branches(torch, tmp_path):
    class PythonIf(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x * 2 if x.sum() > 0 else x - 1

    class WithCond(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (x,))

    x = torch.ones(3, 4)
    # torch.export's docs, "Dealing with GuardOnDataDependentSymNode errors": a Python branch on
    # a tensor's value cannot be traced (torch.cond is the documented way).
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    with pytest.raises(GuardOnDataDependentSymNode, match="Could not guard on data-dependent expression"):
        torch.export.export(PythonIf(), (x,))
    program = torch.export.export(WithCond(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    art = rt.export_artifact(tmp_path / "cond", "torch-export", lambda p: torch.export.save(program, str(p)))
    loaded = rt.load(art.path, "torch-export")
    for sign in (1.0, -1.0):
        v = (sign * np.arange(1, 9, dtype=np.float32)).reshape(2, 4)
        want = v * 2 if v.sum() > 0 else v - 1
        rt.assert_same_outputs(loaded.run(v), {"output_0": want}, what=f"torch.cond program, branch sum {v.sum():+g}")
    evidence.covers("torch.cond")


# --------------------------------------------------------------------------- ONNX


def _require_onnx() -> None:
    for module, dist in (("onnxruntime", "onnxruntime"), ("onnxscript", "onnxscript"), ("onnx", "onnx")):
        if importlib.util.find_spec(module) is None:
            not_applicable(f"{dist} is not installed: pip install onnx onnxscript onnxruntime "
                           "(torch.onnx's default dynamo exporter needs onnxscript, the round trip needs onnxruntime)")


# ONNX Runtime's CPU provider implements Elu for float only (its OperatorKernels table); a
# float64 Elu exports fine but does not load ("Could not find an implementation for Elu(6)").
# ONNX Runtime's CPU provider has float-only kernels for Elu, Selu, LeakyRelu, Softplus and Erf
# (its OperatorKernels.md; loading a double model fails "NOT_IMPLEMENTED ... Could not find an
# implementation"), and its double Gelu(approximate='tanh') is only float32-accurate (5.8e-9
# absolute on [-6, 6], a finding): the float64 coverage model leaves them to the float32 ones.
ORT_FLOAT_ONLY = ("elu", "selu", "leaky_relu", "softplus", "gelu", "gelu_tanh")
ORT_SPECS = rt.model_specs(activations=("linear", "relu", "tanh", "sigmoid", "elu"),
                           activations_for={"float64": ["linear", "relu", "tanh", "sigmoid"]})


def _onnx_writer(torch: Any, model: Any, example: Any, *, dynamo: bool = True) -> Any:
    def write(path: Path) -> None:
        if dynamo:  # the default exporter (torch.export underneath): dynamic_shapes
            torch.onnx.export(model, (example,), str(path), input_names=["x"], output_names=["y"],
                              dynamic_shapes=({0: "batch"},), verbose=False)
        else:  # the TorchScript-based exporter: dynamic_axes
            torch.onnx.export(model, (example,), str(path), input_names=["x"], output_names=["y"], dynamo=False,
                              dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, verbose=False)

    return write


_ELEM = {"float32": "tensor(float)", "float64": "tensor(double)", "int32": "tensor(int32)"}


def _onnx_signature(spec: rt.ModelSpec, batch: str = "batch") -> dict[str, Any]:
    """What torch.onnx.export documents: graph inputs and outputs named by ``input_names`` /
    ``output_names`` ('names to assign to the input nodes of the graph, in order'), static
    dimensions 'set to exactly match those given in args', and the dynamic one symbolic. Its
    name is documented for ``dynamic_axes`` only ('dict value: manually named axes', dynamo=False);
    with ``dynamic_shapes`` (dynamo=True) pass ``rt.DYNAMIC``: any symbolic name."""
    return {"inputs": [["x", _ELEM[spec.input_dtype], [batch, *spec.input_shape]]],
            "outputs": [["y", _ELEM[spec.dtype], [batch, *spec.output_shape]]]}


def _note_initializers(loaded: Any, state: dict[str, np.ndarray], dynamo: bool) -> dict[str, int]:
    """Evidence, never a verdict: how many ONNX initializers keep a state_dict name, and how many
    of those hold that tensor bitwise. torch.onnx.export documents no naming of initializers;
    its optimiser (optimize=True, the default) folds constants, e.g. a BatchNorm into the
    preceding Linear under the Linear's names. The documented promise is the outputs."""
    stored = loaded.initializers()
    named = sorted(k for k in stored if k in state)
    same = [k for k in named if stored[k].shape == state[k].shape and np.array_equal(stored[k], state[k])]
    counts = {"state_dict entries": len(state), "initializers by a state_dict name": len(named),
              "of those, bitwise the state_dict tensor": len(same)}
    evidence.note(**{f"onnx dynamo={dynamo}: {k}": v for k, v in counts.items()})
    return counts


@pytest.mark.claim("export.onnx.roundtrip")
def test_onnx_runtime_matches_torch_within_tolerance(torch, tmp_path, dl_settings, dl_seed):
    _require_onnx()
    trip = rt.RoundTrip(tmp_path, dl_settings.timeout)

    def one(spec: rt.ModelSpec, batches: list[int], seed: int, example_batch: int, dynamo: bool = True) -> None:
        module = rt.build_torch(spec, torch)
        inputs = rt.example_inputs(spec, batches, seed)
        example = _example(torch, module, spec, example_batch, seed + 1)
        art = rt.export_artifact(trip.path("onnx"), "onnx", _onnx_writer(torch, module, example, dynamo=dynamo))
        expected = rt.Expected([{"y": o["output_0"]} for o in _eager(_onnx_stated(torch, module), inputs)], None,
                               _onnx_signature(spec, batch=rt.DYNAMIC if dynamo else "batch"),
                               tol=rt.model_tolerance(spec), scales=rt.magnitudes(spec, inputs, "torch"))
        loaded = trip.check(art, inputs, expected, what=f"ONNX (dynamo={dynamo}) of {spec.describe()}")
        _note_initializers(loaded, rt.torch_state(module), dynamo)

    coverage = _coverage(dl_seed, float64_without=ORT_FLOAT_ONLY)
    for spec in coverage:  # every layer kind and activation, by construction, through both exporters
        for dynamo in (True, False):
            one(spec, [1, 3], dl_seed, 2, dynamo)

    @rt.examples(1)
    @given(spec=ORT_SPECS, batches=BATCHES, seed=SEEDS, example_batch=st.integers(2, 5))
    def prop(spec: rt.ModelSpec, batches: list[int], seed: int, example_batch: int) -> None:
        one(spec, batches, seed, example_batch)

    prop()
    trip.finish()
    _covered(coverage, "dynamo=True", "dynamo=False")


@pytest.mark.claim("export.chain.torch-export-onnx")
def test_torch_export_then_onnx_keeps_outputs(torch, tmp_path, dl_settings):
    _require_onnx()
    trip = rt.RoundTrip(tmp_path, dl_settings.timeout)

    @rt.examples(2)
    @given(spec=ORT_SPECS, batches=BATCHES, seed=SEEDS)
    def prop(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        module = rt.build_torch(spec, torch)
        inputs = rt.example_inputs(spec, batches, seed)
        example = _example(torch, module, spec, 3, seed + 1)
        program = torch.export.export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
        saved = rt.export_artifact(trip.path("torch-export"), "torch-export", lambda p: torch.export.save(program, str(p)))
        reloaded = rt.load(saved.path, "torch-export").program  # the chain continues from the file
        art = rt.export_artifact(trip.path("onnx"), "onnx", lambda p: torch.onnx.export(
            reloaded, (example,), str(p), input_names=["x"], output_names=["y"], verbose=False))
        # The program's own symbol names the dynamic dimension here (Dim's name is not kept).
        expected = rt.Expected([{"y": o["output_0"]} for o in _eager(_onnx_stated(torch, module), inputs)], None,
                               _onnx_signature(spec, batch=rt.DYNAMIC), tol=rt.model_tolerance(spec),
                               scales=rt.magnitudes(spec, inputs, "torch"))
        trip.check(art, inputs, expected, what=f"torch -> torch.export -> ONNX of {spec.describe()}")

    prop()
    trip.finish()
    evidence.covers("torch.export", "onnx-from-program")


# --------------------------------------------------------------------------- state_dict


@pytest.mark.claim("export.state-dict.roundtrip")
def test_state_dict_restores_parameters_buffers_and_outputs(torch, tmp_path, dl_settings, dl_seed):
    trip = rt.RoundTrip(tmp_path, dl_settings.timeout)

    def one(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        module = rt.build_torch(spec, torch)
        inputs = rt.example_inputs(spec, batches, seed)
        state = rt.torch_state(module)
        expected = rt.Expected(_eager(module, inputs), state, {"keys": sorted(state)})
        art = rt.export_artifact(trip.path("state-dict"), "state-dict", lambda p: torch.save(module.state_dict(), str(p)))
        trip.check(art, inputs, expected, what=f"state_dict of {spec.describe()}", spec=spec,
                   device=rt.torch_device(module))

    coverage = _coverage(dl_seed)
    for spec in coverage:  # every layer kind and activation, by construction
        one(spec, [1, 3], dl_seed)

    @rt.examples(3)
    @given(spec=rt.model_specs(), batches=BATCHES, seed=SEEDS)
    def prop(spec: rt.ModelSpec, batches: list[int], seed: int) -> None:
        one(spec, batches, seed)

    prop()
    trip.finish()
    _covered(coverage)


class _RunsOnLoad:
    """A pickle whose loading calls a function: here a harmless mkdir, the stand-in for any code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        import os

        return (os.mkdir, (str(self.marker),))


@pytest.mark.claim("export.state-dict.weights-only")
def test_weights_only_load_refuses_modules_and_code(torch, tmp_path):
    spec = rt.ModelSpec(4, (rt.Layer("dense", 5, "relu"), rt.Layer("batchnorm"), rt.Layer("dense", 2)), "float32", 3)
    module = rt.build_torch(spec, torch)
    torch.save(module, tmp_path / "module.pt")  # the whole pickled nn.Module
    for kwargs in ({"weights_only": True}, {}):  # explicit, and the default since torch 2.6
        with pytest.raises(pickle.UnpicklingError, match=r"Unsupported global: GLOBAL torch\.nn\.modules\.container\.Sequential"):
            torch.load(tmp_path / "module.pt", **kwargs)
        evidence.covers("weights_only=True" if kwargs else "weights_only-default")
    torch.save(module.state_dict(), tmp_path / "state.pt")
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    rt.assert_same_state(rt.torch_state_from(state), rt.torch_state(module), what="state_dict loaded with weights_only=True")

    marker = tmp_path / "code-ran"
    torch.save({"weights": torch.ones(2), "payload": _RunsOnLoad(marker)}, tmp_path / "payload.pt")
    blocked = os.mkdir.__module__  # the payload's callable: its module is on the weights-only block list
    with pytest.raises(pickle.UnpicklingError,
                       match=rf"Trying to load unsupported GLOBAL {blocked}\.mkdir whose module {blocked} is blocked"):
        torch.load(tmp_path / "payload.pt", weights_only=True)
    assert not marker.exists(), "torch.load(weights_only=True) refused the file but the payload ran anyway"
    torch.load(tmp_path / "payload.pt", weights_only=False)  # the control: the payload is live
    assert marker.is_dir(), "the payload did not run with weights_only=False: the refusal above proves nothing"
    evidence.covers("weights_only=False")
