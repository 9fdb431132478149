"""Keras 3 model.fit under MirroredStrategy fails when the first global batch does not
split evenly over the replicas.

Claim (dlconform distributed.keras.fit-remainder): fit under MirroredStrategy trains on
batches that do not split evenly; each replica's mean loss is scaled by 1/N, so it equals
single-device fit with per-row weights b / (N * b_r).
Documentation: https://www.tensorflow.org/guide/distributed_training#use_tfdistributestrategy_with_keras_modelfit
    "tf.distribute.Strategy is integrated into tf.keras ... you can distribute your
     training written with the Keras training framework ... the rest of the code stays
     the same" (build and compile the model in strategy.scope(), then call fit);
  https://www.tensorflow.org/tutorials/distribute/input: a global batch that does not
  divide evenly is split unevenly across replicas (the partial batch case).
Observed on tensorflow 2.21.0, keras 3.15.1: InvalidArgumentError: Inputs to operation
AddN of type AddN must have the same size and shape. Input 0: [2,3] != input 1: [1,3].
keras/src/backend/tensorflow/trainer.py, _maybe_symbolic_build(), calls
strategy.reduce("MEAN", first_distributed_batch, axis=None) to get a batch to build the
model with; the reduction adds the replicas' uneven per-replica batches elementwise.
Upstream: no report found (the reduce call came with keras PR #20051).
Found by: suites/distributed/test_keras_fit.py::test_first_batch_not_divisible_by_the_replicas_trains
(2 replicas, global batch 3, dl_seed 0): the same model, data and optimizer inline below.

Run: python keras_mirrored_uneven_first_batch.py   (two logical CPU devices, no GPU needed)
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow/keras cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPLICAS, BATCH, LR = 2, 3, 0.1
rng = np.random.default_rng(0)  # the suite's _seeded_case(seed=0, batch=3, rows=6)
W1, B1 = rng.normal(size=(3, 4)) / np.sqrt(3), rng.normal(size=4) * 0.1
W2, B2 = rng.normal(size=(4, 2)) / np.sqrt(4), rng.normal(size=2) * 0.1
X, Y = rng.uniform(-1, 1, (6, 3)), rng.uniform(-1, 1, (6, 2))
# Two float64 SGD steps of a 3-4-2 network: rounding stays far below 1e-12 relative.
RTOL = 1e-12


def observed():
    """Weights after one epoch of fit(batch_size=3, shuffle=False) under MirroredStrategy."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
    import keras

    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(REPLICAS)])
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,), dtype="float64"),
                                  keras.layers.Dense(4, activation="tanh", dtype="float64"),
                                  keras.layers.Dense(2, dtype="float64")])
        model.set_weights([W1, B1, W2, B2])
        model.compile(optimizer=keras.optimizers.SGD(LR), loss=keras.losses.MeanSquaredError(dtype="float64"))
    model.fit(X, Y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return [np.asarray(w) for w in model.get_weights()]


def _split(b):
    """How tf.distribute splits a global batch of b rows over the replicas: [2, 1] for 3."""
    base, extra = divmod(b, REPLICAS)
    return [base + (1 if r < extra else 0) for r in range(REPLICAS)]


def expected():
    """The same training in numpy: per step, loss = (1/N) * sum over replicas of the mean
    squared error over that replica's rows, then w -= lr * grad. As single-device fit does
    (measured: it matches single-device fit with per-row weights to 1e-16), x, y and the
    learning rate are rounded to float32 first: Keras converts float NumPy data to floatx
    and keeps the learning rate in a float32 variable."""
    xs, ys, lr = (np.asarray(a, np.float32).astype(np.float64) for a in (X, Y, LR))
    w1, b1, w2, b2 = W1.copy(), B1.copy(), W2.copy(), B2.copy()
    for lo in range(0, len(X), BATCH):
        x, y = xs[lo:lo + BATCH], ys[lo:lo + BATCH]
        c = np.concatenate([np.full(n, 1.0 / (REPLICAS * n)) for n in _split(len(x)) if n])
        h = np.tanh(x @ w1 + b1)
        dp = c[:, None] * 2.0 * (h @ w2 + b2 - y) / y.shape[1]
        dz = (dp @ w2.T) * (1.0 - h ** 2)
        w2, b2, w1, b1 = w2 - lr * h.T @ dp, b2 - lr * dp.sum(0), w1 - lr * x.T @ dz, b1 - lr * dz.sum(0)
    return [w1, b1, w2, b2]


def judge(got, want):
    if isinstance(got, BaseException):
        first = (str(got).strip().splitlines() or [""])[0][:300]
        return False, (f"model.fit under MirroredStrategy ({REPLICAS} replicas, global batch {BATCH}) "
                       f"raised {type(got).__name__}: {first}")
    err = max(float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-300)) for g, w in zip(got, want))
    return err <= RTOL, (f"model.fit under MirroredStrategy ({REPLICAS} replicas, global batch {BATCH}): weights vs the "
                         f"per-replica-mean training in numpy: worst relative error {err:.3g} (allowed {RTOL:g})")


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    except Exception as exc:
        got = exc
    holds, line = judge(got, expected())
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
