"""Launching the multi-process strategies: torch process groups and TensorFlow clusters.

Each launcher gives a :class:`~pytest_dlconform.harness.groups.Group` (local ranks with
deadlines, see :mod:`pytest_dlconform.harness.groups` for why not torch's own launchers)
or, when this process already runs inside a cluster (torchrun, TF_CONFIG), an attached
group of this process's rank. :func:`group_for` keeps them in the run's pool so every
test of a kind reuses one group. What each rank runs first (framework setup) is in
:mod:`.ranks`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ...frameworks import HarnessError
from .. import netns
from ..clusters import external_tf_config, external_torch_env, tf_config
from ..groups import AttachedGroup, ClusterError, Group, LocalGroup, TaskError
from ..pool import GroupPool
from ..ports import lease_ports, loopback_interface
from .handles import StrategyHandle, cpu_replicas
from .ranks import ps_chief_setup, ps_servers_setup, tf_multiworker_setup, torch_setup, torch_teardown


def child_threads(world_size: int) -> int:
    """Framework threads per rank, so that a group does not oversubscribe this machine's cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, world_size))


def _gpu_env(handle: StrategyHandle, rank: int) -> dict[str, str]:
    """One GPU per rank on multi-gpu runs (NCCL needs exclusive devices); on gpu every
    rank gets this process's first GPU (torch ranks share it over gloo); none on cpu.
    The run pins CUDA_VISIBLE_DEVICES (session.plan.DevicePlan) whenever it uses GPUs."""
    if handle.device == "cpu":
        return {"CUDA_VISIBLE_DEVICES": ""}
    visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    index = rank if handle.device == "multi-gpu" else 0
    return {"CUDA_VISIBLE_DEVICES": visible[index]} if index < len(visible) else {}


# torch.distributed's backend table: on CUDA tensors gloo implements these only.
TORCH_GLOO_CUDA = frozenset({"all_reduce", "broadcast"})


GLOO_CUDA_REASON = ("on --dl-device=gpu the torch ranks share the one GPU: NCCL refuses two ranks on one device, "
                    "and gloo implements only all_reduce and broadcast on CUDA tensors")


def require_gpus_per_rank(handle: StrategyHandle, world_size: int) -> None:
    """NCCL (torch) and MultiWorker collectives on GPUs need one GPU per rank."""
    import pytest_dlconform

    if handle.device == "cpu":
        return
    visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    if handle.framework == "torch" and handle.device == "gpu" and visible:
        if handle.name == "fsdp":  # all_gather_into_tensor / reduce_scatter_tensor: not on gloo CUDA
            pytest_dlconform.not_applicable(f"fsdp: {GLOO_CUDA_REASON}; FSDP needs all-gather and reduce-scatter")
        return  # gloo ranks share the GPU
    have = len(visible) if handle.device == "multi-gpu" else min(1, len(visible))
    if have < world_size:
        pytest_dlconform.not_applicable(
            f"{handle.name} on {handle.device} needs one GPU per rank ({world_size} ranks, NCCL cannot share a GPU "
            f"between processes), this run gives {have} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r}); "
            "use --dl-device multi-gpu on a machine with enough GPUs"
        )


def torch_ranks(handle: StrategyHandle) -> int:
    """Ranks of the distributed suites' local torch group: at least 3 on CPU (cpu_replicas),
    so that 2 and 3 ranks (subgroups of the first k) always run; N on GPUs (one per rank)."""
    return cpu_replicas(handle.replicas) if handle.device == "cpu" else handle.replicas


def torch_group(handle: StrategyHandle, timeout: float, world: int | None = None) -> Group:
    """A torch process group for ``handle``: this process's torchrun rank when launched by
    torchrun, else ``world`` local ranks (default ``handle.replicas``) meeting through a file."""
    outer = external_torch_env()
    cfg = {"backend": handle.torch_backend(), "timeout": timeout, "device": handle.device}
    if outer is not None:
        return AttachedGroup(f"torchrun rank {outer.rank}/{outer.world_size}", outer.rank, outer.world_size,
                             timeout, setup=torch_setup, setup_payload={**cfg, "init_method": "env://",
                                                                       "local_rank": outer.local_rank},
                             teardown=torch_teardown)
    world = world or handle.replicas
    require_gpus_per_rank(handle, world)
    iface = loopback_interface()

    def env(rank: int, workdir: str) -> dict[str, str]:
        threads = str(child_threads(world))
        return {**_gpu_env(handle, rank), "GLOO_SOCKET_IFNAME": iface, "NCCL_SOCKET_IFNAME": iface,
                "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}

    return LocalGroup.start(
        f"torch-{cfg['backend']}-{world}", world, timeout=timeout, env=env, setup=torch_setup,
        setup_payload={**cfg, "init_method": None, "threads": child_threads(world)}, teardown=torch_teardown,
    )


LISTEN_ALL = "--dl-allow-listen-all"


def tf_cluster_network(allow_listen_all: bool, timeout: float) -> netns.PrivateNetwork | None:
    """Where a local TensorFlow cluster runs: a private network namespace of its own with
    only loopback, because TensorFlow's gRPC servers listen on every interface and have no
    bind-address option. Where none can be made, the cluster's claims are not applicable,
    unless the user allowed listening on all interfaces (then None: this host's network)."""
    import pytest_dlconform

    try:
        return netns.create(timeout=min(30.0, timeout))
    except netns.Unavailable as exc:
        if allow_listen_all:
            return None
        pytest_dlconform.not_applicable(listen_all_refused(exc))


def listen_all_refused(exc: BaseException) -> str:
    return (f"TensorFlow's gRPC servers listen on every network interface (tf.distribute.Server has no bind "
            f"address), so local TensorFlow clusters run only in a private network namespace with nothing but "
            f"loopback, and none can be made here: {exc}; pass {LISTEN_ALL}=yes (DLCONFORM_ALLOW_LISTEN_ALL=yes) "
            "to run them on this host's network instead, listening on all of its interfaces")


def multiworker_cluster(handle: StrategyHandle, timeout: float, allow_listen_all: bool = False) -> Group:
    """A MultiWorkerMirroredStrategy cluster: this process's TF_CONFIG cluster when set,
    else ``handle.replicas`` local worker processes, each given TF_CONFIG, in a private
    network namespace (:func:`tf_cluster_network`)."""
    outer = external_tf_config()
    if outer is not None:
        task = outer["task"]
        workers = len(outer["cluster"].get("worker", [])) + len(outer["cluster"].get("chief", []))
        return AttachedGroup(f"TF_CONFIG {task['type']}:{task['index']}", _global_worker_index(outer), workers,
                             timeout, setup=tf_multiworker_setup, setup_payload={"timeout": timeout, "attached": True})
    world = handle.replicas
    require_gpus_per_rank(handle, world)
    for attempt in range(3):
        network = tf_cluster_network(allow_listen_all, timeout)
        lease = None if network else lease_ports(world)
        cluster = {"worker": network.addresses(world) if network else lease.addresses()}  # type: ignore[union-attr]
        def env(rank: int, _: str, spec: dict[str, list[str]] = cluster) -> dict[str, str]:
            return {**_gpu_env(handle, rank), "TF_CONFIG": tf_config(spec, "worker", rank), "TF_CPP_MIN_LOG_LEVEL": "2"}

        try:
            return LocalGroup.start(
                f"tf-multiworker-{world}", world, timeout=timeout, env=env,
                setup=tf_multiworker_setup, setup_payload={"timeout": timeout, "threads": child_threads(world)},
                network=network,
            )
        except (ClusterError, TaskError) as exc:
            # On this host's network another program may have taken a leased port before
            # TensorFlow bound it; a private namespace holds nothing else.
            if network is not None or attempt == 2 or "Could not start gRPC server" not in str(exc):
                raise
        finally:
            if lease is not None:
                lease.release()
    raise AssertionError("unreachable")


def _global_worker_index(config: dict[str, Any]) -> int:
    task = config["task"]
    chiefs = len(config["cluster"].get("chief", []))
    return int(task["index"]) if task["type"] == "chief" else chiefs + int(task["index"])


@dataclass(frozen=True)
class PsLayout:
    workers: int
    ps: int


def ps_cluster(handle: StrategyHandle, timeout: float, ps_tasks: int = 2, allow_listen_all: bool = False) -> Group:
    """A ParameterServerStrategy cluster driven by a ClusterCoordinator.

    Rank 0 is the coordinator (the "chief" task); rank 1 hosts the gRPC servers of the
    ``handle.replicas`` worker tasks and ``ps_tasks`` ps tasks, the way TensorFlow's
    parameter-server tutorial builds an in-process cluster, so that one extra process
    (not one per task) pays TensorFlow's start-up. Both run in one private network
    namespace (:func:`tf_cluster_network`): the coordinator's own server and the worker and
    ps servers reach each other on its loopback only. With TF_CONFIG naming this process
    the chief of an outer cluster, the coordinator runs here and uses that cluster."""
    outer = external_tf_config()
    if outer is not None:
        if outer["task"]["type"] != "chief":
            raise HarnessError("inside a parameter-server TF_CONFIG cluster, run pytest on the chief task only; "
                               "workers and ps tasks run tf.distribute.Server(...).join()")
        return AttachedGroup("TF_CONFIG chief", 0, 1, timeout, setup=ps_chief_setup,
                             setup_payload={"cluster": outer["cluster"], "timeout": timeout, "attached": True})
    layout = PsLayout(handle.replicas, ps_tasks)
    tasks = 1 + layout.workers + layout.ps
    network = tf_cluster_network(allow_listen_all, timeout)
    lease = None if network else lease_ports(tasks)
    addresses = network.addresses(tasks) if network else lease.addresses()  # type: ignore[union-attr]
    cluster = {"chief": addresses[:1], "worker": addresses[1:1 + layout.workers], "ps": addresses[1 + layout.workers:]}
    visible = "" if handle.device == "cpu" else os.environ.get("CUDA_VISIBLE_DEVICES", "")
    try:  # the ports stay leased until every server has bound its own
        group = LocalGroup.start(f"tf-ps-{layout.workers}w{layout.ps}ps", 2, timeout=timeout,
                                 env=lambda rank, _: {"CUDA_VISIBLE_DEVICES": visible, "TF_CPP_MIN_LOG_LEVEL": "2"},
                                 network=network)
        try:
            payload = {"cluster": cluster, "timeout": timeout, "threads": child_threads(2)}
            group.run(ps_servers_setup, payload, ranks=[1], what="start of the worker and ps servers")
            group.run(ps_chief_setup, payload, ranks=[0], what="ParameterServerStrategy and ClusterCoordinator on the chief")
        except BaseException:
            group.close()
            raise
    finally:
        if lease is not None:
            lease.release()
    return group


def group_for(pool: GroupPool, handle: StrategyHandle, timeout: float, world: int | None = None) -> Group:
    """The pooled multi-process group of a multi-process handle, started on first use;
    ``world``: a torch group of that many ranks instead of ``handle.replicas`` (the
    distributed suites ask for :func:`torch_ranks`)."""
    size = world or handle.replicas
    key = (handle.framework, handle.name if handle.framework == "tensorflow" else "torch", size, handle.device)
    if handle.name == "multi-worker":
        return pool.get(key, lambda: multiworker_cluster(handle, timeout, allow_listen_all=pool.allow_listen_all))
    if handle.name == "parameter-server":
        return pool.get(key, lambda: ps_cluster(handle, timeout, allow_listen_all=pool.allow_listen_all))
    if handle.name in ("ddp", "fsdp"):
        return pool.get(key, lambda: torch_group(handle, timeout, size))
    raise HarnessError(f"{handle.name} is not a multi-process strategy")


def inprocess_strategy(pool: GroupPool, handle: StrategyHandle, replicas: int | None = None) -> Any:
    """The in-process TensorFlow strategy of a handle (Mirrored over the first ``replicas``
    devices), kept in the pool; Mirrored ones are shared process-wide (mirrored_strategy)."""
    return pool.get(("tf-in-process", handle.name, replicas, handle.device), lambda: handle.tf_strategy(replicas))


__all__ = [
    "GLOO_CUDA_REASON", "LISTEN_ALL", "TORCH_GLOO_CUDA", "PsLayout", "child_threads", "group_for",
    "inprocess_strategy", "listen_all_refused", "multiworker_cluster", "ps_cluster", "require_gpus_per_rank",
    "tf_cluster_network", "torch_group", "torch_ranks",
]
