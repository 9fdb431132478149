"""The worker: the role of a process that runs tests (an xdist worker, or the one process
without xdist). It collects and parametrizes, hands out the dl_* fixtures, guards each
claim test and writes its verdict and evidence on the test's reports (verdicts.py), which
travel to the controller."""

from __future__ import annotations

from typing import Any

import pytest

from ...core import devices
from ...frameworks import adapter
from .. import settings as opts
from .budget import Budget
from .collection import Collection
from .environment import Environment
from .fixtures import Fixtures
from .guard import Guard
from .known import KnownDivergences
from .plan import DevicePlan


class Worker:
    def __init__(self, config: pytest.Config, settings: opts.Settings, plan: DevicePlan,
                 installed: tuple[str, ...], environment: Environment) -> None:
        self.config = config
        self.settings = settings
        self.plan = plan
        # TensorFlow's logical CPU devices: one per replica when the run covers the CPU, at
        # least 3 so the distributed suites always run 2 and 3 replicas (distribution.cpu_replicas).
        from ...harness.distribution.handles import cpu_replicas

        self.logical_cpus = cpu_replicas(settings.replicas) if "cpu" in plan.kinds else 1
        # ... and logical GPUs: a one-GPU run splits its GPU so multi-replica claims run (devices.logical_gpus).
        tf_adapter: Any = adapter("tensorflow")  # TensorFlowAdapter: logical_gpus is its own attribute
        tf_adapter.logical_gpus = devices.logical_gpus(plan.kinds, settings.replicas)
        self.collection = Collection(settings, plan, installed)
        self.budget = Budget(config, settings)
        self.guard = Guard(settings, plan.kinds, self.collection.params)
        self.fixtures = Fixtures(settings, plan.threads, self.logical_cpus, installed)
        self.known = KnownDivergences(settings, environment)

    @property
    def gpu_lock(self) -> str | None:
        return self.plan.gpu_lock
