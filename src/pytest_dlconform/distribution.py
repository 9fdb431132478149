"""Distribution-strategy handles for the ``dl_strategy`` fixture.

A *distribution* strategy (tf.distribute, torch DDP/FSDP) is a fixture; a *hypothesis*
strategy lives in :mod:`pytest_dlconform.inputs`. The handle knows its framework, name,
replica count and device kind; in-process TensorFlow strategies are built here over the
logical CPU devices the adapter configured (or the GPUs), multi-process ones are launched
by :mod:`pytest_dlconform.cluster`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .frameworks import HarnessError, adapter

MULTI_REPLICA = frozenset({"mirrored", "multi-worker", "parameter-server", "ddp", "fsdp"})
MULTI_PROCESS = frozenset({"multi-worker", "parameter-server", "ddp", "fsdp"})


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

    def replica_devices(self) -> list[str]:
        """Framework device names, one per replica."""
        ad = adapter(self.framework)
        if self.device == "cpu":
            kind, count = "cpu", self.world_size
        else:
            kind, count = "gpu", self.world_size if self.device == "multi-gpu" else 1
        if self.framework == "torch":
            return ["cpu"] * count if kind == "cpu" else [ad.device(kind, i) for i in range(count)]
        return [ad.device(kind, i) for i in range(count)]

    def tf_strategy(self) -> Any:
        """The in-process tf.distribute strategy this handle stands for."""
        if self.framework != "tensorflow":
            raise HarnessError(f"{self.name} is a torch strategy; tf_strategy() is for TensorFlow handles")
        tf = adapter("tensorflow").module
        if self.name == "default":
            return tf.distribute.get_strategy()
        if self.name == "one-device":
            return tf.distribute.OneDeviceStrategy(self.replica_devices()[0])
        if self.name == "mirrored":
            return tf.distribute.MirroredStrategy(devices=self.replica_devices())
        raise HarnessError(f"{self.name} runs in separate processes: use pytest_dlconform.cluster to launch it")
