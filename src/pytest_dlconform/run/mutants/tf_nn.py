"""Mutants of tf.nn functions (claim modules.tf.nn-functions; suite suites/modules/test_tf_nn.py).

Each patches one public tf.nn function the way a reported issue asked it to behave or a proposed
change would have made it behave; the suite's numpy references must notice.
"""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

CLAIMS = "modules.tf.nn-functions"


def _pair(v: Any, i: int) -> int:
    if isinstance(v, int):
        return v
    v = list(v)
    return int(v[i] if len(v) == 2 else v[1 + i] if len(v) == 4 else v[0])


@mutant("tf-avg-pool-same-counts-padding", areas="modules", claims=CLAIMS, target="tensorflow", select="tf or tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/45579",
        bug="tf.nn.avg_pool with padding='SAME' averages over the zero padding too (divides by the full window), "
            "the behaviour issue 45579 expected from 'SAME' (an explicitly zero-padded input pooled with 'VALID'); "
            "TensorFlow averages over the in-bounds entries only.")
def _tf_avg_pool_counts_padding() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def avg_pool(input: Any, ksize: Any, strides: Any, padding: Any, data_format: Any = None, name: Any = None) -> Any:
            x = tf.convert_to_tensor(input)
            if padding != "SAME" or x.shape.rank != 4 or data_format not in (None, "NHWC"):
                return orig(input, ksize, strides, padding, data_format, name)
            pads = [[0, 0]]
            for i in range(2):
                n, k, s = int(x.shape[1 + i]), _pair(ksize, i), _pair(strides, i)
                out = -(-n // s)
                total = max((out - 1) * s + k - n, 0)
                pads.append([total // 2, total - total // 2])
            return orig(tf.pad(x, [*pads, [0, 0]]), ksize, strides, "VALID", data_format, name)
        return avg_pool
    wrap(tf.nn, "avg_pool", make)


@mutant("tf-in-top-k-breaks-ties", areas="modules", claims=CLAIMS, target="tensorflow", select="tf or tensorflow",
        cite="https://github.com/tensorflow/tensorflow/pull/12230",
        bug="tf.nn.in_top_k breaks ties by index as top_k does (the handle_ties change proposed in PR 12230 for "
            "issues 10767 and 13005), so a target tied with the k-th prediction but at a higher index is no longer "
            "in the top k; the docstring says all tied classes straddling the boundary are in.")
def _tf_in_top_k_breaks_ties() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def in_top_k(targets: Any, predictions: Any, k: Any, name: Any = None) -> Any:
            finite = orig(targets, predictions, k, name)
            _, idx = tf.math.top_k(predictions, k=k)
            hit = tf.reduce_any(tf.equal(idx, tf.cast(tf.expand_dims(targets, -1), idx.dtype)), axis=-1)
            return tf.logical_and(finite, hit)
        return in_top_k
    wrap(tf.nn, "in_top_k", make)
