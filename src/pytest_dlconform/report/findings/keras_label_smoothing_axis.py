"""Keras categorical (focal) crossentropy: label_smoothing with axis != -1 uses the last axis' size.

Claim (dlconform modules.keras.losses): CategoricalCrossentropy and CategoricalFocalCrossentropy
(from_logits, label_smoothing, axis) compute the formula their docstrings state, the smoothing
spreading label_smoothing / num_classes over the classes along `axis`.
Documentation: keras.losses.categorical_crossentropy and categorical_focal_crossentropy,
https://keras.io/api/losses/probabilistic_losses/
    "label_smoothing: Float in [0, 1]. If > `0` then smooth the labels. For example, if `0.1`,
     use `0.1 / num_classes` for non-target labels and `0.9 + 0.1 / num_classes` for target labels."
    "axis: Defaults to `-1`. The dimension along which the entropy is computed."
  keras.losses.CategoricalCrossentropy: "axis: The axis along which to compute crossentropy (the
  features axis)". The classes lie along `axis`, so num_classes is the size of that axis.
Observed on keras 3.15.1 (TensorFlow 2.21.0 backend): with one-hot labels over axis 1 of a
(1, 4, 2) tensor (4 classes, 2 positions, channels first) and label_smoothing=0.2, the smoothed
labels are y (1 - 0.2) + 0.2 / 2, not 0.2 / 4: keras/src/losses/losses.py takes
`num_classes = ops.cast(ops.shape(y_true)[-1], ...)` whatever `axis` is, in both functions (so
the classes' smoothed labels do not even sum to 1). The class forms call the functions.
Upstream: keras-team/keras#23451 (closed), fixed by PR #23437 "Fix categorical_crossentropy label
smoothing for custom axis", merged 2026-08-19 (commit f4d0e5d83b: shape(y_pred)[axis]) on master,
after the 3.15.1 release; no release has it yet.
Found by: suites/modules/test_losses.py::test_keras_loss_matches_documented_formula rows
CategoricalCrossentropy[...label_smoothing=0.2,axis=1] (3) and
CategoricalFocalCrossentropy[...label_smoothing=0.2,axis=1] (4): relative errors 1.8e-02 to
4.9e-02; the rows with label_smoothing=0.2 and axis=-1, or axis=1 without smoothing, hold.

Run: python keras_label_smoothing_axis.py   (sets KERAS_BACKEND=tensorflow unless it is set)
Exit 1 while the smoothing divides by the last axis' size, 0 once by the class axis' size, 2 if
keras cannot be imported.
"""

import os
import sys

import numpy as np

C, AXIS, LS = 4, 1, 0.2
Y = np.zeros((1, C, 2))
Y[0, 1, 0] = 1.0  # position 0: class 1
Y[0, 3, 1] = 1.0  # position 1: class 3
LOGITS = np.array([[[0.5, -1.0], [2.0, 0.3], [-0.7, 1.1], [0.1, 2.4]]])  # (1, C, 2), classes along axis 1
ALPHA, GAMMA = 0.25, 2.0  # categorical_focal_crossentropy's defaults
# log-softmax over 4 classes and a 4-term sum in float64, values O(10): 1e-13 absolute is generous.
ATOL = 1e-13


def observed():
    """The per-position losses of the function and class forms, from logits, label_smoothing=LS, axis=AXIS."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # before keras is imported
    import keras

    def np64(x):
        return np.asarray(keras.ops.convert_to_numpy(x), dtype=np.float64)

    kw = {"from_logits": True, "label_smoothing": LS, "axis": AXIS}
    return {
        "backend": keras.backend.backend(),
        "categorical_crossentropy": np64(keras.losses.categorical_crossentropy(Y, LOGITS, **kw)),
        "CategoricalCrossentropy": np64(keras.losses.CategoricalCrossentropy(
            reduction=None, dtype="float64", **kw)(Y, LOGITS)),
        "categorical_focal_crossentropy": np64(keras.losses.categorical_focal_crossentropy(
            Y, LOGITS, alpha=ALPHA, gamma=GAMMA, **kw)),
        "CategoricalFocalCrossentropy": np64(keras.losses.CategoricalFocalCrossentropy(
            alpha=ALPHA, gamma=GAMMA, reduction=None, dtype="float64", **kw)(Y, LOGITS)),
    }


def _losses(num_classes):
    """Crossentropy and alpha-balanced focal crossentropy along AXIS, labels smoothed with num_classes."""
    ys = Y * (1.0 - LS) + LS / num_classes
    logp = LOGITS - np.log(np.sum(np.exp(LOGITS), axis=AXIS, keepdims=True))
    p = np.exp(logp)
    cce = -np.sum(ys * logp, axis=AXIS)
    focal = -np.sum(ALPHA * (1.0 - p) ** GAMMA * ys * logp, axis=AXIS)
    return {"categorical_crossentropy": cce, "CategoricalCrossentropy": cce,
            "categorical_focal_crossentropy": focal, "CategoricalFocalCrossentropy": focal}


def expected():
    return _losses(Y.shape[AXIS])  # num_classes = the size of the class axis, 4


def judge(got, want):
    wrong = _losses(Y.shape[-1])  # what dividing by the last axis' size (2) gives
    worst = max(float(np.max(np.abs(np.asarray(got[k]) - want[k]))) for k in want)
    parts = "; ".join(f"{k} {np.round(got[k], 4).ravel().tolist()} (documented {np.round(want[k], 4).ravel().tolist()})"
                      for k in ("categorical_crossentropy", "CategoricalCrossentropy",
                                "categorical_focal_crossentropy", "CategoricalFocalCrossentropy"))
    like_last = all(np.allclose(got[k], wrong[k], rtol=1e-12, atol=ATOL) for k in want)
    line = (f"keras {got.get('backend', '?')} backend, one-hot labels over axis={AXIS} of shape {Y.shape} "
            f"({C} classes), from_logits=True, label_smoothing={LS}: {parts}; "
            f"{'equal to' if like_last else 'not'} smoothing with num_classes = shape[-1] = {Y.shape[-1]}; "
            f"worst |error| {worst:.3g} (allowed {ATOL:g})")
    return worst <= ATOL, line


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
