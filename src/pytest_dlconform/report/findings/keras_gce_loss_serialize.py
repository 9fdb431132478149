"""keras.losses: CategoricalGeneralizedCrossEntropy cannot be deserialized or looked up by name.

Claim (dlconform modules.keras.losses, mode keras.serialize): keras.losses.serialize/deserialize
and get(config) give back an instance of each public loss class with the same config, and
get(function name) the public function.
Documentation: help(keras.losses.deserialize): "Deserializes a serialized loss class/function
    instance. ... Returns: A Keras Loss instance or a loss function."; help(keras.losses.get):
    "Retrieves a Keras loss as a function/Loss class instance. The identifier may be the string
    name of a loss function or Loss class." keras.losses.CategoricalGeneralizedCrossEntropy and
    keras.losses.categorical_generalized_cross_entropy are public (added by keras-team/keras#21024).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): the class and its function
are missing from ALL_OBJECTS in keras/src/losses/__init__.py, so deserialize(serialize(loss))
returns the class name as a str, with no error, and get(serialize(loss)) and
get("categorical_generalized_cross_entropy") raise "Could not interpret loss identifier". Every
other public loss class round-trips. The same kind of bug as keras-team/keras#18769 (AdamW in
keras.optimizers); no report found for this loss.
Found by: suites/modules/test_losses.py::test_keras_loss_serialize_deserialize_and_get_round_trip[*]

Run: python keras_gce_loss_serialize.py
Exit 1 while any of the three lookups fails, 0 once all three give the class or function, 2 if
keras cannot be imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

Q = 0.5


def observed():
    """What deserialize(serialize(loss)), get(serialize(loss)) and get(function name) give."""
    import keras

    loss = keras.losses.CategoricalGeneralizedCrossEntropy(q=Q, reduction="sum")
    out = {"keras": keras.__version__, "backend": keras.backend.backend()}
    calls = {"deserialize(serialize(loss))": lambda: keras.losses.deserialize(keras.losses.serialize(loss)),
             "get(serialize(loss))": lambda: keras.losses.get(keras.losses.serialize(loss)),
             "get('categorical_generalized_cross_entropy')":
                 lambda: keras.losses.get("categorical_generalized_cross_entropy")}
    for label, call in calls.items():
        try:
            got = call()
        except ValueError as exc:
            out[label] = f"raised ValueError: {str(exc).splitlines()[0][:70]}"
            continue
        if label.startswith("get('"):
            ok = got is keras.losses.categorical_generalized_cross_entropy
        else:
            ok = type(got) is type(loss) and got.get_config() == loss.get_config()
        out[label] = "the loss" if ok else f"{type(got).__name__} {got!r:.50}"
    return out


def expected():
    return {"deserialize(serialize(loss))": "the loss", "get(serialize(loss))": "the loss",
            "get('categorical_generalized_cross_entropy')": "the loss"}


def judge(got, want):
    holds = all(got[k] == v for k, v in want.items())
    line = (f"keras {got.get('keras', '?')} ({got.get('backend', '?')}) CategoricalGeneralizedCrossEntropy(q={Q}): "
            + "; ".join(f"{k} -> {got[k]}" for k in want)
            + " (documented: the Loss instance with the same config, and the public function)")
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
