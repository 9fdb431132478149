"""Mutants of the rest of the tf.data API (claims data.tfdata.api-*): ignore_errors, cache,
Dataset.random, rejection_resample, FixedLengthRecordDataset and with_options, each modelled on a
real tf.data bug or report (cited)."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import default, wrap


@mutant("tf-data-ignore-errors-stops", areas="data", claims="data.tfdata.api-elements", target="tensorflow",
        select="ignore_errors or elements_docstring", cite="https://github.com/tensorflow/tensorflow/issues/41530",
        bug="Dataset.ignore_errors ends the dataset at the first failing element instead of dropping it and going "
            "on (issue 41530: elements after an error were lost under ignore_errors).")
def _tfdata_ignore_errors_stops() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def ignore_errors(self: Any, log_warning: bool = False, name: Any = None) -> Any:
            src = self

            def gen() -> Any:
                it = iter(src)
                while True:
                    try:
                        yield next(it)
                    except (StopIteration, tf.errors.OpError):
                        return
            return tf.data.Dataset.from_generator(gen, output_signature=src.element_spec)
        return ignore_errors
    wrap(tf.data.Dataset, "ignore_errors", make)


@mutant("tf-data-cache-not-reused", areas="data", claims="data.tfdata.api-persistence", target="tensorflow",
        select="cache", cite="https://github.com/tensorflow/tensorflow/issues/20930",
        bug="Dataset.cache() does not serve later iterations from the cache, so the input pipeline runs again "
            "every epoch (issue 20930: a re-initialized iterator did not use the cached dataset).")
def _tfdata_cache_not_reused() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def cache(self: Any, filename: Any = "", name: Any = None) -> Any:
            return self
        return cache
    wrap(tf.data.Dataset, "cache", make)


@mutant("tf-data-random-rerandomize-ignored", areas="data", claims="data.tfdata.api-random", target="tensorflow",
        select="random", cite="https://github.com/tensorflow/tensorflow/issues/44195",
        bug="Dataset.random ignores rerandomize_each_iteration=True and repeats the same values every epoch "
            "(issue 44195: random ops gave the same values on every iteration over a dataset).")
def _tfdata_random_rerandomize_ignored() -> None:
    import tensorflow as tf

    original = tf.data.Dataset.random
    tf.data.Dataset.random = staticmethod(default(original, "rerandomize_each_iteration", False))


@mutant("tf-data-rejection-resample-ignores-target", areas="data", claims="data.tfdata.api-random",
        target="tensorflow", select="rejection_resample",
        cite="https://github.com/tensorflow/tensorflow/issues/28598",
        bug="Dataset.rejection_resample passes the input through with its class, so the output keeps the initial "
            "distribution instead of reaching target_dist (issue 28598: 'rejection resample not producing the "
            "proper target distribution').")
def _tfdata_rejection_resample_ignores_target() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def rejection_resample(self: Any, class_func: Any, target_dist: Any, initial_dist: Any = None,
                               seed: Any = None, name: Any = None) -> Any:
            return self.map(lambda *x: (class_func(*x), x[0] if len(x) == 1 else x))
        return rejection_resample
    wrap(tf.data.Dataset, "rejection_resample", make)


@mutant("tf-fixed-length-header-kept-compressed", areas="data", claims="data.tfdata.api-readers",
        target="tensorflow", select="fixed_length", cite="https://github.com/tensorflow/tensorflow/pull/21861",
        bug="FixedLengthRecordDataset with a compression_type does not skip header_bytes: the compressed stream "
            "cannot seek, so PR 21861's compressed path has to read and drop the header itself; forgetting "
            "that shifts every record.")
def _tfdata_fixed_length_header_kept() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def init(self: Any, filenames: Any, record_bytes: Any, header_bytes: Any = None, footer_bytes: Any = None,
                 buffer_size: Any = None, compression_type: Any = None, num_parallel_reads: Any = None,
                 name: Any = None) -> None:
            if compression_type:
                header_bytes = None
            orig(self, filenames, record_bytes, header_bytes=header_bytes, footer_bytes=footer_bytes,
                 buffer_size=buffer_size, compression_type=compression_type, num_parallel_reads=num_parallel_reads,
                 name=name)
        return init
    wrap(tf.data.FixedLengthRecordDataset, "__init__", make)


@mutant("tf-data-with-options-dropped", areas="data", claims="data.tfdata.api-structure", target="tensorflow",
        select="options", cite="https://github.com/tensorflow/tensorflow/pull/48341",
        bug="Dataset.with_options returns the dataset without the options, so options() and the pipeline never "
            "see them (PR 48341 fixed options that were not applied to a dataset copied to another device).")
def _tfdata_with_options_dropped() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def with_options(self: Any, options: Any, name: Any = None) -> Any:
            return self
        return with_options
    wrap(tf.data.Dataset, "with_options", make)
