"""keras.callbacks.EarlyStopping with a baseline keeps training while the monitored value
improves without ever reaching the baseline.

Claim (dlconform modules.early-stopping): EarlyStopping stops where its documented rule says.
Documentation: keras.callbacks.EarlyStopping (https://keras.io/api/callbacks/early_stopping/),
    "baseline: Baseline value for the monitored quantity. If not None, training will stop
     if the model doesn't show improvement over the baseline."
    "If no epoch improves on baseline, training will run for patience epochs and restore
     weights from the best epoch in that set."
Observed on keras 3.15.1 (tensorflow 2.21.0): a loss that falls 10, 9, ..., 2, 1.5 and
stays at 1.5, baseline 0.5, patience 2: fit runs 11 epochs (it stops two epochs after the
last improvement over the best value), not 2. keras/src/callbacks/early_stopping.py,
on_epoch_end(): an improvement over the best value returns before the patience check even
when it does not improve on the baseline.
Upstream: no Keras 3 report found (searched keras-team/keras issues for EarlyStopping
baseline; keras-team/keras#13860 is the Keras 2 question about the same rule, closed as
support; keras PR #23559, merged 2026-09, changes the wait counter around this code).
Found by a probe of the documented rule; the suite's
test_baseline_never_reached_runs_patience_epochs feeds only values that never fall, so it
does not reach this case.

Run: python keras_early_stopping_baseline.py
Exit 1 while the divergence is there, 0 once fixed, 2 if keras cannot be imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
LOSSES = [10.0 - k for k in range(9)] + [1.5] * 11  # improves for 10 epochs, never below the baseline
BASELINE, PATIENCE = 0.5, 2


def observed():
    """How many epochs fit runs with EarlyStopping(monitor='loss', patience=2, baseline=0.5)."""
    import keras
    import numpy as np

    class Feed(keras.callbacks.Callback):  # sets the monitored value of each epoch, before EarlyStopping reads it
        def on_epoch_end(self, epoch, logs=None):
            logs["loss"] = LOSSES[epoch]

    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=PATIENCE, baseline=BASELINE, mode="min")
    history = model.fit(np.zeros((4, 1)), np.zeros((4, 1)), epochs=len(LOSSES), verbose=0, callbacks=[Feed(), stop])
    return len(history.history["loss"])


def expected():
    return PATIENCE  # "If no epoch improves on baseline, training will run for patience epochs"


def judge(got, want):
    return got == want, (f"EarlyStopping(patience={PATIENCE}, baseline={BASELINE}) on losses {LOSSES[:10]} + [1.5] * 10: "
                         f"fit ran {got} epochs, documented {want} (no epoch improves on the baseline)")


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
