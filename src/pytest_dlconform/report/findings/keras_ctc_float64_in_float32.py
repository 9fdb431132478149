"""Keras CTC loss with dtype='float64' computes in float32 on the TensorFlow backend.

Claim (dlconform modules.keras.losses): every keras.losses loss built with dtype='float64' computes
its documented formula within the float64 error model; CTC's dtype='float64' is the dtype of its
computations.
Documentation: keras.losses.CTC, https://keras.io/api/losses/ (CTC)
    "dtype: The dtype of the loss's computations. Defaults to `None`, which means using
     `keras.backend.floatx()`."
  keras.losses.ctc: "CTC (Connectionist Temporal Classification) loss", y_true integer labels
  with "`0` always represents the blank/mask index", y_pred logits "(batch_size, max_length,
  num_classes)": the loss is -log of the sum over every alignment of the labels (Graves et al.
  2006), nothing about a lower precision.
Observed on keras 3.15.1 with tensorflow-cpu 2.21.0: CTC(dtype="float64") and keras.losses.ctc on
float64 logits return float64 tensors that are only float32-accurate (relative errors 1e-8 to
1e-7 against the float64 forward recursion; float64 arithmetic gives ~1e-15):
keras/src/backend/tensorflow/nn.py ctc_loss casts float64 logits to float32 before
tf.nn.ctc_loss (`compute_dtype = "float32" if result_dtype == "float64" else result_dtype`, with
the comment that tf.nn.ctc_loss "will raise an error when the input is float64") and casts the
float32 loss back to float64. Unchanged on keras master (2026-08-21).
Upstream: no report found.
Found by: suites/modules/test_losses.py::test_keras_loss_matches_documented_formula[*-CTC[*]]
(all 15 rows: relative errors 2.7e-10 to 3.2e-08 of the effective scale, against float64 error
models of ~3.5e-14).

Run: python keras_ctc_float64_in_float32.py   (sets KERAS_BACKEND=tensorflow itself)
Exit 1 while the float64 CTC loss is float32-accurate, 0 once float64-accurate, 2 if keras or
tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

rng = np.random.default_rng(0)
LOGITS = rng.normal(size=(2, 6, 4)) * 2.0  # (batch, frames, classes); class 0 is the blank
LABELS = np.array([[1.0, 2.0, 0.0], [3.0, 3.0, 1.0]])  # 0 pads; the repeated 3 needs a blank between
# The forward recursion: ~8 float64 operations per (frame, extended label), 6 x 7 of them, loss O(10):
# 16 x 8 x 42 units of round-off relative, 3e-12, is generous; float32 arithmetic gives ~1e-8.
RTOL = 16 * 8 * 42 * np.finfo(np.float64).eps / 2


def observed():
    """CTC(dtype='float64', reduction=None) and keras.losses.ctc on float64 logits, and their dtypes."""
    os.environ["KERAS_BACKEND"] = "tensorflow"  # before keras is imported (a fresh interpreter: python SCRIPT)
    import keras

    if keras.backend.backend() != "tensorflow":
        raise ImportError(f"keras was imported with the {keras.backend.backend()} backend before this script set tensorflow")
    cls = keras.losses.CTC(dtype="float64", reduction=None)(LABELS, LOGITS)
    fn = keras.losses.ctc(LABELS, LOGITS)
    return {
        "CTC": np.asarray(keras.ops.convert_to_numpy(cls)),
        "ctc": np.asarray(keras.ops.convert_to_numpy(fn)),
        "dtypes": f"{keras.backend.standardize_dtype(cls.dtype)}, {keras.backend.standardize_dtype(fn.dtype)}",
    }


def _ctc(logits, labels):
    """-log p(labels | logits): the CTC forward recursion over the blank-extended labels, in float64."""
    lp = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
    ext = [0]
    for c in labels:
        ext += [int(c), 0]
    alpha = np.full(len(ext), -np.inf)
    alpha[0], alpha[1] = lp[0, 0], lp[0, ext[1]]
    for t in range(1, lp.shape[0]):
        new = np.full(len(ext), -np.inf)
        for s in range(len(ext)):
            terms = [alpha[s]]
            if s >= 1:
                terms.append(alpha[s - 1])
            if s >= 2 and ext[s] != 0 and ext[s] != ext[s - 2]:
                terms.append(alpha[s - 2])
            new[s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
        alpha = new
    return -np.logaddexp(alpha[-1], alpha[-2])


def expected():
    return np.array([_ctc(LOGITS[b], [c for c in LABELS[b] if c != 0]) for b in range(LOGITS.shape[0])])


def judge(got, want):
    rel = {k: float(np.max(np.abs(np.asarray(got[k], dtype=np.float64) - want)) / np.max(np.abs(want)))
           for k in ("CTC", "ctc")}
    worst = max(rel.values())
    line = (f"keras tensorflow backend, float64 logits of shape {LOGITS.shape}, labels {LABELS.astype(int).tolist()} "
            f"(0 = blank/padding): CTC(dtype='float64', reduction=None) {np.asarray(got['CTC']).tolist()}, "
            f"keras.losses.ctc {np.asarray(got['ctc']).tolist()} (dtypes {got.get('dtypes', '?')}); float64 forward "
            f"recursion {want.tolist()}; relative error CTC {rel['CTC']:.3g}, ctc {rel['ctc']:.3g} "
            f"(allowed {RTOL:.2g}; float32 rounding is 6e-08)")
    return worst <= RTOL, line


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
