"""Fixtures of the modules suites."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlconform.api import keras as keras_adapter


@pytest.fixture(scope="session")
def keras(tf: Any) -> Any:
    """Keras 3 on the TensorFlow backend, in this process (the ``tf`` fixture configures
    TensorFlow first); a harness error naming the fix where Keras already runs on another."""
    return keras_adapter.require("tensorflow", needed_by="the modules suites' Keras tests")
