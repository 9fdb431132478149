"""Mutants of compiled second order (claims execution.compile.second-order and
execution.function.second-order, suites/execution/test_compiled_second_order.py): a compiled
function whose first derivative is right but whose second derivative is silently lost."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap


@mutant("torch-jit-trace-double-backward-detached", areas="execution", claims="execution.compile.second-order",
        target="torch", select="torch and torchscript", cite="https://github.com/pytorch/pytorch/issues/181581",
        bug="The gradients that torch.autograd.grad(create_graph=True) returns for the output of a compiled "
            "(here: torch.jit.trace'd) function silently carry no graph (requires_grad=False, grad_fn=None), so "
            "a double backward sees a zero second derivative without an error; issue 181581 reports exactly this "
            "for torch.compile ('silently drops higher-order grad graph metadata'), fixed by pytorch/pytorch#181606.")
def _torch_jit_trace_double_backward_detached() -> None:
    import torch

    def make(orig: Any) -> Any:
        def trace(func: Any, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
            traced = orig(func, example_inputs, *args, **kwargs)

            class FirstOrderOnly(torch.autograd.Function):
                @staticmethod
                def forward(ctx: Any, *xs: Any) -> Any:
                    ctx.save_for_backward(*xs)
                    return traced(*xs)

                @staticmethod
                def backward(ctx: Any, *grads: Any) -> Any:
                    xs = [x.detach().requires_grad_(True) for x in ctx.saved_tensors]
                    with torch.enable_grad():
                        outs = traced(*xs)
                        outs = outs if isinstance(outs, tuple) else (outs,)
                        # No create_graph: the first derivative is right, its graph is dropped.
                        return torch.autograd.grad(outs, xs, grads, allow_unused=True, materialize_grads=True)

            def call(*xs: Any) -> Any:
                return FirstOrderOnly.apply(*xs)

            return call

        return trace

    wrap(torch.jit, "trace", make)


@mutant("tf-function-second-gradient-lost", areas="execution", claims="execution.function.second-order",
        target="tensorflow", select="tf_function_hvp",
        cite="https://github.com/tensorflow/tensorflow/issues/31519",
        bug="Inside a tf.function, the outer GradientTape does not record the inner tape's gradient computation, so "
            "the second derivative of nested tapes is None (zero with unconnected_gradients=ZERO) while eager "
            "nested tapes give it (issue 31519: 'second gradient with input is None').")
def _tf_function_second_gradient_lost() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def gradient(self: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self, target, sources, *args, **kwargs)
            if tf.executing_eagerly():
                return out
            return tf.nest.map_structure(lambda g: g if g is None else tf.stop_gradient(tf.convert_to_tensor(g)), out)

        return gradient

    wrap(tf.GradientTape, "gradient", make)
