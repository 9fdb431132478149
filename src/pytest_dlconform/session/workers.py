"""Devices and workers: what hardware the run found and selected, how the controller shares
it among xdist workers (GPUs, a GPU lock, threads), and the framework and strategy fixtures
built on it."""

from __future__ import annotations

import os
from typing import Any

import pytest

from .. import determinism, devices, results
from .. import settings as opts
from ..frameworks import adapter
from . import recipe
from .guard import _suites_dirs


class Workers:
    """Run's device and worker part (a mixin of :class:`pytest_dlconform.session.Run`)."""

    config: pytest.Config
    settings: opts.Settings
    workerinput: dict[str, Any] | None
    installed: tuple[str, ...]
    kinds: tuple[str, ...]
    inventory_text: str
    threads: int | None
    logical_cpus: int
    _inventory: devices.Inventory
    _visible_gpus: tuple[str, ...]
    gpu_lock: str | None

    def _devices(self) -> tuple[str, tuple[str, ...], int | None]:
        if self.workerinput is not None and "dlconform_kinds" in self.workerinput:
            # A worker never re-discovers: collection must not depend on what it sees.
            wi = self.workerinput
            os.environ["CUDA_VISIBLE_DEVICES"] = wi[devices.WORKER_GPUS_KEY]
            self._visible_gpus = tuple(devices.visible_tokens(wi[devices.WORKER_GPUS_KEY]))
            self.gpu_lock = wi.get(devices.GPU_LOCK_KEY)
            threads = int(wi["dlconform_threads"])
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                os.environ[var] = str(threads)
            if any(k != devices.CPU for k in wi["dlconform_kinds"]):
                os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
                os.environ.setdefault(*determinism.CUBLAS_ENV)
            return wi["dlconform_inventory"], tuple(wi["dlconform_kinds"]), threads
        inventory = devices.discover()
        try:
            kinds = devices.select(self.settings.device, inventory, self.settings.describe(opts.DEVICE))
        except devices.DeviceError as exc:
            raise pytest.UsageError(str(exc)) from None
        self._inventory = inventory
        self._visible_gpus = inventory.gpu_ids if kinds != (devices.CPU,) else ()
        self.gpu_lock = None  # one process: nothing to take turns with
        if self._visible_gpus:
            # What this process and every child (ranks, fresh interpreters) use is what was
            # found: by UUID, so CUDA's device order cannot change it. A child TensorFlow
            # must not take the memory of the GPU this process already uses.
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", ",".join(self._visible_gpus))
            os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
            os.environ.setdefault(*determinism.CUBLAS_ENV)  # before cuBLAS starts: bitwise claims
        return inventory.describe(), kinds, None

    def worker_input(self, node: Any, n_workers: int | None = None) -> dict[str, Any]:
        # -n N sets numprocesses and leaves --tx empty; --tx lists the workers itself.
        numprocesses = getattr(self.config.option, "numprocesses", None)
        tx = getattr(self.config.option, "tx", None) or []
        if n_workers is None:
            n_workers = max(1, numprocesses if isinstance(numprocesses, int) and numprocesses > 0 else len(tx))
        index = int(str(node.gateway.id).removeprefix("gw") or 0)
        wi = {
            "dlconform_kinds": list(self.kinds),
            "dlconform_inventory": self.inventory_text,
            devices.WORKER_GPUS_KEY: devices.worker_gpus(index, n_workers, self.kinds, self._inventory),
            "dlconform_threads": devices.threads_per_worker(n_workers, self._inventory.cpu_count),
        }
        if devices.MULTI_GPU in self.kinds:  # workers that all see every GPU take turns (devices.gpu_lock)
            import tempfile

            wi[devices.GPU_LOCK_KEY] = os.path.join(tempfile.gettempdir(), f"dlconform-gpus-{os.getpid()}.lock")
        return wi

    def configure_frameworks(self) -> None:
        for fw in self.settings.frameworks:
            adapter(fw).configure(threads=self.threads, logical_cpus=self.logical_cpus)

    def header_lines(self) -> list[str]:
        s = self.settings
        versions = ", ".join(f"{fw} {opts.framework_version(fw)}" for fw in s.frameworks)
        # The run's selection and settings, runnable from any folder (recipe.run_line). A
        # randomized run's examples: its hypothesis seed (chosen by profiles.choose_seed if
        # the user gave none) or its example database.
        line = recipe.run_line(
            [str(a) for a in self.config.args], pyargs=bool(self.config.getoption("pyargs", False)),
            here=self.config.invocation_params.dir, suites_dirs=_suites_dirs(), s=s,
            dlconform_run=os.environ.get(opts.PACKAGED_DIVERGENCES_VAR) == "1",
            hypothesis_seed=self.config.getoption("hypothesis_seed", None),
            keyword=self.config.getoption("keyword", "") or "", markexpr=self.config.getoption("markexpr", "") or "")
        # At most 120 columns a line: the device inventory wraps; the command continues with
        # a backslash, so that its lines paste as one command.
        return [
            *results.wrap_line(f"dlconform: {versions}; selected: {', '.join(self.kinds)}; "
                               f"devices found: {self.inventory_text}"),
            *results.wrap_command(f"dlconform: reproduce with: {line}"),
        ]

    def framework_fixture(self, name: str) -> Any:
        installed = self.installed
        if name not in installed:
            pytest.skip(
                f"{results.NOT_APPLICABLE_PREFIX}{name} is not installed: "
                f"{opts.FRAMEWORK_INSTALL_HINT[name]}"
            )
        ad = adapter(name)
        ad.configure(threads=self.threads, logical_cpus=self.logical_cpus)
        return ad

    def strategy_fixture(self, param: tuple[str, str], device: str) -> Any:
        from ..distribution import StrategyHandle

        fw, name = param
        self.framework_fixture(fw)
        return StrategyHandle(framework=fw, name=name, replicas=self.settings.replicas, device=device)
