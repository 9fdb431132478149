"""The interop claims' oracles: each framework (or Keras backend, or device) against the
float64 reference, then against the other, with tolerances that add; and single
activations against their documented formulas."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

import numpy as np

from ..numerics import assert_close, combined, tolerance
from .architectures import ACTIVATIONS, Case, Result
from .magnitudes import gradient_magnitudes
from .reference import _act, _ratio, reference
from .tolerances import ModelMismatch, _conditioned, compare, tolerances


def check_same_model(tf_result: Result, torch_result: Result, case: Case, dtype: str, *,
                     tf32: tuple[bool, bool] = (False, False), label: str = "") -> None:
    """Each framework against the float64 reference, then TensorFlow against torch.

    The reference checks logits, loss and each framework's documented moving-statistics
    update; the cross check adds every gradient (input and weights)."""
    __tracebackhide__ = True
    ref = reference(case, dtype)
    tf_tol = tolerances(case, dtype, tf32=tf32[0], condition=ref.condition)
    torch_tol = tolerances(case, dtype, tf32=tf32[1], condition=ref.condition)
    compare(tf_result, ref.keras, *tf_tol, what="tensorflow vs float64 reference", label=label, factors=ref.factors)
    compare(torch_result, ref.torch, *torch_tol, what="torch vs float64 reference", label=label, factors=ref.factors)
    shared = {k: v for k, v in torch_result.items() if not k.startswith("state/")}
    both = (combined(tf_tol[0], torch_tol[0]), combined(tf_tol[1], torch_tol[1]))
    compare({k: v for k, v in tf_result.items() if not k.startswith("state/")}, shared, *both,
            what="tensorflow vs torch", label=label, factors=ref.factors, grad_scales=grad_scales(case, dtype))


def _scales_if_gradients(result: Result, case: Case, dtype: str) -> dict[str, float] | None:
    return grad_scales(case, dtype) if any(k.startswith("grad/") for k in result) else None


def grad_scales(case: Case, dtype: str) -> dict[str, float]:
    """Per gradient tensor, the largest sum of absolute terms of an entry (the per-tensor scale)."""
    return {k: float(np.max(v, initial=0.0)) for k, v in gradient_magnitudes(case, dtype).items()}


def check_backends(results: Mapping[str, Result], case: Case, dtype: str, *, tf32: bool = False, label: str = "") -> None:
    """Keras on each backend against the float64 reference, then the backends pairwise."""
    __tracebackhide__ = True
    ref = reference(case, dtype)
    fwd, bwd = tolerances(case, dtype, tf32=tf32, condition=ref.condition)
    names = sorted(results)
    for name in names:
        compare(results[name], ref.keras, fwd, bwd, what=f"keras[{name}] vs float64 reference", label=label, factors=ref.factors)
    for a, b in pairwise(names):
        compare(results[a], results[b], combined(fwd, fwd), combined(bwd, bwd), what=f"keras[{a}] vs keras[{b}]", label=label,
                factors=ref.factors, grad_scales=_scales_if_gradients(results[b], case, dtype))


def check_backend(result: Result, case: Case, dtype: str, *, name: str, dtype_seen: str | None = None,
                  other: tuple[str, Result] | None = None, tf32: bool = False, label: str = "") -> None:
    """One Keras backend's verdict: its result against the float64 reference, then against
    ``other`` (another backend's result, both rounded: tolerances add), then the dtype Keras
    gave its logits (``dtype_seen``), which must be the model's. The reference comes first:
    a result that is wrong in value is reported as such, whatever its dtype."""
    __tracebackhide__ = True
    ref = reference(case, dtype)
    fwd, bwd = tolerances(case, dtype, tf32=tf32, condition=ref.condition)
    compare(result, ref.keras, fwd, bwd, what=f"keras[{name}] vs float64 reference", label=label, factors=ref.factors)
    if other is not None:
        compare(result, other[1], combined(fwd, fwd), combined(bwd, bwd), what=f"keras[{name}] vs keras[{other[0]}]",
                label=label, factors=ref.factors, grad_scales=_scales_if_gradients(other[1], case, dtype))
    if dtype_seen is not None and dtype_seen != dtype:
        raise ModelMismatch(f"{label}keras[{name}]: the logits of a {dtype} model are {dtype_seen} tensors, "
                            f"but layers with dtype={dtype!r} compute in {dtype}")


def check_devices(gpu: Result, cpu: Result, case: Case, dtype: str, *, tf32: bool, label: str) -> None:
    """A GPU run against the CPU run of the same oracle: both rounded, tolerances add."""
    __tracebackhide__ = True
    ref = reference(case, dtype)
    g_fwd, g_bwd = tolerances(case, dtype, tf32=tf32, condition=ref.condition)
    c_fwd, c_bwd = tolerances(case, dtype, condition=ref.condition)
    compare(gpu, cpu, combined(g_fwd, c_fwd), combined(g_bwd, c_bwd), what="gpu vs cpu", label=label, factors=ref.factors,
            grad_scales=grad_scales(case, dtype))


ACTIVATION_FORMULAS = (*ACTIVATIONS, "gelu_tanh")


def activation_reference(name: str, x: np.ndarray) -> np.ndarray:
    """The documented formula in float64; gelu_tanh is GELU's tanh approximation."""
    if name == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return _act(name, x)


def framework_activation(framework: str, module: Any, name: str) -> Callable[[Any], Any]:
    """The activation as a user of each framework calls it: Keras's activations on
    TensorFlow (what ``Dense(activation=...)`` runs), torch.nn.functional on torch."""
    if framework == "tensorflow":
        import keras

        if name == "gelu_tanh":
            return lambda t: keras.activations.gelu(t, approximate=True)
        return keras.activations.get(name)
    F = module.nn.functional
    table = {"linear": lambda t: t, "relu": F.relu, "tanh": module.tanh, "sigmoid": module.sigmoid,
             "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}
    return table[name]


def check_activation(actual: np.ndarray, x: np.ndarray, name: str, dtype: str, *, what: str) -> None:
    """Normwise against the float64 formula on the same (rounded) inputs; the tolerance is
    the dtype's for a few elementwise operations, times the normwise condition
    ``max|x f'(x)| / max|f(x)|`` of the function on these inputs."""
    __tracebackhide__ = True
    xr = np.asarray(x, dtype=dtype).astype(np.float64)
    expected = activation_reference(name, xr)
    slope = np.abs(activation_reference(name, xr * (1 + 1e-6)) - expected) / 1e-6
    tol = _conditioned(tolerance(dtype, ops=4), _ratio(float(slope.max(initial=0.0)), float(np.abs(expected).max(initial=0.0))))
    assert_close(actual, expected, tol, what=what, name=f"{name} ({dtype})")
