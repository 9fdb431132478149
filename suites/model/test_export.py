"""model.export.round-trip: the user's model saved in every format of its framework, loaded back
here and in a fresh interpreter; outputs, and named state where the format keeps it."""

from __future__ import annotations

import functools
import importlib.util
import json
import time

import numpy as np
import pytest

from pytest_dlconform.api import evidence, not_applicable, run_python, usermodels
from pytest_dlconform.api import roundtrip as rt
from pytest_dlconform.api import usermodel as ops

FORMATS = ops.TORCH_FORMATS + ops.KERAS_FORMATS
PACKAGES = {"onnx": ("onnx", "onnxscript", "onnxruntime")}


def _nonpersistent_buffers(model) -> dict[str, np.ndarray]:
    """Buffers registered with persistent=False: not in the module's state_dict (Module.register_buffer)."""
    kept = set(model.state_dict())
    return {n: ops.to_numpy(b) for n, b in model.named_buffers() if n not in kept}


def _pin_torchscript_buffers(state, extra, label):
    """Known divergence, pinned to its symptom: a saved TorchScript module lists the original's
    non-persistent buffers in its state_dict (pytorch/pytorch#45012, #69250; closed unfixed,
    TorchScript is deprecated). Those entries must hold the original buffers bitwise; any other
    difference in the state still fails."""
    __tracebackhide__ = True
    listed = sorted(k for k in extra if k in state)
    if listed:
        rt.assert_same_state({k: state[k] for k in listed}, {k: extra[k] for k in listed},
                             what=f"{label}: non-persistent buffers TorchScript lists in its state_dict")
        evidence.note(torchscript_lists_nonpersistent_buffers=", ".join(listed))
    return {k: v for k, v in state.items() if k not in listed}


def _compare(outs, state, expected_outs, expected_state, tol, fmt, what, where, extra=None, reference=None):
    """The loaded artifact against the original: named state first (a weight the format lost names
    itself), then outputs. ``reference``: a float64 forward of the original's weights, called only
    when a bitwise comparison fails, to say which side computed a wrong answer."""
    __tracebackhide__ = True
    label = f"{what} [{where}]"
    if fmt == "torchscript" and state is not None and extra:
        state = _pin_torchscript_buffers(state, extra, label)
    if fmt not in ops.NO_NAMED_STATE:
        if state is None:
            raise rt.StateMismatch(f"{label}: the loaded artifact exposes no named state")
        rt.assert_same_state(state, expected_state, what=label)
    if fmt in ops.BITWISE_FORMATS:
        try:
            rt.assert_same_outputs(outs, expected_outs, what=label, name=f"outputs bitwise ({where})")
        except rt.OutputMismatch as exc:
            raise rt.OutputMismatch(f"{exc}; {_diagnosis(reference, expected_outs, outs, where, tol)}") from None
    else:
        if len(outs) != len(expected_outs):
            raise rt.OutputMismatch(f"{label}: {len(outs)} outputs came back, but the model has {len(expected_outs)}")
        # Formats that rename outputs (ONNX, signatures) are compared in order.
        renamed = dict(zip(expected_outs, outs.values()))
        rt.assert_close_outputs(renamed, expected_outs, tol, what=label, name=f"outputs normwise relative error ({where})")


def _diagnosis(reference, expected_outs, outs, where, tol) -> str:
    """The failure's second half: each side against the float64 reference (ops.reference_diagnosis)."""
    if reference is None:
        return "no float64 reference for this model"
    try:
        ref, uncopied = reference()
    except Exception as exc:  # the mismatch stands; say why the reference is missing
        return f"no float64 reference: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return ops.reference_diagnosis({"the original": expected_outs, f"the artifact ({where})": outs}, ref, tol,
                                   uncopied=uncopied)


def _float64_reference(dl_model, seed, inputs, state):
    """The model built again in float64 (the factory's dtype keyword, Keras's dtype policy) with the
    original's weights, run on the same inputs in this process; and the names of the state it
    could not be given (tensors outside the state load_state copies: the variable counts differ)."""
    fw = ops.adapter_for(dl_model.framework)
    um = dl_model.build("float64", seed=seed)
    if fw.dtype_of(um.model) != "float64":
        raise ValueError(f"the factory built a {fw.dtype_of(um.model)} model when asked for float64")
    fw.load_state(um.model, {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in state.items()})
    return fw.forward(um.model, inputs, training=False), ops.hints.untracked_names(um.model, dl_model.framework)


def _require_deterministic(fw, model, inputs, expected_outs, tol, fmt, what):
    """The original called again: a model whose inference-mode outputs change from call to call
    (dropout ignoring ``training``) fails here, saying so, rather than blaming the format: no
    artifact can reproduce outputs the original itself does not reproduce."""
    __tracebackhide__ = True
    again = fw.forward(model, inputs, training=False)
    worst = max((ops.normwise(again[k], expected_outs[k]) for k in expected_outs if k in again), default=0.0)
    differs = any(not np.array_equal(again.get(k), v) for k, v in expected_outs.items())
    if differs and (fmt in ops.BITWISE_FORMATS or not worst <= tol.rtol):
        raise rt.OutputMismatch(
            f"{what}: the original model itself is not deterministic in inference mode: two identical calls differ "
            f"(normwise relative difference {worst:.3g}), so no saved format can reproduce its outputs; a layer draws "
            "random numbers with training=False (dropout ignoring training) or changes state when called")


@pytest.mark.claim("model.export.round-trip")
@pytest.mark.dl_model_variants("fmt", {"torch": ops.TORCH_FORMATS, "tensorflow": ops.KERAS_FORMATS})
@pytest.mark.parametrize("fmt", FORMATS)
def test_export_round_trip(dl_model, fmt, dl_seed, tmp_path, dl_settings):
    missing = [p for p in PACKAGES.get(fmt, ()) if importlib.util.find_spec(p) is None]
    if missing:
        not_applicable(f"{fmt} needs {', '.join(missing)}: pip install 'pytest-dlconform[onnx]'")
    fw = ops.adapter_for(dl_model.framework)
    um = dl_model.build(seed=dl_seed)
    inputs = usermodels.example_inputs(um, dl_seed)
    expected_outs = fw.forward(um.model, inputs, training=False)
    expected_state = fw.state(um.model)
    tol = ops.forward_tolerance(um.model, inputs, dl_model.framework, "float32", device=dl_model.device_kind)
    extra = _nonpersistent_buffers(um.model) if fmt == "torchscript" else None
    what = f"{fmt} round trip of {dl_model.describe()}"
    finders = [functools.partial(ops.hints.untracked_state, um.model, dl_model.framework)]
    if dl_model.framework == "tensorflow":
        finders.append(functools.partial(ops.hints.config_roundtrip, um.model))
    with ops.hinting(*finders):
        _round_trip(dl_model, fmt, dl_seed, tmp_path, dl_settings, fw, um, inputs, expected_outs, expected_state,
                    tol, extra, what)


def _round_trip(dl_model, fmt, dl_seed, tmp_path, dl_settings, fw, um, inputs, expected_outs, expected_state, tol,
                extra, what):
    __tracebackhide__ = True
    _require_deterministic(fw, um.model, inputs, expected_outs, tol, fmt, what)
    try:
        art = rt.export_artifact(tmp_path / fmt, fmt, lambda p: ops.write_artifact(fmt, um.model, inputs, p))
    except rt.WriteFailed as exc:  # only the format's documented refusal is not applicable (ops.FORMAT_REFUSALS)
        reason = ops.refusal_reason(ops.FORMAT_REFUSALS[fmt], exc.__cause__) if exc.__cause__ else None
        if reason is None:
            raise
        not_applicable(f"the {fmt} exporter refuses this model: {reason}")
    seed = dl_seed + 1  # a state_dict is loaded into a model with other weights
    names = ops.input_names(um.model, len(inputs)) if dl_model.framework == "tensorflow" else None
    outs, state = ops.load_and_run(fmt, str(art.main), inputs, dl_model.ref, seed, dl_model.device, names)
    reference = functools.partial(_float64_reference, dl_model, dl_seed, inputs, expected_state)
    _compare(outs, state, expected_outs, expected_state, tol, fmt, what, "same process", extra, reference)
    folder = tmp_path / "fresh"
    folder.mkdir()
    paths = []
    for j, x in enumerate(inputs):
        paths.append(str(folder / f"input-{j}.npy"))
        np.save(paths[-1], x)
    job = folder / "job.json"
    job.write_text(json.dumps([{"artifact": str(art.path), "format": fmt, "inputs": paths, "out": str(folder),
                                "ref": dl_model.ref, "seed": seed, "names": names}]), encoding="utf-8")
    started = time.perf_counter()
    run_python(f"from pytest_dlconform.checks.usermodel import fresh_main\nemit(fresh_main({str(job)!r}))\n",
               timeout=dl_settings.timeout, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, what=f"fresh interpreter loading {fmt}")
    evidence.note(fresh_interpreter_seconds=round(time.perf_counter() - started, 2))
    with np.load(folder / "outputs.npz") as z:
        fresh_outs = {k: z[k] for k in z.files}
    with np.load(folder / "state.npz") as z:
        fresh_state = {rt.unkey(k): z[k] for k in z.files}
    _compare(fresh_outs, fresh_state if fmt not in ops.NO_NAMED_STATE else None, expected_outs, expected_state, tol,
             fmt, what, "fresh interpreter", extra, reference)
