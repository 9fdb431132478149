"""One conformance run, as the roles a pytest process plays once dlconform is active.

:mod:`pytest_dlconform.plugin` forwards pytest hooks to the role they belong to:

- :class:`.controller.Controller` gathers the results: each xdist worker's share of the
  machine, the verdicts from the test reports, the report, matrix and files at the end;
- :class:`.worker.Worker` runs the tests: collection, fixtures, the guard around each
  claim test, its verdict and evidence.

Under xdist the controller process plays the controller and each worker process the
worker; without xdist one process plays both, as two objects. Both are composed of small
parts with one job each (``plan``, ``collection``, ``guard``, ``budget``, ``fixtures``,
``known``, ``environment``, ``outcome``) and share the settings, the device plan and the
environment built here once per process (:func:`start`).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

from .. import settings as opts
from .collection import DESELECTED, FIXTURE_FRAMEWORK, ITEM_KEY, SHORT, ItemInfo
from .controller import Controller
from .environment import Environment
from .guard import EVIDENCE_KEY, VERDICT_KEY
from .plan import DevicePlan
from .worker import Worker

__all__ = [
    "DESELECTED", "EVIDENCE_KEY", "FIXTURE_FRAMEWORK", "ITEM_KEY", "SHORT", "VERDICT_KEY", "Controller", "ItemInfo",
    "Process", "Worker", "start",
]


class Process:
    """The roles of this pytest process: a controller unless it is an xdist worker, and a
    worker (built when a test needs one: an xdist controller never does)."""

    def __init__(self, config: pytest.Config, settings: opts.Settings, plan: DevicePlan,
                 controller: Controller | None, environment: Environment) -> None:
        self.config = config
        self.settings = settings
        self.plan = plan
        self.controller = controller
        self.environment = environment
        self._worker: Worker | None = None

    @property
    def worker(self) -> Worker:
        if self._worker is None:
            # Read once: each call scans installed distributions' metadata, and collection
            # would otherwise repeat it for every test function and item.
            installed = opts.installed_frameworks()
            self._worker = Worker(self.config, self.settings, self.plan, installed, self.environment)
        return self._worker


def start(config: pytest.Config) -> Process:
    """The roles of this process, once something asked for dlconform; a bad option, device,
    input file or model factory is a ``pytest.UsageError``."""
    settings = opts.from_config(config)
    _quiet_framework_logs(config)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    plan = DevicePlan.discover(settings) if workerinput is None else _worker_plan(workerinput, settings)
    if settings.examples_db and config.getoption("hypothesis_seed", None) is not None:
        raise pytest.UsageError(
            f"--hypothesis-seed={config.getoption('hypothesis_seed')} with {opts.flag(opts.EXAMPLES_DB)}="
            f"{settings.examples_db}: hypothesis ignores the example database under a fixed seed; drop one "
            "(the database reproduces its failures with --dl-profile=replay)")
    environment = Environment(config, settings, plan)
    controller = Controller(config, settings, plan, environment) if workerinput is None else None
    process = Process(config, settings, plan, controller, environment)
    if workerinput is not None:
        process.worker  # noqa: B018 - an xdist worker is built at once, as it runs tests
    return process


def _worker_plan(workerinput: dict[str, Any], settings: opts.Settings) -> DevicePlan:
    """An xdist worker's devices: its share as the controller gave it. A worker whose
    controller was inert (it collects nothing, so it could not know that claim tests would
    run) plans its own share as the controller would have: the same discovery, the same
    split of cores and GPUs by worker index and count."""
    if not DevicePlan.is_given(workerinput):
        index = int(str(workerinput.get("workerid", "gw0")).removeprefix("gw") or 0)
        # one lock for all workers of this run
        lock = os.path.join(tempfile.gettempdir(), f"dlconform-gpus-{workerinput.get('testrunuid', 'run')}.lock")
        whole = DevicePlan.discover(settings)
        workerinput.update(whole.share(index, int(workerinput.get("workercount", 1)), lock))
    return DevicePlan.given(workerinput)


def _quiet_framework_logs(config: pytest.Config) -> None:
    """TensorFlow's C++ logging (INFO and WARNING lines such as ``util.cc:163] Not handling
    type DT_DOUBLE``) off in this process and every child it starts, unless the user set
    TF_CPP_MIN_LOG_LEVEL or asked for detail with -v."""
    if config.get_verbosity() <= 0:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
