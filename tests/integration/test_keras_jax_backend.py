"""The Keras-backend oracle on the JAX backend: real JAX children, and results made wrong on purpose.

interop.keras-backends runs Keras on JAX in fresh interpreters (JAX as installed, and with
JAX_ENABLE_X64=1); here the same worker runs on small batches, its real results hold, and the
oracle fails a perturbed JAX result, a disagreement with the TensorFlow backend and a float64
model whose logits came back float32, each with its message. The run plumbing (which runs
exist, their environments, the not-applicable reason without jax) is checked without a child.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks import crossframework as cf

L, A = cf.Layer, cf.Architecture
CONV = cf.Case(A((5, 6, 2), (L("conv", units=3, kernel=3, activation="relu"), L("layernorm", epsilon=1e-3),
                             L("flatten"), L("dense", units=4))), batch=3, training=False, seed=7)
BN = cf.Case(A((4,), (L("dense", units=5, activation="relu", use_bias=False), L("batchnorm", epsilon=1e-3, momentum=0.9),
                      L("dense", units=3))), batch=6, training=True, seed=11)
# Dense layers with relu/sigmoid compute in float64 on JAX with x64 (tanh and the normalisations
# do not: the pinned divergence keras_jax_x64_float64_demoted.py).
DENSE = cf.Case(A((4,), (L("dense", units=5, activation="relu"), L("dense", units=4, activation="sigmoid"),
                         L("dense", units=3))), batch=6, training=False, seed=5)
BATCH = [(CONV, "float32"), (BN, "float32"), (DENSE, "float64")]
ONLY = {"jax-x64": ("float64",)}  # as the suite runs it: the x64 child computes the float64 cases only


@pytest.fixture(scope="module")
def jax_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[cf.Result], dict[str, Any]]]:
    """The batch on Keras/JAX, x64 off and on, each in a fresh interpreter as the suite runs it."""
    why = cf.keras_run_missing("jax")
    if why:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("keras-jax")
    inp = str(tmp / "in.npz")
    cf.write_batch(inp, BATCH)

    def run(name: str) -> tuple[list[cf.Result], dict[str, Any]]:
        out = str(tmp / f"{name}.npz")
        info = cf.keras_backend_call(inp, out, ONLY.get(name), env=cf.keras_run_env(name, "cpu"), timeout=300, what=name)
        assert info["backend"] == "jax"
        return cf.read_results(out, len(BATCH)), cf.read_meta(out)

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(("jax", "jax-x64"), pool.map(run, ("jax", "jax-x64"))))


def test_the_jax_children_get_the_settings_their_runs_ask_for(jax_runs):
    for name, x64 in (("jax", False), ("jax-x64", True)):
        meta = jax_runs[name][1]
        assert (meta["x64"], meta["platform"]) == (x64, "cpu"), meta
        assert cf.keras_run_problem(name, meta) is None
    assert cf.keras_run_problem("jax", {**jax_runs["jax"][1], "x64": True}) is not None
    results, meta = jax_runs["jax-x64"]
    assert (results[:2], meta["dtypes"][:2]) == ([{}, {}], [None, None])  # the float32 cases were skipped
    assert sorted(results[2]) == ["logits", "loss"]  # DENSE, float64: computed


def test_float32_results_on_jax_hold_and_agree(jax_runs):
    results, meta = jax_runs["jax"]
    for j, (case, dtype) in enumerate(BATCH[:2]):
        cf.check_backend(results[j], case, dtype, name="jax", dtype_seen=meta["dtypes"][j], other=("jax", results[j]))


def just_beyond(case: cf.Case, dtype: str) -> float:
    """A relative change of the logits three times the oracle's forward tolerance for ``case``
    (CONV's layer norm makes it ~1.5e-3 in float32: a fixed 1e-3 would pass, rightly)."""
    rtol = cf.tolerances(case, dtype, condition=cf.reference(case, dtype).condition)[0].rtol
    assert rtol <= cf.UNJUDGED_RTOL
    return 3 * rtol


def test_the_oracle_fails_a_perturbed_jax_result(jax_runs):
    results, meta = jax_runs["jax"]
    off = {**results[0], "logits": results[0]["logits"] * (1 + just_beyond(CONV, "float32"))}
    with pytest.raises(cf.ModelMismatch, match=r"model 0: keras\[jax\] vs float64 reference: logits: max\|actual"):
        cf.check_backend(off, CONV, "float32", name="jax", dtype_seen=meta["dtypes"][0], label="model 0: ")
    state = {**results[1], "state/1.moving_variance": results[1]["state/1.moving_variance"] + 1e-3}
    with pytest.raises(cf.ModelMismatch, match=r"keras\[jax\] vs float64 reference: state/1.moving_variance"):
        cf.check_backend(state, BN, "float32", name="jax")


def test_the_oracle_fails_a_disagreement_with_the_tensorflow_backend(jax_runs):
    # Within the reference tolerance on its own, but another backend's result six tolerances away.
    results, _ = jax_runs["jax"]
    other = {**results[0], "logits": results[0]["logits"] * (1 + 2 * just_beyond(CONV, "float32"))}
    with pytest.raises(cf.ModelMismatch, match=r"keras\[jax\] vs keras\[tensorflow\]: logits"):
        cf.check_backend(results[0], CONV, "float32", name="jax", other=("tensorflow", other))


def test_the_oracle_fails_float64_logits_that_came_back_float32(jax_runs):
    results, meta = jax_runs["jax-x64"]
    assert meta["dtypes"][2] == "float64"
    cf.check_backend(results[2], DENSE, "float64", name="jax-x64", dtype_seen=meta["dtypes"][2])
    with pytest.raises(cf.ModelMismatch, match=r"keras\[jax-x64\]: the logits of a float64 model are float32 tensors"):
        cf.check_backend(results[2], DENSE, "float64", name="jax-x64", dtype_seen="float32")


def test_jax_without_x64_computes_a_float64_model_in_float32(jax_runs):
    # The pinned divergence (known_divergences.toml, keras_jax_float64_without_x64.py), seen by the oracle.
    results, meta = jax_runs["jax"]
    assert meta["dtypes"][2] == "float32"
    assert any("truncated to dtype float32" in w for w in meta["warnings"]), meta["warnings"]
    with pytest.raises(cf.ModelMismatch, match=r"keras\[jax\] vs float64 reference"):
        cf.check_backend(results[2], DENSE, "float64", name="jax", dtype_seen=meta["dtypes"][2])


# --------------------------------------------------------------------------- the runs, without a child


def test_without_jax_the_jax_runs_are_not_applicable_with_the_install_command():
    def find_spec(name: str) -> Any:
        return None if name in ("jax", "jaxlib") else object()

    why = cf.keras_run_missing("jax", find_spec)
    assert why == ("jax and jaxlib are not installed (importlib.util.find_spec returned None), so Keras has no JAX "
                   "backend here: pip install 'pytest-dlconform[jax]' (jax and jaxlib, a CPU build)")
    assert cf.keras_run_missing("jax-x64", lambda n: None if n == "jaxlib" else object()).startswith("jaxlib is not")
    assert cf.keras_run_missing("tensorflow", find_spec) is None and cf.keras_run_missing("torch", find_spec) is None


def test_each_run_sets_its_backend_and_keeps_cpu_tests_on_the_cpu():
    assert cf.keras_run_env("jax", "cpu") == {"KERAS_BACKEND": "jax", "JAX_ENABLE_X64": "0", "TF_CPP_MIN_LOG_LEVEL": "2",
                                              "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    assert cf.keras_run_env("jax-x64", "gpu")["JAX_ENABLE_X64"] == "1"
    assert ("JAX_PLATFORMS" not in cf.keras_run_env("jax", "gpu")
            and "CUDA_VISIBLE_DEVICES" not in cf.keras_run_env("torch", "gpu"))
    assert cf.keras_run_env("torch", "cpu")["KERAS_BACKEND"] == "torch"


def test_a_cpu_only_jaxlib_is_not_applicable_on_a_gpu_test():
    meta = {"version": "0.10.2", "platform": "cpu", "x64": False}
    assert "has no GPU backend" in str(cf.keras_run_device_reason("jax", meta, "gpu"))
    assert cf.keras_run_device_reason("jax", meta, "cpu") is None
    assert cf.keras_run_device_reason("jax", {**meta, "platform": "gpu"}, "gpu") is None
    assert cf.keras_run_device_reason("tensorflow", {"version": "2.21.0"}, "gpu") is None


def test_the_worker_meta_is_beside_the_results_not_among_them(tmp_path):
    path = str(tmp_path / "out.npz")
    np.savez(path, meta=np.asarray('{"dtypes": ["float32"]}'), **{"0/logits": np.zeros(2)})
    assert cf.read_meta(path) == {"dtypes": ["float32"]}
    assert list(cf.read_results(path, 1)[0]) == ["logits"]
