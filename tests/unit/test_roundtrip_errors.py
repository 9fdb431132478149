"""The round-trip helper on bad input, and its oracles on wrong data. numpy only, no framework.

Bad input: a target that exists, a missing or unwritable folder, a truncated, corrupted,
incomplete or foreign artifact: each must raise ArtifactError naming the step and the file;
a writer that fails half way or writes nothing raises WriteFailed (a violation). None may
leave anything that could pass for a good artifact. Oracles: each one passes the right data and fails a deliberately wrong one
with a message that says what differs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_dlconform.checks import roundtrip as rt
from pytest_dlconform.checks.numerics import tolerance
from pytest_dlconform.frameworks import HarnessError


def _write_file(content: bytes = b"weights" * 100):
    return lambda p: p.write_bytes(content)


def _export(tmp_path: Path, name: str = "model", fmt: str = "torchscript") -> rt.Artifact:
    return rt.export_artifact(tmp_path / name, fmt, _write_file())


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --------------------------------------------------------------------------- export


def test_export_writes_a_sealed_folder_and_opening_verifies_it(tmp_path):
    art = _export(tmp_path)
    assert art.main == tmp_path / "model" / "model.pt" and art.main.read_bytes() == b"weights" * 100
    assert (tmp_path / "model" / rt.SEAL).is_file()
    assert rt.open_artifact(art.path, "torchscript").files == art.files
    assert _leftovers(tmp_path) == ["model"]  # no staging folder left behind


def test_export_refuses_an_existing_target(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "keep.txt").write_text("precious")
    with pytest.raises(rt.ArtifactError, match=r"step 'export: check target' on .*model: already exists; refusing to overwrite"):
        _export(tmp_path)
    assert (tmp_path / "model" / "keep.txt").read_text() == "precious"
    assert _leftovers(tmp_path) == ["model"]


def test_export_refuses_an_existing_file_too(tmp_path):
    (tmp_path / "model").write_text("a file")
    with pytest.raises(rt.ArtifactError, match="already exists"):
        _export(tmp_path)


def test_export_into_a_missing_folder_names_it(tmp_path):
    with pytest.raises(rt.ArtifactError, match=r"check target.*the folder .*nowhere does not exist"):
        rt.export_artifact(tmp_path / "nowhere" / "model", "onnx", _write_file())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /sys, read-only on Linux even for root")
def test_export_into_an_unwritable_folder_names_the_folder_and_step():
    # /sys refuses new entries even to root (chmod would not stop root); a real unwritable folder.
    with pytest.raises(rt.ArtifactError, match=r"step 'export: create staging folder' on /sys: the folder is not writable"):
        rt.export_artifact("/sys/dlconform-model", "onnx", _write_file())


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores directory permissions")
def test_export_into_a_read_only_folder_as_a_user(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(rt.ArtifactError, match="not writable"):
            rt.export_artifact(ro / "model", "onnx", _write_file())
    finally:
        ro.chmod(0o700)


def test_a_writer_failing_half_way_leaves_nothing_behind(tmp_path):
    def half_then_fail(path: Path) -> None:
        path.write_bytes(b"partial")
        raise OSError("disk full")

    # The saver failing is a violation (WriteFailed, an AssertionError), not a harness error.
    with pytest.raises(rt.WriteFailed,
                       match=r"step 'export: write onnx' on .*model/model\.onnx: the writer raised OSError: disk full"):
        rt.export_artifact(tmp_path / "model", "onnx", half_then_fail)
    assert _leftovers(tmp_path) == []  # neither the target nor the staging folder


def test_a_writer_that_writes_nothing_is_a_violation(tmp_path):
    with pytest.raises(rt.WriteFailed, match="the writer returned without writing it") as info:
        rt.export_artifact(tmp_path / "model", "onnx", lambda p: None)
    assert isinstance(info.value, AssertionError) and not isinstance(info.value, HarnessError)
    with pytest.raises(rt.WriteFailed, match="the writer returned without writing it"):
        rt.export_artifact(tmp_path / "empty-dir", "savedmodel", lambda p: None)  # a folder format, left empty
    assert _leftovers(tmp_path) == []


def test_unknown_format_is_a_usage_error(tmp_path):
    with pytest.raises(ValueError, match="unknown artifact format 'pickle'"):
        rt.export_artifact(tmp_path / "m", "pickle", _write_file())


# --------------------------------------------------------------------------- verify and load


def test_a_truncated_file_is_refused_naming_file_and_step(tmp_path):
    art = _export(tmp_path)
    data = art.main.read_bytes()
    art.main.write_bytes(data[: len(data) // 2])
    with pytest.raises(rt.ArtifactError, match=r"step 'verify: size' on .*model\.pt: 350 bytes, but the export wrote 700"):
        rt.open_artifact(art.path)


def test_a_corrupted_file_of_the_same_size_is_refused(tmp_path):
    art = _export(tmp_path)
    data = bytearray(art.main.read_bytes())
    data[10] ^= 0xFF
    art.main.write_bytes(bytes(data))
    with pytest.raises(rt.ArtifactError, match=r"step 'verify: checksum' on .*model\.pt: content differs"):
        rt.open_artifact(art.path)


def test_a_folder_without_seal_is_not_taken_for_an_artifact(tmp_path):
    half = tmp_path / "half"
    half.mkdir()
    (half / "model.pt").write_bytes(b"weights")  # what a crashed plain writer leaves
    with pytest.raises(rt.ArtifactError,
                       match=r"step 'verify: read seal' on .*\.dlconform-seal\.json: missing: the export did not finish"):
        rt.open_artifact(half)
    with pytest.raises(rt.ArtifactError, match="read seal"):
        rt.load(half, "torchscript")  # the loader verifies before it opens anything


def test_an_unreadable_seal_is_refused(tmp_path):
    art = _export(tmp_path)
    (art.path / rt.SEAL).write_text("{not json")
    with pytest.raises(rt.ArtifactError, match=r"read seal.*unreadable"):
        rt.open_artifact(art.path)


def test_missing_and_extra_files_are_refused(tmp_path):
    art = _export(tmp_path, "a")
    art.main.unlink()
    with pytest.raises(rt.ArtifactError, match=r"verify: files.*model\.pt: listed in the seal but missing"):
        rt.open_artifact(art.path)
    other = _export(tmp_path, "b")
    (other.path / "model.pt.data").write_bytes(b"late")
    with pytest.raises(rt.ArtifactError, match=r"model\.pt\.data: present but not in the seal"):
        rt.open_artifact(other.path)


def test_opening_as_another_format_is_refused(tmp_path):
    art = _export(tmp_path)
    with pytest.raises(rt.ArtifactError, match="sealed as 'torchscript', but opened as 'onnx'"):
        rt.open_artifact(art.path, "onnx")


def test_a_missing_artifact_is_named(tmp_path):
    with pytest.raises(rt.ArtifactError, match=r"verify: find artifact.*nothing-here: no artifact folder"):
        rt.open_artifact(tmp_path / "nothing-here")


def test_reseal_accepts_a_deliberate_change(tmp_path):
    art = _export(tmp_path)
    art.main.write_bytes(b"planted")
    with pytest.raises(rt.ArtifactError):
        rt.open_artifact(art.path)
    rt.reseal(art.path)
    assert rt.open_artifact(art.path).files["model.pt"][0] == len(b"planted")


def test_artifact_errors_are_harness_errors_not_conformance_results():
    assert issubclass(rt.ArtifactError, HarnessError) and not issubclass(rt.ArtifactError, AssertionError)
    assert issubclass(rt.RoundTripMismatch, AssertionError)


# --------------------------------------------------------------------------- output oracles


def test_same_outputs_pass_and_one_ulp_fails():
    a = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    rt.assert_same_outputs({"y": a.copy()}, {"y": a}, what="identical")
    b = a.copy()
    b[1, 2] = np.nextafter(b[1, 2], np.float32(2))
    with pytest.raises(rt.OutputMismatch, match=(r"one ulp: output 'y' differs .* max abs difference 1\.192e-07 at \(1, 2\), "
                                                 r"but the format promises bitwise")):
        rt.assert_same_outputs({"y": b}, {"y": a}, what="one ulp")


def test_same_outputs_fail_on_dtype_shape_and_names():
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(rt.OutputMismatch, match=r"dtype float64, but should be shape \(2, 3\) dtype float32"):
        rt.assert_same_outputs({"y": a.astype(np.float64)}, {"y": a}, what="dtype")
    with pytest.raises(rt.OutputMismatch, match=r"has shape \(3, 2\)"):
        rt.assert_same_outputs({"y": a.T}, {"y": a}, what="shape")
    with pytest.raises(rt.OutputMismatch, match=r"outputs differ by name: missing \['y'\], unexpected \['output_0'\]"):
        rt.assert_same_outputs({"output_0": a}, {"y": a}, what="names")


def test_close_outputs_use_the_dtype_tolerance():
    tol = tolerance("float32", ops=3, reduction=8)
    e = np.array([[1.0, -2.0, 4.0]])
    rt.assert_close_outputs({"y": e * (1 + tol.rtol / 8)}, {"y": e}, tol, what="within")
    with pytest.raises(rt.OutputMismatch, match=(r"far: output 'y': max\|actual - expected\| / "
                                                 r"max\(max\|expected\|, magnitude\) = .* but should be <=")):
        rt.assert_close_outputs({"y": e * (1 + 4 * tol.rtol)}, {"y": e}, tol, what="far")


def test_close_outputs_scale_is_the_computation_magnitude_not_a_cancelled_output():
    tol = tolerance("float64", ops=2, reduction=2)
    expected = {"y": np.array([1e-9])}  # a result that cancelled out of terms of size 1
    actual = {"y": np.array([1e-9 + 1e-15])}  # rounding relative to the terms, not the result
    with pytest.raises(rt.OutputMismatch):
        rt.assert_close_outputs(actual, expected, tol, what="relative to the output")
    rt.assert_close_outputs(actual, expected, tol, what="relative to the terms", scale=1.0)
    with pytest.raises(rt.OutputMismatch):  # the scale does not excuse a real error
        rt.assert_close_outputs({"y": np.array([1e-6])}, expected, tol, what="real error", scale=1.0)


def test_within_bound_fails_where_one_entry_exceeds_it():
    e = np.array([[1.0, 2.0], [3.0, 4.0]])
    bound = np.full_like(e, 0.1)
    assert rt.assert_within_bound(e + 0.05, e, bound, what="half the bound") == pytest.approx(0.5)
    wrong = e.copy()
    wrong[1, 0] += 0.2
    with pytest.raises(rt.QuantisationBoundExceeded, match=(r"\|actual - expected\| = 2\.000e-01 at \(1, 0\), "
                                                            r"but should be <= the quantisation bound 1\.000e-01")):
        rt.assert_within_bound(wrong, e, bound, what="one entry")


# --------------------------------------------------------------------------- state and signature oracles


def _state() -> dict[str, np.ndarray]:
    return {"0.weight": np.ones((2, 3), np.float32), "1.running_mean": np.zeros(3, np.float32),
            "1.num_batches_tracked": np.array(7, np.int64)}


def test_state_oracle_catches_a_changed_counter_a_dropped_buffer_and_a_dtype():
    rt.assert_same_state(_state(), _state(), what="same")
    counter = _state()
    counter["1.num_batches_tracked"] = np.array(8, np.int64)
    with pytest.raises(rt.StateMismatch,
                       match=r"1 of 3 state entries differ .*1\.num_batches_tracked: max abs difference 1\.000e\+00"):
        rt.assert_same_state(counter, _state(), what="counter")
    dropped = _state()
    del dropped["1.running_mean"]
    with pytest.raises(rt.StateMismatch, match=r"missing \['1\.running_mean'\]"):
        rt.assert_same_state(dropped, _state(), what="a loader that drops a buffer")
    widened = _state()
    widened["0.weight"] = widened["0.weight"].astype(np.float64)
    with pytest.raises(rt.StateMismatch,
                       match=r"0\.weight: shape \(2, 3\) dtype float64, but should be shape \(2, 3\) dtype float32"):
        rt.assert_same_state(widened, _state(), what="dtype")


def test_signature_oracle_names_the_first_difference():
    want = {"serving_default": {"inputs": {"x": ["float32", [None, 8]]}, "outputs": {"y": ["float32", [None, 3]]}}}
    rt.assert_same_signature(want, want, what="same")
    fixed = {"serving_default": {"inputs": {"x": ["float32", [4, 8]]}, "outputs": {"y": ["float32", [None, 3]]}}}
    with pytest.raises(rt.SignatureMismatch, match=r"signature at serving_default\.inputs\.x\[1\]\[0\] is 4, but should be None"):
        rt.assert_same_signature(fixed, want, what="a batch fixed at export")
    renamed = {"serving_default": {"inputs": {"input_1": ["float32", [None, 8]]}, "outputs": {"y": ["float32", [None, 3]]}}}
    with pytest.raises(rt.SignatureMismatch, match=r"inputs\.input_1 is \['float32', \[None, 8\]\], but should be '<missing>'"):
        rt.assert_same_signature(renamed, want, what="renamed input")


def test_signature_wildcard_accepts_any_symbolic_dimension_only():
    want = {"inputs": [["x", "tensor(float)", [rt.DYNAMIC, 4]]]}
    rt.assert_same_signature({"inputs": [["x", "tensor(float)", ["s31", 4]]]}, want, what="symbol")
    with pytest.raises(rt.SignatureMismatch, match=r"inputs\[0\]\[2\]\[0\] is 2"):
        rt.assert_same_signature({"inputs": [["x", "tensor(float)", [2, 4]]]}, want, what="static batch")


# --------------------------------------------------------------------------- int8 weights and the bound


def _quantised_forward(spec: rt.ModelSpec, x: np.ndarray, quantised: set[int], *, negate: bool = False) -> np.ndarray:
    """numpy dynamic-range int8 (per-channel symmetric weights, per-row asymmetric inputs),
    the scheme TFLite's hybrid fully-connected kernel uses; ``negate`` plants a gross bug."""
    h = np.asarray(x, np.float64)
    for i, (layer, p) in enumerate(zip(spec.layers, rt.parameters(spec))):
        if layer.kind != "dense":
            continue
        w, hq = p["kernel"], h
        if i in quantised:
            s = np.max(np.abs(w), axis=0) / 127.0
            w = np.clip(np.round(w / s), -127, 127) * s
            lo, hi = np.minimum(h.min(axis=1, keepdims=True), 0), np.maximum(h.max(axis=1, keepdims=True), 0)
            sx = np.where(hi > lo, (hi - lo) / 255.0, 1.0)
            zero = np.round(-lo / sx)
            hq = (np.clip(np.round(h / sx) + zero, 0, 255) - zero) * sx
        h = rt._activation(layer.activation, hq @ w + p["bias"])
    return -h if negate else h


SPEC = rt.ModelSpec(32, (rt.Layer("dense", 52, "sigmoid"), rt.Layer("dense", 2, "tanh")), "float32", 804)


def _int8_kernel(w: np.ndarray) -> rt.Int8Tensor:
    """How the quantisation spec stores a kernel: [out, in] int8, one scale per output channel."""
    wt = w.T
    scales = np.max(np.abs(wt), axis=1) / 127.0
    q = np.clip(np.round(wt / scales[:, None]), -127, 127).astype(np.int8)
    return rt.Int8Tensor("spec_model/dense_0_1/MatMul", q, scales, np.zeros(len(scales), np.int64), 0)


def test_int8_weights_on_the_grid_pass():
    good = _int8_kernel(rt.parameters(SPEC)[0]["kernel"])
    assert rt.assert_int8_weights(SPEC, [good], min_elements=1024, what="good") == [0]


def test_int8_weights_oracle_catches_a_flipped_weight_a_wrong_scale_and_a_zero_point():
    good = _int8_kernel(rt.parameters(SPEC)[0]["kernel"])
    flipped = good.values.copy()
    flipped[3, 5] = -flipped[3, 5] if flipped[3, 5] != 0 else 9
    with pytest.raises(rt.QuantisedWeightsMismatch, match=r"weight \[3, 5\] stored as .* steps away, should be <= 0\.5"):
        rt.assert_int8_weights(SPEC, [rt.Int8Tensor(good.name, flipped, good.scales, good.zero_points, 0)],
                               min_elements=1024, what="flipped")
    with pytest.raises(rt.QuantisedWeightsMismatch, match="steps away"):
        rt.assert_int8_weights(SPEC, [rt.Int8Tensor(good.name, good.values, good.scales * 1.01, good.zero_points, 0)],
                               min_elements=1024, what="scale 1% off")
    halved = (good.values // 2).astype(np.int8)  # a scale twice too large: half the int8 range unused
    with pytest.raises(rt.QuantisedWeightsMismatch, match=r"largest \|int8\| is 6[34], but should be 127"):
        rt.assert_int8_weights(SPEC, [rt.Int8Tensor(good.name, halved, good.scales * 2, good.zero_points, 0)],
                               min_elements=1024, what="half range")
    with pytest.raises(rt.QuantisedWeightsMismatch, match="should be symmetric: zero point 0"):
        rt.assert_int8_weights(SPEC, [rt.Int8Tensor(good.name, good.values, good.scales, good.zero_points + 1, 0)],
                               min_elements=1024, what="zero point")
    with pytest.raises(rt.QuantisedWeightsMismatch, match="one per output channel"):
        rt.assert_int8_weights(SPEC, [rt.Int8Tensor(good.name, good.values, good.scales[:1], good.zero_points[:1], 0)],
                               min_elements=1024, what="per tensor")


def test_int8_weights_oracle_refuses_a_vacuous_model():
    with pytest.raises(rt.NotQuantised, match=r"kernel of layer dense_0 \(1664 entries >= 1024\) is not stored as int8"):
        rt.assert_int8_weights(SPEC, [], min_elements=1024, what="float kernel")
    tiny = rt.ModelSpec(4, (rt.Layer("dense", 8, "relu"), rt.Layer("dense", 2)), "float32", 1)
    with pytest.raises(rt.NotQuantised, match="would pass vacuously"):
        rt.assert_int8_weights(tiny, [], min_elements=1024, what="tiny")


def test_the_int8_bound_holds_for_a_correct_quantisation():
    x = rt.example_inputs(SPEC, [5], seed=2)[0].astype(np.float64)
    want = rt.numpy_forward(SPEC, x, bn_eps=1e-3, ln_eps=1e-3)
    bound = rt.dynamic_range_bound(SPEC, x, rtol=0.0, quantised=[0])
    ratio = rt.assert_within_bound(_quantised_forward(SPEC, x, {0}), want, bound, what="numpy dynamic-range int8")
    assert 0.0 < ratio < 1.0


def test_the_int8_bound_catches_a_gross_runtime_error():
    x = rt.example_inputs(SPEC, [5], seed=2)[0].astype(np.float64)
    want = rt.numpy_forward(SPEC, x, bn_eps=1e-3, ln_eps=1e-3)
    bound = rt.dynamic_range_bound(SPEC, x, rtol=0.0, quantised=[0])
    with pytest.raises(rt.QuantisationBoundExceeded, match="but should be <= the quantisation bound"):
        rt.assert_within_bound(_quantised_forward(SPEC, x, {0}, negate=True), want, bound, what="negated outputs")
    with pytest.raises(rt.QuantisationBoundExceeded):  # quantising a layer the model keeps in float is not free
        rt.assert_within_bound(_quantised_forward(SPEC, x, {0}), want, rt.dynamic_range_bound(SPEC, x, rtol=0.0, quantised=[]),
                               what="no layer quantised")


def test_the_int8_bound_refuses_layers_it_does_not_cover():
    spec = rt.ModelSpec(4, (rt.Layer("dense", 4), rt.Layer("batchnorm"), rt.Layer("dense", 2)), "float32", 1)
    with pytest.raises(ValueError, match="dense stacks"):
        rt.dynamic_range_bound(spec, np.zeros((1, 4)), rtol=0.0, quantised=[0])


# --------------------------------------------------------------------------- specs


def test_spec_round_trips_through_json_and_parameters_are_reproducible():
    spec = rt.ModelSpec(3, (rt.Layer("dense", 4, "tanh"), rt.Layer("dropout", rate=0.5), rt.Layer("layernorm"),
                            rt.Layer("dense", 2)), "float64", 9)
    assert rt.ModelSpec.from_json(spec.to_json()) == spec
    a, b = rt.parameters(spec), rt.parameters(spec)
    assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x)
    assert spec.out_features == 2 and spec.fan_ins() == [3, 4] and spec.has_dropout
    assert "dropout0.5" in spec.describe()


def test_forward_magnitude_bounds_the_outputs():
    x = rt.example_inputs(SPEC, [6], seed=5)[0]
    out = rt.numpy_forward(SPEC, x, bn_eps=1e-3, ln_eps=1e-3)
    assert np.max(np.abs(out)) <= rt.forward_magnitude(SPEC, x, bn_eps=1e-3, ln_eps=1e-3)


def test_int8_kernels_without_a_layer_name_are_attributed_by_shape_and_still_checked():
    """TF 2.20's converter names a quantised kernel "tfl.pseudo_qconst": it is found by its
    shape (the TF 2.20 upgrade run's false NotQuantised), and a wrong one still fails."""
    good = _int8_kernel(rt.parameters(SPEC)[0]["kernel"])
    unnamed = rt.Int8Tensor("tfl.pseudo_qconst", good.values, good.scales, good.zero_points, 0)
    assert rt.assert_int8_weights(SPEC, [unnamed], min_elements=1024, what="unnamed") == [0]
    flipped = good.values.copy()
    flipped[3, 5] = -flipped[3, 5] if flipped[3, 5] != 0 else 9
    wrong = rt.Int8Tensor("tfl.pseudo_qconst", flipped, good.scales, good.zero_points, 0)
    with pytest.raises(rt.QuantisedWeightsMismatch, match=r"weight \[3, 5\] stored as .* steps away"):
        rt.assert_int8_weights(SPEC, [wrong], min_elements=1024, what="unnamed, flipped")
    other = rt.Int8Tensor("tfl.pseudo_qconst_1", good.values[:, ::-1].copy(), good.scales, good.zero_points, 0)
    assert rt.assert_int8_weights(SPEC, [other, unnamed], min_elements=1024, what="two of one shape") == [0]
