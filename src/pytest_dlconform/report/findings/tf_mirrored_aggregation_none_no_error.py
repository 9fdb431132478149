"""tf.VariableAggregation.NONE: a replica-context update of a mirrored variable raises no error.

Claim (dlconform distributed.tf.variable-aggregation): non-trainable tf.Variables under
MirroredStrategy follow their synchronization and aggregation.
Documentation: help(tf.VariableAggregation)
    "NONE: This is the default, giving an error if you use a variable-update operation with
     multiple replicas."
Observed on tensorflow-cpu 2.21.0: a MirroredVariable (ON_WRITE, aggregation NONE, the default)
updated with assign_add in replica context under MirroredStrategy over 2 logical CPU devices
raises nothing; each replica updates only its own copy
(tensorflow/python/distribute/values.py _on_write_update_replica: "if var.aggregation == NONE:
return update_fn(var._get_on_device_or_primary(), value)"), so the copies of one mirrored
variable now differ. Older releases raised "You must specify an aggregation method to update a
MirroredVariable in Replica Context" (tensorflow/tensorflow#23792, mlcommons/training#452).
Found by: suites/distributed/test_nontrainable_state.py::test_on_write_none_refuses_replica_updates.

Run: python tf_mirrored_aggregation_none_no_error.py
Exit 1 while the update passes silently, 0 once it raises, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

INCREMENTS = np.array([[1.0, 10.0], [2.0, 20.0]], np.float32)  # replica 0, replica 1


def observed():
    """assign_add of replica r's row of INCREMENTS to a mirrored variable (aggregation NONE)."""
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        v = tf.Variable(np.zeros(2, np.float32), trainable=False)

    @tf.function
    def step():
        r = tf.distribute.get_replica_context().replica_id_in_sync_group
        return v.assign_add(tf.gather(tf.constant(INCREMENTS), r))

    try:
        strategy.run(step)
        error = None
    except (ValueError, RuntimeError, TypeError) as exc:
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    copies = [np.asarray(p.numpy()).tolist() for p in strategy.experimental_local_results(v)]
    return {"error": error, "aggregation": str(v.aggregation), "copies": copies, "tf": tf.__version__}


def expected():
    """The documented behaviour: an error."""
    return {"raises": True}


def judge(got, want):
    line = (f"tensorflow {got.get('tf', '?')}: MirroredStrategy over 2 CPUs, tf.Variable(zeros(2), trainable=False) "
            f"(aggregation {got.get('aggregation', '?')}), assign_add({INCREMENTS.tolist()}[replica]) in replica "
            f"context: raised {got['error']!r}; mirrored copies {got['copies']}; documented: NONE is 'giving an "
            "error if you use a variable-update operation with multiple replicas'")
    return (got["error"] is not None) == want["raises"], line


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
