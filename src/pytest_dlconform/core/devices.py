"""Which hardware is there, which the run asked for, and which GPU each xdist worker gets.

Discovery never imports a framework: it asks ``nvidia-smi`` and honours
``CUDA_VISIBLE_DEVICES`` the way CUDA does. Whether a framework build can *use* a GPU
that is there (a CPU-only torch wheel on a GPU machine) is checked by its adapter when
a test asks for the device, and reported as an error of that test, not as a skip.

Ids. nvidia-smi numbers GPUs in PCI bus order; CUDA numbers them fastest first unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA C Programming Guide, "CUDA Environment
Variables"). The two agree only on machines of identical GPUs, so an nvidia-smi index is
never handed to CUDA: without ``CUDA_VISIBLE_DEVICES`` a GPU's id is its UUID (which
CUDA accepts in ``CUDA_VISIBLE_DEVICES`` whatever the order); with it, the ids are the
user's own entries, which every child process interprets exactly as this one does.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

CPU, GPU, MULTI_GPU = "cpu", "gpu", "multi-gpu"
WORKER_GPUS_KEY = "dlconform_visible_gpus"
GPU_LOCK_KEY = "dlconform_gpu_lock"
QUERY = "--query-gpu=index,uuid,pci.bus_id,name,compute_cap"


class DeviceError(ValueError):
    """The run asked for hardware that is not there; one line for pytest.UsageError."""


@dataclass(frozen=True)
class PhysicalGpu:
    index: str  # nvidia-smi's index: PCI bus order
    uuid: str  # GPU-xxxxxxxx-...
    bus_id: str  # 00000000:3B:00.0
    name: str
    compute_capability: str = ""  # "8.0"; "" where nvidia-smi is too old to report it
    migs: tuple[str, ...] = ()  # MIG-... UUIDs of this GPU's MIG devices (nvidia-smi -L)


@dataclass(frozen=True)
class Inventory:
    cpu_count: int
    gpus: tuple[str, ...]  # model names of the GPUs visible to this process, in CUDA order
    gpu_ids: tuple[str, ...]  # the ids to put in CUDA_VISIBLE_DEVICES to select each one
    how: str  # how the GPUs were found, for messages and the report header
    compute_capabilities: tuple[str, ...] = ()  # per visible GPU, "" where unknown
    cpu: str = ""  # the CPU's model and vector extensions (cpu_description), "" where unknown

    def describe(self) -> str:
        gpus = ", ".join(self.gpus) if self.gpus else "no GPU"
        cpu = f" ({self.cpu})" if self.cpu else ""
        return f"{self.cpu_count} CPU cores{cpu}; {gpus} ({self.how})"


# The CPU flags that choose a framework's kernels (oneDNN, MKL, ATen's CPU capability, XLA):
# which code paths, and so which roundings and which bugs, a run met. Two CI machines of one
# kind differed in these (a finding reproduced on one and not on the other).
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_bf16",
             "amx_int8", "amx_fp16", "asimd", "sve", "sve2", "bf16", "i8mm")


def cpu_info(cpuinfo: str | None = None) -> tuple[str, set[str]]:
    """(model name, flags) of the first processor in Linux's /proc/cpuinfo (or ``cpuinfo``);
    ("", set()) where there is no such file."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                cpuinfo = fh.read(1 << 16)
        except OSError:
            return "", set()
    model, flags = "", set[str]()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags


def cpu_description(cpuinfo: str | None = None) -> str:
    """``"MODEL; flags f1 f2 ..."``: the CPU's model and which of :data:`ISA_FLAGS` it has
    (:func:`cpu_info`); "" where unknown."""
    model, flags = cpu_info(cpuinfo)
    if not model and not flags:
        return ""
    found = [f for f in ISA_FLAGS if f in flags]
    return f"{model or 'CPU'}; flags {' '.join(found) if found else 'none of ' + ' '.join(ISA_FLAGS[:3])}"


def discover(env: dict[str, str] | None = None) -> Inventory:
    env = dict(os.environ) if env is None else env
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    found, how = nvidia_gpus(env)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        ordered = cuda_order(found, env.get("CUDA_DEVICE_ORDER"))
        if ordered is not found:
            how += "; CUDA numbers these fastest first (CUDA_DEVICE_ORDER unset): order of unlike models approximate"
        return Inventory(cpus, tuple(g.name for g in ordered), tuple(g.uuid for g in ordered), how,
                         tuple(g.compute_capability for g in ordered), cpu_description())
    kept, ids, note = apply_visible(found, visible, env.get("CUDA_DEVICE_ORDER"))
    how += f", CUDA_VISIBLE_DEVICES={visible!r}" + (f" ({note})" if note else "")
    return Inventory(cpus, tuple(g.name for g in kept), tuple(ids), how, tuple(g.compute_capability for g in kept),
                     cpu_description())


def nvidia_gpus(env: dict[str, str]) -> tuple[list[PhysicalGpu], str]:
    """The machine's GPUs as nvidia-smi lists them (PCI bus order), with their MIG devices."""
    exe = shutil.which("nvidia-smi", path=env.get("PATH", os.defpath))
    if exe is None:
        return [], "nvidia-smi not found"
    try:
        out = _run(exe, QUERY, "--format=csv,noheader")
    except subprocess.CalledProcessError:
        try:  # drivers before 510 do not know the compute_cap field
            out = _run(exe, QUERY.removesuffix(",compute_cap"), "--format=csv,noheader")
        except (OSError, subprocess.SubprocessError) as exc:
            return [], f"nvidia-smi failed: {exc}"
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"nvidia-smi failed: {exc}"
    try:
        migs = parse_mig_list(_run(exe, "-L"))
    except (OSError, subprocess.SubprocessError):
        migs = {}  # no MIG information: MIG entries of CUDA_VISIBLE_DEVICES will not resolve
    gpus = [PhysicalGpu(g.index, g.uuid, g.bus_id, g.name, g.compute_capability, tuple(migs.get(g.uuid, ())))
            for g in parse_query(out)]
    return sorted(gpus, key=lambda g: g.bus_id.lower()), "nvidia-smi"


def gpu_details(inventory: Inventory, env: dict[str, str] | None = None) -> dict[str, Any]:
    """For the report: the GPUs of ``inventory`` (the visible ones, in CUDA order) with their
    memory, and the driver and the driver's CUDA version; empty without nvidia-smi."""
    env = dict(os.environ) if env is None else env
    details: dict[str, Any] = {"gpus": [], "driver": None, "cuda": None}
    exe = shutil.which("nvidia-smi", path=env.get("PATH", os.defpath))
    if exe is None or not inventory.gpus:
        return details
    try:
        rows = _run(exe, "--query-gpu=uuid,memory.total,driver_version", "--format=csv,noheader")
        banner = _run(exe)
    except (OSError, subprocess.SubprocessError):
        return details
    memory = {}
    for row in rows.splitlines():
        parts = [p.strip() for p in row.split(",")]
        if len(parts) == 3:
            memory[parts[0]] = parts[1]
            details["driver"] = parts[2]
    details["gpus"] = [{"name": name, "memory": memory.get(uid, "")} for name, uid in zip(inventory.gpus, inventory.gpu_ids)]
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", banner)
    details["cuda"] = cuda.group(1) if cuda else None
    return details


def _run(exe: str, *args: str) -> str:
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=30, check=True).stdout


def parse_query(out: str) -> list[PhysicalGpu]:
    """Rows of ``index, uuid, pci.bus_id, name[, compute_cap]`` (csv, noheader)."""
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        cap = parts[-1] if len(parts) >= 5 and _is_capability(parts[-1]) else ""
        name = ",".join(parts[3:-1] if len(parts) >= 5 and (cap or parts[-1].startswith("[")) else parts[3:])
        gpus.append(PhysicalGpu(parts[0], parts[1], parts[2], name.strip(), cap))
    return gpus


def _is_capability(text: str) -> bool:
    major, _, minor = text.partition(".")
    return major.isdigit() and minor.isdigit()


def parse_mig_list(out: str) -> dict[str, list[str]]:
    """``nvidia-smi -L``: GPU lines with their UUID, MIG lines (indented) under them."""
    migs: dict[str, list[str]] = {}
    parent = None
    for line in out.splitlines():
        uuid = line.rpartition("(UUID: ")[2].rstrip(")").strip() if "(UUID: " in line else ""
        if line.lstrip().startswith("GPU ") and uuid.startswith("GPU-"):
            parent = uuid
            migs[parent] = []
        elif line.lstrip().startswith("MIG ") and uuid.startswith("MIG-") and parent is not None:
            migs[parent].append(uuid)
    return migs


def cuda_order(gpus: list[PhysicalGpu], order: str | None) -> list[PhysicalGpu]:
    """The GPUs in CUDA's numbering. PCI_BUS_ID: nvidia-smi's (bus) order. FASTEST_FIRST
    (the default): fastest first; CUDA does not document its speed measure, so unlike
    models are ranked by compute capability (ties, and like models, in bus order) and
    a new list is returned to say the order is approximate."""
    if (order or "FASTEST_FIRST").strip().upper() == "PCI_BUS_ID" or len({g.name for g in gpus}) <= 1:
        return gpus
    return sorted(gpus, key=lambda g: (-_capability_value(g.compute_capability), g.bus_id.lower()))


def _capability_value(cap: str) -> float:
    return float(cap) if _is_capability(cap) else 0.0


def apply_visible(gpus: list[PhysicalGpu], visible: str, order: str | None = None
                  ) -> tuple[list[PhysicalGpu], list[str], str]:
    """The GPUs CUDA makes visible for a CUDA_VISIBLE_DEVICES value, and their ids (the
    user's entries, which mean the same in every child process).

    Entries: an index in CUDA's order, a ``GPU-`` UUID or a unique prefix of one, a
    ``MIG-`` UUID. CUDA stops at the first entry it cannot resolve (and at a repeated
    one); "" shows no GPU. CUDA enumerates at most one MIG device per process."""
    numbered = cuda_order(gpus, order)
    kept: list[PhysicalGpu] = []
    ids: list[str] = []
    notes = []
    seen: set[str] = set()
    for token in (t.strip() for t in visible.split(",")):
        gpu, key = _resolve(numbered, token)
        if gpu is None or key in seen:
            if token:
                notes.append(f"CUDA stops at {token!r}: {'repeated' if gpu is not None else 'no such GPU'}")
            break
        if key.startswith("MIG-") and any(i.startswith("MIG-") for i in ids):
            notes.append(f"CUDA enumerates one MIG device per process: {token!r} not visible")
            break
        seen.add(key)
        kept.append(gpu)
        ids.append(token)
    if numbered is not gpus and any(t.strip().isdigit() for t in visible.split(",")):
        notes.append("indices are CUDA's fastest-first order, approximated for unlike models")
    return kept, ids, "; ".join(notes)


def _resolve(gpus: list[PhysicalGpu], token: str) -> tuple[PhysicalGpu | None, str]:
    if token.isdigit():
        i = int(token)
        return (gpus[i], gpus[i].uuid) if i < len(gpus) else (None, token)
    if token.startswith("MIG-"):
        for g in gpus:
            if token in g.migs:
                return g, token
        return None, token
    if token.startswith("GPU-") and len(token) > 4:
        matches = [g for g in gpus if g.uuid.lower().startswith(token.lower())]
        return (matches[0], matches[0].uuid) if len(matches) == 1 else (None, token)
    return None, token


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

    Each worker has a home GPU, round-robin (two workers share one only when there are
    more workers than GPUs), and it is the worker's first visible GPU, so that its
    single-GPU tests (cuda:0, /GPU:0) run there. A multi-GPU run gives each worker every
    GPU, rotated so that its home GPU comes first; its multi-GPU tests then take the
    run's GPU lock (:func:`gpu_lock`), so no two workers run multi-GPU groups at once.
    """
    del n_workers  # the assignment depends on the index only: a worker's GPUs never depend on load
    ids = inventory.gpu_ids
    if not ids or kinds == (CPU,):
        return ""
    home = worker_index % len(ids)
    if MULTI_GPU in kinds:
        return ",".join(ids[home:] + ids[:home])
    return ids[home]


def visible_tokens(value: str | None) -> list[str]:
    """The entries of a CUDA_VISIBLE_DEVICES value dlconform set (None: not set)."""
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def logical_gpus(kinds: tuple[str, ...], replicas: int) -> int:
    """TensorFlow logical GPUs per physical GPU: a one-GPU run (kind gpu without
    multi-gpu) splits its GPU into ``replicas`` logical GPUs, so that MirroredStrategy's
    multi-replica claims run (tf.config.set_logical_device_configuration, TensorFlow's
    documented way to test multi-GPU code on one GPU); a multi-GPU run uses the GPUs."""
    return max(1, replicas) if GPU in kinds and MULTI_GPU not in kinds else 1


def bf16_support(capability: str) -> str | None:
    """None where a GPU of this compute capability has bfloat16 arithmetic, else why not.
    bfloat16 tensor-core math starts with Ampere, compute capability 8.0 (CUDA C
    Programming Guide, arithmetic instructions; torch.cuda.is_bf16_supported)."""
    if not _is_capability(capability):
        return f"compute capability unknown ({capability!r}): cannot tell whether the GPU has bfloat16"
    if float(capability) < 8.0:
        return f"the GPU's compute capability is {capability}; bfloat16 needs 8.0 (Ampere) or newer"
    return None


@contextlib.contextmanager
def gpu_lock(path: str | None) -> Iterator[None]:
    """Held around a multi-GPU test in an xdist worker: the workers of a multi-GPU run all
    see every GPU, so their multi-GPU groups (NCCL communicators, Mirrored replicas) take
    turns instead of sharing devices. ``path``: the run's lock file; None: no xdist."""
    if not path:
        yield
        return
    import fcntl

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def threads_per_worker(n_workers: int, cpu_count: int) -> int:
    """Framework threads per process so that n workers do not oversubscribe the cores."""
    return max(1, cpu_count // max(1, n_workers))


def min_devices(kind: str) -> int:
    return {CPU: 0, GPU: 1, MULTI_GPU: 2}[kind]
