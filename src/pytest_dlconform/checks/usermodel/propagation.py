"""The first-order worst-case rounding bound of one float32 evaluation of a user's model, at
chosen output entries: what :func:`tolerances.forward_tolerance` leaves out.

``forward_tolerance`` counts a model's roundings at the scale of its largest output. A rounding
made inside the network is carried to the output by every later layer, and a later layer of
fan-in n can multiply it by up to the sum of its n absolute weights, so that count can be
exceeded by a faithful float32 evaluation (the seed's GAN generator: the count gives 1.9e-5 of
the output's scale, the bound below 1.9e-4, and a Sapphire Rapids CPU's compiled-vs-eager
difference, 3.7e-5, lay between them).

For one output entry y_o, to first order in u (backward error analysis of each operation):

- a product of fan-in n (a parameter of two or more dimensions: a linear or convolution weight;
  not an embedding table, whose lookup is exact) computed in floating point is the exact
  product with each weight entry w perturbed by at most gamma_n |w|, gamma_n = n u / (1 - n u);
  its effect on y_o is at most gamma_n * sum |dy_o/dw| |w|;
- each leaf layer's output v (its bias addition, its activation, its own operation) is rounded
  with at most numerics.OP_ROUNDING u |v|: at most OP_ROUNDING u * sum |dy_o/dv| |v|;

and the bound at y_o is the sum over all of them. The gradients are those of the float32 model
itself (they need only their leading digits). A weight used more than once (convolution,
recurrence, positions) gets the sum of its uses' gradients, whose absolute value can be smaller
than the sum of their absolute values, and products of two activations (attention) carry only
their leaf's output rounding: the bound is then lower than the worst case, never higher, so a
check built on it can only be stricter. Keras exposes no leaf outputs of a subclassed model, so
its bound has the products' term only.

Importing this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..numerics import OP_ROUNDING, UNIT_ROUNDOFF, Tolerance, gamma


def chosen_entries(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray], points: int) -> dict[str, list[int]]:
    """Per output, the flat indices of the ``points`` largest differences and the ``points``
    largest expected magnitudes: where a normwise check's worst error and its scale sit."""
    out: dict[str, list[int]] = {}
    for key, e in expected.items():
        e = np.asarray(e, np.float64).ravel()
        if not e.size:
            continue
        a = np.asarray(actual.get(key, e), np.float64).ravel()
        diff = np.abs(np.nan_to_num(a - e, nan=np.inf))
        take = min(points, e.size)
        picks = np.argpartition(-diff, take - 1)[:take].tolist() + np.argpartition(-np.abs(e), take - 1)[:take].tolist()
        out[key] = sorted({int(i) for i in picks})
    return out


def torch_entry_bounds(model: Any, args: Sequence[Any], entries: dict[str, list[int]],
                       dtype: str = "float32") -> dict[str, dict[int, float]]:
    """The first-order bound (module docstring) at each chosen entry of each output of a torch
    model called on ``args`` in inference mode."""
    import torch

    from .adapters import TorchOps

    u = UNIT_ROUNDOFF[dtype]
    fw = TorchOps()
    captured: list[Any] = []

    def keep(_module: Any, _inputs: Any, out: Any) -> Any:
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            # the value is kept apart from what flows on, so an in-place layer after this one
            # (ReLU(inplace=True)) changes the copy, not the value whose gradient is read
            v = out.detach().clone().requires_grad_(True) if not out.requires_grad else out.clone()
            captured.append(v)
            return v.clone()
        return out

    leaves = [m for m in model.modules() if not list(m.children())]
    hooks = [m.register_forward_hook(keep) for m in leaves]
    try:
        with torch.enable_grad():
            outs = fw.call(model, args, training=False)
    finally:
        for h in hooks:
            h.remove()
    lookups = {id(p) for m in model.modules() if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))
               for p in m.parameters(recurse=False)}  # a table lookup is exact: no product
    params = [(p, gamma(int(np.prod(p.shape[1:])), u)) for p in model.parameters()
              if p.requires_grad and p.ndim >= 2 and id(p) not in lookups]
    leaf_values = [v for v in captured if v.requires_grad]
    wrt = [p for p, _ in params] + leaf_values
    bounds: dict[str, dict[int, float]] = {}
    for key, idx in entries.items():
        y = outs[key].reshape(-1)
        bounds[key] = {}
        for i in idx:
            grads = torch.autograd.grad(y[i], wrt, retain_graph=True, allow_unused=True)
            total = 0.0
            for (p, g_n), g in zip(params, grads[:len(params)]):
                if g is not None:
                    total += g_n * float((g.abs() * p.detach().abs()).sum())
            for v, g in zip(leaf_values, grads[len(params):]):
                if g is not None:
                    total += OP_ROUNDING * u * float((g.abs() * v.detach().abs()).sum())
            bounds[key][i] = total
    return bounds


def keras_entry_bounds(model: Any, args: Sequence[Any], entries: dict[str, list[int]],
                       dtype: str = "float32") -> dict[str, dict[int, float]]:
    """The products' term of the bound (module docstring) at each chosen entry, for a Keras model."""
    import keras
    import tensorflow as tf

    from .adapters import KerasOps
    from .tolerances import _keras_leaves

    u = UNIT_ROUNDOFF[dtype]
    fw = KerasOps()
    lookups = {id(v) for layer in _keras_leaves(model) if isinstance(layer, keras.layers.Embedding)
               for v in layer.weights}  # a table lookup is exact: no product
    weights = [(v, gamma(int(np.prod(v.shape[:-1])), u)) for v in model.trainable_variables
               if len(v.shape) >= 2 and id(v) not in lookups]
    bounds: dict[str, dict[int, float]] = {}
    with tf.GradientTape(persistent=True) as tape:
        outs = fw.call(model, list(args), training=False)
        flat = {k: tf.reshape(outs[k], [-1]) for k in entries}
        picked = {k: [flat[k][i] for i in idx] for k, idx in entries.items()}
    for key, idx in entries.items():
        bounds[key] = {}
        for i, y in zip(idx, picked[key]):
            grads = tape.gradient(y, [v for v, _ in weights], unconnected_gradients=tf.UnconnectedGradients.ZERO)
            bounds[key][i] = sum(g_n * float(tf.reduce_sum(tf.abs(g) * tf.abs(tf.cast(v, g.dtype))))
                                 for (v, g_n), g in zip(weights, grads))
    del tape
    return bounds


def propagated_tolerances(model: Any, inputs: Sequence[np.ndarray], framework: str, actual: dict[str, Any],
                          expected: dict[str, Any], *, device: str = "cpu", points: int = 8) -> tuple[Tolerance, Tolerance]:
    """(outputs, gradients) tolerances of a comparison of two float32 evaluations of a model
    (compiled and eager) whose outputs are ``actual`` and ``expected``.

    Outputs: :func:`forward_tolerance` (forward and backward), or, where larger, twice the
    first-order worst-case bound of one evaluation (``propagation``: the roundings carried to
    the output by the later layers' weights) at the outputs' largest differences and largest
    entries, over the largest expected magnitude. Gradients: ``forward_tolerance``'s backward
    bound times the same carrying factor (the propagated bound over the forward-only count,
    at least 1): the backward pass runs through the same layers' weights, transposed, so a
    rounding inside it is carried by them as in the forward pass."""
    from .adapters import adapter_for
    from .tolerances import forward_tolerance, largest_magnitude

    both = forward_tolerance(model, inputs, framework, "float32", backward=True, device=device)
    forward = forward_tolerance(model, inputs, framework, "float32", device=device)
    entries = chosen_entries(actual, expected, points)
    args = adapter_for(framework).tensors(model, inputs)
    bounds = (torch_entry_bounds if framework == "torch" else keras_entry_bounds)(model, args, entries)
    scale = largest_magnitude(expected)
    top = max((b for per in bounds.values() for b in per.values()), default=0.0)
    carried = 2 * top / scale if scale > 0 else 0.0
    factor = max(1.0, carried / forward.rtol) if forward.rtol > 0 else 1.0
    where = (f"2 x {top:.3g} (first-order worst-case rounding of one evaluation carried through the layers, "
             f"at {sum(len(v) for v in entries.values())} chosen output entries) / {scale:.3g}")
    out = Tolerance(carried, where, dtype="float32") if carried > both.rtol else both
    grad = (Tolerance(both.rtol * factor, f"{both.why} x {factor:.3g} (the rounding carried through the layers: "
                      f"{where} over the forward count {forward.rtol:.3g})", dtype="float32")
            if factor > 1 else both)
    return out, grad
