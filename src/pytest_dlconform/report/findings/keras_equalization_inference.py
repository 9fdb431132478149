"""keras.layers.Equalization does nothing at inference: training=False returns the input, and a
symbolic call returns the input tensor itself, so a functional model holding it is "a cycle".

Claim (dlconform modules.keras.layer-contract): a layer without randomness gives the same output
with training=True and training=False, and a functional model holding it can be built, saved and
loaded.
Documentation: help(keras.layers.Equalization): "Preprocessing layer for histogram equalization on
    image channels. ... This layer works with both grayscale and color images, performing
    equalization independently on each color channel. At inference time, the equalization is
    consistently applied."
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): Equalization()(x,
training=False) returns x unchanged (training=True equalizes; it is deterministic, so the two should
be equal): transform_images does its work under `if training:` only. And
Equalization.compute_output_spec is `return inputs`, so calling it on a keras.Input returns that very
KerasTensor: keras.Model(inp, Equalization()(inp)) raises ValueError "... from operation
'equalization' is part of a cycle" (the suite's .keras save round trip hits this). model.predict
and evaluate call layers with training=False, so a model trained on equalized images is evaluated
on raw ones.
Found by: suites/modules/test_keras_layer_records.py::test_layer_contract[*-Equalization]
(training-flag: max abs difference 4.081e+01) and test_keras_save_roundtrip[*-augmentation].

Run: python keras_equalization_inference.py
Exit 1 while inference skips the equalization or the symbolic output is the input, 0 once
training=False equals training=True and a functional model builds, 2 if keras cannot be imported.
"""

import os
import re
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

X = np.random.default_rng(0).uniform(0.0, 255.0, (2, 5, 6, 3)).astype(np.float32)


def observed():
    """(max|inference - training|, inference is the input, symbolic output is the input, keras.Model outcome)."""
    import keras

    layer = keras.layers.Equalization()
    inference = np.asarray(layer(X, training=False))
    training = np.asarray(layer(X, training=True))
    inp = keras.Input(X.shape[1:])
    out = layer(inp)
    try:
        keras.Model(inp, out)
        model = "builds"
    except Exception as exc:  # the finding is an exception from the documented use
        first = re.sub(r"<KerasTensor[^>]*>", "<KerasTensor>", str(exc).strip().splitlines()[0])
        model = f"{type(exc).__name__} ({re.sub(r'_[0-9]+', '', first)[:160]})"
    return float(np.max(np.abs(inference - training))), bool(np.array_equal(inference, X)), out is inp, model


def judge(got):
    diff, identity, same_tensor, model = got
    holds = diff == 0.0 and not same_tensor and model == "builds"
    return holds, (f"keras.layers.Equalization() on a {X.shape} image batch in [0, 255]: training=False "
                   f"{'returns the input unchanged' if identity else 'changes the input'}, max|training=False - "
                   f"training=True| = {diff:.4g}; symbolic call returns its input tensor: {same_tensor}; "
                   f"keras.Model(inp, Equalization()(inp)): {model}; documented: equalization applied at inference")


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    holds, line = judge(got)
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
