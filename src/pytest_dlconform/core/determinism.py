"""Deterministic GPU kernels for the claims that assert bitwise equality.

On a CPU the frameworks' kernels give the same bits for the same inputs. On a GPU some do
not: TensorFlow's BiasAddGrad and cuDNN's convolution backward passes accumulate with
atomics, cuBLAS may split reductions across streams. Bitwise claims (a recomputed gradient
equals the stored one, two model APIs give the same output) therefore run their GPU
computations with the frameworks' documented determinism switches on:

- TensorFlow: ``tf.config.experimental.enable_op_determinism()`` (ops without a
  deterministic GPU kernel then raise instead of varying);
- torch: ``torch.use_deterministic_algorithms(True)`` and
  ``torch.backends.cudnn.deterministic = True`` / ``benchmark = False``; cuBLAS needs
  ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` before its first call, which the run sets for GPU runs
  (:data:`CUBLAS_ENV`, applied by session.plan.DevicePlan).

Each switch is put back as it was afterwards, so the run's state-leak check stays quiet.
No framework is imported here: only those already loaded are switched.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

CUBLAS_ENV = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


@contextlib.contextmanager
def deterministic_kernels(device: str) -> Iterator[list[str]]:
    """Determinism on for the body when ``device`` is a GPU kind; yields what was switched."""
    switched: list[str] = []
    with contextlib.ExitStack() as stack:
        if device != "cpu":
            if "tensorflow" in sys.modules:
                stack.enter_context(_tensorflow(sys.modules["tensorflow"]))
                switched.append("tf.config.experimental.enable_op_determinism")
            if "torch" in sys.modules:
                stack.enter_context(_torch(sys.modules["torch"]))
                switched.append("torch.use_deterministic_algorithms")
        yield switched


@contextlib.contextmanager
def _tensorflow(tf: object) -> Iterator[None]:
    from tensorflow.python.framework import config  # is_/disable_op_determinism are not exported

    was = config.is_op_determinism_enabled()
    config.enable_op_determinism()
    try:
        yield
    finally:
        if not was:
            config.disable_op_determinism()


@contextlib.contextmanager
def _torch(torch: object) -> Iterator[None]:
    t: Any = torch  # the torch module (typed loosely: no stubs needed)
    was = (t.are_deterministic_algorithms_enabled(), t.is_deterministic_algorithms_warn_only_enabled(),
           t.backends.cudnn.deterministic, t.backends.cudnn.benchmark)
    t.use_deterministic_algorithms(True)
    t.backends.cudnn.deterministic, t.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        t.use_deterministic_algorithms(was[0], warn_only=was[1])
        t.backends.cudnn.deterministic, t.backends.cudnn.benchmark = was[2], was[3]
