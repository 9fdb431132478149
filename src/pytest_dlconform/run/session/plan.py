"""The run's devices: what one process found and selected, or what its controller gave it.

A controller (or a process without xdist) discovers the machine once (:meth:`DevicePlan.discover`)
and hands each xdist worker its share (:meth:`DevicePlan.share`); a worker takes its share as
given (:meth:`DevicePlan.given`) and never re-discovers, so collection never depends on what a
worker sees. A worker whose controller was inert plans its own share with the same two calls.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

from ...core import determinism, devices
from .. import settings as opts

CPU_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
KINDS_KEY, INVENTORY_KEY, THREADS_KEY = "dlconform_kinds", "dlconform_inventory", "dlconform_threads"


@dataclass(frozen=True)
class DevicePlan:
    kinds: tuple[str, ...]  # the device kinds the run selected
    inventory_text: str  # what the controller found, in words
    visible_gpus: tuple[str, ...]  # the GPUs this process's tests may use
    threads: int | None  # CPU threads of this process (None: one process, no limit)
    gpu_lock: str | None  # the file workers that share every GPU take turns with (devices.gpu_lock)
    inventory: devices.Inventory | None = None  # the discovery itself, where this process made it

    @classmethod
    def discover(cls, settings: opts.Settings) -> DevicePlan:
        """Find the machine and select the devices --dl-device asks for; pin them for children."""
        inventory = devices.discover()
        try:
            kinds = devices.select(settings.device, inventory, settings.describe(opts.DEVICE))
        except devices.DeviceError as exc:
            raise pytest.UsageError(str(exc)) from None
        visible = inventory.gpu_ids if kinds != (devices.CPU,) else ()
        if visible:
            # What this process and every child (ranks, fresh interpreters) use is what was
            # found: by UUID, so CUDA's device order cannot change it. A child TensorFlow
            # must not take the memory of the GPU this process already uses.
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", ",".join(visible))
            os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
            os.environ.setdefault(*determinism.CUBLAS_ENV)  # before cuBLAS starts: bitwise claims
        # One process: nothing to take turns with.
        return cls(kinds, inventory.describe(), visible, None, None, inventory)

    @classmethod
    def given(cls, workerinput: dict[str, Any]) -> DevicePlan:
        """A worker's share as its controller planned it (:meth:`share`); applied to this process."""
        wi = workerinput
        os.environ["CUDA_VISIBLE_DEVICES"] = wi[devices.WORKER_GPUS_KEY]
        threads = int(wi[THREADS_KEY])
        for var in CPU_THREAD_VARS:
            os.environ[var] = str(threads)
        kinds = tuple(wi[KINDS_KEY])
        if any(k != devices.CPU for k in kinds):
            os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
            os.environ.setdefault(*determinism.CUBLAS_ENV)
        visible = tuple(devices.visible_tokens(wi[devices.WORKER_GPUS_KEY]))
        return cls(kinds, wi[INVENTORY_KEY], visible, threads, wi.get(devices.GPU_LOCK_KEY))

    @staticmethod
    def is_given(workerinput: dict[str, Any]) -> bool:
        return KINDS_KEY in workerinput

    def share(self, index: int, n_workers: int, lock_path: str) -> dict[str, Any]:
        """What worker ``index`` of ``n_workers`` gets (its workerinput): GPUs, threads, the GPU lock."""
        assert self.inventory is not None, "only the process that discovered the machine shares it"
        share = {
            KINDS_KEY: list(self.kinds),
            INVENTORY_KEY: self.inventory_text,
            devices.WORKER_GPUS_KEY: devices.worker_gpus(index, n_workers, self.kinds, self.inventory),
            THREADS_KEY: devices.threads_per_worker(n_workers, self.inventory.cpu_count),
        }
        if devices.MULTI_GPU in self.kinds:  # workers that all see every GPU take turns (devices.gpu_lock)
            share[devices.GPU_LOCK_KEY] = lock_path
        return share

    def device_count(self, kind: str, replicas: int) -> int:
        """Devices of ``kind`` a test of this process can use: logical CPU devices on cpu,
        the logical GPUs of the one GPU on gpu (devices.logical_gpus), the GPUs on multi-gpu.
        From what was found or given, never from the environment (without xdist nobody sets
        CUDA_VISIBLE_DEVICES)."""
        if kind == "cpu":
            return replicas
        gpus = len(self.visible_gpus)
        if kind == "gpu":
            return devices.logical_gpus(self.kinds, replicas) if gpus else 0
        return gpus
