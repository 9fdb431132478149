"""The run's device bookkeeping (session.Run) on machines faked with an nvidia-smi script:
what a test of the controller (no xdist) or of a worker counts as its devices, and what
each xdist worker is given."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from test_devices_gpu import H200, eight, fake_smi  # tests/unit is on sys.path (rootdir-relative import)

from pytest_dlconform import devices, session
from pytest_dlconform import settings as opts


def controller(monkeypatch, tmp_path, gpus, device: str, **env: str) -> session.Run:
    """A controller Run (no xdist) with ``_devices`` run against the faked machine."""
    for var in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TF_FORCE_GPU_ALLOW_GROWTH", "CUBLAS_WORKSPACE_CONFIG"):
        monkeypatch.setenv(var, "")  # recorded, so what the run sets is undone after the test
        monkeypatch.delenv(var)
    monkeypatch.setenv("PATH", fake_smi(tmp_path, gpus)["PATH"])
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    run = session.Run.__new__(session.Run)
    run.settings = opts.Settings(device=device, replicas=2)
    run.workerinput = None
    run.config = SimpleNamespace(option=SimpleNamespace(numprocesses=2, tx=[]))
    run.inventory_text, run.kinds, run.threads = run._devices()
    return run


def test_without_xdist_multi_gpu_tests_see_the_gpus(monkeypatch, tmp_path):
    run = controller(monkeypatch, tmp_path, eight()[:2], "multi-gpu")
    # nobody set CUDA_VISIBLE_DEVICES: the old count read it and gave 0 GPUs
    assert run.device_count("multi-gpu") == 2
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ",".join(g[1] for g in eight()[:2])  # pinned by UUID for children
    assert os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "true" and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # the count comes from the inventory, not the variable
    assert run.device_count("multi-gpu") == 2


def test_auto_on_a_one_gpu_machine_gives_logical_replicas(monkeypatch, tmp_path):
    run = controller(monkeypatch, tmp_path, H200[:1], "auto")
    assert run.kinds == ("gpu",)
    assert run.device_count("gpu") == 2  # min_devices(2) multi-replica claims run on two logical GPUs
    assert devices.logical_gpus(run.kinds, run.settings.replicas) == 2


def test_user_settings_are_kept(monkeypatch, tmp_path):
    run = controller(monkeypatch, tmp_path, H200, "gpu", CUDA_VISIBLE_DEVICES="1", TF_FORCE_GPU_ALLOW_GROWTH="false")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1" and os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"
    assert run.device_count("multi-gpu") == 1


def test_cpu_runs_count_no_gpu_and_pin_nothing(monkeypatch, tmp_path):
    run = controller(monkeypatch, tmp_path, H200, "cpu")
    assert run.device_count("multi-gpu") == 0 and "CUDA_VISIBLE_DEVICES" not in os.environ


@pytest.mark.parametrize("n_gpus", [1, 2, 8])
def test_workers_get_distinct_home_gpus_and_a_shared_lock_on_multi_gpu(monkeypatch, tmp_path, n_gpus):
    run = controller(monkeypatch, tmp_path, eight()[:n_gpus], "all")
    given = [run.worker_input(SimpleNamespace(gateway=SimpleNamespace(id=f"gw{i}"))) for i in range(2)]
    homes = [devices.visible_tokens(g[devices.WORKER_GPUS_KEY])[0] for g in given]
    assert len(set(homes)) == min(2, n_gpus)
    assert all(g["dlconform_threads"] == devices.threads_per_worker(2, run._inventory.cpu_count) for g in given)
    if n_gpus >= 2:
        assert given[0][devices.GPU_LOCK_KEY] == given[1][devices.GPU_LOCK_KEY]
    else:
        assert devices.GPU_LOCK_KEY not in given[0]


def test_a_worker_counts_what_it_was_given(monkeypatch, tmp_path):
    for var in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_FORCE_GPU_ALLOW_GROWTH", "CUBLAS_WORKSPACE_CONFIG"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    run = session.Run.__new__(session.Run)
    run.settings = opts.Settings(device="multi-gpu", replicas=2)
    run.workerinput = {"dlconform_kinds": ["multi-gpu"], "dlconform_inventory": "x", "dlconform_threads": 1,
                       devices.WORKER_GPUS_KEY: "GPU-b,GPU-a", devices.GPU_LOCK_KEY: str(tmp_path / "l")}
    run.inventory_text, run.kinds, run.threads = run._devices()
    assert run.device_count("multi-gpu") == 2 and os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-b,GPU-a"
    assert run.gpu_lock == str(tmp_path / "l")

