"""keras.layers.RandomCrop called with training=False returns its input uncropped (and uncast).

Claim (dlconform modules.keras.layer-contract): a layer's output has its documented shape
(compute_output_shape agrees), and under mixed_float16 its compute dtype, float16.
Documentation: help(keras.layers.RandomCrop): "At inference time, and during training if an input
    image is smaller than the target size, the input will be resized and cropped so as to return
    the largest possible window in the image that matches the target aspect ratio."; "Output shape:
    3D (unbatched) or 4D (batched) tensor with shape: `(..., target_height, target_width, channels)`."
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): RandomCrop(3, 4) on a
(2, 5, 6, 3) batch with training=False returns the (2, 5, 6, 3) input itself, while
compute_output_shape says (2, 3, 4, 3); under mixed_float16 the inference
output is the float32 input. get_random_transformation computes the centre window for
training=False, but transform_images does all its work under `if training:` and returns the images
untouched otherwise. model.predict/evaluate call layers with training=False, so a model trained
on crops is evaluated on the uncropped images (a shape error downstream where the size matters,
silently otherwise, e.g. behind global pooling).
Found by: suites/modules/test_keras_layer_records.py::test_layer_contract[*-RandomCrop]
(properties output-shape, mixed_float16).

Run: python keras_randomcrop_inference.py
Exit 1 while the inference output is not the documented centre window, 0 once it is, 2 if keras
cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HEIGHT, WIDTH = 3, 4
X = np.random.default_rng(0).uniform(0.0, 255.0, (2, 5, 6, 3)).astype(np.float32)


def observed():
    """(inference output shape, training output shape, compute_output_shape, mixed_float16 inference dtype)."""
    import keras

    layer = keras.layers.RandomCrop(HEIGHT, WIDTH, seed=1)
    inference = tuple(layer(X, training=False).shape)
    training = tuple(layer(X, training=True).shape)
    declared = tuple(layer.compute_output_shape(X.shape))
    mixed = keras.layers.RandomCrop(HEIGHT, WIDTH, dtype="mixed_float16")(X, training=False).dtype
    return inference, training, declared, str(getattr(mixed, "name", mixed))


def judge(got):
    inference, training, declared, mixed = got
    want = (X.shape[0], HEIGHT, WIDTH, X.shape[3])
    holds = inference == want and mixed == "float16"
    return holds, (f"keras.layers.RandomCrop({HEIGHT}, {WIDTH}) on a {X.shape} batch: training=False gives shape "
                   f"{inference} (mixed_float16: {mixed}), training=True {training}, compute_output_shape {declared}; "
                   f"documented at inference: the centre window resized to {want} (float16 under mixed_float16)")


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
