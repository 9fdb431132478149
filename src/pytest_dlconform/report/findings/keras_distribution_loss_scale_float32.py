"""Keras 3 under tf.distribute scales a float64 loss by 1/N rounded to float32.

Claim (dlconform distributed.keras.fit-equivalence, distributed.keras.fit-remainder):
model.fit under MirroredStrategy equals single-device fit with the same global batch, in the
model's dtype (float64 here), within float64 rounding.
Documentation: https://keras.io/guides/distributed_training_with_tensorflow/ (the loss of a
global batch is averaged over it: each of N replicas' losses is scaled by 1/N);
keras.losses.Loss(dtype="float64") computes the loss in float64.
Observed on keras 3.15.1, tensorflow-cpu 2.21.0: keras/src/losses/loss.py
scale_loss_for_distribution multiplies by ops.cast(1.0 / num_replicas, value.dtype); ops.cast
of a Python float makes a float32 tensor first, so a float64 loss is scaled by
float32(1/3) = 0.3333333432674408 over 3 replicas (relative error 3e-8; 2 and 4 replicas are
exact). Float64 fit over 3 replicas then ends about 1e-11 relative from single-device fit,
a thousand times float64's rounding.
Upstream: no report found in keras-team/keras (searched 2026-12-01: "scale_loss_for_distribution
float64", "ops.cast python float float32"); keras PR #20610 (unscaling the loss for metrics) is
the nearest, about the same scaling.
Found by: suites/distributed/test_keras_fit.py (test_fit_under_the_strategy_equals_single_device_fit
and test_partial_last_batch_is_averaged_per_replica, mirrored over 3 replicas, float64) under
--dl-profile=explore --hypothesis-seed=20261201.

Run: python keras_distribution_loss_scale_float32.py
Exit 1 while the bug is there, 0 once fixed, 2 if keras or tensorflow cannot be imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
REPLICAS = 3


def observed():
    """The factor each replica's float64 loss of 1.0 is scaled by, and keras.ops.cast(1/3, float64)."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
    import keras
    from keras.src.losses.loss import scale_loss_for_distribution

    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(REPLICAS)])
    scaled = strategy.run(lambda: scale_loss_for_distribution(tf.constant(1.0, tf.float64)))
    factor = float(strategy.experimental_local_results(scaled)[0].numpy())
    return factor, float(keras.ops.cast(1.0 / REPLICAS, "float64"))


def expected():
    return 1.0 / REPLICAS, 1.0 / REPLICAS


def judge(got, want):
    holds = got == want
    return holds, (f"float64 loss scale over {REPLICAS} replicas = {got[0]!r}, keras.ops.cast(1/{REPLICAS}, 'float64') = "
                   f"{got[1]!r}; float64 1/{REPLICAS} = {want[0]!r} (relative error {abs(got[0] - want[0]) / want[0]:.3g})")


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
