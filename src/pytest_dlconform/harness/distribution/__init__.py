"""Distribution strategies for the ``dl_strategy`` fixture: handles, launchers, payloads, references.

The generic machinery the distributed suites (and a user's own distributed claims) run
on; the programs those suites run in the ranks live with the suites
(``suites/distributed/tf_programs.py``, ``torch_programs.py``), so a new distributed claim
needs no change here.

- :mod:`.handles`: :class:`StrategyHandle` (framework, name, replicas, device kind) and the
  in-process TensorFlow strategies (Mirrored, default, OneDevice, TPU);
- :mod:`.launch`: torch process groups and TensorFlow clusters, pooled per kind
  (:func:`group_for`), on :mod:`pytest_dlconform.harness`;
- :mod:`.ranks`: each rank's framework setup and teardown;
- :mod:`.payloads`: the plain data that crosses process boundaries (:class:`ReduceCase`,
  :class:`TrainCase`, :class:`Outcome`, :class:`TrainResult`);
- :mod:`.cases`: hypothesis strategies that draw those payloads;
- :mod:`.reference`: the single-device runs the distributed ones are compared with, and
  the model and optimizer builders they share;
- :mod:`.oracles`: checks that need more than a comparison with a reference.

Importing this package imports no framework (and not hypothesis: :mod:`.cases` loads
on its own import).
"""

from __future__ import annotations

from ...frameworks import HarnessError
from .handles import (
    MULTI_PROCESS,
    MULTI_REPLICA,
    NO_TPU,
    REPLICA_COUNTS,
    StrategyHandle,
    cpu_replicas,
    mirrored_strategy,
    tpu_resolver,
    tpu_strategy,
    tpu_unavailable,
)
from .launch import (
    GLOO_CUDA_REASON,
    LISTEN_ALL,
    TORCH_GLOO_CUDA,
    PsLayout,
    child_threads,
    group_for,
    inprocess_strategy,
    listen_all_refused,
    multiworker_cluster,
    ps_cluster,
    require_gpus_per_rank,
    tf_cluster_network,
    torch_group,
    torch_ranks,
)
from .oracles import check_nccl_int_avg, check_replica_split, check_sampler_reference, replica_split, stall_problems
from .payloads import Outcome, ReduceCase, TrainCase, TrainResult, first_line
from .ranks import (
    prepare_outer_multiworker,
    ps_chief_setup,
    ps_servers_setup,
    tf_multiworker_setup,
    torch_setup,
    torch_teardown,
)
from .reference import (
    keras_model,
    keras_optimizer,
    sample_weights,
    sampler_batches,
    sampler_shards,
    tf_module,
    tf_single_device_steps,
    torch_model,
    torch_optimizer,
    torch_sampler_shards,
    torch_single_process_steps,
    torch_weights,
)

__all__ = [
    "GLOO_CUDA_REASON",
    "LISTEN_ALL",
    "MULTI_PROCESS",
    "MULTI_REPLICA",
    "NO_TPU",
    "REPLICA_COUNTS",
    "TORCH_GLOO_CUDA",
    "HarnessError",
    "Outcome",
    "PsLayout",
    "ReduceCase",
    "StrategyHandle",
    "TrainCase",
    "TrainResult",
    "check_nccl_int_avg",
    "check_replica_split",
    "check_sampler_reference",
    "child_threads",
    "cpu_replicas",
    "first_line",
    "group_for",
    "inprocess_strategy",
    "keras_model",
    "keras_optimizer",
    "listen_all_refused",
    "mirrored_strategy",
    "multiworker_cluster",
    "prepare_outer_multiworker",
    "ps_chief_setup",
    "ps_cluster",
    "ps_servers_setup",
    "replica_split",
    "require_gpus_per_rank",
    "sample_weights",
    "sampler_batches",
    "sampler_shards",
    "stall_problems",
    "tf_cluster_network",
    "tf_module",
    "tf_multiworker_setup",
    "tf_single_device_steps",
    "torch_group",
    "torch_model",
    "torch_optimizer",
    "torch_ranks",
    "torch_sampler_shards",
    "torch_setup",
    "torch_single_process_steps",
    "torch_teardown",
    "torch_weights",
    "tpu_resolver",
    "tpu_strategy",
    "tpu_unavailable",
]
