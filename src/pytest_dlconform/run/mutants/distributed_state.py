"""Mutants of non-trainable state under data parallelism: DDP's buffer broadcast, Keras's
synchronized BatchNormalization and tf.distribute variable aggregation (claims
distributed.torch.ddp-buffers, distributed.keras.batchnorm-synchronized,
distributed.tf.variable-aggregation). The torch one applies in the rank processes, fresh
interpreters started with the run's environment."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap


@mutant("torch-ddp-skips-buffer-broadcast", areas="distributed", claims="distributed.torch.ddp-buffers",
        target="torch", select="ddp_buffers", cite="https://github.com/pytorch/pytorch/issues/63916",
        bug="DistributedDataParallel never broadcasts rank 0's buffers at the beginning of forward, so each rank "
            "keeps its own BatchNorm running statistics (issue 63916: 'module buffers across the 2 ranks are not "
            "actually synchronized (i.e. they do not take on rank 0's value as expected) before the forward pass').")
def _ddp_skips_buffer_broadcast() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    def make(orig: Any) -> Any:
        def _sync_buffers(self: Any) -> None:
            return None
        return _sync_buffers
    wrap(DDP, "_sync_buffers", make)


@mutant("keras-bn-synchronized-uses-local-stats", areas="distributed",
        claims="distributed.keras.batchnorm-synchronized", target="keras", select="keras_batchnorm",
        cite="https://github.com/keras-team/keras/issues/18667",
        bug="BatchNormalization(synchronized=True) normalises with each replica's local batch statistics, as "
            "Keras 3 did before the synchronized argument was implemented (issue 18667: SyncBatchNormalization "
            "missing in Keras core, fixed by PR 18671).")
def _bn_synchronized_local() -> None:
    import keras

    def make(orig: Any) -> Any:
        def build(self: Any, *args: Any, **kwargs: Any) -> Any:
            self.synchronized = False  # before the first call: the layer computes local moments
            return orig(self, *args, **kwargs)
        return build
    wrap(keras.layers.BatchNormalization, "build", make)


@mutant("tf-distributed-variable-drops-aggregation", areas="distributed",
        claims="distributed.tf.variable-aggregation", target="tensorflow", select="on_read or on_write",
        cite="https://github.com/keras-team/keras/issues/19891",
        bug="A variable created under MirroredStrategy loses its aggregation argument (created with "
            "VariableAggregation.NONE), the bug of keras issue 19891 (fixed by PR 20541: 'Propagate the "
            "aggregation property when creating a tf.Variable'), where metrics aggregated wrongly.")
def _drops_aggregation() -> None:
    import tensorflow as tf
    from tensorflow.python.distribute import mirrored_strategy

    def make(orig: Any) -> Any:
        def _create_variable(self: Any, next_creator: Any, **kwargs: Any) -> Any:
            kwargs["aggregation"] = tf.VariableAggregation.NONE
            return orig(self, next_creator, **kwargs)
        return _create_variable
    wrap(mirrored_strategy.MirroredExtended, "_create_variable", make)
