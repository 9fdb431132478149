"""Which hardware is there, which the run asked for, and which GPU each xdist worker gets.

Discovery never imports a framework: it asks ``nvidia-smi`` and honours
``CUDA_VISIBLE_DEVICES`` the way CUDA does. Whether a framework build can *use* a GPU
that is there (a CPU-only torch wheel on a GPU machine) is checked by its adapter when
a test asks for the device, and reported as an error of that test, not as a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

CPU, GPU, MULTI_GPU = "cpu", "gpu", "multi-gpu"
WORKER_GPUS_KEY = "dlconform_visible_gpus"


class DeviceError(ValueError):
    """The run asked for hardware that is not there; one line for pytest.UsageError."""


@dataclass(frozen=True)
class Inventory:
    cpu_count: int
    gpus: tuple[str, ...]  # model names of the GPUs visible to this process, in CUDA order
    gpu_ids: tuple[str, ...]  # the ids to put in CUDA_VISIBLE_DEVICES to select each one
    how: str  # how the GPUs were found, for messages and the report header

    def describe(self) -> str:
        gpus = ", ".join(self.gpus) if self.gpus else "no GPU"
        return f"{self.cpu_count} CPU cores; {gpus} ({self.how})"


def discover(env: dict[str, str] | None = None) -> Inventory:
    env = dict(os.environ) if env is None else env
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    names, ids, how = _nvidia_gpus()
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        names, ids = _apply_visible(names, ids, visible)
        how += f", CUDA_VISIBLE_DEVICES={visible!r}"
    return Inventory(cpus, tuple(names), tuple(ids), how)


def _nvidia_gpus() -> tuple[list[str], list[str], str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return [], [], "nvidia-smi not found"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return [], [], f"nvidia-smi failed: {exc}"
    rows = [line.split(",", 1) for line in out.splitlines() if "," in line]
    return [name.strip() for _, name in rows], [idx.strip() for idx, _ in rows], "nvidia-smi"


def _apply_visible(names: list[str], ids: list[str], visible: str) -> tuple[list[str], list[str]]:
    # CUDA stops at the first entry it cannot resolve; we do the same.
    kept_names: list[str] = []
    kept_ids: list[str] = []
    for token in (t.strip() for t in visible.split(",")):
        if token not in ids:
            break
        kept_names.append(names[ids.index(token)])
        kept_ids.append(token)
    return kept_names, kept_ids


def select(requested: str, inventory: Inventory, source: str) -> tuple[str, ...]:
    """Device kinds the run covers; asking for absent hardware raises DeviceError."""
    n = len(inventory.gpus)
    if requested == CPU:
        return (CPU,)
    if requested == "auto":
        return (GPU,) if n else (CPU,)
    if requested == "all":
        return (CPU,) + ((GPU,) if n >= 1 else ()) + ((MULTI_GPU,) if n >= 2 else ())
    need = 1 if requested == GPU else 2
    if n < need:
        found = f"found {n} GPU{'s' if n != 1 else ''} ({inventory.how})"
        raise DeviceError(
            f"--dl-device={requested} (from {source}) needs at least {need} GPU{'s' if need > 1 else ''}, "
            f"but {found}; run with --dl-device=cpu, or --dl-device=auto to use what this machine has"
        )
    return (requested,)


def worker_gpus(worker_index: int, n_workers: int, kinds: tuple[str, ...], inventory: Inventory) -> str:
    """CUDA_VISIBLE_DEVICES value for one xdist worker.

    Single-GPU runs spread workers over GPUs round-robin, so two workers share a GPU
    only when there are more workers than GPUs. A multi-GPU run needs every GPU in
    each worker, so all are visible to all workers.
    """
    if not inventory.gpu_ids or kinds == (CPU,):
        return ""
    if MULTI_GPU in kinds:
        return ",".join(inventory.gpu_ids)
    del n_workers
    return inventory.gpu_ids[worker_index % len(inventory.gpu_ids)]


def threads_per_worker(n_workers: int, cpu_count: int) -> int:
    """Framework threads per process so that n workers do not oversubscribe the cores."""
    return max(1, cpu_count // max(1, n_workers))


def min_devices(kind: str) -> int:
    return {CPU: 0, GPU: 1, MULTI_GPU: 2}[kind]
