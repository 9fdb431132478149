"""Mutants of cross-framework agreement: activation defaults and Keras precision (claims
interop.*). The Keras-backend runs happen in fresh interpreters (one per backend), which the
hook reaches like every other process."""

from __future__ import annotations

from typing import Any

from . import mutant


@mutant("torch-gelu-default-tanh", areas="interop", claims="interop.same-model*", target="torch",
        cite="https://github.com/pytorch/pytorch/pull/61439",
        bug="F.gelu defaults to the tanh approximation instead of the exact erf form (the approximate "
            "argument PR 61439 added, with 'none' as the default).")
def _torch_gelu_tanh() -> None:
    import torch.nn.functional as F

    original = F.gelu

    def gelu(input: Any, *args: Any, **kwargs: Any) -> Any:
        if args or "approximate" in kwargs:
            return original(input, *args, **kwargs)
        return original(input, approximate="tanh")
    F.gelu = gelu


@mutant("keras-gelu-default-approximate", areas="interop", claims="interop.*", target="keras",
        cite="https://github.com/tensorflow/addons/pull/2265",
        bug="Keras's gelu uses the tanh approximation by default (the default that changed from True to False "
            "between tensorflow_addons' gelu and tf.nn.gelu, PR 2265).")
def _keras_gelu_approximate() -> None:
    from keras.src import ops

    original = ops.gelu

    def gelu(x: Any, approximate: bool = True) -> Any:
        return original(x, approximate=True)
    ops.gelu = gelu


@mutant("keras-float64-matmul-in-float32", areas="interop", claims="interop.keras-backends*", target="keras",
        cite="https://github.com/keras-team/keras/issues/15791",
        bug="Keras computes float64 matrix products in float32 (issue 15791: float64 results truncated to "
            "32-bit precision).")
def _keras_float64_truncated() -> None:
    from keras.src import ops

    original = ops.matmul

    def matmul(x1: Any, x2: Any) -> Any:
        if "float64" in (str(getattr(x1, "dtype", "")), str(getattr(x2, "dtype", ""))):
            return ops.cast(original(ops.cast(x1, "float32"), ops.cast(x2, "float32")), "float64")
        return original(x1, x2)
    ops.matmul = matmul
