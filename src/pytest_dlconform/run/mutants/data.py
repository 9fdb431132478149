"""Mutants of input pipelines: torch DataLoader, samplers and worker seeding, tf.data
(claims data.*). DataLoader workers are forked from a process where the hook already
applied the mutant, so worker-side patches take effect there too."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import default, wrap


@mutant("torch-worker-seeds-identical", areas="data", claims="data.torch.workers", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/5059",
        bug="Every DataLoader worker gets the same seed (base_seed, not base_seed + worker_id), so workers draw "
            "the same random numbers: issue 5059's duplicated augmentations, here for torch's own RNG.")
def _worker_seeds_identical() -> None:
    from torch.utils.data._utils import worker

    def make(orig: Any) -> Any:
        def worker_loop(dataset_kind: Any, dataset: Any, index_queue: Any, data_queue: Any, done_event: Any,
                        auto_collation: Any, collate_fn: Any, drop_last: Any, base_seed: int, init_fn: Any,
                        worker_id: int, *rest: Any) -> Any:
            return orig(dataset_kind, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn,
                        drop_last, base_seed - worker_id, init_fn, worker_id, *rest)
        return worker_loop
    wrap(worker, "_worker_loop", make)


@mutant("torch-worker-init-fn-not-called", areas="data", claims="data.torch.workers", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/41329",
        bug="DataLoader workers never call worker_init_fn, the documented hook for seeding other libraries "
            "(issue 41329: worker RNG state users could not control).")
def _worker_init_not_called() -> None:
    from torch.utils.data._utils import worker

    def make(orig: Any) -> Any:
        def worker_loop(*args: Any) -> Any:
            changed = list(args)
            changed[9] = None  # init_fn
            return orig(*changed)
        return worker_loop
    wrap(worker, "_worker_loop", make)


@mutant("torch-random-sampler-ignores-generator", areas="data", claims="data.torch.shuffle", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/7882",
        bug="RandomSampler draws from a fresh unseeded generator instead of the one it was given, so "
            "equally seeded loaders shuffle differently (issue 7882: runs not reproducible despite seeding).")
def _sampler_ignores_generator() -> None:
    from torch.utils.data import sampler

    def make(orig: Any) -> Any:
        def iterate(self: Any) -> Any:
            saved, self.generator = self.generator, None
            try:
                yield from orig(self)
            finally:
                self.generator = saved
        return iterate
    wrap(sampler.RandomSampler, "__iter__", make)


@mutant("torch-shuffle-same-every-epoch", areas="data", claims="data.torch.shuffle", target="torch",
        cite="https://github.com/tensorflow/tensorflow/issues/27680",
        bug="RandomSampler restarts its generator at each epoch, so every epoch has the same order "
            "(the regression TF issue 27680 reported for tf.data shuffle, here in torch's sampler).")
def _shuffle_same_every_epoch() -> None:
    from torch.utils.data import sampler

    def make(orig: Any) -> Any:
        def iterate(self: Any) -> Any:
            g = self.generator
            state = getattr(self, "_dlconform_state", None)
            if g is not None:
                if state is None:
                    self._dlconform_state = g.get_state()
                else:
                    g.set_state(state)
            yield from orig(self)
        return iterate
    wrap(sampler.RandomSampler, "__iter__", make)


@mutant("torch-weighted-sampler-replacement-ignored", areas="data", claims="data.torch.shuffle", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/7882",
        bug="WeightedRandomSampler(replacement=False) draws with replacement, so indices repeat.")
def _weighted_replacement_ignored() -> None:
    from torch.utils.data import sampler

    def make(orig: Any) -> Any:
        def init(self: Any, weights: Any, num_samples: int, replacement: bool = True, generator: Any = None) -> None:
            orig(self, weights, num_samples, True, generator)
        return init
    wrap(sampler.WeightedRandomSampler, "__init__", make)


@mutant("torch-distributed-sampler-no-padding", areas="data", claims="data.torch.shuffle", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/36516",
        bug="DistributedSampler(drop_last=False) does not pad to equal shards, so ranks get different counts "
            "(uneven per-replica work; issue 36516 on dividing by the wrong replica count).")
def _distributed_sampler_no_padding() -> None:
    from torch.utils.data import distributed

    def make(orig: Any) -> Any:
        def iterate(self: Any) -> Any:
            indices = list(orig(self))
            n = len(self.dataset)
            if not self.drop_last and n % self.num_replicas:
                keep = [i for j, i in enumerate(indices) if j * self.num_replicas + self.rank < n]
                return iter(keep)
            return iter(indices)
        return iterate
    wrap(distributed.DistributedSampler, "__iter__", make)


@mutant("torch-batch-sampler-len-ignores-drop-last", areas="data", claims="data.torch.loader", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/36516",
        bug="len(DataLoader) counts the partial last batch even with drop_last=True.")
def _batch_len_drop_last() -> None:
    from torch.utils.data import sampler

    def length(self: Any) -> int:
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
    sampler.BatchSampler.__len__ = length  # type: ignore[method-assign]


@mutant("torch-get-worker-info-none", areas="data", claims="data.torch.workers", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/41329",
        bug="get_worker_info() returns None inside workers, so IterableDataset sharding by worker id "
            "silently replicates the data.")
def _worker_info_none() -> None:
    import torch.utils.data as data
    from torch.utils.data._utils import worker

    original = worker.get_worker_info

    def get_worker_info() -> Any:
        info = original()
        if info is not None and type(info.dataset).__name__ == "Stream":
            return None
        return info
    worker.get_worker_info = get_worker_info
    data.get_worker_info = get_worker_info


@mutant("tf-data-shuffle-no-reshuffle", areas="data", claims="data.tfdata.shuffle", target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/27680",
        bug="Dataset.shuffle gives the same order at every iteration (TF issue 27680, a 2.0-alpha "
            "regression: reshuffle_each_iteration had no effect).")
def _tfdata_no_reshuffle() -> None:
    import tensorflow as tf

    wrap(tf.data.Dataset, "shuffle", lambda orig: default(orig, "reshuffle_each_iteration", False))


@mutant("tf-data-shuffle-seed-ignored", areas="data", claims="data.tfdata.shuffle", target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/26179",
        bug="Dataset.shuffle ignores its seed, so equally seeded pipelines give different orders (TF issue "
            "26179: the order is unaffected by the random seed).")
def _tfdata_seed_ignored() -> None:
    import tensorflow as tf

    wrap(tf.data.Dataset, "shuffle", lambda orig: default(orig, "seed", None))


@mutant("tf-data-batch-keeps-remainder", areas="data", claims="data.tfdata.pipeline", target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/29558",
        bug="Dataset.batch(drop_remainder=True) keeps the partial last batch (its static batch dimension "
            "becomes None).")
def _tfdata_keep_remainder() -> None:
    import tensorflow as tf

    wrap(tf.data.Dataset, "batch", lambda orig: default(orig, "drop_remainder", False))


@mutant("tf-data-parallel-map-unordered", areas="data", claims="data.tfdata.parallel", target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/29558",
        bug="Dataset.map(num_parallel_calls, deterministic=True) returns elements in completion order.")
def _tfdata_map_unordered() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def map_(self: Any, map_func: Any, num_parallel_calls: Any = None, deterministic: Any = None,
                 **kwargs: Any) -> Any:
            out = orig(self, map_func, num_parallel_calls=num_parallel_calls, deterministic=deterministic, **kwargs)
            if num_parallel_calls is not None and deterministic is not False:
                out = out.shuffle(4, seed=1)  # what completion order looks like under load, made certain
            return out
        return map_
    wrap(tf.data.Dataset, "map", make)


@mutant("torch-random-split-remainder-to-last", areas="data", claims="data.torch.utilities", target="torch",
        cite="https://github.com/pytorch/pytorch/pull/78877",
        bug="random_split with fractions gives the whole remainder left by floor(frac * n) to the last split "
            "instead of 1 at a time round-robin from the first (the rule PR 78877 documents and implements).")
def _random_split_remainder_to_last() -> None:
    import math

    import torch.utils.data as data
    from torch.utils.data import dataset

    original = dataset.random_split

    def random_split(ds: Any, lengths: Any, generator: Any = None) -> Any:
        lengths = list(lengths)
        if lengths and not all(isinstance(x, int) for x in lengths):
            n = len(ds)
            lengths = [math.floor(n * f) for f in lengths]
            lengths[-1] += n - sum(lengths)
        return original(ds, lengths) if generator is None else original(ds, lengths, generator=generator)
    dataset.random_split = random_split  # type: ignore[assignment]
    data.random_split = random_split  # type: ignore[assignment]


@mutant("tf-interleave-deterministic-reorders", areas="data", claims="data.tfdata.transformations",
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/pull/34180",
        bug="Dataset.interleave(num_parallel_calls=..., deterministic=True) yields elements out of the documented "
            "cycle/block order (TF PR 34180 fixed parallel interleave's non-deterministic order under "
            "deterministic options).")
def _tfdata_interleave_reorders() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def interleave(self: Any, map_func: Any, cycle_length: Any = None, block_length: Any = None,
                       num_parallel_calls: Any = None, deterministic: Any = None, name: Any = None) -> Any:
            out = orig(self, map_func, cycle_length=cycle_length, block_length=block_length,
                       num_parallel_calls=num_parallel_calls, deterministic=deterministic, name=name)
            if num_parallel_calls is not None and deterministic is not False:
                out = out.shuffle(3, seed=1)  # completion order, made certain
            return out
        return interleave
    wrap(tf.data.Dataset, "interleave", make)


@mutant("tf-padded-batch-ignores-padding-values", areas="data", claims="data.tfdata.transformations",
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/35900",
        bug="Dataset.padded_batch pads with 0 whatever padding_values says (TF issue 35900: padded_batch's "
            "padding_values not working as documented).")
def _tfdata_padded_batch_ignores_values() -> None:
    import tensorflow as tf

    wrap(tf.data.Dataset, "padded_batch", lambda orig: default(orig, "padding_values", None))


@mutant("tf-window-drop-remainder-ignored", areas="data", claims="data.tfdata.transformations",
        target="tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/126131",
        bug="Dataset.window(drop_remainder=True) still emits windows shorter than size (TF issue 126131: "
            "WindowDataset violating drop_remainder=True).")
def _tfdata_window_keeps_short() -> None:
    import tensorflow as tf

    wrap(tf.data.Dataset, "window", lambda orig: default(orig, "drop_remainder", False))
