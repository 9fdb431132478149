"""Execution-area fixtures: compiled functions shared within a worker, Keras on the
TensorFlow backend (the run's compiler cache is set in suites/conftest.py).

Tests that count traces or compiles reset what they count per example themselves (a new
tf.function, a new code object and torch._dynamo.reset()): hypothesis forbids
function-scoped fixtures in @given tests."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlconform.api import keras as keras_adapter


@pytest.fixture(scope="session")
def compiled_functions() -> dict[Any, Any]:
    """Compiled functions shared by the tests of one worker, keyed by the caller.

    A cold inductor compile takes tens of seconds here, so one compiled function serves
    every hypothesis example of the same program, dtype and shape.
    """
    return {}


@pytest.fixture(scope="session")
def keras_module(tf: Any) -> Any:
    """Keras 3 on the TensorFlow backend (the seed's train_step is TensorFlow code)."""
    return keras_adapter.require("tensorflow", needed_by="the seed's train_step (TensorFlow code)")
