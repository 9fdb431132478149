"""Keras 3 adapter: which backend this process's Keras runs on, the one guard that requires
a backend, Keras's global dtype policy for a block, and Keras values to numpy.

Keras fixes its backend when it is first imported (``KERAS_BACKEND``, else
``~/.keras/keras.json``, else TensorFlow), so a process has one Keras backend for its
lifetime: the in-process suites run Keras on TensorFlow, and a claim about another backend
runs Keras in a fresh interpreter with ``KERAS_BACKEND`` set before the import. Every
in-process check of the backend goes through :func:`require`, so the rule and its message
live here once.

Importing this module imports no framework.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import HarnessError

DEFAULT_BACKEND = "tensorflow"  # Keras's own default, and the backend of the in-process suites


def active_backend(default: str = DEFAULT_BACKEND) -> str:
    """The backend of the Keras imported in this process, or ``default`` while none is
    imported (a Keras model built later here gets ``default`` through :func:`require`)."""
    keras = sys.modules.get("keras")
    return str(keras.backend.backend()) if keras is not None else default


def require(backend: str = DEFAULT_BACKEND, *, needed_by: str = "the in-process tests") -> Any:
    """Keras, checked to run on ``backend``; imported for it when not imported yet.

    Before the first import ``KERAS_BACKEND`` defaults to ``backend`` (a value the user set
    is kept); once Keras runs on another backend nothing in this process can change it, so
    that is a harness error naming the fix, not a conformance result.
    """
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", backend)
    import keras

    actual = str(keras.backend.backend())
    if actual != backend:
        raise HarnessError(
            f"Keras runs on the {actual!r} backend in this process (KERAS_BACKEND, fixed when keras is first "
            f"imported); {backend!r} is needed by {needed_by}: unset KERAS_BACKEND for the pytest run, or run "
            "them in their own process"
        )
    return keras


@contextlib.contextmanager
def dtype_policy(name: str, keras: Any = None) -> Iterator[Any]:
    """Keras's global dtype policy set to ``name`` for the block (yielded), the previous one
    restored after it, also when the block raises."""
    if keras is None:
        keras = importlib.import_module("keras")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield keras.config.dtype_policy()
    finally:
        keras.config.set_dtype_policy(previous)


def to_numpy(value: Any) -> np.ndarray:
    """A Keras tensor or variable, on any backend, as a numpy array of its own (a copy)."""
    import keras

    return np.array(keras.ops.convert_to_numpy(value))
