"""modules.keras.apis: the functional API, Sequential and a subclassed keras.Model with the same
layers and weights compute the same function.

Oracle: bitwise equality between the three (the same kernels run in the same order) and a
float64 numpy evaluation of the layer stack within the float32 tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, assert_equal, budget, deterministic_kernels, evidence, tolerance

CLAIM = "modules.keras.apis"
ACTIVATIONS = {"linear": lambda a: a, "relu": lambda a: np.maximum(a, 0), "tanh": np.tanh,
               "sigmoid": lambda a: 1 / (1 + np.exp(-a))}


def _layers(keras, spec):
    out = []
    for units, act, bn in spec:
        out.append(keras.layers.Dense(units, activation=act))
        if bn:
            out.append(keras.layers.BatchNormalization())
    return out


def _models(keras, dim, spec):
    inp = keras.Input((dim,))
    h = inp
    for layer in _layers(keras, spec):
        h = layer(h)
    functional = keras.Model(inp, h)
    sequential = keras.Sequential([keras.Input((dim,)), *_layers(keras, spec)])

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.stack = _layers(keras, spec)  # a list attribute: tracked

        def call(self, x, training=False):
            for layer in self.stack:
                x = layer(x, training=training)
            return x

    sub = Subclassed()
    sub(np.zeros((1, dim), np.float32))  # build
    return functional, sequential, sub


def _numpy_forward(x, weights, spec):
    h, i = x.astype(np.float64), 0
    for _, act, bn in spec:
        h = ACTIVATIONS[act](h @ weights[i].astype(np.float64) + weights[i + 1])
        i += 2
        if bn:  # inference: moving statistics
            gamma, beta, mean, var = (w.astype(np.float64) for w in weights[i: i + 4])
            h = gamma * (h - mean) / np.sqrt(var + 1e-3) + beta
            i += 4
    return h


layer_specs = st.lists(st.tuples(st.integers(1, 8), st.sampled_from(sorted(ACTIVATIONS)), st.booleans()),
                       min_size=1, max_size=4)


@pytest.mark.claim(CLAIM)
@budget(6)
@given(dim=st.integers(1, 6), spec=layer_specs, batch=st.integers(2, 5), seed=st.integers(0, 2**32 - 1))
def test_functional_sequential_and_subclassed_agree(tf, dl_device, dim, spec, batch, seed):
    import keras

    functional, sequential, sub = _models(keras, dim, spec)
    rng = np.random.default_rng(seed)
    weights = [rng.normal(size=w.shape).astype(np.float32) for w in functional.get_weights()]
    # BatchNormalization's moving variance must stay positive.
    weights = [np.abs(w) + 0.5 if "moving_variance" in v.path else w for w, v in zip(weights, functional.weights)]
    shapes = [tuple(w.shape) for w in functional.get_weights()]
    for name, model in (("Sequential", sequential), ("subclassed", sub)):
        got = [tuple(w.shape) for w in model.get_weights()]
        assert got == shapes, f"{name} model weights {got}, but should match the functional model's {shapes}"
        assert len(model.trainable_weights) == len(functional.trainable_weights), f"{name}: trainable weight count"
        model.set_weights(weights)
    functional.set_weights(weights)
    x = rng.normal(size=(batch, dim)).astype(np.float32)
    want = np.asarray(functional(x))
    for training in (False, True):
        with deterministic_kernels(dl_device):  # bitwise on a GPU: the same kernels, deterministically
            ref = np.asarray(functional(x, training=training))
            models = (("Sequential", sequential), ("subclassed", sub))
            outs = {name: np.asarray(model(x, training=training)) for name, model in models}
        for name, out in outs.items():
            assert_equal(out, ref, what=f"{name} vs functional output (training={training})")
    # Dense layers are float32 matmuls: TF32 on a GPU where Keras's backend allows it.
    assert_close(want, _numpy_forward(x, weights, spec),
                 tolerance("float32", ops=6 * len(spec), reduction=8, device=dl_device, framework="keras", matmul=True),
                 what="functional model vs float64 numpy")
    evidence.covers("functional", "Sequential", "subclassed", "list-tracking", "training=True", "training=False")
    # trainable=False on a model is recursive: every weight becomes non-trainable.
    for name, model in (("functional", functional), ("Sequential", sequential), ("subclassed", sub)):
        model.trainable = False
        assert not model.trainable_weights and len(model.non_trainable_weights) == len(shapes), (
            f"{name} with trainable=False: {len(model.trainable_weights)} trainable and "
            f"{len(model.non_trainable_weights)} non-trainable weights, but should be 0 and {len(shapes)}")
        assert all(not layer.trainable for layer in model.layers), (
            f"{name} with trainable=False: an inner layer is still trainable")
    evidence.covers("trainable=False")
