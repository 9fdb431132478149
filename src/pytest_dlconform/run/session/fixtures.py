"""What the dl_* fixtures hand a test: configured framework adapters, distribution-strategy
handles and user-model handles, on the devices and threads of this process."""

from __future__ import annotations

from typing import Any

import pytest

from ...frameworks import adapter
from ...report import results
from .. import settings as opts


class Fixtures:
    def __init__(self, settings: opts.Settings, threads: int | None, logical_cpus: int,
                 installed: tuple[str, ...]) -> None:
        self.settings = settings
        self.threads = threads
        self.logical_cpus = logical_cpus  # TensorFlow's logical CPU devices (distribution.cpu_replicas)
        self.installed = installed

    def configure_frameworks(self) -> None:
        """Threads and logical devices of the selected frameworks, once collection is done."""
        for fw in self.settings.frameworks:
            adapter(fw).configure(threads=self.threads, logical_cpus=self.logical_cpus)

    def framework(self, name: str) -> Any:
        """The configured adapter; "not applicable" where the framework is not installed."""
        if name not in self.installed:
            pytest.skip(
                f"{results.NOT_APPLICABLE_PREFIX}{name} is not installed: "
                f"{opts.FRAMEWORK_INSTALL_HINT[name]}"
            )
        ad = adapter(name)
        ad.configure(threads=self.threads, logical_cpus=self.logical_cpus)
        return ad

    def strategy(self, param: tuple[str, str], device: str) -> Any:
        from ...harness.distribution import StrategyHandle

        fw, name = param
        self.framework(fw)
        return StrategyHandle(framework=fw, name=name, replicas=self.settings.replicas, device=device)

    def model(self, param: Any, device_kind: str) -> Any:
        """A registered user model (usermodels.ModelHandle) on the test's device."""
        from ... import not_applicable
        from .. import usermodels

        framework, ref = param
        if not framework:
            not_applicable(usermodels.NO_MODEL)
        self.framework(framework)  # configured framework; "not applicable" if not installed
        device = adapter(framework).device("cpu" if device_kind == "cpu" else "gpu")
        return usermodels.ModelHandle(ref, framework, device_kind, device, float(self.settings.timeout))
