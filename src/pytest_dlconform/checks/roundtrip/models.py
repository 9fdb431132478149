"""Small models from a spec, with their float64 numpy reference and their tolerances.

:class:`ModelSpec` describes a layer stack (dense layers with activations, batch and layer
normalisation with their buffers, dropout) with parameters drawn from its seed, so that
torch, Keras, numpy and a fresh interpreter build the same model. :func:`numpy_forward`
is the independent reference; :func:`forward_magnitude` and :func:`model_tolerance` state
the error model the output oracles use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..numerics import Tolerance, combined, tolerance

# Activation name -> Lipschitz constant (for the quantisation bound).
ACTIVATIONS = {"linear": 1.0, "relu": 1.0, "tanh": 1.0, "sigmoid": 0.25, "elu": 1.0}
KERAS_BN_EPS, KERAS_LN_EPS = 1e-3, 1e-3  # Keras defaults (keras.layers.BatchNormalization / LayerNormalization)
TORCH_BN_EPS, TORCH_LN_EPS = 1e-5, 1e-5  # torch defaults (nn.BatchNorm1d / nn.LayerNorm)


@dataclass(frozen=True)
class Layer:
    kind: str  # dense | batchnorm | layernorm | dropout
    width: int = 0  # dense only
    activation: str = "linear"  # dense only
    rate: float = 0.0  # dropout only


@dataclass(frozen=True)
class ModelSpec:
    in_features: int
    layers: tuple[Layer, ...]
    dtype: str = "float32"
    seed: int = 0

    @property
    def out_features(self) -> int:
        return next(layer.width for layer in reversed(self.layers) if layer.kind == "dense")

    @property
    def has_dropout(self) -> bool:
        return any(layer.kind == "dropout" for layer in self.layers)

    def fan_ins(self) -> list[int]:
        width, fans = self.in_features, []
        for layer in self.layers:
            if layer.kind == "dense":
                fans.append(width)
                width = layer.width
        return fans

    def describe(self) -> str:
        parts = [str(self.in_features)]
        for layer in self.layers:
            if layer.kind == "dense":
                parts.append(f"dense{layer.width}" + ("" if layer.activation == "linear" else f"/{layer.activation}"))
            elif layer.kind == "dropout":
                parts.append(f"dropout{layer.rate:g}")
            else:
                parts.append(layer.kind)
        return " -> ".join(parts) + f" ({self.dtype}, seed {self.seed})"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ModelSpec:
        layers = tuple(Layer(**layer) for layer in doc["layers"])
        return cls(int(doc["in_features"]), layers, str(doc["dtype"]), int(doc["seed"]))


def parameters(spec: ModelSpec) -> list[dict[str, np.ndarray]]:
    """Each layer's parameters and buffers, drawn from the spec's seed (float64)."""
    rng = np.random.default_rng(spec.seed)
    width, out = spec.in_features, []
    for layer in spec.layers:
        if layer.kind == "dense":
            bound = 1.0 / math.sqrt(width)  # the frameworks' own default init scale
            out.append({"kernel": rng.uniform(-bound, bound, (width, layer.width)) * 1.5,
                        "bias": rng.uniform(-0.5, 0.5, layer.width)})
            width = layer.width
        elif layer.kind == "batchnorm":
            # Running statistics far from their initial 0/1, so a lost buffer changes outputs.
            out.append({"gamma": rng.uniform(0.5, 1.5, width), "beta": rng.uniform(-0.5, 0.5, width),
                        "mean": rng.normal(0.0, 0.5, width), "var": rng.uniform(0.5, 2.0, width),
                        "count": np.array(int(rng.integers(1, 1000)))})
        elif layer.kind == "layernorm":
            out.append({"gamma": rng.uniform(0.5, 1.5, width), "beta": rng.uniform(-0.5, 0.5, width)})
        else:
            out.append({})
    return out


def model_specs(*, dtypes: Iterable[str] = ("float32", "float64"),
                kinds: Iterable[str] = ("batchnorm", "layernorm", "dropout"),
                activations: Iterable[str] = tuple(ACTIVATIONS), dense: tuple[int, int] = (1, 3),
                widths: tuple[int, int] = (1, 24), in_features: tuple[int, int] = (1, 12),
                out_features: tuple[int, int] = (1, 4), hidden_activation_only: bool = False,
                activations_for: Mapping[str, Iterable[str]] | None = None) -> Any:
    """Hypothesis strategy for :class:`ModelSpec`: dense layers, each optionally followed by
    one of ``kinds``; the last dense layer has ``out_features`` units. ``activations_for``
    narrows the activations for a dtype (a runtime that lacks a kernel for it)."""
    from hypothesis import strategies as st

    extra = sorted(kinds)

    @st.composite
    def build(draw: Any) -> ModelSpec:
        dtype = draw(st.sampled_from(sorted(dtypes)))
        acts = sorted((activations_for or {}).get(dtype, activations))
        hidden_acts = [a for a in acts if a != "linear"] if hidden_activation_only else acts
        n = draw(st.integers(*dense), label="dense layers")
        layers: list[Layer] = []
        for i in range(n):
            last = i == n - 1
            width = draw(st.integers(*(out_features if last else widths)))
            act = draw(st.sampled_from(acts if last else hidden_acts))
            layers.append(Layer("dense", width=width, activation=act))
            if not last and extra and draw(st.booleans()):
                kind = draw(st.sampled_from(extra))
                layers.append(Layer(kind, rate=0.5 if kind == "dropout" else 0.0))
        return ModelSpec(draw(st.integers(*in_features)), tuple(layers), dtype, draw(st.integers(0, 2**31 - 1)))

    return build()


def examples(n: int) -> Any:
    """Settings for a property whose every example exports artifacts: ``n`` examples in the
    ci profile (scaled like :func:`inputs.budget`) and no shrinking, which would export
    again for minutes; a failing example is reported as drawn."""
    from hypothesis import Phase, settings

    from ...inputs import budget

    return settings(budget(n), phases=(Phase.explicit, Phase.reuse, Phase.generate))


def example_inputs(spec: ModelSpec, batch_sizes: Iterable[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-3.0, 3.0, (b, spec.in_features)).astype(spec.dtype) for b in batch_sizes]


def numpy_forward(spec: ModelSpec, x: np.ndarray, *, bn_eps: float, ln_eps: float) -> np.ndarray:
    """The spec's inference forward pass in float64 numpy: an independent reference."""
    h = np.asarray(x, dtype=np.float64)
    for layer, p in zip(spec.layers, parameters(spec)):
        if layer.kind == "dense":
            h = _activation(layer.activation, h @ p["kernel"] + p["bias"])
        elif layer.kind == "batchnorm":
            h = (h - p["mean"]) / np.sqrt(p["var"] + bn_eps) * p["gamma"] + p["beta"]
        elif layer.kind == "layernorm":
            mu, var = h.mean(axis=-1, keepdims=True), h.var(axis=-1, keepdims=True)
            h = (h - mu) / np.sqrt(var + ln_eps) * p["gamma"] + p["beta"]
    return h


def _activation(name: str, h: np.ndarray) -> np.ndarray:
    if name == "relu":
        return np.maximum(h, 0.0)
    if name == "tanh":
        return np.tanh(h)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-h))
    if name == "elu":
        return np.where(h > 0, h, np.expm1(np.minimum(h, 0.0)))
    return h


def forward_magnitude(spec: ModelSpec, x: np.ndarray, *, bn_eps: float, ln_eps: float) -> float:
    """The scale against which a forward pass's rounding error is measured.

    Rounding in a dot product is bounded by its terms, not its result
    (|fl(h W) - h W| <= gamma_n |h| |W|), so a normwise error relative to max|output| is
    unbounded when an output cancels. Running the network on magnitudes (|h| |W| + |b|,
    scaled by each activation's Lipschitz constant and by each normalisation's factor)
    gives a scale s with error <= (sum of the layers' gamma) * max(s): the budget
    :func:`model_tolerance` states.
    """
    h = np.asarray(x, dtype=np.float64)
    m = np.abs(h)
    for layer, p in zip(spec.layers, parameters(spec)):
        if layer.kind == "dense":
            z = h @ p["kernel"] + p["bias"]
            h = _activation(layer.activation, z)
            m = np.maximum(ACTIVATIONS[layer.activation] * (m @ np.abs(p["kernel"]) + np.abs(p["bias"])), np.abs(h))
        elif layer.kind == "batchnorm":
            a = p["gamma"] / np.sqrt(p["var"] + bn_eps)
            h = (h - p["mean"]) * a + p["beta"]
            m = np.abs(a) * (m + np.abs(p["mean"])) + np.abs(p["beta"])
        elif layer.kind == "layernorm":
            mu, sd = h.mean(axis=-1, keepdims=True), np.sqrt(h.var(axis=-1, keepdims=True) + ln_eps)
            h = (h - mu) / sd * p["gamma"] + p["beta"]
            m = np.abs(p["gamma"]) * (m + np.abs(mu)) / sd + np.abs(p["beta"])
    return float(np.max(m)) if m.size else 0.0


def magnitudes(spec: ModelSpec, inputs: Iterable[np.ndarray], framework: str) -> list[float]:
    """:func:`forward_magnitude` per input, with the framework's normalisation epsilons."""
    bn, ln = (KERAS_BN_EPS, KERAS_LN_EPS) if framework == "keras" else (TORCH_BN_EPS, TORCH_LN_EPS)
    return [forward_magnitude(spec, x, bn_eps=bn, ln_eps=ln) for x in inputs]


def model_tolerance(spec: ModelSpec, dtype: str | None = None, *, device: str = "cpu",
                    framework: str | None = None) -> Tolerance:
    """Two independent evaluations of the spec's forward pass (e.g. torch and ONNX Runtime).

    Per dense layer a dot product over its fan-in plus bias and activation; a
    normalisation layer reduces over the width. Forward error bound per evaluation from
    :func:`numerics.tolerance`; two evaluations compared with each other add.
    """
    ops = sum(3 if layer.kind == "dense" else 6 if layer.kind in ("batchnorm", "layernorm") else 0 for layer in spec.layers)
    reduction = sum(spec.fan_ins()) + sum(_width_before(spec, i) for i, layer in enumerate(spec.layers)
                                          if layer.kind == "layernorm")
    # matmul=True: on a GPU TensorFlow runs float32 matmuls in TF32 by default.
    one = tolerance(dtype or spec.dtype, ops=ops, reduction=reduction, device=device, framework=framework, matmul=True)
    return combined(one, one)


def _width_before(spec: ModelSpec, index: int) -> int:
    width = spec.in_features
    for layer in spec.layers[:index]:
        if layer.kind == "dense":
            width = layer.width
    return width
