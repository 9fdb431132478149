"""tf.data.Dataset.save(checkpoint_args=...) writes a dataset that Dataset.load cannot read back.

Claim (dlconform data.tfdata.api-persistence): Dataset.save then Dataset.load round-trips the
elements, in order with the default sharding, also when checkpoint_args enables checkpointing.
Documentation: help(tf.data.Dataset.save):
    "Saves the content of the given dataset."
    "To enable checkpointing, pass in `checkpoint_args` to the `save` method" (an example with
     checkpoint_interval, step_counter, directory, max_to_keep follows)
    "datasets saved through `tf.data.Dataset.save` should only be consumed through
     `tf.data.Dataset.load`, which is guaranteed to be backwards compatible."
  help(tf.data.Dataset.load): "If the default option of sharding the saved dataset was used, the
  element order of the saved dataset will be preserved when loading it."
  Nothing says a checkpointed save is not loadable.
Observed on tensorflow 2.21.0 (CPU, eager): Dataset.range(6).save(path, checkpoint_args={
checkpoint_interval: 2 or 100, step_counter, directory, max_to_keep}) writes its shard as
several files (00000000.snapshot, 00000001.snapshot, ...: one more after each checkpoint), and
iterating Dataset.load(path) yields the elements of the first file, then raises InternalError
"Expected 1 components but got 0. [Op:IteratorGetNext]". A one-element dataset (no second
file) loads; the same save without checkpoint_args loads in full. TensorFlow's own tests of
checkpoint_args (SaveCheckpointTest in python/data/kernel_tests/io_test.py) count checkpoint
files and never load what they saved.
Found by: suites/data/test_tfdata_api.py::test_save_with_checkpoint_args_round_trips[cpu-6-2]
and [cpu-6-100].

Run: python tf_data_save_checkpoint_args_load.py
Exit 1 while a checkpointed save does not load back, 0 once every case loads range(n) in order,
2 if tensorflow cannot be imported.
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# (label, n, checkpoint_interval or None for a save without checkpoint_args: the control)
CASES = (("range(6), no checkpoint_args", 6, None), ("range(1), checkpoint_interval=2", 1, 2),
         ("range(6), checkpoint_interval=2", 6, 2), ("range(6), checkpoint_interval=100", 6, 100))


def observed():
    """label -> the loaded elements, or the error iterating the load raised (after which elements)."""
    import tensorflow as tf

    out = {}
    for label, n, interval in CASES:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "saved")
            args = None if interval is None else {"checkpoint_interval": interval, "directory": os.path.join(d, "ckpt"),
                                                  "step_counter": tf.Variable(0, trainable=False), "max_to_keep": 3}
            tf.data.Dataset.range(n).save(path, checkpoint_args=args)
            got = []
            try:
                for x in tf.data.Dataset.load(path):
                    got.append(int(x))
                out[label] = got
            except tf.errors.OpError as exc:
                first = str(exc).strip().splitlines()[0].split("}}")[-1].strip()
                out[label] = f"{type(exc).__name__} after {got}: {first[:80]}"
    return out


def expected():
    return {label: list(range(n)) for label, n, _ in CASES}


def judge(got, want):
    bad = [f"{label}: {got[label]}" for label in want if got[label] != want[label]]
    line = ("tf.data.Dataset.save(path, checkpoint_args=...) then Dataset.load(path) (documented: load reads what "
            "save wrote, in order): " + ("; ".join(bad) if bad else "every case loads range(n) in order"))
    return not bad, line


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
