"""keras.layers.MelSpectrogram with a float64 dtype raises: a float32 reference power meets the
float64 spectrogram.

Claim (dlconform modules.keras.layer-contract): a layer built under the "float64" policy runs and
outputs float64.
Documentation: help(keras.layers.MelSpectrogram): "This layer takes `float32`/`float64` single or
    batched audio signal as inputs and computes the Mel spectrogram"; its call() keeps a float64
    compute dtype ("jax, tf supports only "float32" and "float64" in stft"); help(keras.DTypePolicy).
Observed on keras 3.15.1 (TensorFlow backend, tensorflow-cpu 2.21.0): InvalidArgumentError
"cannot compute Sub as input #1(zero-based) was expected to be a double tensor but is a float
tensor [Op:Sub]": in `_dbscale` (power_to_db=True, the default), `ref_value =
convert_to_tensor(self.ref_power)` is float32 and `log_spec -= 10.0 * log10(maximum(ref_value,
min_power))` subtracts it from the float64 log spectrogram. With power_to_db=False the float64
layer runs and returns float64; dtype float32 (with float64 input too) runs.
Found by: suites/modules/test_keras_layer_records.py::test_layer_contract[*-MelSpectrogram]
(property float64).

Run: python keras_melspectrogram_float64.py
Exit 1 while the float64 layer raises or returns another dtype, 0 once it returns float64, 2 if
keras cannot be imported.
"""

import os
import re
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

KWARGS = {"fft_length": 64, "sequence_stride": 16, "sequence_length": 32, "num_mel_bins": 8, "sampling_rate": 1600}
X = np.random.default_rng(0).standard_normal((2, 128))


def _short(exc):
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    noise = ("Exception encountered", "Arguments received", "\u2022")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(noise)]
    line = re.sub(r"\s*name:\s*$", "", lines[0] if lines else text)
    return f"{type(exc).__name__}: {line[:140]}"


def observed():
    """{dtype: output dtype name or the error} for the float64 layer and the float32 control."""
    import keras

    out = {}
    for dtype in ("float64", "float32"):
        try:
            y = keras.layers.MelSpectrogram(dtype=dtype, **KWARGS)(X)
            out[dtype] = str(getattr(y.dtype, "name", y.dtype))
        except Exception as exc:  # the finding is an exception from the documented call
            out[dtype] = _short(exc)
    return out


def judge(got):
    holds = got["float64"] == "float64"
    return holds, (f"keras.layers.MelSpectrogram({', '.join(f'{k}={v}' for k, v in KWARGS.items())}, dtype='float64') "
                   f"on a (2, 128) float64 signal: {got['float64']} (dtype='float32': {got['float32']}); "
                   f"documented: float32/float64 input, float64 output")


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
