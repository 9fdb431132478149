"""TFLiteConverter refuses a Keras 3 LSTM (and GRU) whose batch dimension is dynamic.

Claim (dlconform export.tflite.roundtrip): tf.lite.TFLiteConverter.from_keras_model converts
generated Keras models with every layer kind, with a dynamic batch dimension.
Documentation: https://ai.google.dev/edge/litert/conversion/tensorflow/rnn (TensorFlow RNN
conversion to LiteRT): "We support out of the box conversion of Keras LSTM to TensorFlow
Lite", with "The dimension 0 of the input tensor is the batch size"; a Keras model's batch
dimension is None unless keras.Input(batch_size=...) fixes it.
Observed on tensorflow 2.21.0 with keras 3.15.1: converting keras.Sequential-like
Input((5, 4)) -> LSTM(3) raises ConverterError "'tf.TensorListReserve' op requires
element_shape to be static during TF Lite transformation pass" (the same for GRU); with
keras.Input((5, 4), batch_size=3) both convert and run. The converter's message suggests
Select TF ops instead (a larger runtime, not builtin ops).
Upstream: tensorflow/tensorflow#62849 and #70502 (closed as stale, no fix), #53333.
Found by: suites/export/test_tensorflow_formats.py::test_tflite_recurrent_layers_convert_with_a_dynamic_batch
(the coverage models' token sequence model has LSTM and GRU layers).

Run: python tflite_keras_lstm_dynamic_batch.py
Exit 1 while the bug is there, 0 once fixed, 2 if tensorflow or keras cannot be imported.
"""

import sys


def observed():
    import keras
    import tensorflow as tf

    out = {}
    for batch in (None, 3):
        inp = keras.Input((5, 4), batch_size=batch, dtype="float32")
        model = keras.Model(inp, keras.layers.Dense(2)(keras.layers.LSTM(3)(inp)))
        try:
            tf.lite.TFLiteConverter.from_keras_model(model).convert()
            out[batch] = "converted"
        except Exception as exc:  # the converter's ConverterError
            text = str(exc)
            at = text.find("error: ")
            out[batch] = f"{type(exc).__name__}: " + (text[at:].split("\n", 1)[0].split("):", 1)[-1].strip()[:160]
                                                       if at >= 0 else text[:160])
    return out


def judge(got):
    holds = got.get(None) == "converted"
    return holds, (f"Keras LSTM with a dynamic batch: {got.get(None)}; with batch_size=3: {got.get(3)} "
                   "(the RNN conversion guide documents Keras LSTM conversion out of the box)")


def main(observe=observed):
    try:
        got = observe()
    except ImportError as exc:
        print(f"CANNOT RUN: {exc}")
        return 2
    holds, line = judge(got)
    print(("FIXED: " if holds else "BUG PRESENT: ") + line)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
