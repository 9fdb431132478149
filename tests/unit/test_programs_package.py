"""The programs package keeps what its callers rely on: the op table's order, its public
names, and an import that loads no framework."""

from __future__ import annotations

import subprocess
import sys

import pytest_dlconform.programs as programs
from pytest_dlconform.programs import OPS

# The order hypothesis shrinks towards and draws from: a seed's programs, and so every suite
# example and reproduction, depend on it. Changing it is a deliberate act that changes the
# examples every suite runs; edit this list with it.
TABLE_ORDER = [
    # elementwise (smooth)
    "tanh", "sigmoid", "sin", "cos", "atan", "asinh", "erf", "logsigmoid", "gelu", "silu", "mish", "tanhshrink",
    "square", "cube", "sqrt_c", "log_c", "rsqrt_c", "log1p_sq", "pow_c", "exp_tanh",
    # binary
    "add", "sub", "mul", "div_c", "logaddexp",
    # reductions and ops along an axis
    "sum", "mean", "logsumexp", "var", "prod", "norm_c", "softmax", "log_softmax", "cumsum", "logcumsumexp",
    # shape
    "permute", "reshape", "flip", "roll", "slice", "gather", "broadcast_to", "concat", "stack",
    # contractions
    "matmul", "einsum", "einsum2", "tensordot", "linear",
    # linear algebra
    "det_dd", "logdet_dd", "inv_dd", "solve_dd", "cholesky_spd", "trisolve", "trace", "diagonal",
    # nn
    "conv2d", "avg_pool2d", "layer_norm",
    # piecewise (inputs only)
    "relu", "leaky_relu", "elu", "selu", "celu", "softplus", "softsign", "hardtanh", "relu6", "hardsigmoid",
    "hardswish", "abs",
    # issue 12 part B, per-op only (composable=False): pooling, convolution, losses, attention, normalisation
    "max_pool2d", "avg_pool2d_pad", "conv2d_full", "conv_transpose2d", "cross_entropy", "nll_loss", "mse_loss",
    "huber_loss", "smooth_l1_loss", "bce_with_logits", "sdpa", "batch_norm", "group_norm", "instance_norm",
    # issue 12 part A, per-op only: indexing with accumulation, ordering, decompositions
    "scatter_add", "index_add", "index_put", "embedding", "sort_sep", "topk_sep", "amax_sep", "amin_sep", "cumprod",
    "svd", "qr", "eigh",
]


def test_the_op_table_keeps_its_order() -> None:
    assert list(OPS) == TABLE_ORDER, "the op table's order changed: it decides which programs every seed draws"


def test_every_public_name_is_importable_from_the_package() -> None:
    missing = [name for name in programs.__all__ if not hasattr(programs, name)]
    assert not missing, f"pytest_dlconform.programs.__all__ names {missing}, which the package does not define"


def test_importing_the_package_loads_no_framework() -> None:
    code = ("import sys, pytest_dlconform.programs\n"
            "print(sorted(m for m in ('torch', 'tensorflow', 'keras', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", f"importing pytest_dlconform.programs loads {out.stdout.strip()}"
