"""IntegerLookup, StringLookup, TextVectorization (multi_hot, count): compute_output_spec says
float32, the layer outputs int64.

Claim (dlconform modules.keras.layer-contract): compute_output_spec (what a functional model's
symbolic tensors carry) returns a spec of the real output's shape and dtype.
Documentation: help(keras.layers.IntegerLookup): the multi_hot example
    ">>> layer = IntegerLookup(vocabulary=vocab, output_mode='multi_hot') ... dtype=float32)" and the
    count example "... dtype=float32)"; help(keras.layers.StringLookup): the same examples with
    "dtype=int64)" (changed by keras-team/keras PR #19672 for #19660: "the dtype should be int64
    for the cases output_mode with one_hot multi_hot and count"); help(keras.layers.TextVectorization):
    '"multi_hot": Outputs a single int array per batch', '"count": Like "multi_hot", but the int
    array contains a count'.
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): all three output int64 in
multi_hot and count modes (IndexLookup passes `dtype=self._value_dtype`, int64, to
numerical_utils.encode_categorical_inputs), while IndexLookup.compute_output_spec and
TextVectorization.compute_output_spec return `backend.floatx()` (float32) for every mode but
"int", so a symbolic call (keras.Input) says float32. IntegerLookup's docstring examples say
float32 too. Documentation gap: the documents disagree with each other and the code.
Found by: suites/modules/test_keras_layer_records.py::test_layer_contract[*-IntegerLookup],
[*-StringLookup], [*-TextVectorization] (property output-shape: compute_output_spec).

Run: python keras_lookup_output_spec_dtype.py
Exit 1 while a symbolic call's dtype differs from the eager output's, 0 once they agree, 2 if
keras cannot be imported.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

CASES = {
    "IntegerLookup(vocabulary=[1, 2, 3], output_mode='multi_hot')": (
        "IntegerLookup", {"vocabulary": [1, 2, 3], "output_mode": "multi_hot"}, np.array([[1, 2, 5], [3, 3, 1]]), "int64"),
    "StringLookup(vocabulary=['a', 'b'], output_mode='count')": (
        "StringLookup", {"vocabulary": ["a", "b"], "output_mode": "count"},
        np.array([["a", "b", "c"], ["a", "a", "b"]]), "string"),
    "TextVectorization(vocabulary=['a', 'b'], output_mode='multi_hot')": (
        "TextVectorization", {"vocabulary": ["a", "b"], "output_mode": "multi_hot"}, np.array(["a b", "b c"]), "string"),
}


def observed():
    """{case: (eager output dtype, compute_output_spec dtype, keras.Input call dtype)}."""
    import keras

    out = {}
    for label, (cls, kwargs, x, in_dtype) in CASES.items():
        layer = getattr(keras.layers, cls)(**kwargs)
        eager = layer(x).dtype
        eager = getattr(eager, "name", str(eager))
        spec = layer.compute_output_spec(keras.KerasTensor(x.shape, dtype=in_dtype)).dtype
        symbolic = layer(keras.Input(batch_shape=x.shape, dtype=in_dtype)).dtype
        out[label] = (str(eager), str(spec), str(symbolic))
    return out


def judge(got):
    holds = all(e == s == k for e, s, k in got.values())
    line = "; ".join(f"{label}: output {e}, compute_output_spec {s}, symbolic call {k}" for label, (e, s, k) in got.items())
    return holds, line + " (documented: a spec of the output's dtype)"


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
