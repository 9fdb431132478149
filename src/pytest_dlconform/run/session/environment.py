"""The stack a run ran on (versions, devices, settings), as the report's ``environment``
records it; a worker matches known divergences against it, the controller reports it."""

from __future__ import annotations

from typing import Any

import pytest

from ...core import devices
from ...core.versions import dist_version, framework_version
from ...report import results
from .. import settings as opts
from .plan import DevicePlan

EXTRA_DISTRIBUTIONS = ("keras", "numpy", "hypothesis", "pytest", "pytest-xdist", "ml-dtypes", "jax", "pytest-dlconform")


class Environment:
    def __init__(self, config: pytest.Config, settings: opts.Settings, plan: DevicePlan) -> None:
        self.config = config
        self.settings = settings
        self.plan = plan
        self._doc: dict[str, Any] | None = None

    def doc(self) -> dict[str, Any]:
        """The environment document, computed once."""
        if self._doc is None:
            self._doc = self._compute()
        return self._doc

    def _compute(self) -> dict[str, Any]:
        s = self.settings
        versions = {fw: framework_version(fw) or "not installed" for fw in opts.FRAMEWORK_CHOICES}
        for extra in EXTRA_DISTRIBUTIONS:
            versions[extra] = dist_version(extra)
        settings_dict = {
            "device": s.device, "selected_devices": list(self.plan.kinds), "frameworks": list(s.frameworks),
            "strategies": list(s.strategies), "replicas": s.replicas, "claims": list(s.claims),
            "profile": s.profile, "seed": s.seed, "hypothesis_profile": self.config.getoption("hypothesis_profile", None),
            # the seed that picked a randomized run's examples (explore, quick): rerun with it
            "hypothesis_seed": self.config.getoption("hypothesis_seed", None), "examples_db": s.examples_db,
            "allow_listen_all": s.allow_listen_all,  # --dl-allow-listen-all: TensorFlow cluster servers on all interfaces
            "divergences": s.divergences,  # the known-divergences file the verdicts were judged with
        }
        inventory = self.plan.inventory  # the controller's discovery (a worker given its share: none)
        gpu = devices.gpu_details(inventory if inventory is not None else devices.discover())
        return results.environment(settings_dict, versions, self.plan.inventory_text, gpu)
