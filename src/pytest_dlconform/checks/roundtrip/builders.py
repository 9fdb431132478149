"""Framework builders: the same :class:`ModelSpec` as a torch module, a Keras model, and a
servable ``tf.Module``, with every parameter and buffer taken from the spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .models import POOL, RECURRENT, SOFTPLUS_THRESHOLD, WEIGHTED, Layer, ModelSpec, layer_shapes, parameters


def build_torch(spec: ModelSpec, torch: Any) -> Any:
    """``torch.nn.Sequential`` for the spec, parameters and buffers set, in eval mode.

    Tensors stay channels last between modules (so Flatten keeps Keras's H, W, C order);
    convolution, pooling and batch normalisation of a sequence or an image are wrapped in
    permutations to and from channels first."""
    from . import torch_layers as tl

    nn, mods = torch.nn, []
    dtype = getattr(torch, spec.dtype)
    for layer, p, shape in zip(spec.layers, parameters(spec), layer_shapes(spec)):
        rank = len(shape) + 1  # with the batch
        first, last = ([0, 2, 1], [0, 2, 1]) if rank == 3 else ([0, 3, 1, 2], [0, 2, 3, 1])
        if layer.kind == "dense":
            lin = nn.Linear(p["kernel"].shape[0], layer.width, dtype=dtype)
            _set(torch, lin.weight, p["kernel"].T)
            _set(torch, lin.bias, p["bias"])
            mods += [lin, *_torch_activation(nn, layer)]
        elif layer.kind in ("conv1d", "conv2d"):
            conv_cls = nn.Conv1d if layer.kind == "conv1d" else nn.Conv2d
            conv = conv_cls(shape[-1], layer.width, layer.kernel, dtype=dtype)
            order = (2, 1, 0) if layer.kind == "conv1d" else (3, 2, 0, 1)  # (k.., in, out) -> (out, in, k..)
            _set(torch, conv.weight, p["kernel"].transpose(order))
            _set(torch, conv.bias, p["bias"])
            mods += [tl.Permute(first), conv, tl.Permute(last), *_torch_activation(nn, layer)]
        elif layer.kind in ("maxpool", "avgpool"):
            pool = {("maxpool", 3): nn.MaxPool1d, ("avgpool", 3): nn.AvgPool1d, ("maxpool", 4): nn.MaxPool2d,
                    ("avgpool", 4): nn.AvgPool2d}[layer.kind, rank](POOL)
            mods += [tl.Permute(first), pool, tl.Permute(last)]
        elif layer.kind == "flatten":
            mods.append(nn.Flatten())
        elif layer.kind == "batchnorm":
            bn = (nn.BatchNorm2d if rank == 4 else nn.BatchNorm1d)(p["gamma"].shape[0], dtype=dtype)
            for t, v in ((bn.weight, p["gamma"]), (bn.bias, p["beta"]), (bn.running_mean, p["mean"]),
                         (bn.running_var, p["var"])):
                _set(torch, t, v)
            bn.num_batches_tracked.fill_(int(p["count"]))
            mods += [tl.Permute(first), bn, tl.Permute(last)] if rank > 2 else [bn]
        elif layer.kind == "layernorm":
            ln = nn.LayerNorm(p["gamma"].shape[0], dtype=dtype)
            _set(torch, ln.weight, p["gamma"])
            _set(torch, ln.bias, p["beta"])
            mods.append(ln)
        elif layer.kind == "embedding":
            emb = nn.Embedding(spec.vocab, layer.width, dtype=dtype)
            _set(torch, emb.weight, p["table"])
            mods.append(emb)
        elif layer.kind in RECURRENT:
            mods.append(_torch_recurrent(torch, tl, layer, p, shape[-1], dtype))
        else:
            mods.append(nn.Dropout(layer.rate))
    return nn.Sequential(*mods).eval()


def _set(torch: Any, tensor: Any, value: np.ndarray) -> None:
    with torch.no_grad():
        tensor.copy_(torch.from_numpy(np.ascontiguousarray(value)))


def _torch_activation(nn: Any, layer: Layer) -> list[Any]:
    name, p = layer.activation, layer.param
    if name == "linear":
        return []
    if name == "elu":
        return [nn.ELU(alpha=1.0 if p is None else p)]
    if name == "leaky_relu":
        return [nn.LeakyReLU(negative_slope=0.2 if p is None else p)]
    if name in ("gelu", "gelu_tanh"):
        return [nn.GELU(approximate="tanh" if name == "gelu_tanh" else "none")]
    if name == "softplus":
        return [nn.Softplus(beta=1.0 if p is None else p, threshold=SOFTPLUS_THRESHOLD)]
    return [{"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "selu": nn.SELU}[name]()]


def _torch_recurrent(torch: Any, tl: Any, layer: Layer, p: Mapping[str, np.ndarray], width: int, dtype: Any) -> Any:
    """nn.LSTM / nn.GRU with Keras's weights: kernels transposed; LSTM gates i f g o are
    Keras's i f c o (one bias: bias_hh = 0); GRU gates r z n are Keras's z r h reordered,
    with reset_after=True's input and recurrent biases as bias_ih and bias_hh."""
    units = layer.width
    if layer.kind == "lstm":
        rnn = torch.nn.LSTM(width, units, batch_first=True, dtype=dtype)
        w, u, b_ih, b_hh = p["kernel"], p["recurrent"], p["bias"], np.zeros_like(p["bias"])
        wrap = tl.LSTMOutput
    else:
        rnn = torch.nn.GRU(width, units, batch_first=True, dtype=dtype)
        idx = np.r_[units:2 * units, 0:units, 2 * units:3 * units]  # keras z r h -> torch r z n
        w, u, b_ih, b_hh = p["kernel"][:, idx], p["recurrent"][:, idx], p["bias"][0][idx], p["bias"][1][idx]
        wrap = tl.GRUOutput
    for t, v in ((rnn.weight_ih_l0, w.T), (rnn.weight_hh_l0, u.T), (rnn.bias_ih_l0, b_ih), (rnn.bias_hh_l0, b_hh)):
        _set(torch, t, v)
    return wrap(rnn, layer.sequences)


def build_keras(spec: ModelSpec, keras: Any, *, batch_size: int | None = None) -> Any:
    """A functional Keras model for the spec (input named "x"), weights and moving statistics
    set. ``batch_size`` fixes the batch dimension (TFLite converts recurrent layers only so)."""
    x = inp = keras.Input(spec.input_shape, batch_size=batch_size, dtype=spec.input_dtype, name="x")
    created = []
    for i, layer in enumerate(spec.layers):
        main, extra = _keras_layer(keras, spec, layer, i)
        x = main(x)
        for e in extra:
            x = e(x)
        created.append(main)
    model = keras.Model(inp, x, name="spec_model")
    for lyr, layer, p in zip(created, spec.layers, parameters(spec)):
        if layer.kind in WEIGHTED:
            lyr.set_weights([p["kernel"], p["bias"]])
        elif layer.kind == "batchnorm":
            lyr.set_weights([p["gamma"], p["beta"], p["mean"], p["var"]])
        elif layer.kind == "layernorm":
            lyr.set_weights([p["gamma"], p["beta"]])
        elif layer.kind == "embedding":
            lyr.set_weights([p["table"]])
        elif layer.kind in RECURRENT:
            lyr.set_weights([p["kernel"], p["recurrent"], p["bias"]])
    return model


# Activations Dense(activation=...) runs with their documented defaults; those with a
# parameter of the layer's own become a layer of their own after a linear Dense/Conv.
_KERAS_PLAIN = ("linear", "relu", "tanh", "sigmoid", "gelu", "selu")


def _keras_layer(keras: Any, spec: ModelSpec, layer: Layer, i: int) -> tuple[Any, list[Any]]:
    L, dt = keras.layers, spec.dtype
    if layer.kind in WEIGHTED:
        act, extra = _keras_activation(keras, layer, i, dt)
        cls = {"dense": L.Dense, "conv1d": L.Conv1D, "conv2d": L.Conv2D}[layer.kind]
        args = (layer.width,) if layer.kind == "dense" else (layer.width, layer.kernel)
        return cls(*args, activation=act, dtype=dt, name=f"{layer.kind}_{i}"), extra
    if layer.kind in ("maxpool", "avgpool"):
        rank = len(layer_shapes(spec)[i]) + 1
        cls = {("maxpool", 3): L.MaxPooling1D, ("avgpool", 3): L.AveragePooling1D, ("maxpool", 4): L.MaxPooling2D,
               ("avgpool", 4): L.AveragePooling2D}[layer.kind, rank]
        return cls(POOL, dtype=dt, name=f"{layer.kind}_{i}"), []
    simple = {"batchnorm": lambda: L.BatchNormalization(dtype=dt, name=f"batchnorm_{i}"),
              "layernorm": lambda: L.LayerNormalization(dtype=dt, name=f"layernorm_{i}"),
              "flatten": lambda: L.Flatten(dtype=dt, name=f"flatten_{i}"),
              "embedding": lambda: L.Embedding(spec.vocab, layer.width, dtype=dt, name=f"embedding_{i}"),
              "lstm": lambda: L.LSTM(layer.width, return_sequences=layer.sequences, dtype=dt, name=f"lstm_{i}"),
              "gru": lambda: L.GRU(layer.width, return_sequences=layer.sequences, dtype=dt, name=f"gru_{i}"),
              "dropout": lambda: L.Dropout(layer.rate, seed=spec.seed % 1000 + i, name=f"dropout_{i}")}
    return simple[layer.kind](), []


def _keras_activation(keras: Any, layer: Layer, i: int, dtype: str) -> tuple[str, list[Any]]:
    L, name, p = keras.layers, layer.activation, layer.param
    if name in _KERAS_PLAIN or (name in ("elu", "softplus") and p in (None, 1.0)):
        return name, []
    if name == "elu":
        return "linear", [L.ELU(alpha=p, dtype=dtype, name=f"elu_{i}")]
    if name == "leaky_relu":
        return "linear", [L.LeakyReLU(negative_slope=0.2 if p is None else p, dtype=dtype, name=f"leaky_relu_{i}")]
    raise ValueError(f"Keras has no layer for {name}{'' if p is None else f'({p:g})'}: "
                     "Keras's softplus has no parameter and its gelu layer activation is the exact one")


def servable_module(tf: Any, model: Any, spec: ModelSpec) -> Any:
    """A ``tf.Module`` for ``tf.saved_model.save``: ``serve`` (inference, the serving
    signature), ``train_forward`` (batch statistics, updates the moving ones), a call
    counter, and every variable under ``state`` by its Keras path, so the loaded object
    exposes its state by name."""
    spec_x = tf.TensorSpec([None, *spec.input_shape], getattr(tf, spec.input_dtype), name="x")

    class Servable(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="servable")
            self.model = model
            self.calls = tf.Variable(spec.seed % 997, dtype=tf.int64, trainable=False, name="calls")
            self.state = {v.path: v for v in model.variables}
            self.state["calls"] = self.calls

        # autograph=False: straight-line code, and no source lookup for a class built here.
        @tf.function(input_signature=[spec_x], autograph=False)
        def serve(self, x: Any) -> Any:
            return {"y": self.model(x, training=False)}

        @tf.function(input_signature=[spec_x], autograph=False)
        def train_forward(self, x: Any) -> Any:
            return {"y": self.model(x, training=True)}

        @tf.function(input_signature=[], autograph=False)
        def count(self) -> Any:
            self.calls.assign_add(1)
            return self.calls.read_value()

    return Servable()
