"""Keras tversky / Tversky weight the false negatives by alpha and the false positives by beta.

Claim (dlconform modules.keras.losses): Tversky(alpha, beta, axis) computes the formula its
docstring states, alpha weighing the false positives and beta the false negatives.
Documentation: keras.losses.Tversky, https://keras.io/api/losses/ (Tversky)
    "alpha: The coefficient controlling incidence of false positives."
    "beta: The coefficient controlling incidence of false negatives."
  keras.losses.tversky: "alpha: coefficient controlling incidence of false positives. beta:
  coefficient controlling incidence of false negatives", with the reference its docstrings cite,
  Salehi et al. 2017 (https://arxiv.org/abs/1706.05721), the Tversky index S(P, G; alpha, beta) =
  |P G| / (|P G| + alpha |P \\ G| + beta |G \\ P|), "alpha and beta control the magnitude of
  penalties for FPs and FNs, respectively"; loss = 1 - S.
Observed on keras 3.15.1 (TensorFlow 2.21.0 backend): with y_true = [1, 1, 0, 0] and
y_pred = [1, 0, 1, 1] (TP 1, FP 2, FN 1), alpha=0.7, beta=0.2 the loss is 0.5238 = 1 - 1/(1 +
0.7 FN + 0.2 FP), not the documented 0.6154 = 1 - 1/(1 + 0.7 FP + 0.2 FN). keras/src/losses/
losses.py tversky sets `inputs = y_true`, `targets = y_pred` and then `fp = sum((1 - targets) *
inputs)`, which counts y_true = 1, y_pred = 0: the false negatives (and `fn` the false positives).
Equal alpha and beta (the default 0.5, Dice) hide it.
Upstream: keras-team/keras PR #23333 "Fix alpha and beta coefficient swap in Tversky loss",
merged 2026-07-27 (commit fa9afd5a26: inputs = y_pred, targets = y_true) on master, after the
3.15.1 release branch (v3.15.1 does not contain it); no release has it yet.
Found by: suites/modules/test_losses.py::test_keras_loss_matches_documented_formula[*-Tversky[*]]
(the 8 rows with alpha != beta; the 8 rows with alpha = beta = 0.5 hold).

Run: python keras_tversky_alpha_beta_swapped.py   (sets KERAS_BACKEND=tensorflow unless it is set)
Exit 1 while alpha weighs the false negatives, 0 once it weighs the false positives, 2 if keras
cannot be imported.
"""

import os
import sys

import numpy as np

Y_TRUE = np.array([[1.0, 1.0, 0.0, 0.0]])
Y_PRED = np.array([[1.0, 0.0, 1.0, 1.0]])  # TP = 1, FP = 2 (predicted 1, true 0), FN = 1 (predicted 0, true 1)
ALPHA, BETA = 0.7, 0.2
# keras adds keras.config.epsilon() = 1e-7 (the documented fuzz factor) to the denominator (2.6
# here): the ratio moves by < 1e-7; the float64 arithmetic itself is exact to ~1e-16.
ATOL = 1e-7


def observed():
    """keras.losses.tversky and Tversky(alpha, beta, dtype='float64', reduction=None) on float64 inputs."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # before keras is imported
    import keras

    fn = keras.losses.tversky(Y_TRUE, Y_PRED, alpha=ALPHA, beta=BETA, axis=-1)
    cls = keras.losses.Tversky(alpha=ALPHA, beta=BETA, axis=-1, dtype="float64", reduction=None)(Y_TRUE, Y_PRED)
    return {
        "backend": keras.backend.backend(),
        "tversky": np.asarray(keras.ops.convert_to_numpy(fn), dtype=np.float64).ravel(),
        "Tversky": np.asarray(keras.ops.convert_to_numpy(cls), dtype=np.float64).ravel(),
    }


def _counts():
    tp = float(np.sum(Y_TRUE * Y_PRED))
    fp = float(np.sum((1 - Y_TRUE) * Y_PRED))
    fn = float(np.sum(Y_TRUE * (1 - Y_PRED)))
    return tp, fp, fn


def expected():
    """1 - TP / (TP + alpha FP + beta FN), per sample."""
    tp, fp, fn = _counts()
    return np.array([1.0 - tp / (tp + ALPHA * fp + BETA * fn)])


def judge(got, want):
    tp, fp, fn = _counts()
    swapped = 1.0 - tp / (tp + ALPHA * fn + BETA * fp)
    vals = {k: np.asarray(got[k], dtype=np.float64) for k in ("tversky", "Tversky")}
    worst = max(float(np.max(np.abs(v - want))) for v in vals.values())
    line = (f"keras {got.get('backend', '?')} backend, y_true={Y_TRUE.ravel().tolist()}, y_pred={Y_PRED.ravel().tolist()} "
            f"(TP {tp:g}, FP {fp:g}, FN {fn:g}), alpha={ALPHA}, beta={BETA}: tversky {vals['tversky'].round(4).tolist()}, "
            f"Tversky(dtype='float64') {vals['Tversky'].round(4).tolist()}; documented 1 - TP/(TP + alpha FP + beta FN) = "
            f"{want[0]:.4f} (alpha on the false negatives gives {swapped:.4f}); worst |error| {worst:.3g} (allowed {ATOL:g})")
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
