"""Mutants of distributed training: torch collectives, DDP, process-group timeouts and
tf.distribute reductions (claims distributed.*). They apply in the rank processes, which
are fresh interpreters started with the run's environment."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap


@mutant("torch-all-reduce-avg-divides-by-numel", areas="distributed", claims="distributed.torch.collectives",
        target="torch", cite="https://github.com/pytorch/pytorch/issues/162338",
        bug="all_reduce(ReduceOp.AVG) divides the sum by the tensor's element count instead of the group size "
            "(issue 162338: incorrect AVG reduction for gloo; torchcomms PR 287 fixed the same divisor).")
def _avg_by_numel() -> None:
    import torch.distributed as dist

    def make(orig: Any) -> Any:
        def all_reduce(tensor: Any, op: Any = dist.ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
            if op == dist.ReduceOp.AVG:
                work = orig(tensor, dist.ReduceOp.SUM, group, False)
                tensor.div_(max(1, tensor.numel())) if tensor.is_floating_point() else tensor.floor_divide_(
                    max(1, tensor.numel()))
                return work
            return orig(tensor, op, group, async_op)
        return all_reduce
    wrap(dist, "all_reduce", make)


@mutant("torch-all-reduce-max-is-sum", areas="distributed", claims="distributed.torch.collectives", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/21480",
        bug="all_reduce(ReduceOp.MAX) returns the sum (a reduction applying the wrong operator; issue 21480: "
            "gloo reduce producing wrong results).")
def _max_is_sum() -> None:
    import torch.distributed as dist

    def make(orig: Any) -> Any:
        def all_reduce(tensor: Any, op: Any = dist.ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
            return orig(tensor, dist.ReduceOp.SUM if op == dist.ReduceOp.MAX else op, group, async_op)
        return all_reduce
    wrap(dist, "all_reduce", make)


@mutant("torch-ddp-sums-gradients", areas="distributed", claims="distributed.torch.ddp-equivalence",
        target="torch", cite="https://github.com/pytorch/pytorch/pull/42471",
        bug="DistributedDataParallel sums gradients over ranks instead of averaging them (the semantics "
            "PR 42471 had to clarify in the docs; fairseq issue 494 undoes the averaging by hand).")
def _ddp_sums() -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    # Each local gradient is scaled by the world size before DDP averages it: the sum over ranks. (A comm
    # hook would do the same but hangs under DDP.join() with uneven inputs, where the suite also runs it.)
    def make(orig: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            world = dist.get_world_size(getattr(self, "process_group", None))
            for p in self.module.parameters():
                if p.requires_grad:
                    p.register_hook(lambda g, w=world: g * w)
        return init
    wrap(DDP, "__init__", make)


@mutant("torch-new-group-timeout-ignored", areas="distributed", claims="distributed.torch.timeout", target="torch",
        cite="https://github.com/pytorch/pytorch/pull/158128",
        bug="new_group(timeout=...) is ignored and the group waits with the default timeout (PR 158128: "
            "gloo timeouts were ignored even if they were set; PR 167052: _set_pg_timeout not working for gloo).")
def _new_group_timeout_ignored() -> None:
    import torch.distributed as dist

    def make(orig: Any) -> Any:
        def new_group(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("timeout", None)
            return orig(*args, **kwargs)
        return new_group
    wrap(dist, "new_group", make)


@mutant("tf-strategy-reduce-mean-over-replicas", areas="distributed",
        claims=("distributed.mirrored.reduce", "distributed.mirrored.step-equivalence"), target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/28956",
        bug="strategy.reduce(MEAN, v, axis) divides the sum by the number of replicas, not by the number of "
            "elements along axis (issue 28956: distribute strategy reductions that average the wrong thing).")
def _tf_reduce_mean_replicas() -> None:
    import tensorflow as tf
    from tensorflow.python.distribute import distribute_lib

    def make(orig: Any) -> Any:
        def reduce(self: Any, reduce_op: Any, value: Any, axis: Any) -> Any:
            if axis is not None and reduce_op in (tf.distribute.ReduceOp.MEAN, "MEAN"):
                total = orig(self, tf.distribute.ReduceOp.SUM, value, axis)
                return total / tf.cast(self.num_replicas_in_sync, total.dtype)
            return orig(self, reduce_op, value, axis)
        return reduce
    wrap(distribute_lib.StrategyBase, "reduce", make)


@mutant("tf-replica-all-reduce-mean-is-sum", areas="distributed",
        claims=("distributed.mirrored.reduce", "distributed.mirrored.*"), target="tensorflow",
        cite="https://github.com/tensorflow/benchmarks/issues/466",
        bug="ReplicaContext.all_reduce(MEAN) sums without dividing by the replica count (tensorflow/benchmarks "
            "issue 466: gradients summed, not averaged, in replicated mode).")
def _tf_all_reduce_mean_sum() -> None:
    import tensorflow as tf
    from tensorflow.python.distribute import distribute_lib

    def make(orig: Any) -> Any:
        def all_reduce(self: Any, reduce_op: Any, value: Any, options: Any = None) -> Any:
            if reduce_op in (tf.distribute.ReduceOp.MEAN, "MEAN"):
                reduce_op = tf.distribute.ReduceOp.SUM
            return orig(self, reduce_op, value, options)
        return all_reduce
    wrap(distribute_lib.ReplicaContext, "all_reduce", make)
