"""Mutants of execution: tf.function tracing and retracing, AutoGraph, eager mode, torch.compile
(claims execution.*)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from . import mutant
from ._patch import wrap


def _tf_function_defaults(**forced: Any) -> None:
    """tf.function with some options forced, used as ``@tf.function`` or ``tf.function(...)``."""
    import tensorflow as tf

    original = tf.function

    @functools.wraps(original)
    def function(func: Any = None, **kwargs: Any) -> Any:
        for key, value in forced.items():
            kwargs[key] = value(kwargs.get(key)) if callable(value) else value
        return original(func, **kwargs) if func is not None else original(**kwargs)
    tf.function = function


@mutant("tf-function-relaxes-shapes-by-default", areas="execution",
        claims=("execution.function.retrace-on-new-shape", "execution.function.trace-once-per-signature",
                "execution.function.python-args"), target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/34025",
        bug="tf.function generalises shapes (reduce_retracing=True) unless asked not to, so a new shape gets "
            "a relaxed trace instead of one with its exact spec (issue 34025: when tf.function retraces).")
def _relax_by_default() -> None:
    _tf_function_defaults(reduce_retracing=lambda v: True if v is None or v is False else v)


@mutant("tf-function-reduce-retracing-ignored", areas="execution", claims="execution.function.reduce-retracing",
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/46012",
        bug="tf.function(reduce_retracing=True) still traces once per shape (issue 46012: retracing warnings "
            "where relaxed shapes should have avoided them).")
def _reduce_retracing_ignored() -> None:
    _tf_function_defaults(reduce_retracing=False, experimental_relax_shapes=None)


@mutant("tf-function-input-signature-ignored", areas="execution",
        claims="execution.function.signature-prevents-retrace", target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/28635",
        bug="tf.function ignores input_signature: it retraces per shape and accepts other dtypes (issue 28635: "
            "a ConcreteFunction not raising on inputs incompatible with its TensorSpec).")
def _input_signature_ignored() -> None:
    _tf_function_defaults(input_signature=None)


@mutant("tf-function-retraces-every-call", areas="execution",
        claims=("execution.function.trace-once-per-signature", "execution.function.side-effects-at-trace",
                "execution.function.train-step"), target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/46012",
        bug="tf.function traces again at every call even for a signature it has seen (issue 46012: "
            "'triggered tf.function retracing' on every call).")
def _retrace_every_call() -> None:
    import tensorflow as tf

    original = tf.function

    def function(func: Any = None, **kwargs: Any) -> Any:
        if func is None:
            return lambda f: function(f, **kwargs)

        @functools.wraps(func)
        def call(*args: Any, **kw: Any) -> Any:
            return original(func, **kwargs)(*args, **kw)
        return call
    tf.function = function


@mutant("tf-function-autograph-off", areas="execution",
        claims=("execution.autograph.control-flow", "execution.graph.session-run"), target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/41347",
        bug="tf.function runs with autograph=False by default, so Python control flow on tensors is not "
            "converted to graph ops.")
def _autograph_off() -> None:
    _tf_function_defaults(autograph=False)


@mutant("tf-functions-run-eagerly", areas="execution",
        claims=("execution.function.tracing-is-not-eager", "execution.function.side-effects-at-trace",
                "execution.function.trace-once-per-signature", "execution.autograph.off"),
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/54398",
        bug="tf.config.run_functions_eagerly is on from the start (a debugging switch left set), so tf.function "
            "bodies run eagerly at every call and nothing is traced (the switch TF's error messages tell users "
            "to turn on, issue 54398).")
def _run_eagerly() -> None:
    import tensorflow as tf

    tf.config.run_functions_eagerly(True)


@mutant("torch-compile-falls-back-to-eager", areas="execution", claims="execution.compile.*", target="torch",
        cite="https://github.com/pytorch/pytorch/pull/105307",
        bug="torch.compile returns the function uncompiled, silently running eagerly (PR 105307: falling back "
            "to eager by default when compilation fails).")
def _compile_eager() -> None:
    import torch

    def make(orig: Any) -> Any:
        def compile(model: Any = None, **kwargs: Any) -> Any:
            if model is None:
                return lambda m: m
            return model
        return compile
    wrap(torch, "compile", make)


@mutant("torch-dynamo-no-automatic-dynamic", areas="execution", claims="execution.compile.recompile-on-shape",
        target="torch", cite="https://github.com/pytorch/pytorch/issues/140011",
        bug="torch.compile(dynamic=None) never marks a changed dimension dynamic and recompiles for every new "
            "size (automatic dynamic shapes off; issue 140011 shows the specialisation rules at work).")
def _no_automatic_dynamic() -> None:
    import torch._dynamo

    torch._dynamo.config.automatic_dynamic_shapes = False


@mutant("torch-script-freezes-branch", areas="execution", claims="execution.torchscript.equivalence",
        target="torch", cite="https://github.com/pytorch/pytorch/issues/91470",
        bug="torch.jit.script behaves like torch.jit.trace: the control flow of the first call is frozen.")
def _script_is_trace() -> None:
    import torch

    def make(orig: Any) -> Any:
        def script(obj: Any, *args: Any, **kwargs: Any) -> Any:
            scripted = orig(obj, *args, **kwargs)
            if not inspect.isfunction(obj):
                return scripted
            cache: dict[str, Any] = {}

            def first_path(*inputs: Any) -> Any:
                if "traced" not in cache:
                    cache["traced"] = torch.jit.trace(obj, inputs, check_trace=False)
                return cache["traced"](*inputs)
            scripted_call = first_path
            scripted_call.graph = getattr(scripted, "graph", None)  # type: ignore[attr-defined]
            scripted_call.code = getattr(scripted, "code", "")  # type: ignore[attr-defined]
            return scripted_call
        return script
    wrap(torch.jit, "script", make)
