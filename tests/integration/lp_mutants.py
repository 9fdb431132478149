"""Wrong twins for the low-precision and compiled-backward suites, as a pytest plugin.

Loaded with ``-p lp_mutants`` (this folder on PYTHONPATH), it replaces some ops' templates
in the op table with implementations whose forward value is right and whose gradient is
wrong in one place only:

* torch ``sin``: a torch.library custom op whose registered autograd formula is right in
  eager mode and 1% too large while it is being compiled (``torch.compiler.is_compiling()``
  is true while AOTAutograd traces the backward), so only a compiled backward is wrong;
* TensorFlow ``cos``: a tf.custom_gradient whose gradient is 1% too large in graph mode
  only (``tf.executing_eagerly()`` is false inside tf.function and under XLA);
* torch ``leaky_relu``: a torch.library custom op whose backward is 1% too large only while
  compiled and only at negative_slope 0.0625 (one parameter class of four);
* TensorFlow ``abs``: a tf.custom_gradient 1% too large in graph mode only and only where
  |x| > 16 (the "large" input regime, and large entries of "mixed");
* TensorFlow ``sigmoid``: a tf.custom_gradient 10% too large in float16 only;
* torch ``atan``: an autograd.Function 25% too large in bfloat16 only;
* torch ``cube``: raises NotImplementedError in float16 (torch.pow documents no dtype
  restriction), which the suite must fail as a refusal, not skip as "not applicable".

test_low_precision_compiled_mutants.py runs the ci profile with them and asserts that each
is caught by its op's test, with the message.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_dlconform.programs import OPS

__all__ = ["MUTANTS", "NOT_APPLICABLE", "OPS", "UNAFFECTED"]

_M = "__import__('lp_mutants')"

#: op -> (framework, template, what is wrong, the test ids that must catch it)
MUTANTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "sin": ("torch", "torch.ops.dlconform_mutants.sin({a})", "backward 1% too large only while compiled",
            ("suites/execution/test_compiled_backward.py::"
             "test_torch_compiled_backward_matches_eager_and_finite_differences[cpu-aot_eager-sin]",)),
    "cos": ("tensorflow", _M + ".tf_cos({a})", "gradient 1% too large in graph mode only (tf.function, XLA)",
            ("suites/execution/test_compiled_backward.py::"
             "test_tf_function_backward_matches_eager_and_finite_differences[cpu-function-cos]",
             "suites/execution/test_compiled_backward.py::"
             "test_tf_function_backward_matches_eager_and_finite_differences[cpu-xla-cos]")),
    "leaky_relu": ("torch", "torch.ops.dlconform_mutants.leaky_relu({a}, {negative_slope})",
                   "backward 1% too large only while compiled, and only at negative_slope=0.0625",
                   # (inductor's id would catch it too; its chunk's cold compile costs ~30 s here)
                   ("suites/execution/test_compiled_backward.py::"
                    "test_torch_compiled_backward_matches_eager_and_finite_differences[cpu-aot_eager-leaky_relu]",)),
    "abs": ("tensorflow", _M + ".tf_abs({a})", "gradient 1% too large in graph mode only, and only where |x| > 16",
            ("suites/execution/test_compiled_backward.py::"
             "test_tf_function_backward_matches_eager_and_finite_differences[cpu-function-abs]",
             "suites/execution/test_compiled_backward.py::"
             "test_tf_function_backward_matches_eager_and_finite_differences[cpu-xla-abs]")),
    "sigmoid": ("tensorflow", _M + ".tf_sigmoid({a})", "gradient 10% too large in float16 only",
                ("suites/autodiff/test_low_precision.py::"
                 "test_low_precision_forward_and_gradient_match_float64[tf-cpu-sigmoid-float16]",)),
    "atan": ("torch", _M + ".atan({a})", "gradient 25% too large in bfloat16 only",
             ("suites/autodiff/test_low_precision.py::"
              "test_low_precision_forward_and_gradient_match_float64[torch-cpu-atan-bfloat16]",)),
    "cube": ("torch", _M + ".cube({a})", "raises in float16, a dtype its documentation accepts",
             ("suites/autodiff/test_low_precision.py::"
              "test_low_precision_forward_and_gradient_match_float64[torch-cpu-cube-float16]",)),
}

#: Ids that must still pass with the mutants loaded (the wrong place is one mode or dtype).
UNAFFECTED: tuple[str, ...] = (
    "suites/execution/test_compiled_backward.py::"
    "test_torch_compiled_backward_matches_eager_and_finite_differences[cpu-torchscript-sin]",
    "suites/execution/test_compiled_backward.py::"
    "test_torch_compiled_backward_matches_eager_and_finite_differences[cpu-torchscript-leaky_relu]",
    "suites/autodiff/test_ops.py::test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-abs]",
    "suites/autodiff/test_low_precision.py::test_low_precision_forward_and_gradient_match_float64[tf-cpu-sigmoid-float32]",
    "suites/autodiff/test_low_precision.py::test_low_precision_forward_and_gradient_match_float64[torch-cpu-atan-float16]",
    "suites/autodiff/test_low_precision.py::test_low_precision_forward_and_gradient_match_float64[torch-cpu-cube-float32]",
)
#: Ids that must be "not applicable": the dtype is one the op's documentation excludes.
NOT_APPLICABLE: tuple[str, ...] = (
    "suites/autodiff/test_low_precision.py::test_low_precision_forward_and_gradient_match_float64[torch-cpu-det_dd-float16]",
)


def _register_torch() -> None:
    import torch

    @torch.library.custom_op("dlconform_mutants::sin", mutates_args=(), schema="(Tensor x) -> Tensor")
    def sin(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x)

    @sin.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    def setup(ctx: Any, inputs: Any, output: Any) -> None:
        ctx.save_for_backward(inputs[0])

    def backward(ctx: Any, g: Any) -> Any:
        (x,) = ctx.saved_tensors
        wrong = 1.01 if torch.compiler.is_compiling() else 1.0
        return g * torch.cos(x) * wrong

    sin.register_autograd(backward, setup_context=setup)

    @torch.library.custom_op("dlconform_mutants::leaky_relu", mutates_args=(), schema="(Tensor x, float s) -> Tensor")
    def leaky_relu(x: torch.Tensor, s: float) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, s)

    @leaky_relu.register_fake
    def _(x: torch.Tensor, s: float) -> torch.Tensor:
        return torch.empty_like(x)

    def setup_lr(ctx: Any, inputs: Any, output: Any) -> None:
        ctx.save_for_backward(inputs[0])
        ctx.slope = inputs[1]

    def backward_lr(ctx: Any, g: Any) -> Any:
        (x,) = ctx.saved_tensors
        wrong = 1.01 if torch.compiler.is_compiling() and ctx.slope == 0.0625 else 1.0
        return g * torch.where(x > 0, 1.0, ctx.slope).to(g.dtype) * wrong, None

    leaky_relu.register_autograd(backward_lr, setup_context=setup_lr)


class _Atan:
    fn: Any = None


def atan(x: Any) -> Any:
    import torch

    if _Atan.fn is None:
        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.save_for_backward(x)
                return torch.atan(x)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (x,) = ctx.saved_tensors
                return g / (1 + x * x) * (1.25 if x.dtype == torch.bfloat16 else 1.0)

        _Atan.fn = Fn.apply
    return _Atan.fn(x)


def cube(x: Any) -> Any:
    import torch

    if x.dtype == torch.float16:
        raise NotImplementedError('"pow_cpu" not implemented for \'Half\' (a wrong twin)')
    return torch.pow(x, 3)


def tf_cos(x: Any) -> Any:
    import tensorflow as tf

    @tf.custom_gradient
    def cos(x: Any) -> Any:
        def grad(g: Any) -> Any:
            return -g * tf.math.sin(x) * (1.0 if tf.executing_eagerly() else 1.01)

        return tf.math.cos(x), grad

    return cos(x)


def tf_abs(x: Any) -> Any:
    import tensorflow as tf

    @tf.custom_gradient
    def abs_(x: Any) -> Any:
        def grad(g: Any) -> Any:
            wrong = 1.0 if tf.executing_eagerly() else tf.where(tf.abs(x) > 16, tf.constant(1.01, x.dtype), tf.ones_like(x))
            return g * tf.math.sign(x) * wrong

        return tf.math.abs(x), grad

    return abs_(x)


def tf_sigmoid(x: Any) -> Any:
    import tensorflow as tf

    @tf.custom_gradient
    def sigmoid(x: Any) -> Any:
        y = tf.math.sigmoid(x)

        def grad(g: Any) -> Any:
            return g * y * (1 - y) * (1.1 if x.dtype == tf.float16 else 1.0)

        return y, grad

    return sigmoid(x)


def pytest_configure(config: Any) -> None:
    _register_torch()
    for op, (framework, template, _, _) in MUTANTS.items():
        key = "torch" if framework == "torch" else "tf"
        OPS[op] = replace(OPS[op], **{key: template})
