"""keras.layers.RandomShear(x_factor=f).get_config() stores (-f, f), which from_config rejects, so a
.keras model holding the layer cannot be loaded.

Claim (dlconform modules.keras.layer-contract): from_config(get_config()) rebuilds the layer (same
output, same config), and a functional model holding it survives model.save/keras.saving.load_model.
Documentation: help(keras.layers.Layer.get_config): "Returns the config of the object. An object
    config is a Python dictionary (serializable) containing the information needed to re-instantiate
    it."; help(keras.layers.RandomShear): "x_factor: A tuple of two floats. For each augmented image,
    a value is sampled from the provided range. If a float is passed, the range is interpreted as
    `(0, x_factor)`. ... All provided values should be positive." (y_factor alike).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): `_set_factor_with_name`
turns a float f into `[-f, f]` (not the documented (0, f)) and get_config returns that pair;
from_config passes it back to __init__, whose `_check_factor_range` rejects -f: TypeError "Error
when deserializing class 'RandomShear' ... The `factor` argument should be a number (or a list of
two numbers) in the range [0, 1.0]. Received: input_number=-0.2"; keras.saving.load_model of a model
holding the layer fails the same way. The sampled range is (-f, f) as well, against the docstring's
(0, f).
Found by: suites/modules/test_keras_layer_records.py::test_layer_contract[*-RandomShear]
(get_config-roundtrip) and test_keras_save_roundtrip[*-augmentation].

Run: python keras_randomshear_config.py
Exit 1 while from_config(get_config()) raises, 0 once it rebuilds the layer with the same config,
2 if keras cannot be imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

X_FACTOR = 0.2


def observed():
    """(the stored x_factor, the round trip's outcome: 'same config' / 'other config' / the error)."""
    import keras

    layer = keras.layers.RandomShear(x_factor=X_FACTOR)
    config = layer.get_config()
    try:
        twin = keras.layers.RandomShear.from_config(config)
        outcome = "same config" if twin.get_config() == config else f"other config {twin.get_config()['x_factor']}"
    except Exception as exc:  # the finding is an exception from the documented round trip
        last = str(exc).strip().splitlines()[-1].replace("Exception encountered: ", "")
        outcome = f"{type(exc).__name__} ({last[:200]})"
    return tuple(config["x_factor"]), outcome


def judge(got):
    stored, outcome = got
    holds = outcome == "same config"
    return holds, (f"keras.layers.RandomShear(x_factor={X_FACTOR}).get_config() stores x_factor={stored} "
                   f"(documented range (0, {X_FACTOR})); RandomShear.from_config(that config): {outcome}; "
                   f"documented: the config re-instantiates the layer")


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
