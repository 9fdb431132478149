"""Keras models a user writes from docs/own-model.md, for test_model_float64_gradients.py.

``own_model``: a custom layer and a custom activation, layers without a dtype (they follow the
global dtype policy) and ``keras.Input`` left at its default dtype, which is floatx. The
``float32_input*`` variants declare ``keras.Input(dtype="float32")`` themselves, so even a
float64 build rounds their inputs to float32; ``float32_input_wrong_input_gradient`` also
has a custom op, right after the input, whose gradient is 5% too large, so only the input's
gradient is wrong (every parameter sits behind it).
"""

from __future__ import annotations

import keras
import numpy as np

from pytest_dlconform.api.usermodels import UserModel

FEATURES, BATCH = 6, 8


def soft_clip(x):
    """A custom activation: smooth, odd, unbounded, 3 tanh(x / 3) + x / 10."""
    return 3.0 * keras.ops.tanh(x / 3.0) + 0.1 * x


@keras.saving.register_keras_serializable(package="tests_own_models")
class Residual(keras.layers.Layer):
    """y = x + gelu(x @ w + b) * gain: a custom layer with three weights."""

    def build(self, shape):
        d = shape[-1]
        self.w = self.add_weight(shape=(d, d), initializer="glorot_uniform", name="w")
        self.b = self.add_weight(shape=(d,), initializer="random_normal", name="b")
        self.gain = self.add_weight(shape=(d,), initializer="ones", name="gain")

    def call(self, x):
        return x + keras.activations.gelu(keras.ops.matmul(x, self.w) + self.b) * self.gain


@keras.saving.register_keras_serializable(package="tests_own_models")
class TooSteep(keras.layers.Layer):
    """sin(x) whose hand-written gradient is 5% too large (tf.custom_gradient)."""

    def call(self, x):
        import tensorflow as tf

        @tf.custom_gradient
        def op(v):
            return tf.sin(v), lambda g: 1.05 * g * tf.cos(v)

        return op(x)


def _build(input_dtype, first=None) -> UserModel:
    inp = keras.Input((FEATURES,), name="x", dtype=input_dtype)
    h = first(inp) if first is not None else inp
    h = keras.layers.Dense(12, activation=soft_clip)(h)
    h = Residual()(h)
    h = keras.layers.LayerNormalization()(h)
    out = keras.layers.Dense(3, activation=soft_clip)(h)
    model = keras.Model(inp, out)

    def make_inputs(seed: int) -> np.ndarray:
        return np.random.default_rng(seed).normal(size=(BATCH, FEATURES)).astype(np.float32)

    return UserModel(model, make_inputs)


def own_model() -> UserModel:
    return _build(None)


def float32_input() -> UserModel:
    return _build("float32")


def float32_input_wrong_input_gradient() -> UserModel:
    return _build("float32", TooSteep())
