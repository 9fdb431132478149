"""keras.layers.SpectralNormalization does not normalise the weight in inference until the
layer has been called in training.

Claim (dlconform modules.spectral-norm): spectral normalisation divides the weight by a
power-iteration estimate of its largest singular value.
Documentation: https://keras.io/api/layers/normalization_layers/spectral_normalization/
    "Performs spectral normalization on the weights of a target layer. This wrapper
     controls the Lipschitz constant of the weights of a layer by constraining their
     spectral norm"
Observed on keras 3.15.1 (tensorflow 2.21.0): a freshly built SpectralNormalization(Dense)
called with training=False returns x @ W, the unnormalised kernel (largest singular value
6.7 here), while training=True returns x @ W / sigma; only after a training call does
inference use the normalised kernel (keras/src/layers/normalization/spectral_normalization.py
normalises in call() only when training).
Upstream: no report found (searched keras-team/keras issues for SpectralNormalization
inference / training=False).

Run: python keras_spectral_normalization_inference.py
Exit 1 while the divergence is there, 0 once fixed, 2 if keras cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
rng = np.random.default_rng(0)
KERNEL = rng.normal(size=(4, 3)) * 3.0
X = rng.normal(size=(2, 4))
# float32 layer, 50 power iterations on a matrix with a spectral gap: the estimate of sigma
# is exact to float32 rounding; 1e-4 relative is generous, and x @ W is off by a factor 6.7.
RTOL = 1e-4


def observed():
    """The layer's output in inference (training=False), first call after build."""
    import keras

    layer = keras.layers.SpectralNormalization(keras.layers.Dense(3, use_bias=False), power_iterations=50)
    layer.build((None, 4))
    layer.layer.kernel.assign(KERNEL.astype("float32"))
    return np.asarray(keras.ops.convert_to_numpy(layer(X.astype("float32"), training=False)), dtype=np.float64)


def expected():
    sigma = np.linalg.svd(KERNEL, compute_uv=False)[0]
    return X.astype(np.float32).astype(np.float64) @ (KERNEL.astype(np.float32).astype(np.float64) / sigma)


def judge(got, want):
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    ratio = float(np.max(np.abs(got)) / np.max(np.abs(want)))
    return err <= RTOL, (f"SpectralNormalization(Dense) in inference, first call: relative error {err:.3g} against "
                         f"x @ W / sigma_max (allowed {RTOL:g}); output is {ratio:.3g}x the normalised one")


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    holds, line = judge(got, expected())
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
