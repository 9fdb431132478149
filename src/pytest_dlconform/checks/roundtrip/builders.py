"""Framework builders: the same :class:`ModelSpec` as a torch module, a Keras model, and a
servable ``tf.Module``, with every parameter and buffer taken from the spec."""

from __future__ import annotations

from typing import Any

from .models import ModelSpec, parameters


def build_torch(spec: ModelSpec, torch: Any) -> Any:
    """``torch.nn.Sequential`` for the spec, parameters and buffers set, in eval mode."""
    nn, mods = torch.nn, []
    dtype = getattr(torch, spec.dtype)
    for layer, p in zip(spec.layers, parameters(spec)):
        if layer.kind == "dense":
            lin = nn.Linear(p["kernel"].shape[0], layer.width, dtype=dtype)
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(p["kernel"].T.copy()))
                lin.bias.copy_(torch.from_numpy(p["bias"]))
            mods.append(lin)
            if layer.activation != "linear":
                mods.append({"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "elu": nn.ELU}[layer.activation]())
        elif layer.kind == "batchnorm":
            bn = nn.BatchNorm1d(p["gamma"].shape[0], dtype=dtype)
            with torch.no_grad():
                bn.weight.copy_(torch.from_numpy(p["gamma"]))
                bn.bias.copy_(torch.from_numpy(p["beta"]))
                bn.running_mean.copy_(torch.from_numpy(p["mean"]))
                bn.running_var.copy_(torch.from_numpy(p["var"]))
                bn.num_batches_tracked.fill_(int(p["count"]))
            mods.append(bn)
        elif layer.kind == "layernorm":
            ln = nn.LayerNorm(p["gamma"].shape[0], dtype=dtype)
            with torch.no_grad():
                ln.weight.copy_(torch.from_numpy(p["gamma"]))
                ln.bias.copy_(torch.from_numpy(p["beta"]))
            mods.append(ln)
        else:
            mods.append(nn.Dropout(layer.rate))
    return nn.Sequential(*mods).eval()


def build_keras(spec: ModelSpec, keras: Any) -> Any:
    """A functional Keras model for the spec (input named "x"), weights and moving statistics set."""
    L = keras.layers
    x = inp = keras.Input((spec.in_features,), dtype=spec.dtype, name="x")
    created = []
    for i, layer in enumerate(spec.layers):
        if layer.kind == "dense":
            lyr = L.Dense(layer.width, activation=layer.activation, dtype=spec.dtype, name=f"dense_{i}")
        elif layer.kind == "batchnorm":
            lyr = L.BatchNormalization(dtype=spec.dtype, name=f"batchnorm_{i}")
        elif layer.kind == "layernorm":
            lyr = L.LayerNormalization(dtype=spec.dtype, name=f"layernorm_{i}")
        else:
            lyr = L.Dropout(layer.rate, seed=spec.seed % 1000 + i, name=f"dropout_{i}")
        x = lyr(x)
        created.append(lyr)
    model = keras.Model(inp, x, name="spec_model")
    for lyr, layer, p in zip(created, spec.layers, parameters(spec)):
        if layer.kind == "dense":
            lyr.set_weights([p["kernel"], p["bias"]])
        elif layer.kind == "batchnorm":
            lyr.set_weights([p["gamma"], p["beta"], p["mean"], p["var"]])
        elif layer.kind == "layernorm":
            lyr.set_weights([p["gamma"], p["beta"]])
    return model


def servable_module(tf: Any, model: Any, spec: ModelSpec) -> Any:
    """A ``tf.Module`` for ``tf.saved_model.save``: ``serve`` (inference, the serving
    signature), ``train_forward`` (batch statistics, updates the moving ones), a call
    counter, and every variable under ``state`` by its Keras path, so the loaded object
    exposes its state by name."""
    spec_x = tf.TensorSpec([None, spec.in_features], getattr(tf, spec.dtype), name="x")

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
