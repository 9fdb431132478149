"""Clusters this process may already be part of, and the cluster specs given to ranks.

A conformance run can itself be one task of a cluster started by someone else: TF_CONFIG
names this host's task (TensorFlow's multi-worker convention), or a torchrun-style
launcher set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. The launcher in
:mod:`pytest_dlconform.harness.distribution` then attaches to that cluster instead of starting
local ranks, and it strips these variables (:data:`OUTER_CLUSTER_VARS`) from the local
ranks it starts, so none of them believes it belongs to an outer cluster.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..frameworks import HarnessError

# Environment that would make a local rank believe it is part of an outer cluster.
OUTER_CLUSTER_VARS = (
    "TF_CONFIG", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
)


def tf_config(cluster: Mapping[str, Sequence[str]], task_type: str, index: int) -> str:
    """A TF_CONFIG value: the cluster spec and this process's task."""
    return json.dumps({"cluster": {k: list(v) for k, v in cluster.items()}, "task": {"type": task_type, "index": index}})


def external_tf_config(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The cluster this process already belongs to through TF_CONFIG, if any."""
    raw = (os.environ if env is None else env).get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"TF_CONFIG is set but is not JSON ({exc}): {raw[:200]!r}") from None
    if not isinstance(config, dict) or not config.get("cluster") or not config.get("task"):
        raise HarnessError(f"TF_CONFIG must have 'cluster' and 'task' entries, got {raw[:200]!r}")
    return config


@dataclass(frozen=True)
class TorchEnv:
    rank: int
    world_size: int
    local_rank: int


def external_torch_env(env: Mapping[str, str] | None = None) -> TorchEnv | None:
    """The torchrun (or other env:// launcher) rank of this process, if any.

    torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; all of them
    must be present for ``init_process_group(init_method="env://")`` to work."""
    env = os.environ if env is None else env
    needed = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    if not all(env.get(k) for k in needed):
        return None
    return TorchEnv(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", env["RANK"])))


__all__ = ["OUTER_CLUSTER_VARS", "TorchEnv", "external_tf_config", "external_torch_env", "tf_config"]
