"""The floating-point formats' constants that the error model is made of.

Both the op library (``programs``: forward-error bounds, edge-case tolerances) and the
oracles (``checks.numerics``: tolerances) build on these, so they sit below both.
"""

from __future__ import annotations

from typing import Final

#: Smallest positive normal number of each dtype: below it, a result may be flushed to zero.
SMALLEST_NORMAL: Final = {"float64": 2.0**-1022, "float32": 2.0**-126, "float16": 2.0**-14, "bfloat16": 2.0**-126}
#: Unit round-off u (half an ulp of 1) of each dtype.
UNIT_ROUNDOFF: Final = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
#: TensorFloat-32: TensorFlow runs float32 matmuls and convolutions on Ampere+ GPUs in TF32
#: by default (tf.config.experimental.enable_tensor_float_32_execution); a 10-bit mantissa.
TF32_ROUNDOFF: Final = 2.0**-11
