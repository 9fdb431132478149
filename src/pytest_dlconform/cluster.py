"""Moved to :mod:`pytest_dlconform.harness` (ports, processes, rank, groups, clusters, pool);
this path keeps existing imports working."""

from __future__ import annotations

from .harness.clusters import OUTER_CLUSTER_VARS, TorchEnv, external_tf_config, external_torch_env, tf_config
from .harness.groups import AttachedGroup, ClusterError, Group, LocalGroup, TaskError
from .harness.pool import GroupPool
from .harness.ports import LOOPBACK, PortLease, lease_ports, loopback_interface
from .harness.processes import TOKEN_VAR, group_members, listening_addresses, survivors
from .harness.rank import (
    DIR_VAR,
    PATH_VAR,
    RANK_VAR,
    WORLD_VAR,
    Program,
    RemoteError,
    WorkerContext,
    program_ref,
    worker_main,
)

__all__ = [
    "DIR_VAR", "LOOPBACK", "OUTER_CLUSTER_VARS", "PATH_VAR", "RANK_VAR", "TOKEN_VAR", "WORLD_VAR",
    "AttachedGroup", "ClusterError", "Group", "GroupPool", "LocalGroup", "PortLease", "Program", "RemoteError",
    "TaskError", "TorchEnv", "WorkerContext", "external_tf_config", "external_torch_env", "group_members",
    "lease_ports", "listening_addresses", "loopback_interface", "program_ref", "survivors", "tf_config",
    "worker_main",
]
