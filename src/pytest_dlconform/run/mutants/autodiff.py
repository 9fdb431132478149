"""Mutants of automatic differentiation: wrong gradient formulas (TensorFlow's gradient
registry, torch ops replaced by autograd Functions with a wrong backward), GradientTape and
torch.autograd.grad options that stop working (claims autodiff.*)."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import default, wrap

PROGRAMS = ("autodiff.gradient.finite-differences", "autodiff.cross-framework", "autodiff.gradient.forward-reverse")


def _tf_gradient(op: str, make: Any) -> None:
    """Replace TensorFlow's registered gradient of ``op`` (used by the tape and tf.gradients alike)."""
    from tensorflow.python.framework import ops

    entry = ops._gradient_registry._registry[op]
    entry["type"] = make(entry["type"])


@mutant("tf-tanh-gradient-wrong-sign", areas="autodiff", claims=PROGRAMS, target="tensorflow", select="tf or tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/3767",
        bug="The registered Tanh gradient returns -(1 - y^2) * grad: a wrong registered derivative, the class of "
            "bug of issue 3767 (an incorrect second derivative of tf.nn.sigmoid).")
def _tf_tanh_sign() -> None:
    _tf_gradient("Tanh", lambda orig: lambda op, grad: -orig(op, grad))


@mutant("tf-sigmoid-gradient-missing-factor", areas="autodiff", claims=PROGRAMS, target="tensorflow", select="tf or tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/3767",
        bug="The registered Sigmoid gradient drops its (1 - y) factor: grad * y (issue 3767: sigmoid's "
            "registered derivatives giving an incorrect Hessian).")
def _tf_sigmoid_factor() -> None:
    def make(orig: Any) -> Any:
        def grad_fn(op: Any, grad: Any) -> Any:
            return grad * op.outputs[0]
        return grad_fn
    _tf_gradient("Sigmoid", make)


@mutant("tf-sin-gradient-uses-sin", areas="autodiff", claims=PROGRAMS, target="tensorflow", select="tf or tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/3767",
        bug="The registered Sin gradient multiplies by sin(x) instead of cos(x) (a wrong registered derivative, "
            "as in issue 3767).")
def _tf_sin() -> None:
    import tensorflow as tf

    _tf_gradient("Sin", lambda orig: lambda op, grad: grad * tf.math.sin(op.inputs[0]))


def _torch_unary(name: str, forward: Any, backward: Any) -> None:
    """Replace ``torch.<name>`` by an autograd Function with the given (wrong) backward."""
    import torch

    original = getattr(torch, name)

    class Wrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = original(x)
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            x, y = ctx.saved_tensors
            return backward(g, x, y)

    def call(x: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not isinstance(x, torch.Tensor) or not x.requires_grad:
            return original(x, *args, **kwargs)
        return Wrong.apply(x)
    setattr(torch, name, call)


@mutant("torch-sigmoid-backward-missing-factor", areas="autodiff", claims=PROGRAMS, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/198017",
        bug="torch.sigmoid's backward drops its (1 - y) factor (a wrong derivative formula; issue 198017 tracks "
            "ops whose derivatives are silently wrong, issue 54591 problems in derivatives.yaml).")
def _torch_sigmoid() -> None:
    _torch_unary("sigmoid", None, lambda g, x, y: g * y)


@mutant("torch-atan-backward-missing-square", areas="autodiff", claims=PROGRAMS, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/198017",
        bug="torch.atan's backward uses 1 / (1 + x) instead of 1 / (1 + x^2).")
def _torch_atan() -> None:
    _torch_unary("atan", None, lambda g, x, y: g / (1 + x.abs()))


@mutant("torch-grad-create-graph-ignored", areas=("autodiff", "modules"),
        claims=("autodiff.torch.double-backward", "autodiff.tape.nested", "modules.wgan-gp"), target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/issues/18619",
        bug="torch.autograd.grad ignores create_graph=True, so a gradient penalty cannot be differentiated "
            "again (issue 18619: repeated second derivatives failing).")
def _torch_create_graph() -> None:
    import torch

    wrap(torch.autograd, "grad", lambda orig: default(orig, "create_graph", False))


@mutant("torch-grad-allow-unused-gives-zeros", areas="autodiff", claims="autodiff.tape.unconnected",
        target="torch", select="torch", cite="https://github.com/pytorch/pytorch/issues/18619",
        bug="torch.autograd.grad(allow_unused=True) returns zeros instead of None for unused inputs "
            "(materialize_grads forced on).")
def _torch_allow_unused_zeros() -> None:
    import torch

    def make(orig: Any) -> Any:
        def grad(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("allow_unused"):
                kwargs["materialize_grads"] = True
            return orig(*args, **kwargs)
        return grad
    wrap(torch.autograd, "grad", make)


@mutant("tf-tape-persistent-ignored", areas="autodiff", claims="autodiff.tape.persistent", target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/46487",
        bug="GradientTape(persistent=True) behaves as a plain tape and refuses a second gradient call "
            "(the RuntimeError of issue 46487 raised where the docs promise repeated calls).")
def _tape_persistent_ignored() -> None:
    import tensorflow as tf

    wrap(tf.GradientTape, "__init__", lambda orig: default(orig, "persistent", False))


@mutant("tf-tape-watch-noop", areas="autodiff", claims=("autodiff.tape.watch", "autodiff.tape.*"),
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/31519",
        bug="GradientTape.watch does nothing, so gradients with respect to watched constants are None "
            "(issue 31519: a gradient that should exist comes back None).")
def _tape_watch_noop() -> None:
    import tensorflow as tf

    tf.GradientTape.watch = lambda self, tensor: None


@mutant("tf-unconnected-gradients-zero-ignored", areas="autodiff", claims="autodiff.tape.unconnected",
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/31519",
        bug="GradientTape.gradient ignores unconnected_gradients=ZERO and returns None for unconnected sources.")
def _unconnected_zero_ignored() -> None:
    import tensorflow as tf

    wrap(tf.GradientTape, "gradient", lambda orig: default(orig, "unconnected_gradients", tf.UnconnectedGradients.NONE))


@mutant("tf-output-gradients-ignored", areas="autodiff", claims="autodiff.tape.output-gradients",
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/31519",
        bug="GradientTape.gradient ignores output_gradients, so it returns the gradient of the sum instead "
            "of the vector-Jacobian product.")
def _output_gradients_ignored() -> None:
    import tensorflow as tf

    wrap(tf.GradientTape, "gradient", lambda orig: default(orig, "output_gradients", None))


@mutant("tf-stop-recording-noop", areas="autodiff", claims="autodiff.tape.records-forward", target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/41510",
        bug="GradientTape.stop_recording does not pause the tape, so values computed inside it get gradients "
            "(issue 41510: tape recording state surprises).")
def _stop_recording_noop() -> None:
    import contextlib

    import tensorflow as tf

    tf.GradientTape.stop_recording = lambda self: contextlib.nullcontext()


@mutant("tf-stop-gradient-is-identity", areas="autodiff", claims=("autodiff.tape.*", "autodiff.graph.implicit"),
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/41510",
        bug="tf.stop_gradient passes gradients through (identity), so values meant as constants get gradients.")
def _stop_gradient_identity() -> None:
    import tensorflow as tf

    tf.stop_gradient = lambda input, name=None: tf.identity(input, name=name)


@mutant("torch-jvp-drops-later-tangents", areas="autodiff", claims="autodiff.gradient.forward-reverse",
        target="torch", select="torch", cite="https://github.com/pytorch/pytorch/issues/198017",
        bug="torch.func.jvp uses only the first input's tangent (the others read as zero), so forward-mode "
            "derivatives of multi-input programs disagree with reverse mode.")
def _jvp_first_tangent() -> None:
    import torch

    def make(orig: Any) -> Any:
        def jvp(func: Any, primals: Any, tangents: Any, *args: Any, **kwargs: Any) -> Any:
            tangents = tuple(t if i == 0 else torch.zeros_like(t) for i, t in enumerate(tangents))
            return orig(func, primals, tangents, *args, **kwargs)
        return jvp
    wrap(torch.func, "jvp", make)


@mutant("tf-forward-accumulator-scaled", areas="autodiff", claims="autodiff.gradient.forward-reverse",
        target="tensorflow", select="tf or tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/60736",
        bug="tf.autodiff.ForwardAccumulator.jvp returns tangents scaled by 1 + 2^-8 (a wrong forward-mode "
            "result; issue 60736: incorrect JVPs in forward mode).")
def _tf_jvp_scaled() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def jvp(self: Any, primals: Any, unconnected_gradients: Any = tf.UnconnectedGradients.NONE) -> Any:
            out = orig(self, primals, unconnected_gradients=unconnected_gradients)
            return tf.nest.map_structure(lambda t: None if t is None else t * (1 + 2**-8), out)
        return jvp
    wrap(tf.autodiff.ForwardAccumulator, "jvp", make)


@mutant("torch-detach-keeps-graph", areas="autodiff", claims="autodiff.tape.stop-gradient", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/issues/685",
        bug="Tensor.detach() keeps the reference to the graph that created its input, so gradients flow "
            "through the detached value (issue 685: '.detach() doesn't remove the reference to the creating "
            "graph, even though it should'; fixed in PR 752).")
def _torch_detach_keeps_graph() -> None:
    import torch

    def detach(self: Any) -> Any:
        return self.view_as(self)  # the same values and storage, still in the graph

    torch.Tensor.detach = detach
