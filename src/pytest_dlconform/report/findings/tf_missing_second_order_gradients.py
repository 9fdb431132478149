"""TensorFlow: nested GradientTapes fail on several differentiable tf.math/tf.nn functions.

Claim (dlconform modules.surface-derivatives.tensorflow): a Hessian-vector product by nested
tf.GradientTape (reverse over reverse) of a twice-differentiable function is the derivative of
its gradient.
Documentation: https://www.tensorflow.org/api_docs/python/tf/GradientTape
    "GradientTapes can be nested to compute higher-order derivatives"; the guide
    https://www.tensorflow.org/guide/advanced_autodiff#higher-order_gradients: "the exact same
    API works for higher-order gradients as well". None of the functions below documents a
    first-order-only gradient.
Observed on tensorflow 2.21.0 (eager, CPU, float64): the first derivative works, the second raises
  - tf.math.igamma / tf.math.igammac: LookupError: gradient registry has no entry for: IgammaGradA
  - tf.nn.dilation2d / tf.nn.erosion2d: LookupError: ... Dilation2DBackpropInput / Dilation2DBackpropFilter
  - tf.nn.max_pool_with_argmax: LookupError: ... MaxPoolGradWithArgmax
  - tf.nn.fractional_max_pool: LookupError: ... FractionalMaxPoolGrad
  - tf.nn.safe_embedding_lookup_sparse: LookupError: ... SparseFillEmptyRowsGrad
  - tf.nn.convolution (so tf.nn.with_space_to_batch around it): AttributeError: 'NoneType' object has
    no attribute 'decode' in nn_grad._Conv2DBackpropFilterGrad (op.get_attr("data_format") is None
    for the Conv2DBackpropFilter recorded by tf.nn.convolution's gradient; tf.nn.conv2d works).
  These are not TensorFlow's documented refusal ("No gradient defined for operation"): the backward
  op of a differentiable function simply has no (working) gradient. Upstream: the same class of gap
  was reported and fixed one op at a time, e.g. tensorflow/tensorflow#11435 and #6143 (MaxPoolGrad,
  AvgPoolGrad), #18354 (DepthwiseConv2dNativeBackpropFilter); no report found for these ops.
Found by: suites/modules/test_surface_derivatives.py::test_tensorflow_record_derivative
[tf.math.igamma-hvp-rr], [tf.math.igammac-hvp-rr], [tf.nn.dilation2d-hvp-rr], [tf.nn.erosion2d-hvp-rr],
[tf.nn.max_pool_with_argmax-hvp-rr], [tf.nn.fractional_max_pool-hvp-rr],
[tf.nn.safe_embedding_lookup_sparse-hvp-rr], [tf.nn.with_space_to_batch-hvp-rr].

Run: python tf_missing_second_order_gradients.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
RNG = np.random.default_rng(0)


def cases(tf):
    """name -> (function of a list of tensors, inputs)."""
    rows = np.array([[0, 0], [0, 1], [1, 0]], np.int64)

    def safe(x):
        sp_ids = tf.SparseTensor(rows, np.array([0, 2, 1], np.int64), [2, 2])
        return tf.nn.safe_embedding_lookup_sparse(x[0], sp_ids, tf.SparseTensor(rows, x[1], [2, 2]), combiner="sqrtn")

    spaced = (RNG.permutation(16).reshape(1, 4, 4, 1) - 7.5)
    return {
        "tf.math.igamma": (lambda x: tf.math.igamma(x[0], x[1]), [np.array([0.7, 2.0]), np.array([1.5, 3.0])]),
        "tf.math.igammac": (lambda x: tf.math.igammac(x[0], x[1]), [np.array([0.7, 2.0]), np.array([1.5, 3.0])]),
        "tf.nn.dilation2d": (lambda x: tf.nn.dilation2d(x[0], x[1], [1, 1, 1, 1], "VALID", "NHWC", [1, 1, 1, 1]),
                             [spaced, np.array([[[0.1], [0.2]], [[0.15], [0.05]]])]),
        "tf.nn.erosion2d": (lambda x: tf.nn.erosion2d(x[0], x[1], [1, 1, 1, 1], "VALID", "NHWC", [1, 1, 1, 1]),
                            [spaced, np.array([[[0.1], [0.2]], [[0.15], [0.05]]])]),
        "tf.nn.max_pool_with_argmax": (lambda x: tf.nn.max_pool_with_argmax(x[0], 2, 2, "VALID")[0], [spaced]),
        "tf.nn.fractional_max_pool": (lambda x: tf.nn.fractional_max_pool(x[0], [1.0, 1.5, 1.5, 1.0], pseudo_random=True,
                                                                          seed=5)[0], [spaced]),
        "tf.nn.safe_embedding_lookup_sparse": (safe, [RNG.uniform(-1, 1, (3, 2)), np.array([0.5, 1.5, 2.0])]),
        "tf.nn.convolution": (lambda x: tf.nn.convolution(x[0], x[1], padding="VALID"),
                              [RNG.uniform(-1, 1, (1, 4, 4, 1)), RNG.uniform(-1, 1, (2, 2, 1, 1))]),
    }


def observed():
    """name -> None when nested tapes give H v, else the error ('Type: message' first line)."""
    import tensorflow as tf

    out = {}
    for name, (fn, xs) in cases(tf).items():
        ts = [tf.constant(x, tf.float64) for x in xs]
        try:
            with tf.GradientTape() as outer:
                outer.watch(ts)
                with tf.GradientTape() as inner:
                    inner.watch(ts)
                    y = fn(ts)
                gs = [tf.convert_to_tensor(g) for g in inner.gradient(y, ts)]  # densify IndexedSlices
            outer.gradient(gs, ts, output_gradients=[tf.ones_like(t) for t in ts])
            out[name] = None
        except Exception as e:
            out[name] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
    return out


def expected():
    return dict.fromkeys(("tf.math.igamma", "tf.math.igammac", "tf.nn.dilation2d", "tf.nn.erosion2d",
                          "tf.nn.max_pool_with_argmax", "tf.nn.fractional_max_pool",
                          "tf.nn.safe_embedding_lookup_sparse", "tf.nn.convolution"))


def judge(got, want):
    bad = {k: v for k, v in got.items() if v is not None}
    missing = sorted(set(want) - set(got))
    detail = "; ".join(f"{k}: {v}" for k, v in bad.items())
    holds = not bad and not missing
    return holds, (f"nested-tape H v of {len(got)} differentiable functions: "
                   + (f"{len(bad)} of {len(got)} have no working second derivative ({detail})" if bad
                      else "every second derivative is computed"))


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
