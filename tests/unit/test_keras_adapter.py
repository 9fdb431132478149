"""frameworks/keras.py without Keras: the backend guard against a stand-in ``keras`` module
in ``sys.modules`` (what Keras would report), and the dtype policy restored after an error.

The stand-in replaces only Keras's report of its own backend; the conversions and policies
run against real Keras in the suites and in tests/integration.
"""

from __future__ import annotations

import os
import sys
import types

import pytest

from pytest_dlconform.frameworks import HarnessError
from pytest_dlconform.frameworks import keras as keras_adapter


def _keras_on(backend: str) -> types.ModuleType:
    fake = types.ModuleType("keras")
    fake.backend = types.SimpleNamespace(backend=lambda: backend)  # type: ignore[attr-defined]
    policy = {"name": "float32"}
    fake.config = types.SimpleNamespace(  # type: ignore[attr-defined]
        dtype_policy=lambda: policy["name"], set_dtype_policy=lambda name: policy.update(name=name))
    return fake


def test_active_backend_is_the_default_until_keras_is_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "keras", raising=False)
    assert keras_adapter.active_backend() == "tensorflow"
    assert keras_adapter.active_backend(default="jax") == "jax"
    monkeypatch.setitem(sys.modules, "keras", _keras_on("torch"))
    assert keras_adapter.active_backend() == "torch"


def test_require_returns_keras_on_the_backend_asked_for(monkeypatch):
    fake = _keras_on("tensorflow")
    monkeypatch.setitem(sys.modules, "keras", fake)
    assert keras_adapter.require("tensorflow") is fake


def test_require_refuses_keras_on_another_backend_and_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", _keras_on("jax"))
    with pytest.raises(HarnessError) as info:
        keras_adapter.require("tensorflow", needed_by="the seed's train_step")
    message = str(info.value)
    assert "'jax' backend" in message and "'tensorflow' is needed by the seed's train_step" in message
    assert "unset KERAS_BACKEND" in message


def test_require_defaults_keras_backend_only_before_the_import(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", _keras_on("tensorflow"))
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    keras_adapter.require("tensorflow")  # already imported: the environment is left alone
    assert "KERAS_BACKEND" not in os.environ


def test_dtype_policy_is_restored_after_an_error():
    fake = _keras_on("tensorflow")
    with pytest.raises(RuntimeError), keras_adapter.dtype_policy("mixed_float16", fake) as active:
        assert active == "mixed_float16"
        raise RuntimeError("inside the block")
    assert fake.config.dtype_policy() == "float32"
