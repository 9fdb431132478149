"""Fixtures of the precision suites."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlconform.api import keras as keras_adapter


@pytest.fixture(scope="session")
def keras_tf(tf: Any) -> Any:
    """Keras 3 running on TensorFlow in this process."""
    return keras_adapter.require("tensorflow")
