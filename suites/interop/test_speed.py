"""interop.speed: "performance differences are negligible", measured side by side, never asserted."""

from __future__ import annotations

import pytest

from pytest_dlconform.api import combined, evidence
from pytest_dlconform.api import crossframework as cf

from ._speed import speed_steps, time_per_call

# A dense network big enough that the step is not pure Python overhead, small enough to
# time in a few seconds on a shared CPU.
MODEL = cf.Case(
    cf.Architecture((64,), (cf.Layer("dense", units=256, activation="relu"), cf.Layer("dense", units=256, activation="relu"),
                            cf.Layer("dense", units=10)), cf.Loss("sparse")),
    batch=128, training=True, seed=20240601,
)


@pytest.mark.claim("interop.speed")
def test_step_time_is_recorded_side_by_side(tf, torch, keras_tf, dl_device):
    tf_dev, torch_dev = cf.framework_devices(dl_device)
    steps = speed_steps(tf, keras_tf, torch, MODEL, "float32", tf_dev, torch_dev)
    # What is timed must compute the same thing: each against the float64 reference and
    # the TensorFlow steps' gradients against torch's.
    results = {name: step.result() for name, step in steps.items()}
    tf32 = (cf.tf32_in_use("tensorflow", tf, MODEL, dl_device), cf.tf32_in_use("torch", torch, MODEL, dl_device))
    for name in ("tf eager", "tf.function"):
        cf.check_same_model(results[name], results["torch eager"], MODEL, "float32", tf32=tf32, label=f"{name}: ")
    fwd, bwd = cf.tolerances(MODEL, "float32", tf32=tf32[0])
    cf.compare(results["tf.function"], results["tf eager"], combined(fwd, fwd), combined(bwd, bwd),
               what="tf.function vs tf eager", grad_scales=cf.grad_scales(MODEL, "float32"))
    evidence.covers("torch-eager", "tf-eager", "tf.function")
    seconds = {name: time_per_call(step.run) for name, step in steps.items()}
    base = seconds["torch eager"]
    evidence.note(**{f"ms per step, {name}": round(1e3 * s, 3) for name, s in seconds.items()},
                  **{f"ratio {name} / torch eager": round(s / base, 3) for name, s in seconds.items() if name != "torch eager"},
                  model="dense 64-256-256-10, batch 128, float32, forward + loss + gradients",
                  timing="median of 5 runs of 5 steps after 2 warm-up steps, one process",
                  threads=f"torch {torch.get_num_threads()}, tensorflow intra-op "
                          f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'}")
