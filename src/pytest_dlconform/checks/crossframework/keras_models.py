"""The architecture as a Keras model (any Keras backend) and its run on TensorFlow:
forward, loss, gradients (GradientTape) and the batch-normalisation state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .architectures import Case, Layer, Result, weight_shapes
from .architectures import to_float64 as _np


def keras_in_process(backend: str = "tensorflow") -> Any:
    """The Keras imported in this process, checked to run on ``backend`` (Keras fixes its
    backend at import: other backends run in fresh interpreters)."""
    import keras

    if keras.backend.backend() != backend:
        from ...frameworks import HarnessError

        raise HarnessError(
            f"Keras runs on the {keras.backend.backend()!r} backend in this process (KERAS_BACKEND); the in-process "
            f"tests need {backend!r}: unset KERAS_BACKEND for the pytest run"
        )
    return keras


def keras_model(keras: Any, case: Case, weights: Mapping[str, np.ndarray], dtype: str) -> Any:
    """A Keras Sequential model of ``case.arch`` holding ``weights`` (Keras layout)."""
    layers = [_keras_layer(keras, layer, dtype) for layer in case.arch.layers]
    model = keras.Sequential([keras.Input(shape=case.arch.input_shape, dtype=dtype), *layers])
    for i, layer in enumerate(layers):
        names = [n for n, _ in weight_shapes(case.arch) if n.split(".", 1)[0] == str(i)]
        if names:
            layer.set_weights([np.asarray(weights[n], dtype=dtype) for n in names])
    return model


def _keras_layer(keras: Any, layer: Layer, dtype: str) -> Any:
    L = keras.layers
    if layer.kind == "dense":
        return L.Dense(layer.units, activation=layer.activation, use_bias=layer.use_bias, dtype=dtype)
    if layer.kind == "conv":
        return L.Conv2D(layer.units, layer.kernel, strides=layer.stride, padding=layer.padding,
                        dilation_rate=layer.dilation, activation=layer.activation, use_bias=layer.use_bias, dtype=dtype)
    if layer.kind == "layernorm":
        return L.LayerNormalization(epsilon=layer.epsilon, dtype=dtype)
    if layer.kind == "batchnorm":
        return L.BatchNormalization(epsilon=layer.epsilon, momentum=layer.momentum, dtype=dtype)
    return L.Flatten(dtype=dtype)


def keras_loss(keras: Any, case: Case, dtype: str) -> tuple[Any, Callable[[np.ndarray], np.ndarray]]:
    """The Keras loss object and how it wants the labels (integers or one-hot)."""
    spec, classes = case.arch.loss, case.arch.classes
    if spec.kind == "categorical":
        obj = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=spec.label_smoothing, dtype=dtype)
        return obj, lambda y: np.eye(classes, dtype=dtype)[y]
    obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=spec.ignore_class, dtype=dtype)
    return obj, lambda y: y


def keras_state(keras: Any, model: Any, case: Case) -> Result:
    out: Result = {}
    for i, layer in enumerate(case.arch.layers):
        if layer.kind == "batchnorm":
            k = model.layers[i]
            out[f"state/{i}.moving_mean"] = _np(keras.ops.convert_to_numpy(k.moving_mean))
            out[f"state/{i}.moving_variance"] = _np(keras.ops.convert_to_numpy(k.moving_variance))
    return out



def tf_run(tf: Any, keras: Any, case: Case, dtype: str, device: str = "/CPU:0",
           weights: Mapping[str, np.ndarray] | None = None) -> Result:
    """The Keras model on TensorFlow: forward, loss and gradients (GradientTape).
    ``weights`` replaces the case's own (Keras layout)."""
    with tf.device(device):
        model = keras_model(keras, case, case.weights() if weights is None else weights, dtype)
        loss_obj, labels_for = keras_loss(keras, case, dtype)
        x, labels = case.inputs()
        xt = tf.constant(np.asarray(x, dtype=dtype))
        names, variables = keras_trainables(model, case)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            logits = model(xt, training=case.training)
            loss = loss_obj(labels_for(labels), logits)
        grads = tape.gradient(loss, [xt, *variables])
    out = {"logits": _np(logits), "loss": _np(loss), "grad/x": _np(grads[0])}
    out.update({f"grad/{n}": _np(g) for n, g in zip(names, grads[1:])})
    return {**out, **keras_state(keras, model, case)}


def keras_trainables(model: Any, case: Case) -> tuple[list[str], list[Any]]:
    names, variables = [], []
    for i, layer in enumerate(case.arch.layers):
        k = model.layers[i]
        attrs = {"dense": ("kernel", "bias"), "conv": ("kernel", "bias"),
                 "layernorm": ("gamma", "beta"), "batchnorm": ("gamma", "beta")}.get(layer.kind, ())
        for attr in attrs:
            if attr == "bias" and not layer.use_bias:
                continue
            names.append(f"{i}.{attr}")
            variables.append(getattr(k, attr))
    return names, variables
