"""Mutants of tf.math's functions (claim modules.tf.math-functions): the documented fill of empty
segments and the documented rounding mode."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

CLAIM = "modules.tf.math-functions"


@mutant("tf-segment-max-empty-lowest", areas="modules", claims=CLAIM, target="tensorflow", select="tf or tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/58123",
        bug="tf.math.segment_max fills an empty segment with the dtype's lowest value instead of the documented "
            "0 (issue 58123: 'According to document, if the max is empty for a given segment ID i, output[i] = "
            "0. However, on gpu it gives a large negative value for empty segment ID').")
def _tf_segment_max_empty_lowest() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def segment_max(data: Any, segment_ids: Any, name: Any = None) -> Any:
            out = orig(data, segment_ids, name=name)
            counts = tf.math.segment_sum(tf.ones_like(segment_ids), segment_ids)
            empty = tf.reshape(tf.equal(counts, 0), [-1] + [1] * (len(out.shape) - 1))
            return tf.where(empty, tf.fill(tf.shape(out), out.dtype.min), out)
        return segment_max
    wrap(tf.math, "segment_max", make)


@mutant("tf-round-half-up", areas="modules", claims=CLAIM, target="tensorflow", select="tf or tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/3730",
        bug="tf.round rounds halves up, floor(x + 0.5), instead of the documented half to even (issue 3730: "
            "'tf.round(0.5) => 1', while TensorFlow's round was implemented with floor).")
def _tf_round_half_up() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def round(x: Any, name: Any = None) -> Any:
            x = tf.convert_to_tensor(x)
            return tf.math.floor(x + 0.5) if x.dtype.is_floating else orig(x, name=name)
        return round
    wrap(tf.math, "round", make)
    tf.round = tf.math.round
