"""The plain data that crosses process boundaries: cases sent to ranks and what comes back.

A reduction case (:class:`ReduceCase`) or a training case (:class:`TrainCase`) is drawn
by a test (:mod:`.cases`), shipped to a group in one call, and answered per rank with an
:class:`Outcome` or a :class:`TrainResult`: numpy arrays and dataclasses only, so they
pickle into any rank whatever its framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ReduceCase:
    """One cross-replica reduction: ``api`` applied to one array per replica.

    api: TensorFlow "strategy.reduce", "ReplicaContext.all_reduce", "ReplicaContext.all_gather",
    "strategy.gather"; torch "all_reduce", "all_gather", "broadcast". ``op`` is a reduction
    ("sum", "mean", "max", "min", "product") for the reducing APIs, ``axis`` the gather or
    strategy.reduce axis, ``src`` the broadcast source."""

    api: str
    values: tuple[np.ndarray, ...]
    dtype: str
    op: str = ""
    axis: int | None = None
    src: int = 0

    @property
    def replicas(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Outcome:
    """Per case: the results one rank or process observed (one per local replica), or the
    framework's error when the call raised."""

    results: tuple[np.ndarray, ...] = ()
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainCase:
    """A small dense network trained for a few synchronous steps.

    ``weights``: kernels (in, out) and biases, layer by layer. TensorFlow programs take
    consecutive global batches of ``batch`` rows; torch programs give each rank
    DistributedSampler(shuffle=False, drop_last=...) shards in batches of ``rank_batch``."""

    widths: tuple[int, ...]
    activation: str
    weights: tuple[np.ndarray, ...]
    x: np.ndarray
    y: np.ndarray
    optimizer: str  # sgd | momentum | adam
    lr: float
    dtype: str
    batch: int = 0
    # TF custom loop: compute_average_loss(global_batch_size=B) ("global"), its default
    # ("default"), or reduce_mean per replica ("local-mean", wrong: for the meta-tests)
    loss_scaling: str = "global"
    rank_batch: int = 1
    drop_last: bool = False
    # torch: the ranks 0..ranks-1 that train (a new_group subgroup; 0: the whole group), and
    # DDP.join for uneven inputs: "" (DistributedSampler shards), "initial" or "effective"
    # (divide_by_initial_world_size True / False, each rank on its own contiguous share)
    ranks: int = 0
    join: str = ""

    @property
    def steps(self) -> int:
        """Global batches, the last one partial when ``batch`` does not divide the rows."""
        return -(-len(self.x) // self.batch) if self.batch else 0

    @property
    def global_batches(self) -> list[int]:
        """Rows of each global batch (the last one partial when ``batch`` does not divide the rows)."""
        return [min(self.batch, len(self.x) - s * self.batch) for s in range(self.steps)]


@dataclass(frozen=True)
class TrainResult:
    weights: tuple[np.ndarray, ...]
    # per step, per local replica: rows it trained on (TF: count; torch: dataset indices)
    batches: tuple[tuple[Any, ...], ...] = ()
    info: dict[str, Any] = field(default_factory=dict)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


__all__ = ["Outcome", "ReduceCase", "TrainCase", "TrainResult", "first_line"]
