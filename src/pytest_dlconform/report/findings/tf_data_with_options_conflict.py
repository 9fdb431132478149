"""tf.data.Dataset.with_options does not raise the documented ValueError for conflicting options.

Claim (dlconform data.tfdata.api-structure): with_options raises ValueError when an option is set
twice to different non-default values.
Documentation: help(tf.data.Dataset.with_options):
    "If options are set multiple times, they are merged as long as different options do not use
     different non-default values."
    "Raises: ValueError: when an option is set more than once to a non-default value"
  while help(tf.data.Options.merge) says: "If this object and the `options` to merge set an option
  differently, a warning is generated and this object's value is updated with the `options`
  object's value." The two pages disagree; with_options' own page promises the error.
Observed on tensorflow 2.21.0: ds.with_options(a).with_options(b) with
a.threading.private_threadpool_size = 2 and b's = 3 (also deterministic False then True) returns
a dataset whose options() report b's value: no ValueError, the later value wins, as Options.merge
describes. Different options set in two calls merge as documented (the control).
Found by: suites/data/test_tfdata_api.py::test_with_options_twice_with_different_non_default_values_raises[cpu].

Run: python tf_data_with_options_conflict.py
Exit 1 while the conflicting calls return a dataset, 0 once they raise ValueError (or the
with_options page stops promising it: then retire this script), 2 if tensorflow cannot be imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CASES = ("private_threadpool_size 2 then 3", "deterministic False then True")


def observed():
    """label -> 'ValueError' or what options() of the twice-optioned dataset reports."""
    import tensorflow as tf

    out = {}
    for label in CASES:
        a, b = tf.data.Options(), tf.data.Options()
        if label.startswith("private"):
            a.threading.private_threadpool_size, b.threading.private_threadpool_size = 2, 3
        else:
            a.deterministic, b.deterministic = False, True
        try:
            ds = tf.data.Dataset.range(3).with_options(a).with_options(b)
        except ValueError:
            out[label] = "ValueError"
            continue
        opts = ds.options()
        value = opts.threading.private_threadpool_size if label.startswith("private") else opts.deterministic
        out[label] = f"no error; options() reports {value}"
    return out


def expected():
    return dict.fromkeys(CASES, "ValueError")


def judge(got, want):
    bad = [f"{label}: {got[label]}" for label in want if got[label] != want[label]]
    line = ("tf.data.Dataset.with_options(a).with_options(b), an option set to different non-default values "
            "(documented: Raises ValueError): " + ("; ".join(bad) if bad else "ValueError in every case"))
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
