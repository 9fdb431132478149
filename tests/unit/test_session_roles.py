"""The roles a pytest process plays (session.start): the controller unless it is an xdist
worker, a worker only when a test needs one, and the settings, device plan and environment
shared between the two objects of one process. No pytest run: the config is faked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_dlconform.core import devices
from pytest_dlconform.run import session
from pytest_dlconform.run.session.controller import Controller
from pytest_dlconform.run.session.worker import Worker


def fake_config(workerinput: dict[str, Any] | None = None) -> Any:
    config = SimpleNamespace(
        getoption=lambda name, default=None: default, getini=lambda key: None, get_verbosity=lambda: 0,
        option=SimpleNamespace(numprocesses=None, tx=[]))
    if workerinput is not None:
        config.workerinput = workerinput
    return config


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_CPP_MIN_LOG_LEVEL", "DLCONFORM_MODEL_INFO"):
        monkeypatch.setenv(var, "")  # recorded, so what start() sets is undone after the test
        monkeypatch.delenv(var)
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: a CPU machine
    monkeypatch.setenv("DLCONFORM_DEVICE", "cpu")


def test_one_process_is_a_controller_and_builds_its_worker_when_a_test_needs_one() -> None:
    process = session.start(fake_config())
    assert isinstance(process.controller, Controller)
    assert process._worker is None  # an xdist controller never runs a test: it never builds one
    worker = process.worker
    assert isinstance(worker, Worker) and process.worker is worker
    assert worker.settings is process.controller.settings is process.settings
    assert worker.plan is process.controller.plan and worker.plan.inventory is not None  # discovered once


def test_an_xdist_worker_is_no_controller_and_takes_its_share_as_given() -> None:
    share = {"dlconform_kinds": ["cpu"], "dlconform_inventory": "2 CPU cores; no GPU", "dlconform_threads": 1,
             devices.WORKER_GPUS_KEY: ""}
    process = session.start(fake_config(share))
    assert process.controller is None
    assert process._worker is not None and process.worker.plan.inventory is None  # never re-discovers
    assert process.worker.plan.threads == 1 and process.worker.plan.inventory_text == "2 CPU cores; no GPU"


def test_the_roles_are_composed_not_mixed_in() -> None:
    assert Controller.__mro__ == (Controller, object) and Worker.__mro__ == (Worker, object)
    worker = session.start(fake_config()).worker
    parts = {name: type(part).__name__ for name, part in vars(worker).items() if not name.startswith("_")}
    assert {"collection", "budget", "guard", "fixtures", "known"} <= parts.keys()
