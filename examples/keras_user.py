"""A Keras model of a user's shape: two inputs, a custom layer, layer and batch normalisation, dropout.

`--dl-model examples.keras_user:two_tower`. The layers and inputs take no dtype: they follow
Keras's global dtype policy and floatx, which is how the plugin builds the model in float64,
inputs included (gradient check), and mixed_float16 (mixed precision claims).
"""

from __future__ import annotations

import keras
import numpy as np

from pytest_dlconform.api.usermodels import UserModel

A, B, BATCH = 5, 3, 8


@keras.saving.register_keras_serializable(package="examples")
class Gate(keras.layers.Layer):
    """y = x * sigmoid(x @ w): a learnt gate (a custom layer, saved by its registered name)."""

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1], shape[-1]), initializer="glorot_uniform", name="w")

    def call(self, x):
        return x * keras.ops.sigmoid(keras.ops.matmul(x, self.w))


def two_tower() -> UserModel:
    a = keras.Input((A,), name="a")
    b = keras.Input((B,), name="b")
    ha = keras.layers.LayerNormalization()(keras.layers.Dense(8, activation="tanh")(a))
    hb = keras.layers.BatchNormalization()(keras.layers.Dense(8)(b))
    h = Gate()(keras.layers.Concatenate()([ha, hb]))
    h = keras.layers.Dropout(0.25, seed=3)(h)
    model = keras.Model([a, b], keras.layers.Dense(2, name="score")(h), name="two_tower")
    rng = np.random.default_rng(0)
    for layer in model.layers:  # moving statistics away from 0/1, as after training
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.moving_mean.assign(rng.uniform(-0.5, 0.5, 8))
            layer.moving_variance.assign(rng.uniform(0.5, 2.0, 8))

    def make_inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        return rng.normal(size=(BATCH, A)).astype(np.float32), rng.normal(size=(BATCH, B)).astype(np.float32)

    return UserModel(model, make_inputs)
