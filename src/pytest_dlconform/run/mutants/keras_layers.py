"""Mutants of the generic keras.layers contract (claim modules.keras.layer-contract).

Each patches one layer the way a reported bug broke it; the records suite
(suites/modules/test_keras_layer_records.py) must notice through a generic property: the shape
inference, the config round trip or the mask propagation.
"""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

CLAIMS = "modules.keras.layer-contract"


@mutant("keras-conv-transpose-shape-same-rule", areas="modules", claims=CLAIMS, target="keras", select="keras",
        cite="https://github.com/keras-team/keras/issues/9883",
        bug="Conv2DTranspose.compute_output_shape infers each spatial length as input * stride whatever the "
            "padding and kernel (the 'same' rule; issue 9883: the transposed convolution's inferred output "
            "shape differs from the one it computes).")
def _keras_conv_transpose_shape() -> None:
    import keras

    def make(orig: Any) -> Any:
        def compute_output_shape(self: Any, input_shape: Any) -> Any:
            out = list(orig(self, input_shape))
            spatial = range(1, 3) if self.data_format == "channels_last" else range(2, 4)
            for axis, stride in zip(spatial, self.strides):
                if input_shape[axis] is not None:
                    out[axis] = input_shape[axis] * stride
            return tuple(out)
        return compute_output_shape
    wrap(keras.layers.Conv2DTranspose, "compute_output_shape", make)


@mutant("keras-conv-config-drops-dilation", areas="modules", claims=CLAIMS, target="keras", select="keras",
        cite="https://github.com/keras-team/keras/pull/5810",
        bug="Conv1D.get_config leaves dilation_rate out, so from_config and a loaded .keras model rebuild the "
            "layer undilated (PR 5810: typos in layers' get_config lost constructor arguments on reload).")
def _keras_conv_config_drops_dilation() -> None:
    import keras

    def make(orig: Any) -> Any:
        def get_config(self: Any) -> Any:
            config = dict(orig(self))
            config.pop("dilation_rate", None)
            return config
        return get_config
    wrap(keras.layers.Conv1D, "get_config", make)


@mutant("keras-merge-drops-mask", areas="modules", claims=CLAIMS, target="keras", select="keras",
        cite="https://github.com/keras-team/keras/issues/18416",
        bug="Merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate) return no output "
            "mask (issue 18416: Add and Maximum do not propagate masks in Keras 3).")
def _keras_merge_drops_mask() -> None:
    import keras

    merge = keras.layers.Add.__mro__[1]  # the Merge base class that every merging layer extends
    for cls in (merge, keras.layers.Concatenate):
        wrap(cls, "compute_mask", lambda orig: lambda self, inputs, mask=None: None)


@mutant("keras-softmax-gradient-first-order-only", areas="modules", claims=CLAIMS, target="keras", select="Softmax",
        cite="https://github.com/tensorflow/tensorflow/issues/7403",
        bug="Softmax's gradient is right but built from a stop_gradient of the output, so its own derivative "
            "(the second derivative of the layer) is wrong (issue 7403: 'Incorrect second derivative of softmax "
            "cross entropy loss', the gradient being correct and the Hessian zero).")
def _keras_softmax_first_order_only() -> None:
    import keras
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def call(self: Any, inputs: Any, mask: Any = None) -> Any:
            @tf.custom_gradient
            def softmax(x: Any) -> Any:
                y = orig(self, x, mask=mask)

                def grad(dy: Any) -> Any:
                    s = tf.stop_gradient(y)  # exact to first order, constant to second
                    return s * (dy - tf.reduce_sum(dy * s, axis=self.axis, keepdims=True))
                return y, grad
            return softmax(inputs)
        return call
    wrap(keras.layers.Softmax, "call", make)
