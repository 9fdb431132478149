"""Mutants of in-place updates under compilation (claims execution.compile.input-mutation and
execution.function.variable-program-order, suites/execution/test_compiled_mutation.py): a
compiled torch function whose input mutation never reaches the caller's tensor, and a
tf.function whose read of a variable does not see an earlier assign."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap


@mutant("torch-compile-input-mutation-dropped", areas="execution", claims="execution.compile.input-mutation",
        target="torch", select="torch_input_mutation and not jit", cite="https://github.com/pytorch/pytorch/issues/195422",
        bug="torch.compile silently drops an in-place mutation of a graph input: the compiled function computes on "
            "its own copy, the caller's tensor is left untouched and a second call reads the stale value (issue "
            "195422: 'torch.compile silently drops an in-place mutation of an input ... the caller's tensor is left "
            "untouched ... No error, no warning'). Modelled by running the compiled function on clones of the "
            "tensor arguments that do not require grad.")
def _torch_compile_input_mutation_dropped() -> None:
    import torch

    def make(orig: Any) -> Any:
        def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
            compiled = orig(model, *args, **kwargs)
            if model is None or isinstance(model, torch.nn.Module) or not callable(compiled):
                return compiled

            def call(*xs: Any, **kw: Any) -> Any:
                xs = tuple(x.clone() if isinstance(x, torch.Tensor) and not x.requires_grad else x for x in xs)
                return compiled(*xs, **kw)

            return call

        return compile

    wrap(torch, "compile", make)


@mutant("tf-function-read-before-assign", areas="execution", claims="execution.function.variable-program-order",
        target="tensorflow", select="tf_stateful_ops", cite="https://github.com/tensorflow/tensorflow/issues/16277",
        bug="Inside a tf.function a read of a resource variable does not observe an earlier write: every read of a "
            "variable in one traced graph returns the value read first, before the function's assign ran (issue "
            "16277: 'Control dependency does not ensure write observed by read'; tf.function's automatic control "
            "dependencies are what orders them).")
def _tf_function_read_before_assign() -> None:
    import tensorflow as tf
    from tensorflow.python.ops import resource_variable_ops as rv

    first_reads: dict[tuple[int, int], tuple[Any, Any, Any]] = {}  # (graph, variable) -> its first read

    def make(orig: Any) -> Any:
        def read(self: Any, *args: Any, **kwargs: Any) -> Any:
            if tf.executing_eagerly():
                return orig(self, *args, **kwargs)
            graph = tf.compat.v1.get_default_graph()
            key = (id(graph), id(self))
            if key not in first_reads:  # the graph and variable are kept alive, so the ids stay theirs
                first_reads[key] = (graph, self, orig(self, *args, **kwargs))
            return first_reads[key][2]

        return read

    wrap(rv.BaseResourceVariable, "_read_variable_op", make)
