"""Keras on each backend, in fresh interpreters: Keras fixes its backend at import.

A batch of (case, dtype) goes to the child as data (:func:`write_batch`), the child runs
:func:`keras_backend_worker` and writes results and ``meta`` back (:func:`read_results`,
:func:`read_meta`). Spawning, the deadline and a failing child's report are
:mod:`pytest_dlconform.frameworks.fresh`'s: :func:`keras_backend_call` runs the worker through
:func:`fresh.call`. :data:`KERAS_RUNS` names each run's environment.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...frameworks import fresh
from .architectures import Architecture, Case, Result
from .architectures import to_float64 as _np
from .keras_models import keras_loss, keras_model, keras_state

# What the fresh interpreter runs (module:function): the worker below.
WORKER = "pytest_dlconform.checks.crossframework.keras_backends:keras_backend_worker"


def write_batch(path: str, batch: Sequence[tuple[Case, str]]) -> None:
    """(case, dtype) pairs with their weights and inputs, for a fresh interpreter: weights
    as data, not as seeds, so both processes hold the very same arrays."""
    arrays: dict[str, Any] = {"count": np.asarray(len(batch))}  # Any: numpy's stub types savez(**kw) as allow_pickle
    for j, (case, dtype) in enumerate(batch):
        arrays[f"{j}/case"] = np.asarray(json.dumps({"arch": case.arch.to_json(), "batch": case.batch, "dtype": dtype,
                                                     "training": case.training, "seed": case.seed,
                                                     "logit_scale": case.logit_scale}))
        x, labels = case.inputs()
        arrays[f"{j}/x"], arrays[f"{j}/labels"] = x, labels
        arrays.update({f"{j}/w/{k}": v for k, v in case.weights().items()})
    np.savez(path, **arrays)


def read_batch(path: str) -> list[tuple[Case, str, dict[str, np.ndarray], np.ndarray, np.ndarray]]:
    with np.load(path) as data:
        out = []
        for j in range(int(data["count"])):
            raw = json.loads(str(data[f"{j}/case"]))
            case = Case(Architecture.from_json(raw["arch"]), raw["batch"], raw["training"], raw["seed"], raw["logit_scale"])
            weights = {k.split("/", 2)[2]: data[k] for k in data.files if k.startswith(f"{j}/w/")}
            out.append((case, str(raw["dtype"]), weights, data[f"{j}/x"], data[f"{j}/labels"]))
    return out


def keras_backend_worker(in_path: str, out_path: str, only: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs in a fresh interpreter with KERAS_BACKEND set: every case of the batch on it
    (or those whose dtype is in ``only``; the others get no results and dtype None).

    Besides the results, the file holds ``meta`` (:func:`read_meta`): the backend's own
    version and settings (:func:`backend_facts`), each case's logits dtype as Keras
    reports it, and the warnings the run gave (JAX warns when it truncates float64)."""
    import keras

    results: dict[str, Any] = {}  # arrays (Any for numpy's savez stub, as in write_batch)
    dtypes: list[str | None] = []
    batch = read_batch(in_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # each distinct warning once: evidence, not noise
        for j, (case, dtype, weights, x, labels) in enumerate(batch):
            if only is not None and dtype not in only:
                dtypes.append(None)
                continue
            model = keras_model(keras, case, weights, dtype)
            loss_obj, labels_for = keras_loss(keras, case, dtype)
            logits = model(np.asarray(x, dtype=dtype), training=case.training)
            loss = loss_obj(labels_for(labels), logits)
            dtypes.append(keras.backend.standardize_dtype(logits.dtype))
            results[f"{j}/logits"] = _np(keras.ops.convert_to_numpy(logits))
            results[f"{j}/loss"] = _np(keras.ops.convert_to_numpy(loss))
            results.update({f"{j}/{k}": v for k, v in keras_state(keras, model, case).items()})
    seen = sorted({f"{w.category.__name__}: {str(w.message)[:300]}" for w in caught})
    meta = {**backend_facts(keras.backend.backend()), "dtypes": dtypes, "warnings": seen[:8], "warning_kinds": len(seen)}
    np.savez(out_path, meta=np.asarray(json.dumps(meta)), **results)
    return {"backend": keras.backend.backend(), "keras": keras.__version__, "cases": len(batch)}


def backend_facts(backend: str) -> dict[str, Any]:
    """The framework under a Keras backend: its version, and for JAX the two settings that
    decide what a float64 model computes in and where (jax_enable_x64, the platform)."""
    if backend == "jax":
        import jax

        return {"version": jax.__version__, "x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]  # flags are set on Config at runtime
                "platform": jax.default_backend()}
    module = __import__(backend)
    return {"version": str(module.__version__)}


def read_meta(path: str) -> dict[str, Any]:
    """The ``meta`` record :func:`keras_backend_worker` wrote beside the results."""
    with np.load(path) as data:
        return dict(json.loads(str(data["meta"]))) if "meta" in data.files else {}


# The Keras backends the seed names, as fresh-interpreter runs: the child's environment per
# run. JAX runs twice: as installed (jax_enable_x64 off, JAX's default) and with
# JAX_ENABLE_X64=1, the switch JAX documents for float64 arrays. The flag is set both ways,
# so a value inherited from the user's shell cannot turn one run into the other.
KERAS_RUNS: dict[str, dict[str, str]] = {
    "tensorflow": {"KERAS_BACKEND": "tensorflow"},
    "torch": {"KERAS_BACKEND": "torch"},
    "jax": {"KERAS_BACKEND": "jax", "JAX_ENABLE_X64": "0"},
    "jax-x64": {"KERAS_BACKEND": "jax", "JAX_ENABLE_X64": "1"},
}
JAX_INSTALL = "pip install 'pytest-dlconform[jax]' (jax and jaxlib, a CPU build)"


def keras_run_missing(run: str, find_spec: Callable[[str], Any] | None = None) -> str | None:
    """Why ``run`` cannot start here (a package this environment lacks), or None. TensorFlow
    and torch: the plugin's tf and torch fixtures report those missing."""
    if KERAS_RUNS[run]["KERAS_BACKEND"] != "jax":
        return None
    if find_spec is None:
        from importlib.util import find_spec as default_find_spec

        find_spec = default_find_spec
    absent = [name for name in ("jax", "jaxlib") if find_spec(name) is None]
    if not absent:
        return None
    return (f"{' and '.join(absent)} {'is' if len(absent) == 1 else 'are'} not installed "
            f"(importlib.util.find_spec returned None), so Keras has no JAX backend here: {JAX_INSTALL}")


def keras_run_env(run: str, device_kind: str) -> dict[str, str]:
    """The child's environment: the backend, its settings, and on the CPU instance of a test
    every backend kept on the CPU (JAX_PLATFORMS=cpu also skips JAX's GPU/TPU probing and
    its warnings)."""
    env = {**KERAS_RUNS[run], "TF_CPP_MIN_LOG_LEVEL": "2"}
    if device_kind == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        if env["KERAS_BACKEND"] == "jax":
            env["JAX_PLATFORMS"] = "cpu"
    return env


def keras_run_problem(run: str, meta: Mapping[str, Any]) -> str | None:
    """A child that did not get the settings its run asked for (a harness error), or None."""
    want = KERAS_RUNS[run].get("JAX_ENABLE_X64")
    if want is not None and meta.get("x64") != (want == "1"):
        return f"JAX_ENABLE_X64={want} gave jax_enable_x64={meta.get('x64')} in the child: {dict(meta)}"
    return None


def keras_run_device_reason(run: str, meta: Mapping[str, Any], device_kind: str) -> str | None:
    """Why a run that worked cannot stand for ``device_kind`` (a CPU-only jaxlib on a GPU test)."""
    if KERAS_RUNS[run]["KERAS_BACKEND"] == "jax" and device_kind != "cpu" and meta.get("platform") == "cpu":
        return (f"jax {meta.get('version')} here has no GPU backend (jax.default_backend() is 'cpu'), so Keras on "
                f"JAX cannot run on the {device_kind}: pip install 'jax[cuda12]'")
    return None


def read_results(path: str, count: int) -> list[Result]:
    with np.load(path) as data:
        return [{k.split("/", 1)[1]: data[k] for k in data.files if k.split("/", 1)[0] == str(j)} for j in range(count)]



def keras_backend_call(in_path: str, out_path: str, only: Sequence[str] | None = None, *, env: Mapping[str, str],
                       timeout: float, what: str) -> dict[str, Any]:
    """Run :func:`keras_backend_worker` on the batch at ``in_path`` in a fresh interpreter with
    ``env`` (:func:`keras_run_env`); returns the worker's summary (backend, keras, cases)."""
    result: dict[str, Any] = fresh.call(WORKER, in_path, out_path, None if only is None else list(only),
                                        timeout=timeout, env=env, what=what)
    return result
