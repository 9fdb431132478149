"""Small models from a spec, with their float64 numpy reference and their tolerances.

:class:`ModelSpec` describes a layer stack (dense layers with activations, batch and layer
normalisation with their buffers, dropout; for the coverage models of :mod:`.zoo` also
embedding, 1-D and 2-D convolution, max and average pooling, flatten, LSTM and GRU, and
activations with non-default parameters) with parameters drawn from its seed, so that
torch, Keras, numpy and a fresh interpreter build the same model. Tensors are channels
last (Keras's layout); the torch builder permutes around the layers that want channels
first. :func:`numpy_forward` is the independent reference; :func:`forward_magnitude` and
:func:`model_tolerance` state the error model the output oracles use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..numerics import Tolerance, combined, tolerance

# Activation name -> Lipschitz constant at the default parameter (for the quantisation bound);
# :func:`lipschitz` takes a layer's own parameter into account.
ACTIVATIONS = {"linear": 1.0, "relu": 1.0, "tanh": 1.0, "sigmoid": 0.25, "elu": 1.0, "leaky_relu": 1.0,
               "gelu": 1.13, "gelu_tanh": 1.13, "softplus": 1.0, "selu": 1.7581}
# What the generated dense stacks (:func:`model_specs`) draw from, as before the coverage
# models existed (the TF.js suite's converter and runtime are checked on these).
DENSE_ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid", "elu")
# The parameter each activation documents, with its default (None: the activation has none).
# leaky_relu's default differs: Keras LeakyReLU negative_slope=0.3 (0.2 for the "leaky_relu"
# activation string), torch nn.LeakyReLU 0.01; specs always state it. softplus's is torch's
# beta (threshold stays at its default 20); Keras's softplus has no parameter.
ACTIVATION_PARAMETER = {"elu": ("alpha", 1.0), "leaky_relu": ("negative_slope", None), "softplus": ("beta", 1.0)}
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805
SOFTPLUS_THRESHOLD = 20.0  # torch nn.Softplus default: linear above beta * x > 20
KERAS_BN_EPS, KERAS_LN_EPS = 1e-3, 1e-3  # Keras defaults (keras.layers.BatchNormalization / LayerNormalization)
TORCH_BN_EPS, TORCH_LN_EPS = 1e-5, 1e-5  # torch defaults (nn.BatchNorm1d / nn.LayerNorm)
POOL = 2  # pooling layers: pool size and stride 2, 'valid'
WEIGHTED = ("dense", "conv1d", "conv2d")  # layers with a kernel, a bias and an activation
RECURRENT = ("lstm", "gru")
# Elementwise roundings a recurrent step is allowed in model_tolerance (gate functions, the
# state update): the recurrent magnitudes charge each rounding 1 / RECURRENT_OPS of the budget.
RECURRENT_OPS = 10


@dataclass(frozen=True)
class Layer:
    kind: str  # dense | batchnorm | layernorm | dropout | conv1d | conv2d | maxpool | avgpool | flatten | embedding | lstm | gru
    width: int = 0  # dense units, conv filters, embedding size, recurrent units
    activation: str = "linear"  # dense and conv only
    rate: float = 0.0  # dropout only
    kernel: int = 0  # conv only: kernel size (square for conv2d), 'valid' padding, stride 1
    param: float | None = None  # the activation's parameter (ACTIVATION_PARAMETER); None: its default
    sequences: bool = False  # lstm/gru: return the whole sequence (else the last step)


@dataclass(frozen=True)
class ModelSpec:
    in_features: int  # the input's last dimension (channels); with ``vocab``, the sequence length
    layers: tuple[Layer, ...]
    dtype: str = "float32"
    seed: int = 0
    shape: tuple[int, ...] = ()  # dimensions between batch and features: (T,) sequence, (H, W) image
    vocab: int = 0  # > 0: the input is int32 token ids in [0, vocab), shape (N, in_features)

    @property
    def out_features(self) -> int:
        return next(layer.width for layer in reversed(self.layers) if layer.kind == "dense")

    @property
    def has_dropout(self) -> bool:
        return any(layer.kind == "dropout" for layer in self.layers)

    @property
    def input_dtype(self) -> str:
        return "int32" if self.vocab else self.dtype

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The input's shape without the batch dimension."""
        return (self.in_features,) if self.vocab else (*self.shape, self.in_features)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return layer_shapes(self)[-1]

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(layer.kind for layer in self.layers)

    def fan_ins(self) -> list[int]:
        width, fans = self.in_features, []
        for layer in self.layers:
            if layer.kind == "dense":
                fans.append(width)
                width = layer.width
        return fans

    def describe(self) -> str:
        parts = [f"tokens[{self.vocab}]x{self.in_features}" if self.vocab else
                 "x".join(str(d) for d in (*self.shape, self.in_features))]
        for layer in self.layers:
            if layer.kind in WEIGHTED:
                act = "" if layer.activation == "linear" else f"/{layer.activation}"
                act += "" if layer.param is None else f"({layer.param:g})"
                size = f"{layer.kernel}:" if layer.kind != "dense" else ""
                parts.append(f"{layer.kind}{size}{layer.width}" + act)
            elif layer.kind == "dropout":
                parts.append(f"dropout{layer.rate:g}")
            elif layer.kind in RECURRENT or layer.kind == "embedding":
                parts.append(f"{layer.kind}{layer.width}" + ("/seq" if layer.sequences else ""))
            else:
                parts.append(layer.kind)
        return " -> ".join(parts) + f" ({self.dtype}, seed {self.seed})"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ModelSpec:
        layers = tuple(Layer(**layer) for layer in doc["layers"])
        return cls(int(doc["in_features"]), layers, str(doc["dtype"]), int(doc["seed"]),
                   tuple(int(d) for d in doc.get("shape", ())), int(doc.get("vocab", 0)))


def layer_shapes(spec: ModelSpec) -> list[tuple[int, ...]]:
    """The shape (without batch) before the first layer and after each layer."""
    shape = spec.input_shape
    out = [shape]
    for layer in spec.layers:
        if layer.kind in ("dense",):
            shape = (*shape[:-1], layer.width)
        elif layer.kind == "embedding":
            shape = (*shape, layer.width)
        elif layer.kind in ("conv1d", "conv2d"):
            shape = (*(d - layer.kernel + 1 for d in shape[:-1]), layer.width)
        elif layer.kind in ("maxpool", "avgpool"):
            shape = (*(d // POOL for d in shape[:-1]), shape[-1])
        elif layer.kind == "flatten":
            shape = (int(np.prod(shape)),)
        elif layer.kind in RECURRENT:
            shape = (shape[0], layer.width) if layer.sequences else (layer.width,)
        out.append(shape)
    return out


def lipschitz(layer: Layer) -> float:
    """The activation's Lipschitz constant with the layer's parameter."""
    p = layer.param
    if layer.activation == "elu" and p is not None:
        return max(1.0, abs(p))
    if layer.activation == "leaky_relu" and p is not None:
        return max(1.0, abs(p))
    return ACTIVATIONS[layer.activation]


def parameters(spec: ModelSpec) -> list[dict[str, np.ndarray]]:
    """Each layer's parameters and buffers, drawn from the spec's seed (float64), in Keras's
    layout (dense kernel (in, out), conv kernel (k[, k], in, out), LSTM gates i f c o, GRU
    gates z r h with reset_after=True's two biases). Dense stacks draw exactly as before
    the other kinds existed, so their models are unchanged."""
    rng = np.random.default_rng(spec.seed)
    out = []
    for layer, shape in zip(spec.layers, layer_shapes(spec)):
        width = shape[-1]
        if layer.kind == "dense":
            bound = 1.0 / math.sqrt(width)  # the frameworks' own default init scale
            out.append({"kernel": rng.uniform(-bound, bound, (width, layer.width)) * 1.5,
                        "bias": rng.uniform(-0.5, 0.5, layer.width)})
        elif layer.kind in ("conv1d", "conv2d"):
            window = (layer.kernel,) * (1 if layer.kind == "conv1d" else 2)
            bound = 1.5 / math.sqrt(width * layer.kernel ** len(window))
            out.append({"kernel": rng.uniform(-bound, bound, (*window, width, layer.width)),
                        "bias": rng.uniform(-0.5, 0.5, layer.width)})
        elif layer.kind == "batchnorm":
            # Running statistics far from their initial 0/1, so a lost buffer changes outputs.
            out.append({"gamma": rng.uniform(0.5, 1.5, width), "beta": rng.uniform(-0.5, 0.5, width),
                        "mean": rng.normal(0.0, 0.5, width), "var": rng.uniform(0.5, 2.0, width),
                        "count": np.array(int(rng.integers(1, 1000)))})
        elif layer.kind == "layernorm":
            out.append({"gamma": rng.uniform(0.5, 1.5, width), "beta": rng.uniform(-0.5, 0.5, width)})
        elif layer.kind == "embedding":
            out.append({"table": rng.uniform(-1.0, 1.0, (spec.vocab, layer.width))})
        elif layer.kind in RECURRENT:
            gates, units = (4 if layer.kind == "lstm" else 3), layer.width
            # Recurrent weights within 0.5/sqrt(units): each gate's recurrent term is at most
            # 0.5 sqrt(units) <= 1 for the widths used, so errors do not grow from step to step.
            out.append({"kernel": rng.uniform(-1.0, 1.0, (width, gates * units)) / math.sqrt(width),
                        "recurrent": rng.uniform(-0.5, 0.5, (units, gates * units)) / math.sqrt(units),
                        "bias": rng.uniform(-0.5, 0.5, (gates * units,) if gates == 4 else (2, gates * units))})
        else:
            out.append({})
    return out


def model_specs(*, dtypes: Iterable[str] = ("float32", "float64"),
                kinds: Iterable[str] = ("batchnorm", "layernorm", "dropout"),
                activations: Iterable[str] = DENSE_ACTIVATIONS, dense: tuple[int, int] = (1, 3),
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

    from ...frameworks.inputs import budget

    return settings(budget(n), phases=(Phase.explicit, Phase.reuse, Phase.generate))


def example_inputs(spec: ModelSpec, batch_sizes: Iterable[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if spec.vocab:
        return [rng.integers(0, spec.vocab, (b, *spec.input_shape)).astype(np.int32) for b in batch_sizes]
    return [rng.uniform(-3.0, 3.0, (b, *spec.input_shape)).astype(spec.dtype) for b in batch_sizes]


def numpy_forward(spec: ModelSpec, x: np.ndarray, *, bn_eps: float, ln_eps: float) -> np.ndarray:
    """The spec's inference forward pass in float64 numpy: an independent reference."""
    h = np.asarray(x) if spec.vocab else np.asarray(x, dtype=np.float64)
    for layer, p in zip(spec.layers, parameters(spec)):
        h = _layer_forward(layer, p, h, bn_eps=bn_eps, ln_eps=ln_eps)
    return h


def _layer_forward(layer: Layer, p: Mapping[str, np.ndarray], h: np.ndarray, *, bn_eps: float, ln_eps: float) -> np.ndarray:
    if layer.kind == "dense":
        return _activation(layer.activation, h @ p["kernel"] + p["bias"], layer.param)
    if layer.kind in ("conv1d", "conv2d"):
        return _activation(layer.activation, _conv(h, p["kernel"]) + p["bias"], layer.param)
    if layer.kind == "batchnorm":
        return (h - p["mean"]) / np.sqrt(p["var"] + bn_eps) * p["gamma"] + p["beta"]
    if layer.kind == "layernorm":
        mu, var = h.mean(axis=-1, keepdims=True), h.var(axis=-1, keepdims=True)
        return (h - mu) / np.sqrt(var + ln_eps) * p["gamma"] + p["beta"]
    if layer.kind in ("maxpool", "avgpool"):
        return _pool(h, layer.kind)
    if layer.kind == "flatten":
        return h.reshape(h.shape[0], -1)
    if layer.kind == "embedding":
        return p["table"][np.asarray(h, dtype=np.int64)]
    if layer.kind in RECURRENT:
        seq = (_lstm if layer.kind == "lstm" else _gru)(h, p)
        return seq if layer.sequences else seq[:, -1]
    return h  # dropout: the identity at inference


def _conv(h: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """'valid' cross-correlation, stride 1, channels last; kernel (k[, k], in, out)."""
    window = kernel.shape[:-2]
    axes = tuple(range(1, 1 + len(window)))
    win = np.lib.stride_tricks.sliding_window_view(h, window, axis=axes)  # (N, *out, C, *window)
    if len(window) == 1:
        return np.einsum("ntci,ico->nto", win, kernel)
    return np.einsum("nhwcij,ijco->nhwo", win, kernel)


def _pool(h: np.ndarray, kind: str) -> np.ndarray:
    spatial = h.shape[1:-1]
    kept = tuple(d // POOL * POOL for d in spatial)
    index = [slice(None)] + [slice(0, d) for d in kept]
    h = h[tuple(index)]
    shape = [h.shape[0]]
    for d in kept:
        shape += [d // POOL, POOL]
    blocks = h.reshape(*shape, h.shape[-1])
    axes = tuple(2 + 2 * i for i in range(len(kept)))
    return blocks.max(axis=axes) if kind == "maxpool" else blocks.mean(axis=axes)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _lstm(x: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """Keras LSTM (gates i f c o, tanh, sigmoid recurrent activation), zero initial state."""
    units = p["recurrent"].shape[0]
    h, c, outs = np.zeros((x.shape[0], units)), np.zeros((x.shape[0], units)), []
    for t in range(x.shape[1]):
        z = x[:, t] @ p["kernel"] + h @ p["recurrent"] + p["bias"]
        i, f, g, o = (z[:, k * units:(k + 1) * units] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs, axis=1)


def _gru(x: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """Keras GRU with reset_after=True (torch's formulation): gates z r h, zero initial state."""
    units = p["recurrent"].shape[0]
    h, outs = np.zeros((x.shape[0], units)), []
    for t in range(x.shape[1]):
        xz = x[:, t] @ p["kernel"] + p["bias"][0]
        hz = h @ p["recurrent"] + p["bias"][1]
        z = _sigmoid(xz[:, :units] + hz[:, :units])
        r = _sigmoid(xz[:, units:2 * units] + hz[:, units:2 * units])
        cand = np.tanh(xz[:, 2 * units:] + r * hz[:, 2 * units:])
        h = z * h + (1.0 - z) * cand
        outs.append(h)
    return np.stack(outs, axis=1)


def _activation(name: str, h: np.ndarray, param: float | None = None) -> np.ndarray:
    if name == "relu":
        return np.maximum(h, 0.0)
    if name == "tanh":
        return np.tanh(h)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-h))
    if name == "elu":
        alpha = 1.0 if param is None else param
        return np.where(h > 0, h, alpha * np.expm1(np.minimum(h, 0.0)))
    if name == "leaky_relu":
        return np.where(h >= 0, h, (0.2 if param is None else param) * h)
    if name == "gelu":  # exact: x Phi(x)
        return 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
    if name == "gelu_tanh":
        return 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)))
    if name == "softplus":
        beta = 1.0 if param is None else param
        return np.where(beta * h > SOFTPLUS_THRESHOLD, h, np.logaddexp(0.0, beta * h) / beta)
    if name == "selu":
        return SELU_SCALE * np.where(h > 0, h, SELU_ALPHA * np.expm1(np.minimum(h, 0.0)))
    return h


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _output_scale(layer: Layer, y: np.ndarray) -> np.ndarray:
    """What an activation's output is computed from: |y|, except sigmoid, which an
    implementation may compute as 0.5 + 0.5 tanh(x / 2), terms of size 0.5 and
    0.5 |tanh| = |y - 0.5| (ONNX Runtime's float64 Sigmoid node, measured on [-8, 8]: a relative
    error of 4.3e-13 at x = -8, an absolute 1.3 u, where torch's is below 1 u relative)."""
    if layer.activation == "sigmoid":
        return 0.5 + np.abs(y - 0.5)
    return np.abs(y)


def forward_magnitude(spec: ModelSpec, x: np.ndarray, *, bn_eps: float, ln_eps: float) -> float:
    """The scale against which a forward pass's rounding error is measured.

    Rounding in a dot product is bounded by its terms, not its result
    (|fl(h W) - h W| <= gamma_n |h| |W|), so a normwise error relative to max|output| is
    unbounded when an output cancels. Running the network on magnitudes (|h| |W| + |b|,
    scaled by each activation's Lipschitz constant and by each normalisation's factor, and
    at least what the activation's output is computed from (:func:`_output_scale`); a
    pooling layer pools the magnitudes) gives a scale s with error <= (sum of the layers'
    gamma) * max(s): the budget :func:`model_tolerance` states. Layer normalisation adds
    the rounding of its variance, which cancels when the spread is small against the entries
    (|x_hat| max(m)^2 / sd^2; explore seed 2567932, ONNX Runtime's E[x^2] - mu^2 after a
    sigmoid). A recurrent layer runs its own first-order recursion on the reference's
    gates and states (:func:`_lstm_magnitude`, :func:`_gru_magnitude`): the state's error
    is damped by the gates (each in (0, 1)), so it grows at most linearly with the steps,
    never like T^2.
    """
    h = np.asarray(x) if spec.vocab else np.asarray(x, dtype=np.float64)
    m = np.abs(h).astype(np.float64)
    for layer, p in zip(spec.layers, parameters(spec)):
        new = _layer_forward(layer, p, h, bn_eps=bn_eps, ln_eps=ln_eps)
        if layer.kind == "dense":
            m = np.maximum(lipschitz(layer) * (m @ np.abs(p["kernel"]) + np.abs(p["bias"])), _output_scale(layer, new))
        elif layer.kind in ("conv1d", "conv2d"):
            m = np.maximum(lipschitz(layer) * (_conv(m, np.abs(p["kernel"])) + np.abs(p["bias"])), _output_scale(layer, new))
        elif layer.kind == "batchnorm":
            a = p["gamma"] / np.sqrt(p["var"] + bn_eps)
            m = np.abs(a) * (m + np.abs(p["mean"])) + np.abs(p["beta"])
        elif layer.kind == "layernorm":
            # x - mean errs by gamma (m + |mu|), divided by sd; the variance (mean((x - mu)^2),
            # or E[x^2] - mu^2 as ONNX Runtime's kernel computes it) errs by gamma 2 max(m)^2,
            # so sd by that / (2 sd), and each output by |x_hat| times its relative error.
            mu, sd = h.mean(axis=-1, keepdims=True), np.sqrt(h.var(axis=-1, keepdims=True) + ln_eps)
            h_hat = np.abs(h - mu) / sd
            row = np.max(m, axis=-1, keepdims=True)
            m = np.abs(p["gamma"]) * ((m + np.abs(mu)) / sd + h_hat * row**2 / sd**2) + np.abs(p["beta"])
        elif layer.kind in ("maxpool", "avgpool", "flatten"):
            m = _layer_forward(layer, p, m, bn_eps=bn_eps, ln_eps=ln_eps)
        elif layer.kind == "embedding":
            m = np.abs(new)
        elif layer.kind in RECURRENT:
            seq = (_lstm_magnitude if layer.kind == "lstm" else _gru_magnitude)(h, m, p)
            m = seq if layer.sequences else seq[:, -1]
        h = new
    return float(np.max(m)) if m.size else 0.0


def _sigmoid_slope(z: np.ndarray) -> np.ndarray:
    s = _sigmoid(z)
    return s * (1.0 - s)


def _lstm_magnitude(x: np.ndarray, m: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """Error magnitudes E_h (at least |h_t|) of a Keras LSTM's states, (N, T, units).

    First order, on the reference's values, in units of the budget eps through the layer
    (every register errs by at most eps E; the input x_t by eps m_t, |x_t| <= m_t). One
    elementwise rounding is at most OP_ROUNDING u |v| <= rho eps |v| with
    rho = 1 / RECURRENT_OPS, as :func:`model_tolerance` counts RECURRENT_OPS such ops for
    the layer (eps >= OP_ROUNDING RECURRENT_OPS u); the gate products x W + h U + b round by
    gamma_{in + units + 2} <= eps (it counts in + units terms and 4 RECURRENT_OPS u more).
    Step t, elementwise, |U| the absolute recurrent kernel, s' = s (1 - s) at the gate::

        E_z   = m_t |W| + |h_{t-1}| |U| + |b| + E_h(t-1) |U|     (incoming, rounding, state)
        E_i   = s'(z_i) E_z_i + rho       (so E_f, E_o; g = tanh: (1 - g^2) E_z_g + rho)
        E_c(t) = f E_c(t-1) + |c_{t-1}| E_f + |g| E_i + i E_g + rho (|f c_{t-1}| + |i g| + |c_t|)
        E_h(t) = |tanh c_t| E_o + o (1 - tanh^2 c_t) E_c(t) + rho (|tanh c_t| + |h_t|)

    with E_h(0) = E_c(0) = 0. The forget gate f is in (0, 1), so E_c(T) is a sum of the
    steps' own terms damped by products of f: linear in T at worst, where the previous model
    charged T (T + 4) / 2 times the largest gate term. The state's error reaches h only
    through o tanh'(c) <= 1, and |h| <= 1. Returned: max(|h_t|, E_h(t)), what a later layer
    needs as its input's magnitude (its own rounding is measured against |h_t|).
    """
    units, rho = p["recurrent"].shape[0], 1.0 / RECURRENT_OPS
    w, u, b = np.abs(p["kernel"]), np.abs(p["recurrent"]), np.abs(p["bias"])
    h, c, e_h, e_c = (np.zeros((x.shape[0], units)) for _ in range(4))
    outs = []
    for t in range(x.shape[1]):
        z = x[:, t] @ p["kernel"] + h @ p["recurrent"] + p["bias"]
        e_z = m[:, t] @ w + np.abs(h) @ u + b + e_h @ u
        zi, zf, zg, zo = (z[:, k * units:(k + 1) * units] for k in range(4))
        ei, ef, eg, eo = (e_z[:, k * units:(k + 1) * units] for k in range(4))
        i, f, g, o = _sigmoid(zi), _sigmoid(zf), np.tanh(zg), _sigmoid(zo)
        ei, ef, eo = (_sigmoid_slope(zk) * ek + rho for zk, ek in ((zi, ei), (zf, ef), (zo, eo)))
        eg = (1.0 - g**2) * eg + rho
        c_new = f * c + i * g
        e_c = f * e_c + np.abs(c) * ef + np.abs(g) * ei + i * eg + rho * (np.abs(f * c) + np.abs(i * g) + np.abs(c_new))
        tc = np.tanh(c_new)
        c, h = c_new, o * tc
        e_h = np.abs(tc) * eo + o * (1.0 - tc**2) * e_c + rho * (np.abs(tc) + np.abs(h))
        outs.append(np.maximum(np.abs(h), e_h))
    return np.stack(outs, axis=1)


def _gru_magnitude(x: np.ndarray, m: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """Error magnitudes E_h (at least |h_t|) of a GRU (reset_after=True, Keras's and torch's
    formulation), (N, T, units); the model of :func:`_lstm_magnitude`. Step t, gates z r n,
    a_k their pre-activations::

        E_x   = m_t |W| + |b_0|,   E_r' = |h_{t-1}| |U| + |b_1| + E_h(t-1) |U|
        E_z   = s'(a_z) (E_x_z + E_r'_z + rho |a_z|) + rho                  (so E_r)
        E_n   = (1 - n^2) (E_x_n + r E_r'_n + |h U + b_1|_n E_r + rho (|r (h U + b_1)_n| + |a_n|)) + rho
        E_h(t) = z E_h(t-1) + (1 - z) E_n + |h_{t-1} - n| E_z + rho (2 |h_{t-1}| + 2 |n| + |h_t|)

    The last line's roundings cover both orders of the update, Keras's z h + (1 - z) n and
    torch's n + z (h - n); its linear part is the function's, not the formula's. h is a
    convex combination (z in (0, 1)) of h_{t-1} and n = tanh(.), so |h| <= 1 and E_h(t-1)
    is damped by z: E_h grows at most linearly in T.
    """
    units, rho = p["recurrent"].shape[0], 1.0 / RECURRENT_OPS
    w, u = np.abs(p["kernel"]), np.abs(p["recurrent"])
    h = np.zeros((x.shape[0], units))
    e_h, outs = np.zeros_like(h), []
    for t in range(x.shape[1]):
        xz = x[:, t] @ p["kernel"] + p["bias"][0]
        hz = h @ p["recurrent"] + p["bias"][1]
        e_x = m[:, t] @ w + np.abs(p["bias"][0])
        e_r = np.abs(h) @ u + np.abs(p["bias"][1]) + e_h @ u
        sl = [slice(k * units, (k + 1) * units) for k in range(3)]
        a_z, a_r = xz[:, sl[0]] + hz[:, sl[0]], xz[:, sl[1]] + hz[:, sl[1]]
        z, r = _sigmoid(a_z), _sigmoid(a_r)
        e_z = _sigmoid_slope(a_z) * (e_x[:, sl[0]] + e_r[:, sl[0]] + rho * np.abs(a_z)) + rho
        e_rg = _sigmoid_slope(a_r) * (e_x[:, sl[1]] + e_r[:, sl[1]] + rho * np.abs(a_r)) + rho
        hn = hz[:, sl[2]]
        a_n = xz[:, sl[2]] + r * hn
        cand = np.tanh(a_n)
        e_n = (1.0 - cand**2) * (e_x[:, sl[2]] + r * e_r[:, sl[2]] + np.abs(hn) * e_rg
                                 + rho * (np.abs(r * hn) + np.abs(a_n))) + rho
        h_new = z * h + (1.0 - z) * cand
        e_h = z * e_h + (1.0 - z) * e_n + np.abs(h - cand) * e_z + rho * (2 * np.abs(h) + 2 * np.abs(cand) + np.abs(h_new))
        h = h_new
        outs.append(np.maximum(np.abs(h), e_h))
    return np.stack(outs, axis=1)


def magnitudes(spec: ModelSpec, inputs: Iterable[np.ndarray], framework: str) -> list[float]:
    """:func:`forward_magnitude` per input, with the framework's normalisation epsilons."""
    bn, ln = (KERAS_BN_EPS, KERAS_LN_EPS) if framework == "keras" else (TORCH_BN_EPS, TORCH_LN_EPS)
    return [forward_magnitude(spec, x, bn_eps=bn, ln_eps=ln) for x in inputs]


def model_tolerance(spec: ModelSpec, dtype: str | None = None, *, device: str = "cpu",
                    framework: str | None = None) -> Tolerance:
    """Two independent evaluations of the spec's forward pass (e.g. torch and ONNX Runtime).

    Per dense or conv layer a dot product over its fan-in (kernel window x channels) plus
    bias and activation; a normalisation layer reduces over the width; pooling one rounding
    (average) per layer; a recurrent layer about ten roundings a step (two products, four
    gate functions, the cell update; its steps are in :func:`forward_magnitude`'s scale) over
    input plus units. Forward error bound per evaluation from :func:`numerics.tolerance`;
    two evaluations compared with each other add.
    """
    ops, reduction = 0, 0
    for layer, shape in zip(spec.layers, layer_shapes(spec)):
        if layer.kind in WEIGHTED:
            ops += 3
            reduction += shape[-1] * (layer.kernel ** (1 if layer.kind == "conv1d" else 2) if layer.kind != "dense" else 1)
        elif layer.kind in ("batchnorm", "layernorm"):
            ops += 6
            reduction += shape[-1] if layer.kind == "layernorm" else 0
        elif layer.kind == "avgpool":
            ops += 1
            reduction += POOL ** (len(shape) - 1)
        elif layer.kind in RECURRENT:
            ops += RECURRENT_OPS
            reduction += shape[-1] + layer.width
    # matmul=True: on a GPU TensorFlow runs float32 matmuls in TF32 by default.
    one = tolerance(dtype or spec.dtype, ops=ops, reduction=reduction, device=device, framework=framework, matmul=True)
    return combined(one, one)
