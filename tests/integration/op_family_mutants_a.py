"""Wrong twins for the op families of issue 12 part A, as a pytest plugin.

Loaded with ``-p op_family_mutants_a`` (this folder on PYTHONPATH), it gives one op of each
family a gradient that is wrong in one place, with a right forward value:

* indexing: F.embedding whose backward overwrites instead of adding the cotangents of a
  repeated id (torch), and a tensor_scatter_nd_add whose gradient drops every repeat of an
  index after the first (TensorFlow, tf.custom_gradient);
* ordering: tf.sort whose gradient is 1% too large in descending order only (one parameter
  value); torch.amax whose backward sends a tie's cotangent to one entry only (what
  max(dim) does, not amax); torch.cumprod whose backward divides by the input (TensorFlow's
  div_no_nan formula: 0 at an exact zero);
* decompositions: torch.linalg.eigvalsh whose backward pairs eigenvalue i with the
  eigenvector of eigenvalue n-1-i.

test_op_families_a.py runs the ci profile with them and asserts which test catches each,
with its message, and that the per-op tests of the amax and cumprod twins still hold (their
per-op inputs have no ties and no zeros: only the documented-convention tests see them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_dlconform.programs import OPS

_M = "__import__('op_family_mutants_a')"

#: name -> (what is wrong, the test ids that must catch it, the message they must show)
MUTANTS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "embedding": ("torch: the gradient of a repeated id's row keeps one position's cotangent, not their sum",
                  ("autodiff/test_ops.py::test_torch_op_reverse_mode_vs_finite_differences[cpu-embedding]",),
                  "should be"),
    "scatter_add": ("TensorFlow: the gradient of the scattered values is 0 for every repeat of an index",
                    ("autodiff/test_ops.py::test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-scatter_add]",),
                    "should be"),
    "sort_sep": ("TensorFlow: tf.sort's gradient 1% too large with direction='DESCENDING' only",
                 ("autodiff/test_ops.py::test_tensorflow_op_reverse_mode_vs_finite_differences[cpu-sort_sep]",),
                 "should be"),
    "amax": ("torch.amax sends a tie's whole cotangent to its first entry",
             ("autodiff/test_documented_gradients.py::test_max_and_min_split_the_gradient_evenly_between_ties"
              "[torch-cpu-max-ties2]",
              "autodiff/test_documented_gradients.py::test_max_and_min_split_the_gradient_evenly_between_ties"
              "[torch-cpu-max-ties3]"),
             "torch amax gradient with"),
    "cumprod": ("torch.cumprod's backward divides by the input: 0 at an exact zero",
                ("autodiff/test_documented_gradients.py::test_cumprod_gradient_at_exact_zeros[torch-cpu-False-False]",),
                "at the exact zeros of the input"),
    "eigh": ("torch: eigvalsh's backward pairs eigenvalue i with eigenvector n-1-i",
             ("autodiff/test_ops.py::test_torch_op_reverse_mode_vs_finite_differences[cpu-eigh]",), "should be"),
}
#: Tests of the same ops that must still hold: the twins are wrong in one place only.
UNAFFECTED: tuple[str, ...] = (
    "autodiff/test_ops.py::test_torch_op_reverse_mode_vs_finite_differences[cpu-amax_sep]",
    "autodiff/test_ops.py::test_torch_op_reverse_mode_vs_finite_differences[cpu-cumprod]",
    "autodiff/test_documented_gradients.py::test_max_and_min_split_the_gradient_evenly_between_ties"
    "[torch-cpu-max-ties1]",
    "autodiff/test_ops.py::test_tensorflow_op_forward[cpu-sort_sep]",
)

_CACHE: dict[str, Any] = {}


def _torch_functions() -> dict[str, Any]:
    import torch

    amax, cumprod, eigvalsh = torch.amax, torch.cumprod, torch.linalg.eigvalsh

    class Embedding(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, ids: Any, table: Any) -> Any:
            ctx.save_for_backward(ids)
            ctx.rows = table.shape[0]
            return table[ids]

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (ids,) = ctx.saved_tensors
            grad = torch.zeros((ctx.rows, g.shape[-1]), dtype=g.dtype, device=g.device)
            grad[ids.reshape(-1)] = g.reshape(-1, g.shape[-1])  # assignment: a repeat overwrites
            return None, grad

    class AmaxOneTie(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, dim: int) -> Any:
            ctx.save_for_backward(x)
            ctx.dim = dim
            return amax(x, dim=dim)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            first = torch.argmax(x, dim=ctx.dim, keepdim=True)
            return torch.zeros_like(x).scatter(ctx.dim, first, g.unsqueeze(ctx.dim)), None

    class CumprodDividing(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, dim: int) -> Any:
            y = cumprod(x, dim=dim)
            ctx.save_for_backward(x, y)
            ctx.dim = dim
            return y

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            x, y = ctx.saved_tensors
            tail = torch.flip(torch.cumsum(torch.flip(y * g, (ctx.dim,)), ctx.dim), (ctx.dim,))
            return torch.nan_to_num(tail / x, nan=0.0, posinf=0.0, neginf=0.0), None

    class EigvalshSwapped(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, uplo: str) -> Any:
            w, v = torch.linalg.eigh(a, UPLO=uplo)
            ctx.save_for_backward(v)
            return w

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (v,) = ctx.saved_tensors
            v = torch.flip(v, (-1,))
            return (v * g.unsqueeze(-2)) @ v.mT, None

    def amax_mutant(x: Any, dim: Any = (), keepdim: bool = False) -> Any:
        if isinstance(dim, int) and not keepdim and x.requires_grad:
            return AmaxOneTie.apply(x, dim)
        return amax(x, dim=dim, keepdim=keepdim)

    def cumprod_mutant(x: Any, dim: int, **kw: Any) -> Any:
        return CumprodDividing.apply(x, dim) if not kw else cumprod(x, dim, **kw)

    _ = eigvalsh
    return {"embedding": Embedding.apply, "amax": amax_mutant, "cumprod": cumprod_mutant,
            "eigvalsh": lambda a, UPLO="L": EigvalshSwapped.apply(a, UPLO)}


def _fn(name: str) -> Any:
    if not _CACHE:
        _CACHE.update(_torch_functions())
    return _CACHE[name]


def embedding(ids: Any, table: Any) -> Any:
    return _fn("embedding")(ids, table)


def eigvalsh(a: Any, UPLO: str = "L") -> Any:
    return _fn("eigvalsh")(a, UPLO)


def tf_scatter_add(tensor: Any, indices: Any, updates: Any) -> Any:
    import numpy as np
    import tensorflow as tf

    idx = np.asarray(indices.numpy())
    first = np.ones(len(idx))
    seen: set[tuple[int, ...]] = set()
    for k, coord in enumerate(map(tuple, idx)):
        first[k] = 0.0 if coord in seen else 1.0
        seen.add(coord)

    @tf.custom_gradient
    def scatter(t: Any, u: Any) -> Any:
        def grad(g: Any) -> Any:
            return g, tf.gather_nd(g, indices) * tf.constant(first, dtype=g.dtype)

        return tf.tensor_scatter_nd_add(t, indices, u), grad

    return scatter(tensor, updates)


def tf_sort(values: Any, axis: int = -1, direction: str = "ASCENDING") -> Any:
    import tensorflow as tf

    scale = 1.01 if direction == "DESCENDING" else 1.0

    @tf.custom_gradient
    def sort(v: Any) -> Any:
        y = tf.sort(v, axis=axis, direction=direction)

        def grad(g: Any) -> Any:
            with tf.GradientTape() as tape:
                tape.watch(v)
                again = tf.sort(v, axis=axis, direction=direction)
            return tape.gradient(again, v, output_gradients=g) * scale

        return y, grad

    return sort(values)


def pytest_configure(config: Any) -> None:
    from pytest_dlconform.programs.ops.decompositions import _eigh_torch
    from pytest_dlconform.programs.ops.ordering import _sort_tf

    emb = OPS["embedding"].torch
    assert isinstance(emb, str) and emb.startswith("F.embedding(")
    OPS["embedding"] = replace(OPS["embedding"], torch=_M + ".embedding(" + emb[len("F.embedding("):])
    OPS["scatter_add"] = replace(OPS["scatter_add"], tf=_M + ".tf_scatter_add({a}, tf.constant({nd_index}), "
                                                      "tf.reshape({b}, [-1]))")
    OPS["sort_sep"] = replace(OPS["sort_sep"], tf=lambda p, s: _sort_tf(p, s).replace("tf.sort(", _M + ".tf_sort("))
    OPS["eigh"] = replace(OPS["eigh"], torch=lambda p, s: _eigh_torch(p, s).replace("torch.linalg.eigvalsh(",
                                                                                    _M + ".eigvalsh("))
    import torch

    torch.amax = _fn("amax")
    torch.cumprod = _fn("cumprod")
