"""What every rank of a launched group runs first and last: framework setup and teardown.

The launchers in :mod:`.launch` pass these as a group's ``setup``/``teardown`` programs:
a MultiWorkerMirroredStrategy per worker, the worker and ps servers and the coordinator
of a parameter-server cluster, a torch process group per rank. The strategy or process
group is kept in the rank's ``ctx.state`` for the programs the suites run afterwards.
Inside a TF_CONFIG cluster the strategy must exist before TensorFlow initialises:
:func:`prepare_outer_multiworker` builds it at the end of collection.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

from ...frameworks import HarnessError, adapter
from ..rank import WorkerContext


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
                               "initialised (pytest_dlconform.run.strategies does that at the end of collection)")
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
    ranks: dict[str, Any] = {} if cfg["init_method"] else {"rank": ctx.rank, "world_size": ctx.world_size}  # env:// carries them
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


__all__ = [
    "prepare_outer_multiworker", "ps_chief_setup", "ps_servers_setup", "tf_multiworker_setup", "torch_setup",
    "torch_teardown",
]
