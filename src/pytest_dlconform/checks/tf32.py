"""Whether float32 matmuls and convolutions may run in TensorFloat-32 (10-bit mantissa).

TF32 exists on NVIDIA GPUs of compute capability 8.0 (Ampere) and newer; where a
framework's switch allows it, a float32 product there carries TF32's unit round-off
2**-11 instead of float32's 2**-24. The switches, read where the framework is loaded
(never imported here), with their documented defaults otherwise:

- TensorFlow: ``tf.config.experimental.tensor_float_32_execution_enabled()``, on by
  default, for matmuls and convolutions alike.
- torch, newer API (2.9+): ``torch.backends.cuda.matmul.fp32_precision`` and
  ``torch.backends.cudnn.conv.fp32_precision`` ("tf32" or "ieee"; "none" inherits from
  ``torch.backends.cudnn.fp32_precision`` / ``torch.backends.fp32_precision``, whose
  "none" is "ieee"); matmul "ieee" and cuDNN convolutions "tf32" by default.
  ``torch.set_float32_matmul_precision("high"/"medium")`` sets the matmul one to tf32.
- torch, legacy API: ``torch.backends.cuda.matmul.allow_tf32`` (default False) and
  ``torch.backends.cudnn.allow_tf32`` (default True). Read only where the newer API is
  absent: torch raises when the two are mixed.
- Keras: the backend's own switch (Keras 3 leaves it alone).
"""

from __future__ import annotations

import sys
from typing import Any

TORCH_DEFAULT = {"matmul": "ieee", "conv": "tf32"}


def tf32_reason(framework: str | None, *, conv: bool = False) -> str | None:
    """Why float32 matmuls (and, with ``conv``, convolutions) of ``framework`` on a GPU may
    be TF32, or None where its switches say they are not."""
    if framework == "keras":
        keras = sys.modules.get("keras")
        framework = keras.backend.backend() if keras is not None else "tensorflow"
    if framework == "tensorflow":
        tf = sys.modules.get("tensorflow")
        on = True if tf is None else bool(tf.config.experimental.tensor_float_32_execution_enabled())
        return "TensorFlow's TF32 execution (on by default)" if on else None
    if framework == "torch":
        torch = sys.modules.get("torch")
        parts = [("matmul", torch_precision(torch, "matmul"))] + ([("conv", torch_precision(torch, "conv"))] if conv else [])
        used = [f"torch {kind} fp32_precision={value}" for kind, value in parts if value == "tf32"]
        return ", ".join(used) if used else None
    return None


def torch_precision(torch: Any, kind: str) -> str:
    """torch's effective fp32 precision on CUDA for "matmul" (cuBLAS) or "conv" (cuDNN)."""
    if torch is None:
        return TORCH_DEFAULT[kind]
    backends = torch.backends
    leaf = backends.cuda.matmul if kind == "matmul" else backends.cudnn.conv
    chain = [leaf] + ([] if kind == "matmul" else [backends.cudnn]) + [backends]
    if hasattr(leaf, "fp32_precision"):
        for node in chain:
            value = str(getattr(node, "fp32_precision", "none"))
            if value != "none":
                return value
        return "ieee"
    legacy = backends.cuda.matmul.allow_tf32 if kind == "matmul" else backends.cudnn.allow_tf32
    return "tf32" if legacy else "ieee"
