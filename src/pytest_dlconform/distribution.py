"""Distribution-strategy handles for the ``dl_strategy`` fixture, and what runs under them.

A *distribution* strategy (tf.distribute, torch DDP/FSDP) is a fixture; a *hypothesis*
strategy lives in :mod:`pytest_dlconform.inputs`. The handle knows its framework, name,
replica count and device kind; in-process TensorFlow strategies are built here over the
logical CPU devices the adapter configured (or the GPUs), multi-process ones are launched
by :mod:`pytest_dlconform.cluster` (or attached to the cluster this process runs in).

The rest of the module is the programs the suites run: cross-replica reductions and
training steps for TensorFlow strategies and torch process groups, written once so the
same function runs in-process (Mirrored, default, OneDevice), in every rank of a
localhost group, or in this process as one rank of an outer cluster, plus the
single-device runs the distributed ones are compared with. Payloads and results are
plain data (numpy arrays, dataclasses) so they cross process boundaries.
"""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import netns
from .cluster import (
    AttachedGroup,
    ClusterError,
    Group,
    GroupPool,
    LocalGroup,
    TaskError,
    WorkerContext,
    external_tf_config,
    external_torch_env,
    lease_ports,
    loopback_interface,
    tf_config,
)
from .frameworks import HarnessError, adapter

MULTI_REPLICA = frozenset({"mirrored", "multi-worker", "parameter-server", "ddp", "fsdp"})
MULTI_PROCESS = frozenset({"multi-worker", "parameter-server", "ddp", "fsdp"})
NO_TPU = "no TPU"


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
        elif self.device == "multi-gpu" or (self.framework == "tensorflow" and getattr(ad, "logical_gpus", 1) > 1):
            # multi-gpu: one GPU per replica; gpu: TensorFlow's logical GPUs of the one GPU
            kind, count = "gpu", self.world_size
        else:
            kind, count = "gpu", 1
        if self.framework == "torch":
            return ["cpu"] * count if kind == "cpu" else [ad.device(kind, i) for i in range(count)]
        return [ad.device(kind, i) for i in range(count)]

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
            devices = tuple(self.replica_devices())
            return mirrored_strategy(devices[: replicas or len(devices)])
        if self.name == "tpu":
            return tpu_strategy()
        raise HarnessError(f"{self.name} runs in separate processes: use pytest_dlconform.cluster to launch it")

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
        _MIRRORED[key] = adapter("tensorflow").module.distribute.MirroredStrategy(devices=list(key))
    return _MIRRORED[key]


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


# --------------------------------------------------------------------------- launchers


def child_threads(world_size: int) -> int:
    """Framework threads per rank, so that a group does not oversubscribe this machine's cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, world_size))


def _gpu_env(handle: StrategyHandle, rank: int) -> dict[str, str]:
    """One GPU per rank on multi-gpu runs (NCCL needs exclusive devices); on gpu every
    rank gets this process's first GPU (torch ranks share it over gloo); none on cpu.
    The run pins CUDA_VISIBLE_DEVICES (session.Run) whenever it uses GPUs."""
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


def torch_group(handle: StrategyHandle, timeout: float) -> Group:
    """A torch process group for ``handle``: this process's torchrun rank when launched by
    torchrun, else ``handle.replicas`` local ranks meeting through a file."""
    outer = external_torch_env()
    cfg = {"backend": handle.torch_backend(), "timeout": timeout, "device": handle.device}
    if outer is not None:
        return AttachedGroup(f"torchrun rank {outer.rank}/{outer.world_size}", outer.rank, outer.world_size,
                             timeout, setup=torch_setup, setup_payload={**cfg, "init_method": "env://",
                                                                       "local_rank": outer.local_rank},
                             teardown=torch_teardown)
    world = handle.replicas
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
        try:
            return LocalGroup.start(
                f"tf-multiworker-{world}", world, timeout=timeout,
                env=lambda rank, _, spec=cluster: {**_gpu_env(handle, rank), "TF_CONFIG": tf_config(spec, "worker", rank),
                                                   "TF_CPP_MIN_LOG_LEVEL": "2"},
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


def group_for(pool: GroupPool, handle: StrategyHandle, timeout: float) -> Group:
    """The pooled multi-process group of a multi-process handle, started on first use."""
    key = (handle.framework, handle.name if handle.framework == "tensorflow" else "torch", handle.replicas, handle.device)
    if handle.name == "multi-worker":
        return pool.get(key, lambda: multiworker_cluster(handle, timeout, allow_listen_all=pool.allow_listen_all))
    if handle.name == "parameter-server":
        return pool.get(key, lambda: ps_cluster(handle, timeout, allow_listen_all=pool.allow_listen_all))
    if handle.name in ("ddp", "fsdp"):
        return pool.get(key, lambda: torch_group(handle, timeout))
    raise HarnessError(f"{handle.name} is not a multi-process strategy")


def inprocess_strategy(pool: GroupPool, handle: StrategyHandle, replicas: int | None = None) -> Any:
    """The in-process TensorFlow strategy of a handle (Mirrored over the first ``replicas``
    devices), kept in the pool; Mirrored ones are shared process-wide (mirrored_strategy)."""
    return pool.get(("tf-in-process", handle.name, replicas, handle.device), lambda: handle.tf_strategy(replicas))


# --------------------------------------------------------------------------- rank setup


def _tensorflow(threads: int | None) -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(2, threads))
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    return tf


_OUTER: dict[str, Any] = {}  # strategies of the cluster this process is part of


def prepare_outer_multiworker(logical_cpus: int, timeout: float) -> None:
    """Inside a TF_CONFIG cluster, build this host's MultiWorkerMirroredStrategy now.

    The strategy configures TensorFlow's collective ops, which is only possible before the
    runtime initialises; the adapter initialises it on first use (a fixture). So this runs
    at the end of collection, first applying the settings the adapter will apply (logical
    CPU devices, GPU memory growth): TensorFlow ignores a repeated identical setting, so the
    adapter's own configuration later is a no-op instead of an error."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    if logical_cpus > 1:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(logical_cpus)])
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)
    _OUTER["multi-worker"] = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def tf_multiworker_setup(ctx: WorkerContext, cfg: dict[str, Any]) -> dict[str, Any]:
    if cfg.get("attached"):
        if "multi-worker" not in _OUTER:
            raise HarnessError("TF_CONFIG is set, but MultiWorkerMirroredStrategy was not built before TensorFlow "
                               "initialised (the distributed suites' conftest does that at the end of collection)")
        strategy = _OUTER["multi-worker"]
        tf = adapter("tensorflow").module
    else:
        tf = _tensorflow(cfg.get("threads"))
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=cfg["timeout"])
        ctx.arrive("MultiWorkerMirroredStrategy()")
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    ctx.state["strategy"] = strategy
    # The constructor need not wait for every peer; one collective proves they all joined.
    ctx.arrive("first all-reduce")
    one = strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(1.0)))
    joined = float(strategy.experimental_local_results(one)[0].numpy())
    return {"replicas": strategy.num_replicas_in_sync, "joined": joined}


def ps_servers_setup(ctx: WorkerContext, cfg: dict[str, Any]) -> dict[str, int]:
    tf = _tensorflow(None)
    spec = tf.train.ClusterSpec(cfg["cluster"])
    # TensorFlow's parameter-server tutorial: in-process workers need more inter-op
    # threads than workers, or the coordinator's functions never run (join() hangs).
    workers = len(cfg["cluster"]["worker"])
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=workers + 1)
    servers = []
    for job in ("ps", "worker"):
        for index in range(len(cfg["cluster"][job])):
            ctx.arrive(f"tf.distribute.Server {job}:{index}")
            servers.append(tf.distribute.Server(spec, job_name=job, task_index=index, protocol="grpc",
                                                config=config, start=True))
    ctx.state["servers"] = servers
    return {"servers": len(servers)}


def ps_chief_setup(ctx: WorkerContext, cfg: dict[str, Any]) -> dict[str, int]:
    tf = adapter("tensorflow").module if cfg.get("attached") else _tensorflow(cfg.get("threads"))
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cfg["cluster"]), task_type="chief", task_id=0, rpc_layer="grpc")
    ctx.arrive("ParameterServerStrategy()")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    ctx.arrive("ClusterCoordinator()")
    ctx.state["strategy"] = strategy
    ctx.state["coordinator"] = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    ctx.state["cluster"] = cfg["cluster"]
    return {"workers": len(cfg["cluster"]["worker"]), "ps": len(cfg["cluster"]["ps"])}


def torch_setup(ctx: WorkerContext, cfg: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    device = "cpu"
    if cfg["backend"] == "nccl" or cfg.get("device") == "gpu":
        # NCCL: this rank's own GPU; gloo on gpu: the GPU all ranks share (cuda:0 of each)
        local = int(cfg.get("local_rank", 0)) if cfg.get("init_method") and cfg["backend"] == "nccl" else 0
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    init = cfg["init_method"] or f"file://{os.environ['DLCONFORM_GROUP_DIR']}/rendezvous"
    ctx.arrive("init_process_group")
    # The default timeout is 30 minutes (gloo) / 10 minutes (NCCL): always pass one.
    ranks = {} if cfg["init_method"] else {"rank": ctx.rank, "world_size": ctx.world_size}  # env:// carries them
    dist.init_process_group(cfg["backend"], init_method=init, timeout=datetime.timedelta(seconds=float(cfg["timeout"])),
                            **ranks)
    ctx.state.update(device=device, subgroups={}, backend=cfg["backend"])
    ctx.arrive("first barrier")
    dist.barrier()
    return {"backend": dist.get_backend(), "world_size": dist.get_world_size(), "rank": dist.get_rank()}


def torch_teardown(ctx: WorkerContext, _: Any) -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


# --------------------------------------------------------------------------- payloads


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

    @property
    def steps(self) -> int:
        return len(self.x) // self.batch if self.batch else 0


@dataclass(frozen=True)
class TrainResult:
    weights: tuple[np.ndarray, ...]
    # per step, per local replica: rows it trained on (TF: count; torch: dataset indices)
    batches: tuple[tuple[Any, ...], ...] = ()
    info: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- TF reductions


def tf_reduce_cases(strategy: Any, cases: Sequence[ReduceCase]) -> list[Outcome]:
    """Run each case under ``strategy``; replica i (global replica id, across workers too)
    contributes ``case.values[i]``; results are this process's local replicas'."""
    return [_tf_reduce_one(strategy, case) for case in cases]


def _tf_reduce_one(strategy: Any, case: ReduceCase) -> Outcome:
    tf = _tf()
    if strategy.num_replicas_in_sync != case.replicas:
        raise HarnessError(f"case has {case.replicas} replicas, strategy {strategy.num_replicas_in_sync}")
    dtype = getattr(tf, case.dtype)
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(case.values[ctx.replica_id_in_sync_group], dtype=dtype))
    op = {"sum": tf.distribute.ReduceOp.SUM, "mean": tf.distribute.ReduceOp.MEAN}.get(case.op)
    try:
        if case.api == "strategy.reduce":
            out: Any = [strategy.reduce(op, per_replica, axis=case.axis)]
        elif case.api == "strategy.gather":
            out = [strategy.gather(per_replica, axis=case.axis)]
        elif case.api == "ReplicaContext.all_reduce":
            out = strategy.experimental_local_results(
                strategy.run(lambda v: tf.distribute.get_replica_context().all_reduce(op, v), args=(per_replica,)))
        elif case.api == "ReplicaContext.all_gather":
            out = strategy.experimental_local_results(
                strategy.run(lambda v: tf.distribute.get_replica_context().all_gather(v, axis=case.axis), args=(per_replica,)))
        else:
            raise HarnessError(f"unknown TensorFlow reduction API {case.api!r}")
    except (TypeError, ValueError, tf.errors.OpError) as exc:
        return Outcome(error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
    return Outcome(tuple(np.asarray(t.numpy()) for t in out), info={"dtype": out[0].dtype.name})


def _tf() -> Any:
    import sys

    if "tensorflow" not in sys.modules:
        return adapter("tensorflow").module
    return sys.modules["tensorflow"]


def mw_reduce(ctx: WorkerContext, cases: Sequence[ReduceCase]) -> list[Outcome]:
    return tf_reduce_cases(ctx.state["strategy"], cases)


# --------------------------------------------------------------------------- TF variables


def tf_variable_copies(strategy: Any, shapes: Sequence[tuple[int, ...]]) -> list[dict[str, Any]]:
    """Variables created inside and outside ``strategy.scope()``: per variable, whether the
    strategy owns it, its per-replica components (device, shape, value)."""
    tf = _tf()
    found = []
    for i, shape in enumerate(shapes):
        init = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + i
        with strategy.scope():
            inside = tf.Variable(init)
        outside = tf.Variable(init)
        found.append({"inside": _copies(strategy, inside), "outside": _copies(strategy, outside), "init": init})
    return found


def _copies(strategy: Any, v: Any) -> dict[str, Any]:
    parts = strategy.experimental_local_results(v)
    return {
        "type": type(v).__name__,
        "in_scope": bool(strategy.extended.variable_created_in_scope(v)),
        "devices": [p.device for p in parts],
        "values": [np.asarray(p.numpy()) for p in parts],
    }


def mw_variable_copies(ctx: WorkerContext, shapes: Sequence[tuple[int, ...]]) -> list[dict[str, Any]]:
    return tf_variable_copies(ctx.state["strategy"], shapes)


# --------------------------------------------------------------------------- TF training


def _keras_model(case: TrainCase) -> Any:
    import keras

    layers = [keras.Input((case.widths[0],), dtype=case.dtype)]
    for i, width in enumerate(case.widths[1:]):
        last = i == len(case.widths) - 2
        layers.append(keras.layers.Dense(width, activation=None if last else case.activation, dtype=case.dtype))
    model = keras.Sequential(layers)
    model.set_weights([np.asarray(w, dtype=case.dtype) for w in case.weights])
    return model


def _keras_optimizer(case: TrainCase) -> Any:
    import keras

    if case.optimizer == "sgd":
        return keras.optimizers.SGD(case.lr)
    if case.optimizer == "momentum":
        return keras.optimizers.SGD(case.lr, momentum=0.9)
    if case.optimizer == "adam":
        return keras.optimizers.Adam(case.lr)
    raise HarnessError(f"unknown optimizer {case.optimizer!r}")


def tf_custom_loop(strategy: Any, case: TrainCase) -> TrainResult:
    """The custom training loop of TensorFlow's distributed-training tutorial: model and
    optimizer built in ``scope()``, the dataset batched by the global batch size and
    distributed with ``experimental_distribute_dataset``, each step under ``strategy.run``
    with the per-example loss averaged by ``tf.nn.compute_average_loss``."""
    tf = _tf()
    with strategy.scope():
        model = _keras_model(case)
        optimizer = _keras_optimizer(case)
    dataset = tf.data.Dataset.from_tensor_slices((case.x.astype(case.dtype), case.y.astype(case.dtype))).batch(case.batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dist = strategy.experimental_distribute_dataset(dataset.with_options(options))
    global_batch = case.batch if case.loss_scaling == "global" else None

    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            per_example = tf.reduce_sum(tf.square(model(x, training=True) - y), axis=1)
            if case.loss_scaling == "local-mean":  # the classic mistake, for the meta-tests
                loss = tf.reduce_mean(per_example)
            else:
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return tf.shape(x)[0]

    seen = []
    for x, y in dist:
        rows = strategy.experimental_local_results(strategy.run(step, args=(x, y)))
        seen.append(tuple(int(r) for r in rows))
    return TrainResult(_weights_of(strategy, model), tuple(seen),
                       info={"replica_weights": tf_replica_weights(strategy, model)})


def _weights_of(strategy: Any, model: Any) -> tuple[np.ndarray, ...]:
    """The first local replica's copy of each weight (tf_replica_weights has all copies)."""
    return tuple(np.asarray(strategy.experimental_local_results(v.value)[0].numpy()) for v in model.weights)


def tf_replica_weights(strategy: Any, model: Any) -> list[list[np.ndarray]]:
    return [[np.asarray(c.numpy()) for c in strategy.experimental_local_results(v.value)] for v in model.weights]


def tf_single_device_steps(case: TrainCase, replica_rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, ...]:
    """The oracle: the same model and optimizer on one device, one step per global batch,
    with the loss the distributed run is documented to compute.

    ``replica_rows[s]`` are the per-replica batch sizes of step s. With
    ``global_batch_size=B`` the loss is the mean over the B rows whatever the split; with
    the default (local batch size x replicas) replica r's rows are weighted 1/(N * b_r)."""
    tf = _tf()
    with tf.distribute.get_strategy().scope():
        model = _keras_model(case)
        optimizer = _keras_optimizer(case)
    for s, sizes in enumerate(replica_rows):
        lo = s * case.batch
        x = tf.constant(case.x[lo:lo + case.batch], dtype=case.dtype)
        y = tf.constant(case.y[lo:lo + case.batch], dtype=case.dtype)
        weights = tf.constant(sample_weights(case.loss_scaling, sizes, case.batch), dtype=case.dtype)
        with tf.GradientTape() as tape:
            per_example = tf.reduce_sum(tf.square(model(x, training=True) - y), axis=1)
            loss = tf.reduce_sum(per_example * weights)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return tuple(np.asarray(v.numpy()) for v in model.weights)


def sample_weights(scaling: str, sizes: Sequence[int], batch: int) -> np.ndarray:
    """Weight of each row of a global batch in the loss, given the per-replica sizes."""
    if scaling == "global":
        return np.full(sum(sizes), 1.0 / batch)
    if scaling != "default":
        raise HarnessError(f"no single-device loss for loss scaling {scaling!r}")
    n = len(sizes)
    return np.concatenate([np.full(b, 1.0 / (n * b)) for b in sizes if b > 0] or [np.zeros(0)])


def mw_custom_loop(ctx: WorkerContext, cases: Sequence[TrainCase]) -> list[TrainResult]:
    return [tf_custom_loop(ctx.state["strategy"], case) for case in cases]


def keras_fit(strategy: Any, case: TrainCase, sample_weight: np.ndarray | None = None) -> TrainResult:
    """``model.fit`` exactly as the seed writes it: model and optimizer built inside
    ``strategy.scope()``, the rest unchanged; one epoch, no shuffling."""
    import keras

    with strategy.scope():
        model = _keras_model(case)
        model.compile(optimizer=_keras_optimizer(case), loss=keras.losses.MeanSquaredError(dtype=case.dtype))
    try:
        model.fit(case.x.astype(case.dtype), case.y.astype(case.dtype), batch_size=case.batch, epochs=1,
                  shuffle=False, verbose=0, sample_weight=sample_weight)
    except Exception as exc:  # noqa: BLE001 - the suite decides whether this error is the documented outcome
        return TrainResult((), info={"error": f"{type(exc).__name__}: {_first_line(exc)}"})
    return TrainResult(_weights_of(strategy, model), info={"replica_weights": tf_replica_weights(strategy, model)})


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def mw_fit(ctx: WorkerContext, cases: Sequence[TrainCase]) -> list[TrainResult]:
    return [keras_fit(ctx.state["strategy"], case) for case in cases]


def default_all_reduce_ops(strategy: Any, shape: tuple[int, ...] = (3,)) -> dict[str, Any]:
    """The op types of a traced ReplicaContext.all_reduce under ``strategy`` (a public
    observation of the cross-device implementation), and the private class name as a note."""
    tf = _tf()
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.fill(shape, tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)))

    @tf.function
    def traced(v: Any) -> Any:
        return strategy.run(lambda t: tf.distribute.get_replica_context().all_reduce("SUM", t), args=(v,))

    graph = traced.get_concrete_function(values).graph
    types = {op.type for op in graph.get_operations()}
    for fn in graph.as_graph_def().library.function:
        types.update(node.op for node in fn.node_def)
    out = strategy.experimental_local_results(traced(values))
    return {"op_types": sorted(types), "results": [np.asarray(t.numpy()) for t in out],
            "private_cross_device_ops": type(getattr(strategy.extended, "_cross_device_ops", None)).__name__}


def scope_observations(strategy: Any, case: TrainCase) -> dict[str, Any]:
    """What strategy.scope() is required for, and what runs where without strategy.run.

    - outside_fit: error of ``fit`` inside the scope for a model built outside it (or None);
    - bypass_in_scope: error of a custom step called directly (not through strategy.run)
      inside the scope; bypass: the same outside the scope, with the replica contexts its
      body saw (bypass_seen) and the mirrored copies of the first kernel afterwards;
    - run: the (replica id, rows) each replica's call of the same step saw under strategy.run;
    - fit_traces: (in cross-replica context, num_replicas_in_sync) seen by fit's train step."""
    import keras

    tf = _tf()
    x, y = case.x[: case.batch].astype(case.dtype), case.y[: case.batch].astype(case.dtype)
    out: dict[str, Any] = {}
    outside = _keras_model(case)
    outside.compile(optimizer=_keras_optimizer(case), loss=keras.losses.MeanSquaredError(dtype=case.dtype))
    out["outside_fit"] = _error_of(lambda: _fit_in_scope(strategy, outside, x, y, case.batch))

    with strategy.scope():
        model, optimizer = _keras_model(case), _keras_optimizer(case)
    seen: list[tuple[Any, int]] = []

    def step(xb: Any, yb: Any) -> None:
        ctx = tf.distribute.get_replica_context()
        seen.append((None if ctx is None else tf.get_static_value(ctx.replica_id_in_sync_group), int(xb.shape[0])))
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.reduce_sum(tf.square(model(xb) - yb), axis=1))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    def bypass_in_scope() -> None:
        with strategy.scope():
            step(tf.constant(x), tf.constant(y))

    out["bypass_in_scope"] = _error_of(bypass_in_scope)
    seen.clear()
    before = [np.asarray(c.numpy()) for c in strategy.experimental_local_results(model.weights[0].value)]
    out["bypass"] = _error_of(lambda: step(tf.constant(x), tf.constant(y)))
    out["bypass_seen"] = list(seen)
    out["bypass_copies"] = [np.asarray(c.numpy()) for c in strategy.experimental_local_results(model.weights[0].value)]
    out["bypass_changed"] = any(not np.array_equal(a, b) for a, b in zip(before, out["bypass_copies"]))
    seen.clear()
    with strategy.scope():  # a failed first apply_gradients leaves an optimizer half built
        model, optimizer = _keras_model(case), _keras_optimizer(case)
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(case.batch))
    xb, yb = next(iter(dist))
    strategy.run(step, args=(xb, yb))
    out["run_seen"] = sorted(seen, key=lambda t: -1 if t[0] is None else int(t[0]))
    out["fit_traces"] = _fit_contexts(strategy, case, x, y)
    return out


def _fit_in_scope(strategy: Any, model: Any, x: np.ndarray, y: np.ndarray, batch: int) -> None:
    with strategy.scope():
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)


def _error_of(fn: Any) -> str | None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the error is the observation
        return f"{type(exc).__name__}: {_first_line(exc)}"
    return None


def _fit_contexts(strategy: Any, case: TrainCase, x: np.ndarray, y: np.ndarray) -> list[tuple[bool, int]]:
    """Replica contexts seen while fit traces its train step (a probe layer records them)."""
    import keras

    tf = _tf()
    traces: list[tuple[bool, int]] = []

    class Probe(keras.layers.Layer):  # type: ignore[misc]
        def call(self, t: Any) -> Any:
            ctx = tf.distribute.get_replica_context()
            traces.append((tf.distribute.in_cross_replica_context(), 0 if ctx is None else ctx.num_replicas_in_sync))
            return t

    with strategy.scope():
        model = keras.Sequential([keras.Input((case.widths[0],), dtype=case.dtype), Probe(dtype=case.dtype),
                                  keras.layers.Dense(case.widths[-1], dtype=case.dtype)])
        model.compile(optimizer=_keras_optimizer(case), loss=keras.losses.MeanSquaredError(dtype=case.dtype))
    traces.clear()  # building the model called the probe outside any step
    model.fit(x, y, batch_size=case.batch, epochs=1, shuffle=False, verbose=0)
    return traces


# --------------------------------------------------------------------------- TF parameter server


def ps_observe(ctx: WorkerContext, cfg: dict[str, Any]) -> dict[str, Any]:
    """On the coordinator: where variables live, and what asynchronous workers did.

    - placement: ``cfg["variables"]`` variables created in ``strategy.scope()``, their devices;
    - exactly-once updates: ``cfg["increments"]`` scheduled functions each add 1 to a ps
      variable and return the value after their own add: with atomic, asynchronous updates
      the returned values are exactly 1..K in some order and the variable ends at K;
    - concurrency without timing: two scheduled functions wait for each other through ps
      variables (the first sets ``started`` and waits for ``flag``; the second waits for
      ``started``, then sets ``flag``). Both can finish only if two workers ran them at the
      same time; run one after the other they would wait until ``cfg["liveness_s"]`` of
      TensorFlow's clock and report the flag unseen.
    """
    tf = _tf()
    strategy, coordinator = ctx.state["strategy"], ctx.state["coordinator"]
    with strategy.scope():
        created = [tf.Variable(tf.zeros([i + 1], tf.float32), name=f"v{i}") for i in range(cfg["variables"])]
        counter = tf.Variable(0, dtype=tf.int64, name="counter")
        started = tf.Variable(0, dtype=tf.int32, name="started")
        flag = tf.Variable(0, dtype=tf.int32, name="flag")

    @tf.function
    def increment() -> Any:
        return counter.assign_add(1)

    ctx.arrive("scheduled increments")
    remote = [coordinator.schedule(increment) for _ in range(cfg["increments"])]
    coordinator.join()
    returned = sorted(int(r.fetch()) for r in remote)

    limit = float(cfg["liveness_s"])

    def await_flag(var: Any) -> Any:
        # Re-read the ps variable until it is set or TensorFlow's clock passes the bound.
        start = tf.timestamp()
        seen, spins = tf.constant(0, tf.int32), tf.constant(0, tf.int64)
        while tf.logical_and(tf.equal(seen, 0), tf.timestamp() - start < limit):
            seen = var.read_value()
            spins += 1
        return tf.stack([tf.cast(seen, tf.int64), spins])

    @tf.function
    def first() -> Any:  # announces itself, then needs the second function's flag
        started.assign(1)
        return await_flag(flag)

    @tf.function
    def second() -> Any:  # needs the first function to be running, then sets the flag
        result = await_flag(started)
        with tf.control_dependencies([result]):
            flag.assign(1)
        return result

    ctx.arrive("scheduled two functions that wait for each other")
    a, b = coordinator.schedule(first), coordinator.schedule(second)
    coordinator.join()
    (a_saw, a_spins), (b_saw, b_spins) = ([int(v) for v in r.fetch()] for r in (a, b))
    return {
        "devices": [v.device for v in created],
        "counter_device": counter.device,
        "counter": int(counter.numpy()),
        "returned": returned,
        "first_saw_flag": a_saw, "first_spins": a_spins,
        "second_saw_started": b_saw, "second_spins": b_spins,
        "workers": len(ctx.state["cluster"]["worker"]),
        "ps": len(ctx.state["cluster"]["ps"]),
    }


# --------------------------------------------------------------------------- torch collectives


def _torch_group_of(ctx: WorkerContext, size: int) -> Any:
    """The process group of ranks 0..size-1 (the default group when size is the world);
    every rank must call new_group, so all ranks build the same subgroups in order."""
    import torch.distributed as dist

    if size == ctx.world_size:
        return None
    subgroups = ctx.state["subgroups"]
    if size not in subgroups:
        subgroups[size] = dist.new_group(list(range(size)))
    return subgroups[size]


def torch_collective_cases(ctx: WorkerContext, cases: Sequence[ReduceCase]) -> list[Outcome]:
    """Each case on the group of its first ``case.replicas`` ranks; other ranks skip it."""
    for size in sorted({c.replicas for c in cases}):
        _torch_group_of(ctx, size)  # create subgroups up front, in the same order on every rank
    return [_torch_collective(ctx, case) for case in cases]


def _torch_collective(ctx: WorkerContext, case: ReduceCase) -> Outcome:
    import torch
    import torch.distributed as dist

    if ctx.rank >= case.replicas:
        return Outcome(info={"skipped": True})
    group = _torch_group_of(ctx, case.replicas)
    device = ctx.state["device"]
    mine = torch.tensor(case.values[ctx.rank], dtype=getattr(torch, case.dtype), device=device)
    ops = {"sum": dist.ReduceOp.SUM, "mean": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
           "min": dist.ReduceOp.MIN, "product": dist.ReduceOp.PRODUCT}
    ctx.arrive(f"{case.api} {case.op}".strip())
    try:
        if case.api == "all_reduce":
            out = mine.clone()
            dist.all_reduce(out, op=ops[case.op], group=group)
            results = (out,)
        elif case.api == "all_gather":
            outs = [torch.empty_like(mine) for _ in range(case.replicas)]
            dist.all_gather(outs, mine, group=group)
            results = tuple(outs)
        elif case.api == "broadcast":
            out = mine.clone()
            dist.broadcast(out, src=case.src, group=group)
            results = (out,)
        else:
            raise HarnessError(f"unknown torch collective {case.api!r}")
    except (RuntimeError, ValueError, TypeError) as exc:
        return Outcome(error=f"{type(exc).__name__}: {_first_line(exc)}")
    return Outcome(tuple(_torch_numpy(t) for t in results), info={"dtype": str(results[0].dtype).removeprefix("torch.")})


def _torch_numpy(t: Any) -> np.ndarray:
    import torch

    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


# --------------------------------------------------------------------------- torch training


def _torch_model(case: TrainCase) -> Any:
    import torch

    dtype = getattr(torch, case.dtype)
    act = {"tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid, "linear": torch.nn.Identity}[case.activation]
    layers: list[Any] = []
    for i in range(len(case.widths) - 1):
        lin = torch.nn.Linear(case.widths[i], case.widths[i + 1], dtype=dtype)
        with torch.no_grad():  # kernels are stored (in, out) as in Keras; torch keeps (out, in)
            lin.weight.copy_(torch.tensor(case.weights[2 * i].T, dtype=dtype))
            lin.bias.copy_(torch.tensor(case.weights[2 * i + 1], dtype=dtype))
        layers.append(lin)
        if i < len(case.widths) - 2:
            layers.append(act())
    return torch.nn.Sequential(*layers)


def _torch_optimizer(case: TrainCase, params: Any) -> Any:
    import torch

    if case.optimizer == "sgd":
        return torch.optim.SGD(params, lr=case.lr)
    if case.optimizer == "momentum":
        return torch.optim.SGD(params, lr=case.lr, momentum=0.9)
    if case.optimizer == "adam":
        return torch.optim.Adam(params, lr=case.lr)
    raise HarnessError(f"unknown optimizer {case.optimizer!r}")


def _torch_weights(params: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """Weights in the TrainCase layout: kernel (in, out), bias, layer by layer."""
    out = []
    for p in params:
        full = p.full_tensor() if hasattr(p, "full_tensor") else p  # FSDP's DTensor shards
        a = full.detach().cpu().numpy()
        out.append(a.T if a.ndim == 2 else a)
    return tuple(out)


def torch_train_cases(ctx: WorkerContext, payload: dict[str, Any]) -> list[TrainResult]:
    """DDP or FSDP (``payload["wrap"]``) training of each case on this rank's
    DistributedSampler shard; the result holds the dataset indices of every step's batch."""
    return [_torch_train(ctx, case, payload["wrap"]) for case in payload["cases"]]


def _torch_train(ctx: WorkerContext, case: TrainCase, wrap: str) -> TrainResult:
    import torch
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    device = ctx.state["device"]
    dtype = getattr(torch, case.dtype)
    data = TensorDataset(torch.arange(len(case.x)), torch.tensor(case.x, dtype=dtype), torch.tensor(case.y, dtype=dtype))
    sampler = DistributedSampler(data, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=False, drop_last=case.drop_last)
    loader = DataLoader(data, batch_size=case.rank_batch, sampler=sampler)
    model = _torch_model(case).to(device)
    ctx.arrive(f"wrap model in {wrap}")
    if wrap == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=None if device == "cpu" else [device])
    elif wrap == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    elif wrap != "none":  # "none": no gradient synchronisation, the meta-tests' wrong data parallelism
        raise HarnessError(f"unknown wrapper {wrap!r}")
    optimizer = _torch_optimizer(case, model.parameters())
    seen = []
    for step, (index, x, y) in enumerate(loader):
        ctx.arrive(f"{wrap} step {step}")
        optimizer.zero_grad()
        loss = ((model(x.to(device)) - y.to(device)) ** 2).sum(dim=1).mean()
        loss.backward()
        optimizer.step()
        seen.append(tuple(int(i) for i in index))
    ctx.arrive(f"{wrap} gather weights")
    # FSDP parameters are DTensors: to_local() is this rank's shard; DDP's are plain tensors.
    shards = {"local_shapes": [tuple(p.to_local().shape if hasattr(p, "to_local") else p.shape)
                               for p in model.parameters()]}
    return TrainResult(_torch_weights(list(model.parameters())), (tuple(seen),), info=shards)


def sampler_batches(case: TrainCase, world_size: int) -> list[list[tuple[int, ...]]]:
    """Per step, per rank: the dataset indices DistributedSampler(shuffle=False) and a
    DataLoader with ``case.rank_batch`` give each rank (computed here, for every rank)."""
    _ = adapter("torch").module  # the configured torch (threads) before anything of it runs
    from torch.utils.data import DistributedSampler

    with adapter("torch").module.device("cpu"):  # a sampler's draws belong on the host whatever the default device
        shards = [list(DistributedSampler(range(len(case.x)), num_replicas=world_size, rank=r, shuffle=False,
                                          drop_last=case.drop_last)) for r in range(world_size)]
    steps = -(-len(shards[0]) // case.rank_batch) if shards[0] else 0
    b = case.rank_batch
    return [[tuple(int(i) for i in shard[s * b:(s + 1) * b]) for shard in shards] for s in range(steps)]


def torch_single_process_steps(case: TrainCase, global_batches: Sequence[Sequence[Sequence[int]]]) -> tuple[np.ndarray, ...]:
    """The oracle: one process, the same model and optimizer, one step per global batch,
    loss = mean over ranks of each rank's mean loss (what DDP and FSDP average)."""
    torch = adapter("torch").module
    dtype = getattr(torch, case.dtype)
    model = _torch_model(case)
    optimizer = _torch_optimizer(case, model.parameters())
    x, y = torch.tensor(case.x, dtype=dtype), torch.tensor(case.y, dtype=dtype)
    for per_rank in global_batches:
        optimizer.zero_grad()
        losses = [((model(x[list(ix)]) - y[list(ix)]) ** 2).sum(dim=1).mean() for ix in per_rank if len(ix)]
        loss = torch.stack(losses).sum() / len(per_rank)
        loss.backward()
        optimizer.step()
    return _torch_weights(list(model.parameters()))


# --------------------------------------------------------------------------- torch failures


def torch_stall(ctx: WorkerContext, spec: dict[str, Any]) -> dict[str, Any]:
    """A collective that one rank never joins: every rank creates a group with
    ``spec["timeout"]`` (new_group is itself collective), then rank ``spec["absent"]``
    sleeps ``spec["sleep"]`` seconds instead of calling all_reduce; the others call it and
    report how torch ended the call and after how long.

    A collective's return means it was enqueued, not done: NCCL returns at once and runs
    it on a stream, and a later read (``.tolist()``) would block until the watchdog kills
    the rank, a crash instead of the timeout's error. So the call is made asynchronous on
    every backend (gloo too, where it shows the same semantics without a GPU) and the rank
    waits on its work handle, the documented way to wait for completion. NCCL raises the
    timeout on that wait only with TORCH_NCCL_BLOCKING_WAIT=1, read when the group is
    created ("when TORCH_NCCL_BLOCKING_WAIT is set, this is the duration for which the
    process will block and wait for collectives to complete before throwing an exception";
    otherwise "collectives will be aborted asynchronously and the process will crash").
    ``spec["wait"] = False`` reads the result without waiting: the meta-tests' wrong code."""
    import torch
    import torch.distributed as dist

    previous = os.environ.get(BLOCKING_WAIT)
    os.environ[BLOCKING_WAIT] = "1"
    try:
        group = dist.new_group(list(range(ctx.world_size)), timeout=datetime.timedelta(seconds=float(spec["timeout"])))
    finally:
        if previous is None:
            os.environ.pop(BLOCKING_WAIT, None)
        else:
            os.environ[BLOCKING_WAIT] = previous
    if ctx.rank == spec["absent"]:
        time.sleep(float(spec["sleep"]))
        return {"absent": True}
    x = torch.ones(3, device=ctx.state["device"])
    ctx.arrive("all_reduce")
    start = time.monotonic()
    try:
        work = dist.all_reduce(x, group=group, async_op=True)
        if spec.get("wait", True):
            work.wait()
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}", "elapsed": time.monotonic() - start,
                "runtime_error": isinstance(exc, RuntimeError)}
    return {"error": None, "elapsed": time.monotonic() - start, "value": x.tolist()}


BLOCKING_WAIT = "TORCH_NCCL_BLOCKING_WAIT"


def stall_problems(per_rank: dict[int, dict[str, Any]], absent: int) -> list[str]:
    """What is wrong with the waiting ranks' outcomes of :func:`torch_stall`: each must
    have raised torch's own timeout error (a RuntimeError saying it timed out)."""
    problems = []
    for rank, out in sorted(per_rank.items()):
        if rank == absent:
            continue
        if out["error"] is None:
            problems.append(f"rank {rank}: all_reduce without rank {absent} returned {out.get('value')} after "
                            f"{out['elapsed']:.1f} s, but should raise")
        elif not out.get("runtime_error") or "imed out" not in out["error"]:
            problems.append(f"rank {rank}: all_reduce without rank {absent} raised {out['error']}, but should raise "
                            "torch's timeout error (a RuntimeError)")
    return problems


def check_nccl_int_avg(case: ReduceCase, outcome: Outcome, where: str) -> None:
    """NCCL's AVG on integers, from what is documented rather than from what gloo does:
    torch.distributed.ReduceOp "AVG divides values by the world size before summing
    across ranks", all_reduce works in place (the result keeps the tensor's dtype), and
    NCCL's ncclAvg takes every ncclDataType_t, integers included. Each rank's quotient
    is an integer off the exact one by less than 1 whatever the rounding, so the sum of
    the n quotients is off the exact mean by less than n."""
    __tracebackhide__ = True
    from .checks import reductions

    if outcome.error is not None:
        raise reductions.ReductionMismatch(f"{where}: all_reduce(AVG) on {case.dtype} raised {outcome.error}, but NCCL "
                                       "documents ncclAvg for integer types (NCCL >= 2.10)")
    reductions.check_dtype(outcome.info["dtype"], case.dtype, what=f"{where}: all_reduce(AVG) in place")
    exact = reductions.reference("mean", case.values, case.dtype)
    off = float(np.max(np.abs(np.asarray(outcome.results[0], np.float64) - exact), initial=0.0))
    from . import evidence

    evidence.check(f"nccl int AVG {case.dtype}", observed=off, tolerance=float(case.replicas),
                   basis="n integer quotients, each off by < 1")
    if not off < case.replicas:
        raise reductions.ReductionMismatch(f"{where}: all_reduce(AVG) on {case.dtype} is off the mean by {off:g}, but "
                                       f"should be by less than the world size {case.replicas} (integer quotients, "
                                       "divided before summing)")
