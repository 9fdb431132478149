"""Coverage models: every layer kind and every activation, by construction, in three small models.

:func:`coverage_specs` gives, for a framework and a seed, three :class:`ModelSpec` that
together hold every layer kind the export formats document (dense, 1-D and 2-D convolution,
max and average pooling in 1-D and 2-D, flatten, batch normalisation with its moving
statistics set far from 0/1, layer normalisation, embedding, dropout, LSTM and GRU) and
every activation of the framework, those with a parameter at a non-default value (ELU
alpha, LeakyReLU negative_slope, torch's Softplus beta; GELU exact and, on torch, tanh).
The seed picks the sizes, the parameters and which activation goes to which layer; the
structure, and so the coverage, never depends on it. :func:`modes_of` names what a spec
covers in the claims' modes vocabulary ("layer=Conv1D", "act=elu", "state", "dtype=float64").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .models import WEIGHTED, Layer, ModelSpec, layer_shapes

# Every activation the builders offer per framework (Keras's gelu layer activation is exact;
# its softplus has no parameter).
KERAS_ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu", "leaky_relu", "gelu", "softplus", "selu")
TORCH_ACTIVATIONS = (*KERAS_ACTIVATIONS, "gelu_tanh")
SLOTS = 10  # activations placed per triple of models (4 vector, 3 sequence, 3 image)

# Layer kind (and rank with the batch, where it names another class) -> each framework's class.
_NAMES = {
    "keras": {"dense": "Dense", "conv1d": "Conv1D", "conv2d": "Conv2D", ("maxpool", 3): "MaxPooling1D",
              ("avgpool", 3): "AveragePooling1D", ("maxpool", 4): "MaxPooling2D", ("avgpool", 4): "AveragePooling2D",
              "flatten": "Flatten", "batchnorm": "BatchNormalization", "layernorm": "LayerNormalization",
              "embedding": "Embedding", "dropout": "Dropout", "lstm": "LSTM", "gru": "GRU"},
    "torch": {"dense": "Linear", "conv1d": "Conv1d", "conv2d": "Conv2d", ("maxpool", 3): "MaxPool1d",
              ("avgpool", 3): "AvgPool1d", ("maxpool", 4): "MaxPool2d", ("avgpool", 4): "AvgPool2d",
              "flatten": "Flatten", ("batchnorm", 2): "BatchNorm1d", ("batchnorm", 4): "BatchNorm2d",
              "layernorm": "LayerNorm", "embedding": "Embedding", "dropout": "Dropout", "lstm": "LSTM", "gru": "GRU"},
}


def layer_modes(framework: str) -> tuple[str, ...]:
    """Every "layer=<class>" mode of the framework's coverage models."""
    return tuple(f"layer={name}" for name in dict.fromkeys(_NAMES[framework].values()))


def activation_modes(framework: str) -> tuple[str, ...]:
    return tuple(f"act={a}" for a in (KERAS_ACTIVATIONS if framework == "keras" else TORCH_ACTIVATIONS))


def coverage_specs(framework: str, seed: int, *, float64: bool = False,
                   float64_without: Iterable[str] = ()) -> list[ModelSpec]:
    """Three models (vector, token sequence, image) holding every layer kind and activation.

    ``float64``: the vector model (dense, both normalisations, dropout) in float64, the
    others float32; ``float64_without``: activations a runtime lacks in float64 (moved to
    the float32 models)."""
    rng = np.random.default_rng(seed)
    acts = list(KERAS_ACTIVATIONS if framework == "keras" else TORCH_ACTIVATIONS)
    acts += ["linear"] * (SLOTS - len(acts))
    rng.shuffle(acts)
    banned = set(float64_without) if float64 else set()
    for i in range(4):  # the vector model's slots are 0-3: swap a banned activation out
        if acts[i] in banned:
            j = next(k for k in range(4, SLOTS) if acts[k] not in banned)  # slots allow every runtime's ban
            acts[i], acts[j] = acts[j], acts[i]
    layers = [_with_param(rng, framework, Layer("dense", 0, a)) for a in acts]
    return [_vector(rng, layers[:4], "float64" if float64 else "float32", seed),
            _sequence(rng, layers[4:7], seed + 1), _image(rng, layers[7:], seed + 2)]


def _with_param(rng: np.random.Generator, framework: str, layer: Layer) -> Layer:
    a = layer.activation
    if a == "elu":  # alpha away from its default 1.0, on either side
        return Layer("dense", 0, a, param=float(rng.choice([rng.uniform(0.3, 0.8), rng.uniform(1.5, 2.0)])))
    if a == "leaky_relu":  # neither Keras's 0.2/0.3 nor torch's 0.01
        return Layer("dense", 0, a, param=float(rng.uniform(0.05, 0.15) if rng.integers(2) else rng.uniform(0.35, 0.5)))
    if a == "softplus" and framework == "torch":  # beta: Keras's softplus has none
        return Layer("dense", 0, a, param=float(rng.uniform(1.5, 3.0)))
    return layer


def _sized(layer: Layer, kind: str, width: int, kernel: int = 0) -> Layer:
    return Layer(kind, width, layer.activation, kernel=kernel, param=layer.param)


def _w(rng: np.random.Generator, low: int, high: int) -> int:
    return int(rng.integers(low, high + 1))


def _vector(rng: np.random.Generator, acts: Sequence[Layer], dtype: str, seed: int) -> ModelSpec:
    layers = (_sized(acts[0], "dense", _w(rng, 3, 8)), Layer("batchnorm"), _sized(acts[1], "dense", _w(rng, 3, 8)),
              Layer("layernorm"), _sized(acts[2], "dense", _w(rng, 3, 8)), Layer("dropout", rate=0.5),
              _sized(acts[3], "dense", _w(rng, 1, 4)))
    return ModelSpec(_w(rng, 2, 6), layers, dtype, seed)


def _sequence(rng: np.random.Generator, acts: Sequence[Layer], seed: int) -> ModelSpec:
    steps, kernel = _w(rng, 11, 14), _w(rng, 2, 3)
    layers = (Layer("embedding", _w(rng, 3, 6)), _sized(acts[0], "conv1d", _w(rng, 3, 5), kernel), Layer("maxpool"),
              Layer("avgpool"), Layer("lstm", _w(rng, 2, 4), sequences=True), Layer("gru", _w(rng, 2, 4)),
              _sized(acts[1], "dense", _w(rng, 2, 5)), _sized(acts[2], "dense", _w(rng, 1, 3)))
    return ModelSpec(steps, layers, "float32", seed, vocab=_w(rng, 7, 15))


def _image(rng: np.random.Generator, acts: Sequence[Layer], seed: int) -> ModelSpec:
    size, kernel = _w(rng, 6, 7), _w(rng, 2, 3)
    layers = (_sized(acts[0], "conv2d", _w(rng, 2, 4), kernel), Layer("batchnorm"), Layer("maxpool"), Layer("avgpool"),
              Layer("flatten"), _sized(acts[1], "dense", _w(rng, 3, 6)), Layer("layernorm"),
              _sized(acts[2], "dense", _w(rng, 1, 3)))
    return ModelSpec(_w(rng, 1, 3), layers, "float32", seed, shape=(size, size))


def modes_of(spec: ModelSpec, framework: str) -> list[str]:
    """The modes a spec exercises: its layer classes, activations, "state" (batch
    normalisation's moving statistics) and its dtype."""
    names, out = _NAMES[framework], []
    for layer, shape in zip(spec.layers, layer_shapes(spec)):
        rank = len(shape) + 1
        out.append("layer=" + names.get((layer.kind, rank), names.get(layer.kind, layer.kind)))
        if layer.kind in WEIGHTED and layer.activation != "linear":
            out.append(f"act={layer.activation}")
        if layer.kind == "batchnorm":
            out.append("state")
    out.append(f"dtype={spec.dtype}")
    return list(dict.fromkeys(out))
