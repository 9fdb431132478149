"""The run's device plan (session.plan.DevicePlan) on machines faked with an nvidia-smi script:
what a test of the one process (no xdist) or of a worker counts as its devices, and what
the controller gives each xdist worker."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from test_devices_gpu import H200, eight, fake_smi  # tests/unit is on sys.path (rootdir-relative import)

from pytest_dlconform.core import devices
from pytest_dlconform.run import settings as opts
from pytest_dlconform.run.session.controller import Controller
from pytest_dlconform.run.session.plan import DevicePlan


class Discovered(SimpleNamespace):
    """The plan of the one process (no xdist), as its tests and the controller use it."""

    def device_count(self, kind: str) -> int:
        return self.plan.device_count(kind, self.settings.replicas)


def controller(monkeypatch, tmp_path, gpus, device: str, **env: str) -> Discovered:
    """The device plan of a process without xdist, discovered on the faked machine."""
    for var in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TF_FORCE_GPU_ALLOW_GROWTH", "CUBLAS_WORKSPACE_CONFIG"):
        monkeypatch.setenv(var, "")  # recorded, so what the run sets is undone after the test
        monkeypatch.delenv(var)
    monkeypatch.setenv("PATH", fake_smi(tmp_path, gpus)["PATH"])
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    settings = opts.Settings(device=device, replicas=2)
    plan = DevicePlan.discover(settings)
    ctl = Controller.__new__(Controller)  # its worker_input only: no input files, no factories to check
    ctl.config = SimpleNamespace(option=SimpleNamespace(numprocesses=2, tx=[]))  # type: ignore[assignment]
    ctl.plan = plan
    return Discovered(settings=settings, plan=plan, kinds=plan.kinds, controller=ctl)


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
    given = [run.controller.worker_input(SimpleNamespace(gateway=SimpleNamespace(id=f"gw{i}"))) for i in range(2)]
    homes = [devices.visible_tokens(g[devices.WORKER_GPUS_KEY])[0] for g in given]
    assert len(set(homes)) == min(2, n_gpus)
    assert all(g["dlconform_threads"] == devices.threads_per_worker(2, run.plan.inventory.cpu_count) for g in given)
    if n_gpus >= 2:
        assert given[0][devices.GPU_LOCK_KEY] == given[1][devices.GPU_LOCK_KEY]
    else:
        assert devices.GPU_LOCK_KEY not in given[0]


def test_a_worker_counts_what_it_was_given(monkeypatch, tmp_path):
    for var in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_FORCE_GPU_ALLOW_GROWTH", "CUBLAS_WORKSPACE_CONFIG"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    plan = DevicePlan.given({"dlconform_kinds": ["multi-gpu"], "dlconform_inventory": "x", "dlconform_threads": 1,
                             devices.WORKER_GPUS_KEY: "GPU-b,GPU-a", devices.GPU_LOCK_KEY: str(tmp_path / "l")})
    assert plan.device_count("multi-gpu", 2) == 2 and os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-b,GPU-a"
    assert plan.gpu_lock == str(tmp_path / "l") and plan.inventory is None  # a worker never re-discovers



@pytest.mark.parametrize("n_gpus", [1, 2])
def test_a_worker_of_an_inert_controller_plans_the_share_the_controller_would_give(monkeypatch, tmp_path, n_gpus):
    from pytest_dlconform.run.session import _worker_plan

    run = controller(monkeypatch, tmp_path, eight()[:n_gpus], "all")
    expected = run.controller.worker_input(SimpleNamespace(gateway=SimpleNamespace(id="gw1")))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(var, "")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # an inert controller pinned nothing
    wi = {"workerid": "gw1", "workercount": 2, "testrunuid": "abc"}
    plan = _worker_plan(wi, run.settings)
    for key, value in expected.items():
        if key == devices.GPU_LOCK_KEY:  # one lock per run, named by the run's id: no controller pid to name it by
            assert wi[key].endswith("dlconform-gpus-abc.lock")
        else:
            assert wi[key] == value, key
    assert plan.inventory is None and plan.kinds == run.plan.kinds
    assert plan.visible_gpus == tuple(devices.visible_tokens(expected[devices.WORKER_GPUS_KEY]))
