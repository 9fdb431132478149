"""modules.early-stopping: keras.callbacks.EarlyStopping stops where its documented rule says.

The oracle (checks.module_references.early_stopping) replays the documented rule over the monitored
values. Two ways in: the callback protocol driven with generated value sequences (every
parameter, fast), and real model.fit runs whose recorded history is replayed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_equal, budget, evidence
from pytest_dlconform.api.module_references import early_stopping

CLAIM = "modules.early-stopping"
# Values on a grid of 1/8 (exact in float32, which Keras compares in) and min_delta values
# that are never a difference of two grid values, so no case sits on the documentation's
# unstated boundary "change == min_delta".
GRID = st.integers(0, 40).map(lambda k: k / 8.0)
MIN_DELTAS = st.sampled_from([0.0, 0.3, 1.1])


def _tiny_model(keras):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def _drive(keras, model, values, **kwargs):
    """Run the callback protocol as fit does; epoch e's weights are filled with e."""
    cb = keras.callbacks.EarlyStopping(monitor="val_loss", **kwargs)
    cb.set_model(model)
    model.stop_training = False
    cb.on_train_begin()
    epochs = 0
    for epoch, value in enumerate(values):
        model.set_weights([np.full_like(w, epoch) for w in model.get_weights()])
        cb.on_epoch_end(epoch, {"val_loss": value})
        epochs += 1
        if model.stop_training:
            break
    cb.on_train_end()
    return epochs, model.get_weights()[0].flat[0]


@pytest.mark.claim(CLAIM)
@budget(25)
@given(values=st.lists(GRID, min_size=1, max_size=14), patience=st.integers(0, 4), min_delta=MIN_DELTAS,
       mode=st.sampled_from(["min", "max", "auto"]), start=st.integers(0, 3), restore=st.booleans())
def test_callback_stops_where_the_documented_rule_says(tf, values, patience, min_delta, mode, start, restore):
    import keras

    model = _tiny_model(keras)
    # mode="auto" infers the direction from the monitored name: val_loss is minimised.
    expected = early_stopping(values, patience=patience, min_delta=min_delta, mode="min" if mode == "auto" else mode,
                              start_from_epoch=start)
    epochs, weight = _drive(keras, model, values, patience=patience, min_delta=min_delta, mode=mode,
                            start_from_epoch=start, restore_best_weights=restore)
    assert epochs == expected.epochs_run, (
        f"EarlyStopping ran {epochs} epochs, but should run {expected.epochs_run}: {'; '.join(expected.trace)}"
    )
    restored = expected.best_epoch if restore and expected.best_epoch is not None else epochs - 1
    assert weight == restored, (
        f"final weights are epoch {weight:g}'s, but should be epoch {restored}'s (restore_best_weights={restore})"
    )
    evidence.covers(f"mode={mode}", f"restore_best_weights={restore}", "patience")
    evidence.covers(*(["min_delta"] if min_delta else []), *(["start_from_epoch"] if start else []))


@pytest.mark.claim(CLAIM)
@budget(10)
@given(first=GRID, rises=st.lists(st.integers(0, 8), min_size=1, max_size=10), patience=st.integers(2, 5),
       gap=st.integers(1, 8))
def test_baseline_never_reached_runs_patience_epochs(tf, first, rises, patience, gap):
    """No epoch improves on the first (the values never fall) and none reaches the baseline:
    training stops after `patience` epochs, and restore_best_weights restores the first."""
    import keras

    values = [first] + [first + r / 8.0 for r in rises]
    baseline = first - gap / 8.0
    expected = early_stopping(values, patience=patience, baseline=baseline)
    epochs, weight = _drive(keras, _tiny_model(keras), values, patience=patience, baseline=baseline,
                            restore_best_weights=True)
    assert epochs == expected.epochs_run == min(len(values), patience), (
        f"EarlyStopping(baseline={baseline}, patience={patience}) ran {epochs} epochs on {values}, "
        f"but should run {min(len(values), patience)}"
    )
    assert weight == 0, f"restored weights are epoch {weight:g}'s, but should be epoch 0's (the best)"
    evidence.covers("baseline")


@pytest.mark.claim(CLAIM)
@budget(2)
@given(patience=st.integers(0, 3), min_delta=st.sampled_from([1e-2, 3e-2]), restore=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_fit_runs_the_epochs_its_history_implies(tf, patience, min_delta, restore, seed):
    """A real fit on a least-squares problem: the loss keeps falling by less and less, so
    min_delta ends it; the recorded history, replayed, must give the epoch count."""
    import keras

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x @ rng.normal(size=(4, 1)) + 0.1 * rng.normal(size=(64, 1))).astype(np.float32)
    init = keras.initializers.GlorotUniform(seed=seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, kernel_initializer=init)])
    # Full-batch gradient descent converges geometrically: improvements shrink below
    # min_delta within about ten epochs, so the stop is exercised, not just the full run.
    model.compile(optimizer=keras.optimizers.SGD(0.3), loss="mse")
    snapshots: list[list[np.ndarray]] = []
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: snapshots.append(model.get_weights()))
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=patience, min_delta=min_delta,
                                         restore_best_weights=restore)
    history = model.fit(x, y, epochs=60, batch_size=64, shuffle=False, verbose=0, callbacks=[record, stop])
    losses = history.history["loss"]
    expected = early_stopping(losses, patience=patience, min_delta=min_delta)
    assert len(losses) == expected.epochs_run, (
        f"fit ran {len(losses)} epochs, but the history replayed says {expected.epochs_run}: {'; '.join(expected.trace[-4:])}"
    )
    want = expected.best_epoch if restore else len(losses) - 1
    for got, exp in zip(model.get_weights(), snapshots[want]):
        assert_equal(got, exp, what=f"final weights vs epoch {want} (restore_best_weights={restore})")
    evidence.note(epochs_run=len(losses), stopped_early=expected.stopped, best_epoch=expected.best_epoch)
    evidence.covers("fit")
