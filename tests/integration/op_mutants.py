"""Wrong twins for the per-op suite (suites/autodiff/test_ops.py), as a pytest plugin.

Loaded with ``-p op_mutants`` (this folder on PYTHONPATH), it replaces some ops' templates
in the op table with implementations whose forward value is right and whose gradient is
wrong in one place only: one parameter value, one memory layout, one input regime, one
dtype, one operand class. test_op_coverage.py runs the ci profile with them and asserts that
each is caught by its op's test. The templates call back into this module (the generated
program source imports it by name).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_dlconform.programs import OPS

_M = "__import__('op_mutants')"

#: op -> (framework, template, what is wrong, the test id that must catch it)
MUTANTS: dict[str, tuple[str, str, str, str]] = {
    "leaky_relu": ("torch", _M + ".leaky_relu({a}, {negative_slope})",
                   "gradient 1% too large on x < 0 at negative_slope=0.25 only (one parameter value)",
                   "test_torch_op_reverse_mode_vs_finite_differences[cpu-leaky_relu]"),
    "sin": ("torch", _M + ".sin({a})", "gradient 0.1% too large when the input is not contiguous (one layout)",
            "test_torch_op_gradients_in_every_layout[cpu-sin]"),
    "atan": ("torch", _M + ".atan({a})", "gradient 1% too large where |x| > 16 (one regime: large, and mixed)",
             "test_torch_op_reverse_mode_vs_finite_differences[cpu-atan]"),
    "cos": ("torch", _M + ".cos({a})", "gradient off by 1e-6 relative in float64 only (one dtype)",
            "test_torch_op_reverse_mode_vs_finite_differences[cpu-cos]"),
    "mul": ("tensorflow", _M + ".tf_mul({a}, {b})",
            "gradient of b 1% too large when b is broadcast (one operand class), tf.custom_gradient",
            "test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-mul]"),
}


def _functions() -> dict[str, Any]:
    import torch

    class LeakyRelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, slope: float) -> Any:
            ctx.save_for_backward(x)
            ctx.slope = slope
            return torch.nn.functional.leaky_relu(x, slope)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            slope = ctx.slope * (1.01 if ctx.slope == 0.25 else 1.0)
            return g * torch.where(x > 0, torch.ones_like(x), slope * torch.ones_like(x)), None

    def unary(f: Any, df: Any) -> Any:
        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.save_for_backward(x)
                return f(x)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (x,) = ctx.saved_tensors
                return g * df(x)

        return Fn.apply

    return {
        "leaky_relu": LeakyRelu.apply,
        "sin": unary(torch.sin, lambda x: torch.cos(x) * (1.0 if x.is_contiguous() else 1.001)),
        "atan": unary(torch.atan, lambda x: torch.where(x.abs() > 16, 1.01, 1.0) / (1 + x * x)),
        "cos": unary(torch.cos, lambda x: -torch.sin(x) * (1 + 1e-6 if x.dtype == torch.float64 else 1.0)),
    }


def tf_mul(a: Any, b: Any) -> Any:
    import tensorflow as tf

    @tf.custom_gradient
    def mul(a: Any, b: Any) -> Any:
        def grad(g: Any) -> Any:
            ga, gb = g * b, g * a
            ra, _ = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(a), s1=tf.shape(b))
            _, rb = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(a), s1=tf.shape(b))
            ga = tf.reshape(tf.reduce_sum(ga, ra), tf.shape(a))
            gb = tf.reshape(tf.reduce_sum(gb, rb), tf.shape(b))
            wrong = 1.01 if a.shape != b.shape and b.shape.num_elements() < a.shape.num_elements() else 1.0
            return ga, gb * wrong

        return a * b, grad

    return mul(a, b)


_CACHE: dict[str, Any] = {}


def _fn(name: str) -> Any:
    if not _CACHE:
        _CACHE.update(_functions())
    return _CACHE[name]


def leaky_relu(x: Any, slope: float) -> Any:
    return _fn("leaky_relu")(x, slope)


def sin(x: Any) -> Any:
    return _fn("sin")(x)


def atan(x: Any) -> Any:
    return _fn("atan")(x)


def cos(x: Any) -> Any:
    return _fn("cos")(x)


def pytest_configure(config: Any) -> None:
    for op, (framework, template, _, _) in MUTANTS.items():
        key = "torch" if framework == "torch" else "tf"
        OPS[op] = replace(OPS[op], **{key: template})
