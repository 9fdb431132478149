"""Execution-area fixtures: per-worker compiler caches, compiled functions shared within a
worker, Keras on the TensorFlow backend.

Tests that count traces or compiles reset what they count per example themselves (a new
tf.function, a new code object and torch._dynamo.reset()): hypothesis forbids
function-scoped fixtures in @given tests."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any

import pytest

from pytest_dlconform.api import keras as keras_adapter


def _per_worker_compiler_caches() -> None:
    """Give each xdist worker its own, empty TorchInductor/Triton cache for this run.

    Set before any torch.compile runs (inductor reads the variables when it compiles):
    workers never share or race on one cache, and a conformance run exercises the
    compiler instead of replaying artifacts from an earlier run or another torch.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    root = tempfile.mkdtemp(prefix=f"dlconform-compile-{worker}-")
    atexit.register(shutil.rmtree, root, True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")


_per_worker_compiler_caches()


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
