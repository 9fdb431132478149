"""keras.optimizers.deserialize(keras.optimizers.serialize(Lamb())) returns the string 'Lamb'.

Claim (dlconform modules.keras.optimizer-config): an optimizer rebuilt from its configuration
(get_config/from_config, serialize/deserialize) is the same optimizer and updates bitwise alike.
Documentation: help(keras.optimizers.deserialize), https://keras.io/api/optimizers/
    serialize: "Returns the optimizer configuration as a Python dict."; deserialize: "Returns a
    Keras optimizer object via its configuration. ... Returns: A Keras Optimizer instance."
  keras.optimizers.Lamb is a public optimizer (keras.optimizers.Lamb, keras 3.x).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): Lamb is missing from
ALL_OBJECTS in keras/src/optimizers/__init__.py (Lion, Muon, ScheduleFreeAdamW, AdamW are
there), so deserialize's `module_objects=ALL_OBJECTS_DICT` lookup misses it and
serialization_lib.deserialize_keras_object returns the class name as a str, with no error;
keras.optimizers.get("lamb") and get(serialize(Lamb())) raise "Could not interpret optimizer
identifier". Lamb.from_config(get_config()) and model save/load_model work. The same bug as
keras-team/keras#18769 (AdamW, fixed by adding AdamW to ALL_OBJECTS).
Found by: suites/modules/test_keras_optimizers.py::test_keras_optimizer_config_round_trips_give_the_same_updates[*-Lamb]
("Lamb: serialize round trip gave a str").

Run: python keras_lamb_deserialize.py
Exit 1 while deserialize returns a non-optimizer, 0 once it returns a Lamb with the same
config, 2 if keras cannot be imported.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

LR, BETAS, EPS = 0.125, (0.875, 0.9921875), 2.0 ** -23


def observed():
    """What deserialize(serialize(Lamb(...))) returns, and its config where it is an optimizer."""
    import keras

    original = keras.optimizers.Lamb(learning_rate=LR, beta_1=BETAS[0], beta_2=BETAS[1], epsilon=EPS)
    twin = keras.optimizers.deserialize(keras.optimizers.serialize(original))
    same = None
    if isinstance(twin, keras.optimizers.Optimizer):
        a, b = original.get_config(), twin.get_config()
        a.pop("name", None), b.pop("name", None)
        same = a == b
    return {"type": type(twin).__name__, "repr": repr(twin)[:60], "is_lamb": type(twin) is keras.optimizers.Lamb,
            "same_config": same, "keras": keras.__version__, "backend": keras.backend.backend()}


def expected():
    return {"is_lamb": True, "same_config": True}


def judge(got, want):
    holds = got["is_lamb"] == want["is_lamb"] and got["same_config"] == want["same_config"]
    line = (f"keras {got.get('keras', '?')} ({got.get('backend', '?')}) keras.optimizers.deserialize("
            f"keras.optimizers.serialize(keras.optimizers.Lamb(learning_rate={LR}))) returned a {got['type']} "
            f"({got['repr']}); documented: a Keras Optimizer instance (a Lamb with the same config"
            f"{'' if got['same_config'] is None else ': same config ' + str(got['same_config'])})")
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
