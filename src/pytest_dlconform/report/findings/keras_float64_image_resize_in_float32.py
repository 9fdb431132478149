"""Keras under the float64 policy: bilinear UpSampling2D, Resizing and CLAHE compute in float32.

Claim (dlconform modules.keras.layer-contract): a layer built under the "float64" policy computes
in float64: its output is float64 and, for float64 inputs and weights, almost never representable
in float32.
Documentation: help(keras.DTypePolicy): "A dtype policy determines a layer's computation and
    variable dtypes ... 'float64' ... causes both the compute and variable dtypes to be float64";
    help(keras.layers.Layer) dtype: "The dtype of the layer's computations and weights".
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): the outputs are float64
tensors whose every element is a float32 number. UpSampling2D(interpolation="bilinear") and
Resizing call keras.ops.image.resize, which on TensorFlow is tf.image.resize: "The return value has
type float32, unless the method is ResizeMethod.NEAREST_NEIGHBOR" (ResizeBilinear has a float
output only), and the layer casts that float32 result to float64.
ContrastLimitedAdaptiveHistogramEqualization converts its input with
`_transform_value_range(..., dtype="float32")` and interpolates on float32 grids
(`arange(..., dtype="float32")`), then casts back. Two causes in one symptom (a float64 layer
computing in float32): nearest-neighbour UpSampling2D and a float64 Dense are float64 throughout.
Found by: suites/modules/test_keras_layer_records.py::test_layer_contract[*-UpSampling2D],
[*-Resizing], [*-ContrastLimitedAdaptiveHistogramEqualization] (property float64).

Run: python keras_float64_image_resize_in_float32.py
Exit 1 while a float64 layer's output is all float32 numbers, 0 once each computes in float64,
2 if keras cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

X = np.random.default_rng(0).uniform(0.0, 255.0, (2, 5, 6, 3))  # float64 image batch
CASES = {
    'UpSampling2D((2, 3), interpolation="bilinear")': ("UpSampling2D", {"size": (2, 3), "interpolation": "bilinear"}),
    "Resizing(3, 4)": ("Resizing", {"height": 3, "width": 4}),
    "ContrastLimitedAdaptiveHistogramEqualization(tile_grid_size=(2, 3))": (
        "ContrastLimitedAdaptiveHistogramEqualization", {"tile_grid_size": (2, 3)}),
    'UpSampling2D((2, 3), interpolation="nearest") [control]': ("UpSampling2D", {"size": (2, 3), "interpolation": "nearest"}),
}


def observed():
    """{case: (output dtype, number of elements, how many of them are float32 numbers)}."""
    import keras

    out = {}
    for label, (cls, kwargs) in CASES.items():
        y = np.asarray(getattr(keras.layers, cls)(dtype="float64", **kwargs)(X))
        f32 = int(np.sum(y.astype(np.float32).astype(np.float64) == y))
        out[label] = (str(y.dtype), int(y.size), f32)
    return out


def judge(got):
    lines, holds = [], True
    for label, (dtype, n, f32) in got.items():
        if label.endswith("[control]"):
            continue
        # float64 arithmetic on float64 inputs: a result that is a float32 number is rare (the
        # nearest-neighbour control copies float64 inputs, none of them float32 numbers)
        wrong = dtype != "float64" or f32 > n // 2
        holds &= not wrong
        lines.append(f"{label} {dtype}, {f32} of {n} elements float32 numbers")
    dtype, n, f32 = got['UpSampling2D((2, 3), interpolation="nearest") [control]']
    return holds, ("float64 policy, float64 input: " + "; ".join(lines)
                   + f" (control: nearest UpSampling2D {f32} of {n}); documented: float64 computation")


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
