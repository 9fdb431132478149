"""Fixtures of the interop suites."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlconform.api.crossframework import keras_in_process


@pytest.fixture(scope="session")
def keras_tf(tf: Any) -> Any:
    """Keras 3 running on TensorFlow in this process (the torch backend runs in fresh interpreters)."""
    return keras_in_process("tensorflow")

