"""tf.nn.safe_embedding_lookup_sparse(combiner="sum") keeps the IDs with non-positive weight.

Claim (dlconform modules.tf.nn-functions): every tf.nn function computes what its docstring
states; safe_embedding_lookup_sparse prunes non-positive weights whatever the combiner.
Documentation: help(tf.nn.safe_embedding_lookup_sparse),
https://www.tensorflow.org/api_docs/python/tf/nn/safe_embedding_lookup_sparse
    "This is similar to `tf.nn.embedding_lookup_sparse`, except invalid IDs (< 0) are pruned
     from input IDs and weights, as well as any IDs with non-positive weight. For an entry with
     no features, the embedding vector for `default_id` is returned, or the 0-vector if
     `default_id` is not supplied."
  (no exception for any combiner; combiner: "Currently "mean", "sqrtn" and "sum" are supported").
Observed on tensorflow 2.21.0: with combiner="sum" an ID with weight -1 is added with weight -1,
and a row whose only ID has weight 0 returns 0 * its embedding instead of default_id's vector;
"mean" and "sqrtn" prune as documented. tensorflow/python/ops/embedding_ops.py,
safe_embedding_lookup_sparse: `if combiner != "sum": sparse_ids, sparse_weights =
_prune_invalid_weights(sparse_ids, sparse_weights)`, where _prune_invalid_weights keeps weights > 0.
Found by: suites/modules/test_tf_nn.py::test_safe_embedding_sum_prunes_non_positive_weights[*]
(rows [[1, 2], [0]], weights [[1.0, -1.0], [0.0]], default_id=4: max|actual - expected| = 9.810e-01).

Run: python tf_safe_embedding_lookup_sparse_non_positive_weights.py
Exit 1 while "sum" keeps non-positive weights, 0 once it prunes them, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

EMB = np.arange(10.0).reshape(5, 2)  # 5 ids, dimension 2, float64
ROWS = [[1, 2], [0]]  # row 0: id 1 (weight 1) and id 2 (weight -1); row 1: id 0 (weight 0)
WEIGHTS = [[1.0, -1.0], [0.0]]
DEFAULT_ID = 4
COMBINERS = ("sum", "mean", "sqrtn")
# After pruning each row holds at most one id of weight 1: every combiner returns an embedding row
# exactly (a product by 1, a division by 1 or sqrt(1)); 4 roundings of the largest entry are generous.
ATOL = 4 * np.finfo(np.float64).eps / 2 * float(np.max(np.abs(EMB)))


def _sparse(tf, rows, values_dtype):
    indices = [[r, k] for r, row in enumerate(rows) for k in range(len(row))]
    values = np.array([v for row in rows for v in row], dtype=values_dtype)
    return tf.SparseTensor(indices, values, [len(rows), max(len(row) for row in rows)])


def observed():
    """{combiner: the (2, 2) output} of safe_embedding_lookup_sparse on ROWS/WEIGHTS."""
    import tensorflow as tf

    ids, weights = _sparse(tf, ROWS, np.int64), _sparse(tf, WEIGHTS, np.float64)
    return {c: tf.nn.safe_embedding_lookup_sparse(EMB, ids, weights, combiner=c, default_id=DEFAULT_ID).numpy()
            for c in COMBINERS}


def expected():
    """Documented: id 2 (weight -1) and id 0 (weight 0) pruned; row 1 is then empty: default_id's vector."""
    want = np.stack([EMB[1], EMB[DEFAULT_ID]])
    return dict.fromkeys(COMBINERS, want)


def judge(got, want):
    errors = {c: float(np.max(np.abs(np.asarray(got[c], dtype=np.float64) - want[c]))) for c in want}
    worst = max(errors.values())
    seen = ", ".join(f"{c} {np.asarray(got[c]).tolist()}" for c in want)
    line = (f"tf.nn.safe_embedding_lookup_sparse(ids {ROWS}, weights {WEIGHTS}, default_id={DEFAULT_ID}) "
            f"on a 5x2 table: {seen}; documented (non-positive weights pruned, empty row default_id) "
            f"{next(iter(want.values())).tolist()}; worst |error| {worst:.3g} (allowed {ATOL:.2g})")
    return worst <= ATOL, line


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
