"""The oracles of suites/modules/test_keras_layer_records.py can fail: each generic property, fed a
deliberately wrong layer (numpy stand-ins, no framework import), fails naming the layer, the variant
and the property; a conforming stand-in passes; the table-complete check names what is missing."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from suites.modules import _keras_layer_records as rec
from suites.modules import test_keras_layer_records as suite

DTYPES = {"float32": ("float32", "float32"), "mixed_float16": ("float16", "float32"), "float64": ("float64", "float64")}


class Tensor(np.ndarray):
    """An array that can carry a mask, like a Keras eager tensor's _keras_mask."""

    _keras_mask: Any = None


class Var:
    def __init__(self, value: np.ndarray, path: str) -> None:
        self.value, self.path = value, path

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    def numpy(self) -> np.ndarray:
        return self.value


class Spec:
    def __init__(self, shape: Any, dtype: str = "float32") -> None:
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


class Scale:
    """A conforming stand-in: y = x @ W * scale (+ noise in training where random)."""

    supports_masking = True
    policy = "float32"

    def __init__(self, units: int, scale: float = 1.0) -> None:
        self.units, self.scale = units, scale
        self.weights: list[Var] = []

    @property
    def trainable_weights(self) -> list[Var]:
        return self.weights

    non_trainable_weights: list[Var] = []

    def compute(self) -> str:
        return DTYPES[Scale.policy][0]

    def __call__(self, x: Any, training: Any = None) -> Any:
        if not self.weights:
            w = np.linspace(-1, 1, x.shape[-1] * self.units).reshape(x.shape[-1], self.units) + 1 / 3
            self.weights = [Var(w.astype(DTYPES[Scale.policy][1]), "kernel")]
        y = (np.asarray(x, dtype=self.compute()) @ self.weights[0].value.astype(self.compute())) * self.scale
        out = np.asarray(y, dtype=self.compute()).view(Tensor)
        out._keras_mask = getattr(x, "_keras_mask", None)
        return out

    def compute_output_shape(self, shape: Any) -> Any:
        return (*shape[:-1], self.units)

    def compute_output_spec(self, spec: Spec) -> Spec:
        return Spec(self.compute_output_shape(spec.shape), self.compute())

    def get_config(self) -> dict[str, Any]:
        return {"units": self.units, "scale": self.scale}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Any:
        return cls(**config)

    def get_weights(self) -> list[np.ndarray]:
        return [w.value.copy() for w in self.weights]

    def set_weights(self, values: list[np.ndarray]) -> None:
        for w, v in zip(self.weights, values):
            w.value = v.copy()


class Masking:
    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, x: np.ndarray) -> Tensor:
        out = np.asarray(x).view(Tensor)
        out._keras_mask = np.any(x != self.value, axis=-1)
        return out


def fake_keras(cls: type) -> Any:
    def set_dtype_policy(name: str) -> None:
        Scale.policy = name

    layers = SimpleNamespace(Scale=cls, Masking=Masking)
    return SimpleNamespace(layers=layers, KerasTensor=Spec,
                           config=SimpleNamespace(dtype_policy=lambda: Scale.policy, set_dtype_policy=set_dtype_policy))


RECORD = rec.R("Scale", rec.V({"units": 2, "scale": 0.5}, (2, 4, 3), out=(2, 4, 2), w=(1, 0), mask=True,
                              propagates=True, differentiable=False))


def run(cls: type, record: rec.Record = RECORD) -> None:
    Scale.policy = "float32"
    failures = suite.check_all(fake_keras(cls), record, record.variants[0], 0)
    assert not failures, "\n".join(failures)


def test_conforming_layer_passes() -> None:
    run(Scale)


class WrongShapeInference(Scale):
    def compute_output_shape(self, shape: Any) -> Any:
        return (*shape[:-1], self.units + 1)


class WrongSpecDtype(Scale):
    def compute_output_spec(self, spec: Spec) -> Spec:
        return Spec(self.compute_output_shape(spec.shape), "int64")


class ConfigLosesScale(Scale):
    def get_config(self) -> dict[str, Any]:
        return {"units": self.units}


class ConfigNotStable(Scale):
    calls = 0

    def get_config(self) -> dict[str, Any]:
        ConfigNotStable.calls += 1
        return {"units": self.units, "scale": self.scale + 0.0 * ConfigNotStable.calls, "n": ConfigNotStable.calls}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Any:
        return cls(config["units"], config["scale"])


class ExtraWeight(Scale):
    @property
    def non_trainable_weights(self) -> list[Var]:  # type: ignore[override]
        return [Var(np.zeros(2), "moving_mean")]


class TrainingChangesOutput(Scale):
    def __call__(self, x: Any, training: Any = None) -> Any:
        y = super().__call__(x, training)
        return y * 2 if training else y


class InferenceUpdatesState(Scale):
    """Moves its kernel after computing each output but the first (a moving statistic updated in inference)."""

    calls = 0

    def __call__(self, x: Any, training: Any = None) -> Any:
        y = super().__call__(x, training)
        if self.calls:
            self.weights[0].value = self.weights[0].value + 1.0
        self.calls += 1
        return y


class NoMaskSupport(Scale):
    supports_masking = False


class DropsMask(Scale):
    def __call__(self, x: Any, training: Any = None) -> Any:
        y = super().__call__(x, training)
        y._keras_mask = None
        return y


class WrongMask(Scale):
    def __call__(self, x: Any, training: Any = None) -> Any:
        y = super().__call__(x, training)
        if y._keras_mask is not None:
            y._keras_mask = np.ones_like(y._keras_mask)
        return y


class Float16Variables(Scale):
    def __call__(self, x: Any, training: Any = None) -> Any:
        y = super().__call__(x, training)
        if Scale.policy == "mixed_float16":
            self.weights[0].value = self.weights[0].value.astype("float16")
        return y


class MixedOutputsFloat32(Scale):
    def compute(self) -> str:
        return "float32" if Scale.policy == "mixed_float16" else super().compute()


class Float64ComputedInFloat32(Scale):
    def __call__(self, x: Any, training: Any = None) -> Any:
        y = super().__call__(x, training)
        return y.astype(np.float32).astype(y.dtype).view(Tensor) if Scale.policy == "float64" else y


class WrongShape(Scale):
    def __call__(self, x: Any, training: Any = None) -> Any:
        return super().__call__(x, training)[:, :-1]


class Raises(Scale):
    def __call__(self, x: Any, training: Any = None) -> Any:
        raise ValueError("Incompatible shapes: [2,4,3] vs. [4]")


@pytest.mark.parametrize(("cls", "message"), [
    (WrongShape, "output-shape: output shape (2, 3, 2), documented (2, 4, 2)"),
    (Raises, "output-shape: ValueError: Incompatible shapes"),
    (WrongShapeInference, "compute_output_shape: returned (2, 4, 3), the output has (2, 4, 2)"),
    (WrongSpecDtype, "compute_output_spec: spec (2, 4, 2) int64, output (2, 4, 2) float32"),
    (ExtraWeight, "weights-count: (trainable, non-trainable) weights (1, 1), expected (1, 0)"),
    (ConfigLosesScale, "get_config-roundtrip output: expected bitwise equality"),
    (ConfigNotStable, "get_config-roundtrip: config changed by a round trip"),
    (InferenceUpdatesState, "inference-repeatable: weight kernel unchanged by inference"),
    (TrainingChangesOutput, "training-flag (training=True vs training=False): expected bitwise equality"),
    (DropsMask, "masking: the output carries no mask"),
    (WrongMask, "masking (output _keras_mask equals the input mask): expected bitwise equality"),
    (Float16Variables, "mixed_float16: output float16 (expected float16), variables not float32: ['kernel: float16']"),
    (MixedOutputsFloat32, "mixed_float16: output float32 (expected float16)"),
    (Float64ComputedInFloat32, "float64: every output element is a float32 number"),
])
def test_wrong_layer_fails_naming_the_property(cls: type, message: str) -> None:
    with pytest.raises(AssertionError) as err:
        run(cls)
    text = str(err.value)
    assert text.startswith("Scale variant 0 {'units': 2, 'scale': 0.5}: ")
    assert message in text, text


def test_a_changed_supports_masking_is_evidence_not_a_violation() -> None:
    """Most layers' docs say nothing about supports_masking: a layer that stops supporting masks is
    recorded (evidence) and no mask propagation is asserted for it; a layer that says it supports
    masks must propagate them (DropsMask above)."""
    from pytest_dlconform.core import evidence

    with evidence.recording() as recorder:
        run(NoMaskSupport)
    assert recorder.notes == {"supports_masking_changed.Scale": "False, recorded True"}, recorder.notes


class TwoFaults(TrainingChangesOutput, MixedOutputsFloat32):
    pass


def test_independent_parts_each_report_their_failure() -> None:
    with pytest.raises(AssertionError) as err:
        run(TwoFaults)
    lines = str(err.value).splitlines()
    assert any("training-flag" in line for line in lines) and any("mixed_float16" in line for line in lines)


def test_random_layer_must_be_identity_in_inference() -> None:
    record = rec.R("Scale", rec.V({"units": 3}, (2, 4, 3), out=(2, 4, 3), w=(1, 0), mask=True, propagates=True,
                                  differentiable=False), kind="random", identity=True)
    with pytest.raises(AssertionError, match="inference-identity \\(training=False returns the input\\)"):
        run(Scale, record)  # a 3x3 linspace kernel is not the identity


def test_policy_is_restored_after_a_failure() -> None:
    with pytest.raises(AssertionError):
        run(Float64ComputedInFloat32)
    assert Scale.policy == "float32"


PUBLIC = {"Dense": ["Dense"], "MaxPool1D": ["MaxPool1D", "MaxPooling1D"], "Layer": ["Layer"], "New": ["New"]}


def test_table_complete_names_missing_stale_and_duplicate_entries() -> None:
    assert suite.table_problems(PUBLIC, ["Dense", "MaxPooling1D", "New"], ["Layer"]) == []
    problems = suite.table_problems(PUBLIC, ["Dense", "MaxPooling1D", "MaxPool1D", "Gone"], ["Layer"])
    assert problems == ["MaxPool1D is listed twice (as MaxPooling1D too)",
                        "Gone is in the table but keras.layers has no such layer class",
                        "New (aliases ['New']) has no record and is not listed as out of scope"]


def test_records_are_well_formed() -> None:
    names = [r.name for r in rec.RECORDS]
    assert len(names) == len(set(names))
    assert not set(names) & set(rec.OUT_OF_SCOPE)
    for r in rec.RECORDS:
        assert 1 <= len(r.variants) <= 3, r.name
        for v in r.variants:
            assert v.output[0] == v.inputs[0].shape[0] == 2, r.name
            assert not v.propagates or v.mask, f"{r.name}: propagates a mask without supports_masking"


def test_inputs_are_deterministic_and_of_their_kind() -> None:
    record = rec.BY_NAME["HashedCrossing"]
    a = rec.inputs_for(record, record.variants[1], 1)
    b = rec.inputs_for(record, record.variants[1], 1)
    assert np.array_equal(a[0], b[0]) and list(a[1]) == list(b[1])
    assert a[0].dtype == np.int64 and a[0].min() >= 1 and set(a[1]) <= set(rec.TOKENS)
    img = rec.inputs_for(rec.BY_NAME["Rescaling"], rec.BY_NAME["Rescaling"].variants[0], 0, dtype="float64")[0]
    assert img.dtype == np.float64 and img.min() >= 0 and img.max() <= 255


def _second_order_problem(scale_hvp: float) -> dict[str, Any]:
    """f(x, w) = tanh(x @ w) with its exact gradient and an H v scaled by ``scale_hvp`` (1: right)."""
    x0, w0 = np.random.default_rng(0).standard_normal((2, 3)), np.random.default_rng(1).standard_normal((3, 4))

    def grad(arrays: list[np.ndarray], cot: np.ndarray) -> list[np.ndarray]:
        x, w = arrays
        d = cot * (1 - np.tanh(x @ w) ** 2)
        return [d @ w.T, x.T @ d]

    def hvp(arrays: list[np.ndarray], cot: np.ndarray, vs: list[np.ndarray]) -> list[np.ndarray]:
        x, w = arrays
        vx, vw = vs
        t = np.tanh(x @ w)
        dz = vx @ w + x @ vw  # the tangent of z = x @ w
        d = cot * (1 - t ** 2)
        dd = cot * (-2 * t * (1 - t ** 2)) * dz  # the tangent of d
        return [scale_hvp * (dd @ w.T + d @ vw.T), scale_hvp * (vx.T @ d + x.T @ dd)]

    return {"grad": grad, "hvp": hvp, "start": [x0, w0], "names": ["input 0", "kernel"], "out_shape": (2, 4),
            "restore": lambda: None}


def test_second_order_check_passes_a_right_hvp_and_fails_a_wrong_one() -> None:
    suite.check_second_order(_second_order_problem(1.0), "Dense variant 0")
    from pytest_dlconform.checks.gradients import HessianMismatch

    with pytest.raises(HessianMismatch, match=r"Hessian-vector product for input '(input 0|kernel)' .* is about 10% "
                                              r"too small \(0\.9 x\)"):
        suite.check_second_order(_second_order_problem(0.9), "Dense variant 0")


def test_second_order_is_registered_only_for_smooth_differentiable_variants() -> None:
    dense = rec.BY_NAME["Dense"]
    assert [suite.registered(dense, v) for v in dense.variants] == [["gradient-fd", "hvp"], ["gradient-fd", "hvp"]]
    einsum = rec.BY_NAME["EinsumDense"]  # variant 1 names relu
    assert [suite.registered(einsum, v) for v in einsum.variants] == [["gradient-fd", "hvp"], ["gradient-fd"]]
    assert all(suite.registered(rec.BY_NAME["MaxPooling2D"], v) == ["gradient-fd"]
               for v in rec.BY_NAME["MaxPooling2D"].variants)
    assert set(suite.SECOND_ORDER) <= set(rec.BY_NAME), "a second-order name the table does not have"


@pytest.mark.parametrize(("form", "wrong", "message"), [
    ("average", lambda xs, **k: xs[0] + xs[1] + xs[2], r"keras.layers.average of 3 inputs"),
    ("subtract", lambda xs, **k: xs[1] - xs[0], r"keras.layers.subtract of 2 inputs: expected bitwise equality"),
    ("dot(normalize=True)", lambda xs, axes, normalize: np.sum(xs[0] * xs[1], axis=axes, keepdims=True),
     r"keras.layers.dot\(normalize=True\) of 2 inputs"),
    ("concatenate(axis=-1)", lambda xs, **k: np.concatenate(xs[::-1], axis=-1), r"keras.layers.concatenate\(axis=-1\)"),
])
def test_functional_merge_check_fails_a_wrong_form(form: str, wrong: Any, message: str) -> None:
    fake = SimpleNamespace(layers=SimpleNamespace(**{form.split("(")[0]: wrong}))
    with pytest.raises(AssertionError, match=message):
        suite.test_functional_merge_form_computes_its_layer(fake, form)


def test_functional_merge_check_passes_the_numpy_forms() -> None:
    right = SimpleNamespace(layers=SimpleNamespace(
        add=lambda xs: xs[0] + xs[1] + xs[2], average=lambda xs: (xs[0] + xs[1] + xs[2]) / np.float32(3),
        concatenate=lambda xs, axis=-1: np.concatenate(xs, axis=axis)))
    for form in ("add", "average", "concatenate", "concatenate(axis=-1)"):
        suite.test_functional_merge_form_computes_its_layer(right, form)
