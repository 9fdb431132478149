"""model.gradients.finite-differences computes in the precision its bound assumes.

A float64 check of a user's model sets every global dtype knob of the framework while the
factory builds and while the model runs (``checks.usermodel.dtype_scope``). Before, a Keras
model got float64 weights from the dtype policy but float32 ``keras.Input`` layers from floatx:
its inputs were rounded to float32, and finite differences along them carried float32 noise
against a float64 bound (the shipped two_tower example failed seeds 0-11 in process, a model
written from docs/own-model.md 11 of 12). A model that declares float32 inputs itself still
rounds them; that rounding is counted in f_error, and a wrong input gradient still fails.

The suite's test function is called in process, with the plugin's own ``ModelHandle``, one
build per seed: the whole claim for six seeds of five models in well under a minute.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any
from unittest import mock

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEEDS = range(6)
TORCH_EXAMPLES = ("examples.torch_user:tabular_model", "examples.gan:generator", "examples.bert:tiny_bert")


@pytest.fixture(scope="module")
def keras() -> Any:
    pytest.importorskip("tensorflow")
    return pytest.importorskip("keras")


@pytest.fixture(autouse=True)
def _importable(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))  # examples/
    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).parent))  # keras_own_models


def handle(ref: str, framework: str) -> Any:
    from pytest_dlconform.run.usermodels import ModelHandle

    return ModelHandle(ref, framework, "cpu", "cpu", 120.0)


def gradient_claim(ref: str, framework: str, seed: int) -> dict[str, Any]:
    """The suite's test of the claim on one seed; what it records as evidence, returned."""
    from pytest_dlconform.suites.model import test_gradients as suite

    seen: dict[str, Any] = {}
    with mock.patch.object(suite.evidence, "note", lambda **kw: seen.update(kw)), \
            mock.patch.object(suite.evidence, "check", lambda what, **kw: seen.update(kw)):
        suite.test_parameter_gradients_match_finite_differences(handle(ref, framework), seed)
    return seen


def global_dtypes() -> dict[str, str]:
    out = {}
    if "keras" in sys.modules:
        keras = sys.modules["keras"]
        out.update(floatx=keras.config.floatx(), policy=keras.config.dtype_policy().name)
    if "torch" in sys.modules:
        out["torch"] = str(sys.modules["torch"].get_default_dtype())
    return out


@pytest.mark.parametrize("ref", ["examples.keras_user:two_tower", "keras_own_models:own_model"])
def test_keras_models_hold_in_float64_over_seeds(keras, ref):
    before = global_dtypes()
    for seed in SEEDS:
        seen = gradient_claim(ref, "tensorflow", seed)
        assert seen["dtype"] == "float64" and "inputs_rounded_to" not in seen, seen
        assert seen["observed"] < 1.0, (seed, seen)
    assert global_dtypes() == before


@pytest.mark.parametrize("ref", TORCH_EXAMPLES)
def test_torch_examples_hold_in_float64_over_seeds(ref):
    pytest.importorskip("torch")
    if ref.startswith("examples.bert"):
        pytest.importorskip("transformers")
    before = global_dtypes()
    for seed in SEEDS[:3]:
        seen = gradient_claim(ref, "torch", seed)
        assert seen["dtype"] == "float64" and seen["observed"] < 1.0, (seed, seen)
    assert global_dtypes() == before


@pytest.mark.parametrize("ref", ["examples.keras_user:two_tower", "keras_own_models:own_model"])
def test_a_float64_keras_build_has_float64_inputs(keras, ref):
    """What failed before: the policy alone left keras.Input at floatx (float32)."""
    from pytest_dlconform.checks import usermodel as ops
    from pytest_dlconform.run import usermodels

    before = global_dtypes()
    um = handle(ref, "tensorflow").build("float64", seed=0)
    assert [str(t.dtype) for t in um.model.inputs] == ["float64"] * len(um.model.inputs)
    assert {str(v.dtype) for v in um.model.trainable_variables} == {"float64"}
    assert ops.KerasOps().narrowed_inputs(um.model, usermodels.example_inputs(um, 0)) == [None] * len(um.model.inputs)
    assert global_dtypes() == before  # restored after the build
    mixed = handle(ref, "tensorflow").build("mixed_float16", seed=0)  # floatx follows the variables: float32
    assert {str(t.dtype) for t in mixed.model.inputs} == {"float32"}


def test_declared_float32_inputs_are_counted_in_the_bound_and_a_wrong_input_gradient_still_fails(keras):
    from pytest_dlconform.checks.gradients import GradientMismatch

    for seed in SEEDS:
        seen = gradient_claim("keras_own_models:float32_input", "tensorflow", seed)
        assert seen["dtype"] == "float64" and seen["inputs_rounded_to"] == "model input 0: float32", seen
        assert seen["input_rounding_f_error"] > 0 and seen["observed"] < 1.0, (seed, seen)
    for seed in SEEDS[:3]:
        with pytest.raises(GradientMismatch, match=r"moving input 'model input 0'"):
            gradient_claim("keras_own_models:float32_input_wrong_input_gradient", "tensorflow", seed)


def test_dtype_scope_sets_and_restores_every_knob_also_on_error(keras):
    torch = pytest.importorskip("torch")
    from pytest_dlconform.checks.usermodel import dtype_scope

    before = global_dtypes()
    with pytest.raises(RuntimeError), dtype_scope("tensorflow", "float64"):
        assert (keras.config.floatx(), keras.config.dtype_policy().name) == ("float64", "float64")
        assert keras.Input((2,)).dtype == "float64"
        raise RuntimeError
    with pytest.raises(RuntimeError), dtype_scope("torch", "float64"):
        assert torch.get_default_dtype() == torch.float64 and torch.nn.Linear(2, 2).weight.dtype == torch.float64
        raise RuntimeError
    with dtype_scope("torch", "mixed_float16"):  # not a torch default dtype: left alone
        assert torch.get_default_dtype() == torch.float32
    assert global_dtypes() == before


def test_on_the_jax_backend_a_float64_build_turns_on_x64_for_the_block():
    pytest.importorskip("jax")
    pytest.importorskip("keras")
    code = """
import jax, keras
from pytest_dlconform.checks.usermodel import dtype_scope
assert keras.backend.backend() == "jax" and not jax.config.read("jax_enable_x64")
with dtype_scope("tensorflow", "float64"):
    inside = jax.config.read("jax_enable_x64"), str(keras.Input((2,)).dtype), str(keras.ops.ones((2,)).dtype)
print(inside, jax.config.read("jax_enable_x64"), keras.config.floatx())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "KERAS_BACKEND": "jax", "JAX_ENABLE_X64": "0",
                               "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[-2] == "(True, 'float64', 'float64') False float32", proc.stdout
