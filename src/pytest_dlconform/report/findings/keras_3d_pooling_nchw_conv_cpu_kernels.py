"""TensorFlow CPU: no float16 (and, for 3D pooling, no float64) kernels for 3D pooling, and no
non-float32 NCHW Conv2D, so these Keras layers raise under the mixed_float16 and float64 policies.

Claim (dlconform modules.keras.layer-contract): every public keras.layers layer built under the
"mixed_float16" policy outputs float16, and under "float64" outputs float64.
Documentation: https://keras.io/guides/mixed_precision/ "While mixed precision will run on most
    hardware, it will only speed up models on recent NVIDIA GPUs ... If running on CPU, mixed
    precision will run significantly slower"; help(keras.DTypePolicy): "A dtype policy determines
    a layer's computation and variable dtypes"; help(keras.layers.Conv2D) data_format
    "channels_first"; help(tf.nn.conv2d): "input: ... Must be one of the following types: `half`,
    `bfloat16`, `float32`, `float64`", data_format "NHWC" or "NCHW"; help(tf.nn.avg_pool3d):
    "type `float32`, `float64`, ...".
Observed on tensorflow-cpu 2.21.0 (keras 3.15.1): MaxPooling3D, AveragePooling3D,
AdaptiveMaxPooling3D, AdaptiveAveragePooling3D raise NotFoundError in float16 (MaxPool3D and
AvgPool3D have CPU kernels for float and bfloat16 only); in float64 AvgPool3D has no CPU kernel
(NotFoundError) and the MaxPool3D op does not admit double at all (InvalidArgumentError);
Conv2D(data_format="channels_first") raises UnimplementedError "The Conv2D op currently only
supports the NHWC tensor format on the CPU" in float16 and float64 (float32 runs through oneDNN).
The float32 versions of every case run. Same kind as findings 13 and 16 (dtypes documented,
CPU kernels missing).
Found by: suites/modules/test_keras_layer_records.py::test_layer_contract[*-Conv2D],
[*-MaxPooling3D], [*-AveragePooling3D], [*-AdaptiveMaxPooling3D], [*-AdaptiveAveragePooling3D]
(properties mixed_float16 and float64).

Run: python keras_3d_pooling_nchw_conv_cpu_kernels.py
Exit 1 while any case raises or returns another dtype, 0 once every case returns its policy's
compute dtype, 2 if keras cannot be imported.
"""

import os
import re
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

X3 = np.random.default_rng(0).standard_normal((2, 4, 4, 4, 3))
X2 = np.random.default_rng(1).standard_normal((2, 3, 5, 6))
CASES = [
    ("MaxPooling3D(2)", "MaxPooling3D", {"pool_size": 2}, X3),
    ("AveragePooling3D(2)", "AveragePooling3D", {"pool_size": 2}, X3),
    ("AdaptiveMaxPooling3D(2)", "AdaptiveMaxPooling3D", {"output_size": 2}, X3),
    ("AdaptiveAveragePooling3D(2)", "AdaptiveAveragePooling3D", {"output_size": 2}, X3),
    ("Conv2D(4, 3, channels_first)", "Conv2D", {"filters": 4, "kernel_size": 3, "data_format": "channels_first"}, X2),
]
POLICIES = {"mixed_float16": "float16", "float64": "float64", "float32": "float32"}


def observed():
    """{(policy, case): output dtype name, or the exception's class name}."""
    import keras

    out = {}
    for policy in POLICIES:
        for label, cls, kwargs, x in CASES:
            layer = getattr(keras.layers, cls)(dtype=policy, **kwargs)
            try:
                y = layer(x.astype("float64" if policy == "float64" else "float32"))
                out[(policy, label)] = re.sub(r"^.*\.", "", str(getattr(y.dtype, "name", y.dtype)))
            except Exception as exc:  # the finding is an exception from the documented call
                out[(policy, label)] = type(exc).__name__
    return out


def judge(got):
    bad = {key: v for key, v in got.items() if v != POLICIES[key[0]]}
    if not bad:
        return True, f"every case returns its policy's compute dtype: {sorted(set(got.values()))}"
    groups = []
    for policy in POLICIES:
        items = [f"{label} {v}" for (p, label), v in bad.items() if p == policy]
        if items:
            groups.append(f"{policy}: " + ", ".join(items))
    ok = [p for p in POLICIES if not any(k[0] == p for k in bad)]
    return False, ("on CPU " + "; ".join(groups) + f" (documented: the policy's compute dtype; {', '.join(ok) or 'no policy'} "
                   f"runs every case)")


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
