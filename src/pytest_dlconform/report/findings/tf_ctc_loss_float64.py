"""tf.nn.ctc_loss with dense labels raises on float64 logits (the SparseTensor form computes them).

Claim (dlconform modules.tf.nn-functions): every tf.nn function accepts the inputs its docstring
describes and computes what it states; ctc_loss is -log p(labels | logits) (Graves et al., 2006).
Documentation: help(tf.nn.ctc_loss), https://www.tensorflow.org/api_docs/python/tf/nn/ctc_loss
    "`labels` may be supplied as either a dense, zero-padded `Tensor` with a vector of label
     sequence lengths OR as a `SparseTensor`." / "On CPU and GPU: Caller may use `SparseTensor` or
     dense padded `labels`"; "logits: `Tensor` of shape `[frames, batch_size, num_labels]`"
     (no dtype restriction); "Returns: loss: A 1-D `float Tensor` of shape `[batch_size]`,
     containing negative log probabilities."
Observed on tensorflow 2.21.0: dense labels with float64 logits raise InvalidArgumentError
"cannot compute Mul as input #1(zero-based) was expected to be a double tensor but is a float
tensor"; the same call with the labels as a SparseTensor (blank_index=0) returns the float64 loss.
tensorflow/python/ops/ctc_ops.py: ctc_loss_dense casts only float16/bfloat16 logits to float32,
and ctc_loss_and_grad's helpers build float32 tensors (`_ilabel_to_state`: `array_ops.one_hot(labels,
depth=num_labels)`, then `ilabel_log_probs * one_hot`; ctc_state_log_probs' float32 log_0), so a
float64 log_softmax meets a float32 one_hot.
Found by: suites/modules/test_tf_nn.py::test_ctc_loss_float64[*].

Run: python tf_ctc_loss_float64.py
Exit 1 while dense labels fail on float64 logits (or return a wrong or non-float64 loss), 0 once
they return -log p in float64, 2 if tensorflow cannot be imported. The SparseTensor form is printed
as the control, not judged (it returns float64, 1.6e-8 relative from the float64 sum here).
"""

import itertools
import math
import os
import re
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

LOGITS = np.random.default_rng(0).standard_normal((4, 1, 3))  # [frames, batch, num_labels], float64
LABELS = [1, 2]  # blank 0 (the default blank_index)
# -log p over 3^4 = 81 paths in float64: a sum of 81 products of 4 probabilities; 256 roundings
# of the loss is generous, float32 arithmetic would be ~1e-7 relative.
RTOL = 256 * np.finfo(np.float64).eps / 2


def _short(exc):
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    line = re.sub(r"\s*name:\s*$", "", lines[0] if lines else "")
    return f"{type(exc).__name__}: {line[:120]}"


def observed():
    """{label form: (loss, dtype name) or the error} for float64 logits."""
    import tensorflow as tf

    lengths = (np.array([len(LABELS)], np.int32), np.array([LOGITS.shape[0]], np.int32))
    calls = {
        "dense": lambda: tf.nn.ctc_loss(np.array([LABELS], np.int32), LOGITS, *lengths),
        "SparseTensor": lambda: tf.nn.ctc_loss(tf.sparse.from_dense(tf.constant([LABELS], tf.int32)), LOGITS,
                                               None, lengths[1], blank_index=0),
    }
    out = {}
    for form, call in calls.items():
        try:
            loss = call()
            out[form] = (float(loss.numpy()[0]), loss.dtype.name)
        except Exception as exc:  # the finding is an exception from the documented call
            out[form] = _short(exc)
    return out


def expected():
    """-log sum over the frame paths that collapse to LABELS (merge repeats, drop blanks) of prod softmax."""
    z = LOGITS[:, 0, :]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(z.shape[1]), repeat=z.shape[0]):
        collapsed = [k for i, k in enumerate(path) if k != 0 and (i == 0 or k != path[i - 1])]
        if collapsed == LABELS:
            total += math.prod(p[t, k] for t, k in enumerate(path))
    return -math.log(total)


def judge(got, want):
    """The dense form is judged; the SparseTensor form is shown as the control (same call, other label form)."""
    def show(r):
        return f"{r[0]!r} ({r[1]}, relative error {abs(r[0] - want) / abs(want):.3g})" if isinstance(r, tuple) else r

    dense = got["dense"]
    holds = isinstance(dense, tuple) and dense[1] == "float64" and abs(dense[0] - want) <= RTOL * abs(want)
    line = (f"tf.nn.ctc_loss(dense labels {[LABELS]}, float64 logits {LOGITS.shape}): {show(dense)}; "
            f"documented -log p = {want!r} (float64, allowed relative {RTOL:.2g}); with the labels as a "
            f"SparseTensor: {show(got['SparseTensor'])}")
    return holds, line


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
