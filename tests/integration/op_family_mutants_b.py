"""Wrong twins for the op families of issue 12 part B (pooling, convolution, losses,
attention, normalisation), as a pytest plugin, like op_mutants.py.

Loaded with ``-p op_family_mutants_b`` (this folder on PYTHONPATH), it swaps one framework
call in an op's template for a function here whose forward value is right and whose gradient
is wrong under one parameter value only. test_op_families_b.py runs the ci profile with them
and asserts that each is caught by its op's test, with the message, and that the same op in
the other framework still holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pytest_dlconform.programs import OPS

_M = "__import__('op_family_mutants_b')."

#: op -> (framework, call swapped, replacement, what is wrong, the test id that must catch it)
MUTANTS: dict[str, tuple[str, str, str, str, str]] = {
    "max_pool2d": ("torch", "F.max_pool2d(", _M + "max_pool2d(",
                   "gradient routed to the element before the maximum when dilation > 1",
                   "test_torch_op_reverse_mode_vs_finite_differences[cpu-max_pool2d]"),
    "conv_transpose2d": ("torch", "F.conv_transpose2d(", _M + "conv_transpose2d(",
                         "input gradient of the last group 1% too large when groups > 1",
                         "test_torch_op_reverse_mode_vs_finite_differences[cpu-conv_transpose2d]"),
    "cross_entropy": ("torch", "F.cross_entropy(", _M + "cross_entropy(",
                      "backward ignores label_smoothing (the gradient of the unsmoothed loss)",
                      "test_torch_op_reverse_mode_vs_finite_differences[cpu-cross_entropy]"),
    "sdpa": ("tensorflow", "__import__('keras').ops.dot_product_attention(", _M + "tf_sdpa(",
             "backward ignores the boolean mask (tf.custom_gradient)",
             "test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-sdpa]"),
    "group_norm": ("torch", "F.group_norm(", _M + "group_norm(",
                   "backward normalises over all channels (num_groups=1) when num_groups > 1",
                   "test_torch_op_reverse_mode_vs_finite_differences[cpu-group_norm]"),
}

#: The same ops in the other framework, left alone: they must still hold.
UNAFFECTED: tuple[str, ...] = (
    "test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-max_pool2d]",
    "test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-cross_entropy]",
    "test_torch_op_reverse_mode_vs_finite_differences[cpu-sdpa]",
)


def _with_grad(forward: Callable[..., Any], backward_of: Callable[..., Any]) -> Callable[..., Any]:
    """torch: y = forward(x) with the input gradient of backward_of(x) (same value, another graph)."""
    import torch

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return forward(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                xx = x.detach().requires_grad_(True)
                (gx,) = torch.autograd.grad(backward_of(xx), xx, g)
            return gx

    return Fn.apply


def max_pool2d(x: Any, **kw: Any) -> Any:
    import torch
    import torch.nn.functional as F

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, v: Any) -> Any:
            y, idx = F.max_pool2d(v, return_indices=True, **kw)
            ctx.save_for_backward(idx)
            ctx.shape = v.shape
            return y

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (idx,) = ctx.saved_tensors
            if kw["dilation"] > 1:
                idx = (idx - 1).clamp(min=0)  # the wrong element: one before the maximum
            n, c, h, w = ctx.shape
            out = torch.zeros((n, c, h * w), dtype=g.dtype, device=g.device)
            out.scatter_add_(2, idx.reshape(n, c, -1), g.reshape(n, c, -1))
            return out.reshape(ctx.shape)

    return Fn.apply(x)


def conv_transpose2d(x: Any, w: Any, **kw: Any) -> Any:
    import torch.nn.functional as F

    def wrong(v: Any) -> Any:
        if kw["groups"] == 1:
            return F.conv_transpose2d(v, w, **kw)
        c = v.shape[1] // kw["groups"]
        scale = v.new_ones(v.shape[1])
        scale[-c:] = 1.01  # the last group's input gradient 1% too large
        return F.conv_transpose2d(v * scale[None, :, None, None], w, **kw)

    return _with_grad(lambda v: F.conv_transpose2d(v, w, **kw), wrong)(x)


def cross_entropy(x: Any, target: Any, **kw: Any) -> Any:
    import torch.nn.functional as F

    return _with_grad(lambda v: F.cross_entropy(v, target, **kw),
                      lambda v: F.cross_entropy(v, target, **{**kw, "label_smoothing": 0.0}))(x)


def group_norm(x: Any, num_groups: int, eps: float) -> Any:
    import torch.nn.functional as F

    return _with_grad(lambda v: F.group_norm(v, num_groups, eps=eps), lambda v: F.group_norm(v, 1, eps=eps))(x)


def tf_sdpa(q: Any, k: Any, v: Any, **kw: Any) -> Any:
    import keras
    import tensorflow as tf

    @tf.custom_gradient
    def attend(q: Any, k: Any, v: Any) -> Any:
        def grad(g: Any) -> Sequence[Any]:
            with tf.GradientTape() as tape:
                tape.watch([q, k, v])
                y = keras.ops.dot_product_attention(q, k, v, **{**kw, "mask": None})
            return tape.gradient(y, [q, k, v], output_gradients=g)

        return keras.ops.dot_product_attention(q, k, v, **kw), grad

    return attend(q, k, v)


def _swapped(template: Any, old: str, new: str) -> Callable[[Any, Any], str]:
    def render(p: Any, shapes: Any) -> str:
        src = template(p, shapes) if callable(template) else template
        if old not in src:
            raise ValueError(f"the mutant's call {old!r} is not in the template {src!r}")
        return src.replace(old, new, 1)

    return render


def pytest_configure(config: Any) -> None:
    for op, (framework, old, new, _, _) in MUTANTS.items():
        key = "torch" if framework == "torch" else "tf"
        OPS[op] = replace(OPS[op], **{key: _swapped(getattr(OPS[op], key), old, new)})
