"""Distribution-strategy handles: what the ``dl_strategy`` fixture gives a test.

A *distribution* strategy (tf.distribute, torch DDP/FSDP) is a fixture; a *hypothesis*
strategy lives in :mod:`pytest_dlconform.frameworks.inputs` (and, for the distributed payloads, in
:mod:`.cases`). The handle knows its framework, name, replica count and device kind;
in-process TensorFlow strategies are built here over the logical CPU devices the adapter
configured (or the GPUs); multi-process ones are launched by :mod:`.launch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...frameworks import HarnessError, adapter

MULTI_REPLICA = frozenset({"mirrored", "multi-worker", "parameter-server", "ddp", "fsdp"})


MULTI_PROCESS = frozenset({"multi-worker", "parameter-server", "ddp", "fsdp"})


NO_TPU = "no TPU"


# Replica counts every CPU run checks whatever --dl-replicas says: a power of two and the
# smallest count that is not (a MEAN's division by 3 is inexact; tree and ring all-reduces
# take their odd-count paths).
REPLICA_COUNTS = (2, 3)


def cpu_replicas(replicas: int) -> int:
    """TensorFlow's logical CPU devices and the ranks of a local torch group on CPU:
    --dl-replicas, at least max(REPLICA_COUNTS), so that 2 and 3 replicas always run
    (Mirrored over the first k devices, torch subgroups of the first k ranks)."""
    return max(replicas, *REPLICA_COUNTS)


@dataclass(frozen=True)
class StrategyHandle:
    framework: str
    name: str
    replicas: int
    device: str  # device kind: cpu, gpu, multi-gpu

    @property
    def id(self) -> str:
        return self.name

    @property
    def multi_replica(self) -> bool:
        return self.name in MULTI_REPLICA

    @property
    def multi_process(self) -> bool:
        return self.name in MULTI_PROCESS

    @property
    def world_size(self) -> int:
        return self.replicas if self.multi_replica else 1

    def replica_devices(self, count: int | None = None) -> list[str]:
        """Framework device names, one per replica (``count`` replicas, default the handle's)."""
        ad = adapter(self.framework)
        wanted = self.world_size if count is None else count
        if self.device == "cpu":
            kind, count = "cpu", wanted
        elif self.device == "multi-gpu" or (self.framework == "tensorflow" and getattr(ad, "logical_gpus", 1) > 1):
            # multi-gpu: one GPU per replica; gpu: TensorFlow's logical GPUs of the one GPU
            kind, count = "gpu", wanted
        else:
            kind, count = "gpu", 1
        if self.framework == "torch":
            return ["cpu"] * count if kind == "cpu" else [ad.device(kind, i) for i in range(count)]
        return [ad.device(kind, i) for i in range(count)]

    def replica_counts(self) -> tuple[int, ...]:
        """The replica counts an in-process Mirrored strategy or a local torch group of this
        handle can run: 1..cpu_replicas(N) on CPU (the run configures that many logical
        devices and ranks), 1..N on GPUs (one device per replica)."""
        if not self.multi_replica:
            return (1,)
        top = cpu_replicas(self.replicas) if self.device == "cpu" else self.replicas
        return tuple(range(1, top + 1))

    def tf_strategy(self, replicas: int | None = None) -> Any:
        """The in-process tf.distribute strategy this handle stands for.

        ``replicas`` builds a Mirrored strategy over the first k of the handle's devices
        (generated replica counts). ``tpu`` connects to a real TPU through
        TPUClusterResolver; without one it reports "not applicable: no TPU" with
        TensorFlow's own error."""
        if self.framework != "tensorflow":
            raise HarnessError(f"{self.name} is a torch strategy; tf_strategy() is for TensorFlow handles")
        tf = adapter("tensorflow").module
        if self.name == "default":
            return tf.distribute.get_strategy()
        if self.name == "one-device":
            return tf.distribute.OneDeviceStrategy(self.replica_devices()[0])
        if self.name == "mirrored":
            devices = tuple(self.replica_devices(replicas))
            return mirrored_strategy(devices)
        if self.name == "tpu":
            return tpu_strategy()
        raise HarnessError(f"{self.name} runs in separate processes: launch it with harness.groups.LocalGroup")

    def torch_backend(self) -> str:
        """gloo on CPU; NCCL on multi-gpu (one GPU per rank, as NCCL requires: it refuses
        two ranks on one device); on gpu the ranks share the one GPU over gloo, which
        serves all_reduce and broadcast on CUDA tensors (torch.distributed's backend
        table), so DDP runs and the other collectives are not applicable (TORCH_GLOO_CUDA)."""
        return "nccl" if self.device == "multi-gpu" else "gloo"


_MIRRORED: dict[tuple[str, ...], Any] = {}


def mirrored_strategy(devices: Sequence[str]) -> Any:
    """One MirroredStrategy per device set and process.

    Two MirroredStrategy objects over the same devices number their collective instances
    alike (both start at the same keys); when their first collectives differ (an all-reduce
    in one, an all-gather in the other) TensorFlow aborts every collective of the process
    for good ("Collective instance 100 expected type 0 ... Restart your program to reset").
    Sharing the instance keeps one numbering."""
    key = tuple(devices)
    if key not in _MIRRORED:
        _MIRRORED[key] = _new_mirrored(list(key), base=COLLECTIVE_KEY_STRIDE * len(_MIRRORED))
    return _MIRRORED[key]


# Collective group keys start at 1 + MirroredStrategy._collective_key_base in every
# instance, whatever its devices: a Mirrored strategy over CPU:0-1 and one over CPU:0-2 in
# one process both take group key 1, and the second's first collective aborts them all
# ("Device CPU:0 is joining a group with size 2, but that group has size 3 (group_key=1)
# ... Restart your program"). TensorFlow's own tests give each strategy its own key range
# by raising this class attribute ("Only set this in tests"; strategy_combinations.py adds
# 100000 before each strategy): so does this harness, per device set.
COLLECTIVE_KEY_STRIDE = 100000


def _new_mirrored(devices: list[str], base: int) -> Any:
    tf = adapter("tensorflow").module
    cls = tf.distribute.MirroredStrategy
    previous = getattr(cls, "_collective_key_base", 0)
    cls._collective_key_base = base
    try:
        return cls(devices=devices)
    finally:
        cls._collective_key_base = previous


# --------------------------------------------------------------------------- TPU


def tpu_unavailable(exc: BaseException) -> str:
    return f"{NO_TPU}: {type(exc).__name__}: {exc} (from tf.distribute.cluster_resolver.TPUClusterResolver())"


def tpu_resolver() -> Any:
    """The real TPUClusterResolver(); raises TensorFlow's own error where there is no TPU."""
    tf = adapter("tensorflow").module
    return tf.distribute.cluster_resolver.TPUClusterResolver()


def tpu_strategy() -> Any:
    import pytest_dlconform

    tf = adapter("tensorflow").module
    try:
        resolver = tpu_resolver()
    except (ValueError, RuntimeError) as exc:
        pytest_dlconform.not_applicable(tpu_unavailable(exc))
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


__all__ = [
    "MULTI_PROCESS", "MULTI_REPLICA", "NO_TPU", "REPLICA_COUNTS", "StrategyHandle", "cpu_replicas",
    "mirrored_strategy", "tpu_resolver",
    "tpu_strategy", "tpu_unavailable",
]
