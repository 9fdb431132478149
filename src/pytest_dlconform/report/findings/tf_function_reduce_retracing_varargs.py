"""tf.function(reduce_retracing=True) raises IndexError when a *args function is called
with more positional arguments than before.

Claim (dlconform execution.function.reduce-retracing): with reduce_retracing=True a call
that no trace accepts is traced (with its type generalised where it can be).
Documentation: https://www.tensorflow.org/api_docs/python/tf/function
    "reduce_retracing: When True, tf.function attempts to reduce the amount of retracing,
     for example by using more generic shapes."
  and https://www.tensorflow.org/guide/function#rules_of_tracing: a call whose arguments
  no existing trace accepts is traced again (a new number of arguments is a new signature).
Observed on tensorflow 2.21.0: f(a) works, then f(a, c) raises IndexError: list index out
of range, from tensorflow/core/function/polymorphism/function_type.py,
FunctionType.most_specific_common_subtype(), which indexes the other trace's parameters by
position without comparing their number (the same function without reduce_retracing
traces again and returns 3.0).
Upstream: no report found (searched tensorflow/tensorflow issues for reduce_retracing
IndexError, *args, number of positional arguments).

Run: python tf_function_reduce_retracing_varargs.py
Exit 1 while the divergence is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
CALLS = [[[1.0]], [[1.0], [2.0]]]  # the positional arguments of each call: one vector, then two


def observed():
    """The results of the calls (raises on this bug)."""
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def f(*args):
        return tf.add_n([tf.reduce_sum(a) for a in args])

    return [float(f(*[tf.constant(a) for a in args])) for args in CALLS]


def expected():
    return [sum(sum(a) for a in args) for args in CALLS]


def judge(got, want):
    if isinstance(got, BaseException):
        return False, f"tf.function(reduce_retracing=True) over *args, calls {CALLS}: raised {type(got).__name__}: {got}"
    return got == want, f"tf.function(reduce_retracing=True) over *args, calls {CALLS}: returned {got}, documented {want}"


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    except IndexError as exc:  # the symptom
        got = exc
    holds, line = judge(got, expected())
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
