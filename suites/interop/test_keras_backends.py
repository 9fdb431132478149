"""interop.keras-backends: one Keras 3 model gives the same results on every Keras backend.

The seed names three backends (TensorFlow, JAX, PyTorch). Keras picks its backend when it
is imported, so each backend runs in a fresh interpreter, one per backend for a whole batch
of models, weights and inputs (handed over in a .npz), both dtypes in the same batch; the
two claims read their halves of the results.

Each backend is its own test (``keras_backend`` parameter), so the report and the JSON show one
verdict per backend: the backend against the float64 numpy reference, then against the
TensorFlow backend (the default one). A backend that is not installed is "not applicable"
with the install command, on its own test id; the others still get their verdicts.

JAX runs twice. ``jax`` is JAX as installed: ``jax_enable_x64`` off, which is JAX's
default and what a Keras user gets unless they ask; float32 models are judged there, and
float64 models too (Keras 3.15 accepts ``dtype="float64"`` layers on it and reports float64
variables). ``jax-x64`` is the same batch with ``JAX_ENABLE_X64=1``, the setting JAX
documents for float64 arrays at all ("Default dtypes and the X64 flag"): the float64 claim
is judged there as well, so what Keras computes in each JAX configuration is a separate,
visible verdict rather than a choice hidden in the harness.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_dlconform.api import HarnessError, evidence, not_applicable, quick_selection, scaled
from pytest_dlconform.api import crossframework as cf

RUNS = cf.KERAS_RUNS  # the child's environment per run (tensorflow, torch, jax, jax-x64)
FLOAT32_RUNS = ("tensorflow", "torch", "jax")
FLOAT64_RUNS = ("tensorflow", "torch", "jax", "jax-x64")
# Fresh interpreters, two at a time (2 cores), each importing its framework and Keras: tens
# of seconds on a loaded machine; a hung import must not hang the run.
TIMEOUT_S = 300.0
PARALLEL = 2
# Only the float64 claim reads jax-x64, so that child skips the float32 half: JAX compiles each
# op of each model as it first runs (eager), ~30 s of CPU for a whole batch here, TensorFlow
# and torch ~5 s.
ONLY: dict[str, tuple[str, ...]] = {"jax-x64": ("float64",)}

Batch = list[tuple[cf.Case, str]]
# The modes each claim declares (claims/interop.toml): the float64 claim's torch, jax and jax-x64
# backends are pinned known divergences on this stack, which the modes ledger does not count.
CLAIM_MODES = {"float32": ("backend=tensorflow", "backend=torch", "backend=jax", "mode=inference", "mode=training"),
               "float64": ("backend=tensorflow", "mode=inference", "mode=training")}


# One batch of fresh interpreters serves every test of the module (the module-scoped
# backend_runs): --dl-shard keeps the tests in one shard, which pays for the batch once (split
# over two shards, each started all four interpreters: 45 and 49 s of one ci run's shards).
pytestmark = pytest.mark.dl_shard_group("backend-runs")


@dataclass
class Runs:
    batch: Batch
    results: dict[str, list[cf.Result]]  # run -> one result per case of the batch
    meta: dict[str, dict[str, Any]]  # run -> backend version and settings, logits dtypes, warnings
    missing: dict[str, str]  # run -> why it could not run here (not applicable)
    failed: dict[str, HarnessError]  # run -> how its child failed (an error of that run's tests)
    keras: str


def batch_for(seed: int) -> Batch:
    """Coverage batches (every feature, both dtypes, details from the seed): one in the ci
    profile, scaled with the profile's example budget like ``inputs.budget``."""
    rounds = scaled(1)
    return [(case, dtype) for r in range(rounds) for k, dtype in enumerate(cf.DTYPES)
            for case in cf.coverage_batch(seed + 2 * r + k, cf.activations_for(dtype))]


def run_backend(run: str, in_path: str, out_path: str, device_kind: str) -> dict[str, Any]:
    backend = RUNS[run]["KERAS_BACKEND"]
    info = cf.keras_backend_call(in_path, out_path, ONLY.get(run), env=cf.keras_run_env(run, device_kind),
                                 timeout=TIMEOUT_S, what=f"Keras on the {run} backend")
    if info.get("backend") != backend:
        raise HarnessError(f"KERAS_BACKEND={backend} gave a Keras on the {info.get('backend')!r} backend: {info}")
    meta = cf.read_meta(out_path)
    problem = cf.keras_run_problem(run, meta)
    if problem:
        raise HarnessError(problem)
    return {**info, "meta": meta}


def run_or_failure(run: str, in_path: str, out_path: str, device_kind: str) -> dict[str, Any] | HarnessError:
    try:
        return run_backend(run, in_path, out_path, device_kind)
    except HarnessError as exc:  # that backend's tests are errors; the others keep their verdicts
        return exc


#: What the quick profile leaves out: the second JAX configuration (JAX_ENABLE_X64=1), whose
#: fresh interpreter costs about 15 s of CPU for the float64 half of the batch alone; the float64
#: claim keeps its TensorFlow, torch and JAX runs there, and the ci profile runs it.
QUICK_LEFT_OUT = ("jax-x64",)


def _backend_of(item: Any) -> tuple[str, str] | None:
    """("keras-backends", the run) of a test of this module, else None."""
    return quick_selection.callspec_pair(item, __name__, lambda _: "keras-backends", param="keras_backend")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    quick_selection.register(metafunc, "dlconform-keras-backends-quick-sample", _backend_of,
                             lambda seed: {"keras-backends": [r for r in RUNS if r not in QUICK_LEFT_OUT]})


def _wanted(session: pytest.Session) -> set[str]:
    """The runs the selected tests of this module read (TensorFlow's always: every backend is
    also compared with it)."""
    return {"tensorflow"} | {pair[1] for item in session.items if (pair := _backend_of(item))}


@pytest.fixture(scope="session")
def backend_runs(tf: Any, torch: Any, dl_device: str, dl_settings: Any, request: pytest.FixtureRequest) -> Runs:
    """The batch and the results of every backend a selected test reads (computed once per worker)."""
    batch = batch_for(dl_settings.seed * 7919 + 17)
    missing = {run: why for run in RUNS if (why := cf.keras_run_missing(run))}
    wanted = _wanted(request.session)
    runnable = [run for run in RUNS if run not in missing and run in wanted]
    with tempfile.TemporaryDirectory(prefix="dlconform-keras-") as tmp:
        in_path = os.path.join(tmp, "batch.npz")
        cf.write_batch(in_path, batch)
        outs = {run: os.path.join(tmp, f"{run}.npz") for run in runnable}
        with ThreadPoolExecutor(PARALLEL) as pool:
            done = dict(zip(runnable, pool.map(lambda r: run_or_failure(r, in_path, outs[r], dl_device), runnable)))
        infos = {run: info for run, info in done.items() if not isinstance(info, HarnessError)}
        results = {run: cf.read_results(outs[run], len(batch)) for run in infos}
    failed = {run: exc for run, exc in done.items() if isinstance(exc, HarnessError)}
    meta = {run: info["meta"] for run, info in infos.items()}
    missing.update({run: why for run in infos if (why := cf.keras_run_device_reason(run, meta[run], dl_device))})
    keras = next((str(info["keras"]) for info in infos.values()), "unknown")
    return Runs(batch, results, meta, missing, failed, keras)


def check_run(runs: Runs, run: str, dtype: str, dl_device: str) -> None:
    if run in runs.missing:
        not_applicable(runs.missing[run])
    if run in runs.failed:
        raise runs.failed[run]
    meta = runs.meta[run]
    chosen = [j for j, (_, dt) in enumerate(runs.batch) if dt == dtype]
    facts = {f"{RUNS[run]['KERAS_BACKEND']} version": meta.get("version")}
    facts.update({f"jax {k}": meta[k] for k in ("x64", "platform") if k in meta})
    facts["warnings in the child"] = [w[:160] for w in meta.get("warnings", [])]  # JAX's float64 truncation, say
    evidence.note(keras=runs.keras, backend=run, models=len(chosen), **facts)
    tf32 = dl_device != "cpu"  # Keras leaves each backend's TF32 default alone
    other = "tensorflow" if run != "tensorflow" and "tensorflow" in runs.results else None
    for j in chosen:
        case = runs.batch[j][0]
        cf.check_backend(runs.results[run][j], case, dtype, name=run, dtype_seen=meta["dtypes"][j], tf32=tf32,
                         other=(other, runs.results[other][j]) if other else None,
                         label=f"model {j} ({dtype}, {case.arch.layers[0].kind} ...): ")
    declared = CLAIM_MODES[dtype]  # the float64 claim declares only the backend that conforms here
    modes = [f"backend={run}", *sorted({"mode=training" if runs.batch[j][0].training else "mode=inference" for j in chosen})]
    evidence.covers(*(m for m in modes if m in declared))


# Not hypothesis tests: an example costs a fresh interpreter per backend, and shrinking would
# cost dozens more; the failure message names the model, the dtype, the backend and the quantity.


# The parameter is named keras_backend so the report can show it (a row per backend).
@pytest.mark.claim("interop.keras-backends")
@pytest.mark.parametrize("keras_backend", FLOAT32_RUNS)
def test_keras_model_same_on_every_backend(backend_runs, keras_backend, dl_device):
    check_run(backend_runs, keras_backend, "float32", dl_device)


# The name predates the JAX runs; known_divergences.toml pins the torch entry by it.
@pytest.mark.claim("interop.keras-backends.float64")
@pytest.mark.parametrize("keras_backend", FLOAT64_RUNS)
def test_float64_keras_model_computes_in_float64_on_both_backends(backend_runs, keras_backend, dl_device):
    check_run(backend_runs, keras_backend, "float64", dl_device)
