"""interop.keras-backends: one Keras 3 model, the TensorFlow and the torch backend agree.

Keras picks its backend when it is imported, so each backend runs in a fresh interpreter,
one per backend for a whole batch of models, weights and inputs (handed over in a .npz),
both dtypes in the same batch; the two claims read their halves of the results.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pytest_dlconform import evidence
from pytest_dlconform.checks import crossframework as cf
from pytest_dlconform.frameworks import HarnessError
from pytest_dlconform.fresh import run_python
from pytest_dlconform.inputs import scaled

BACKENDS = ("tensorflow", "torch")
# Two fresh interpreters at once, each importing its framework and Keras: tens of seconds
# on a loaded 2-core machine; a hung import must not hang the run.
TIMEOUT_S = 300.0
CHILD = "from pytest_dlconform.checks.crossframework import keras_backend_worker as w\nemit(w({inp!r}, {out!r}))"

Batch = list[tuple[cf.Case, str]]


def batch_for(seed: int) -> Batch:
    """Coverage batches (every feature, both dtypes, details from the seed): one in the ci
    profile, scaled with the profile's example budget like ``inputs.budget``."""
    rounds = scaled(1)
    return [(case, dtype) for r in range(rounds) for k, dtype in enumerate(cf.DTYPES)
            for case in cf.coverage_batch(seed + 2 * r + k, cf.activations_for(dtype))]


def run_backend(backend: str, in_path: str, out_path: str, device_kind: str) -> dict[str, Any]:
    env = {"KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if device_kind == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU instance of the test: keep both backends on the CPU
    info = run_python(CHILD.format(inp=in_path, out=out_path), timeout=TIMEOUT_S, env=env,
                      what=f"Keras on the {backend} backend")
    if info.get("backend") != backend:
        raise HarnessError(f"KERAS_BACKEND={backend} gave a Keras on the {info.get('backend')!r} backend: {info}")
    return info


@pytest.fixture(scope="session")
def backend_runs(tf: Any, torch: Any, dl_device: str, dl_settings: Any) -> tuple[Batch, dict[str, list[cf.Result]], str]:
    """The batch, each backend's results for it, and the Keras version (computed once per worker)."""
    batch = batch_for(dl_settings.seed * 7919 + 17)
    with tempfile.TemporaryDirectory(prefix="dlconform-keras-") as tmp:
        in_path = os.path.join(tmp, "batch.npz")
        cf.write_batch(in_path, batch)
        outs = {b: os.path.join(tmp, f"{b}.npz") for b in BACKENDS}
        with ThreadPoolExecutor(len(BACKENDS)) as pool:
            infos = list(pool.map(lambda b: run_backend(b, in_path, outs[b], dl_device), BACKENDS))
        results = {b: cf.read_results(outs[b], len(batch)) for b in BACKENDS}
    return batch, results, str(infos[0]["keras"])


def check_dtype(backend_runs: tuple[Batch, dict[str, list[cf.Result]], str], dtype: str, dl_device: str) -> None:
    batch, results, version = backend_runs
    chosen = [j for j, (_, dt) in enumerate(batch) if dt == dtype]
    evidence.note(keras=version, models=len(chosen))
    tf32 = dl_device != "cpu"  # Keras leaves each backend's TF32 default alone
    for j in chosen:
        cf.check_backends({b: results[b][j] for b in BACKENDS}, batch[j][0], dtype, tf32=tf32,
                          label=f"model {j} ({dtype}, {batch[j][0].arch.layers[0].kind} ...): ")


# Not hypothesis tests: an example costs two fresh interpreters, and shrinking would cost
# dozens more; the failure message names the model, the dtype and the quantity.


@pytest.mark.claim("interop.keras-backends")
def test_keras_model_same_on_tensorflow_and_torch_backends(backend_runs, dl_device):
    check_dtype(backend_runs, "float32", dl_device)


@pytest.mark.claim("interop.keras-backends.float64")
def test_float64_keras_model_computes_in_float64_on_both_backends(backend_runs, dl_device):
    check_dtype(backend_runs, "float64", dl_device)
