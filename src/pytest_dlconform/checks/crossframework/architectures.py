"""Architectures: the plain data a cross-framework case is made of.

An :class:`Architecture` (dense, conv, layer/batch normalisation, flatten, a final dense
layer giving logits, softmax cross-entropy) and a :class:`Case` (an architecture, a batch
and a seed from which weights, inputs and labels follow). Weights live in Keras's layout
(dense kernel ``(in, out)``, conv kernel ``(kh, kw, in, out)``, channels last). A run's
:data:`Result` is a flat dict of float64 arrays (:func:`to_float64` converts a framework's
tensor).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

Result = dict[str, np.ndarray]

ACTIVATIONS = ("linear", "relu", "tanh", "gelu", "sigmoid")
NORMS = ("none", "layernorm", "batchnorm")
EPSILONS = (1e-3, 1e-5, 0.1)
MOMENTA = (0.99, 0.9, 0.5)  # Keras convention: moving = momentum * moving + (1 - momentum) * batch
DTYPES = ("float32", "float64")


def activations_for(dtype: str) -> tuple[str, ...]:
    """The activations whole-model checks use in ``dtype``.

    TensorFlow's exact GELU is float32-accurate in float64 (tf.nn.gelu makes its 1/sqrt(2)
    a float32 constant before casting); interop.same-model.activations reports that defect
    on its own, so that it does not hide every other float64 disagreement of whole models.
    """
    return ACTIVATIONS if dtype != "float64" else tuple(a for a in ACTIVATIONS if a != "gelu")


def framework_devices(kind: str) -> tuple[str, str]:
    """(TensorFlow device, torch device) for a device kind, each checked usable by its adapter."""
    from ...frameworks import adapter

    return adapter("tensorflow").device(kind), adapter("torch").device(kind)


def to_float64(value: Any) -> np.ndarray:
    """A TensorFlow, Keras or torch tensor (on any device), or an array, as a float64 numpy array."""
    if hasattr(value, "numpy") and not hasattr(value, "detach"):
        value = value.numpy()
    elif hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


@dataclass(frozen=True)
class Layer:
    kind: str  # dense | conv | layernorm | batchnorm | flatten
    units: int = 0  # dense units or conv filters
    kernel: int = 1
    stride: int = 1
    padding: str = "valid"  # conv: valid | same (same only with stride 1, as torch requires)
    dilation: int = 1
    activation: str = "linear"
    use_bias: bool = True
    epsilon: float = 1e-3
    momentum: float = 0.99


@dataclass(frozen=True)
class Loss:
    kind: str = "sparse"  # sparse: integer labels; categorical: one-hot labels
    label_smoothing: float = 0.0  # categorical only (Keras has no smoothing for sparse labels)
    ignore_class: int | None = None  # sparse only: Keras ignore_class, torch ignore_index


@dataclass(frozen=True)
class Architecture:
    input_shape: tuple[int, ...]  # without the batch: (features,) or (height, width, channels)
    layers: tuple[Layer, ...]
    loss: Loss = field(default_factory=Loss)

    @property
    def classes(self) -> int:
        return self.layers[-1].units

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Architecture:
        raw = json.loads(text)
        return cls(tuple(raw["input_shape"]), tuple(Layer(**d) for d in raw["layers"]), Loss(**raw["loss"]))


@dataclass(frozen=True)
class Case:
    """An architecture, a batch and a seed from which weights, inputs and labels follow."""

    arch: Architecture
    batch: int
    training: bool  # batch normalisation uses batch statistics and updates its moving ones
    seed: int
    logit_scale: float = 1.0  # scales the last kernel: large logits stress the cross-entropy

    def weights(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng([self.seed, 1])
        out = {name: _init(rng, name, shape) for name, shape in weight_shapes(self.arch)}
        last = f"{len(self.arch.layers) - 1}.kernel"
        out[last] = out[last] * self.logit_scale
        return out

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, 2])
        x = rng.normal(size=(self.batch, *self.arch.input_shape))
        labels = rng.integers(0, self.arch.classes, size=self.batch)
        ignore = self.arch.loss.ignore_class
        if ignore is not None and np.all(labels == ignore):
            labels[0] = (ignore + 1) % self.arch.classes  # an all-ignored batch has no mean loss
        return x, labels.astype(np.int64)


def _init(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    what = name.split(".", 1)[1]
    if what == "kernel":  # Glorot uniform over the receptive field (Keras's default initialiser)
        fan_in = int(np.prod(shape[:-1]))
        limit = math.sqrt(6.0 / (fan_in + shape[-1]))
        return rng.uniform(-limit, limit, size=shape)
    if what == "gamma":
        return rng.uniform(0.5, 1.5, size=shape)
    if what == "moving_variance":
        return rng.uniform(0.5, 2.0, size=shape)
    return rng.uniform(-0.5, 0.5, size=shape)  # bias, beta, moving_mean


def conv_output(size: int, layer: Layer) -> int:
    if layer.padding == "same":
        return -(-size // layer.stride)
    span = layer.dilation * (layer.kernel - 1) + 1
    return (size - span) // layer.stride + 1


def shapes(arch: Architecture) -> list[tuple[int, ...]]:
    """The per-example shape entering each layer, then the output shape."""
    out = [tuple(arch.input_shape)]
    for layer in arch.layers:
        s = out[-1]
        if layer.kind == "dense":
            s = (layer.units,)
        elif layer.kind == "conv":
            s = (conv_output(s[0], layer), conv_output(s[1], layer), layer.units)
        elif layer.kind == "flatten":
            s = (int(np.prod(s)),)
        out.append(s)
    return out


def weight_shapes(arch: Architecture) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every weight, in each Keras layer's ``get_weights()`` order."""
    result: list[tuple[str, tuple[int, ...]]] = []
    for i, (layer, s) in enumerate(zip(arch.layers, shapes(arch))):
        if layer.kind == "dense":
            result.append((f"{i}.kernel", (s[-1], layer.units)))
        elif layer.kind == "conv":
            result.append((f"{i}.kernel", (layer.kernel, layer.kernel, s[-1], layer.units)))
        if layer.kind in ("dense", "conv") and layer.use_bias:
            result.append((f"{i}.bias", (layer.units,)))
        if layer.kind in ("layernorm", "batchnorm"):
            result += [(f"{i}.gamma", (s[-1],)), (f"{i}.beta", (s[-1],))]
        if layer.kind == "batchnorm":
            result += [(f"{i}.moving_mean", (s[-1],)), (f"{i}.moving_variance", (s[-1],))]
    return result
