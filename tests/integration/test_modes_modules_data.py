"""Wrong twins for the mode checks of the modules, data and precision suites (issue 13).

Each check the suites run per documented mode (``check_*`` in suites/modules and
suites/data) passes the real framework and fails a deliberately wrong implementation of
that mode, with the message asserted: a BatchNorm whose running variance averages the
biased estimate, one that ignores track_running_stats=False in eval(), a Keras
BatchNormalization that ignores trainable=False, a checkpoint that always preserves the RNG
or ignores context_fn, a spectral norm that keeps iterating in eval(), a BatchSampler and a
DataLoader whose len ignores drop_last, loaders and worker seeding that ignore the
generator, workers that do not persist, tf.data shuffles that ignore their seed or reshuffle_each_iteration=False.
"""

from __future__ import annotations

import math

import pytest

from pytest_dlconform.checks.numerics import ToleranceExceeded

torch = pytest.importorskip("torch")

from suites.data import test_torch_loader as loader_suite  # noqa: E402
from suites.modules import test_batchnorm as bn_suite  # noqa: E402
from suites.modules import test_checkpointing as ckpt_suite  # noqa: E402
from suites.modules import test_spectral_norm as sn_suite  # noqa: E402

TORCH_CASE = {"kind": "1d-flat", "shape": (4, 3), "momentum": 0.3, "eps": 1e-5, "affine": True, "steps": 2, "seed": 11}

# ------------------------------------------------------------------ torch BatchNorm


class BiasedRunningVar(torch.nn.BatchNorm1d):
    """Averages the biased batch variance into running_var (the documentation says unbiased)."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        old = self.running_var.clone()
        y = super().forward(x)
        m = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        with torch.no_grad():
            self.running_var.copy_((1 - m) * old + m * x.var(dim=0, unbiased=False))
        return y


class UntrackedEvalUsesInitialStats(torch.nn.BatchNorm1d):
    """track_running_stats=False, but eval() normalises with (0, 1) instead of batch statistics."""

    def forward(self, x):
        if self.training:
            return super().forward(x)
        return torch.nn.functional.batch_norm(x, torch.zeros(x.shape[1]), torch.ones(x.shape[1]), self.weight, self.bias,
                                              False, 0.0, self.eps)


def _torch_layer(cls, track=True):
    layer = cls(3, eps=TORCH_CASE["eps"], momentum=TORCH_CASE["momentum"], affine=True, track_running_stats=track)
    ref = bn_suite.torch_layer(torch, TORCH_CASE, track=track)
    layer.load_state_dict(ref.state_dict())
    return layer


def test_torch_tracking_passes_batchnorm_and_fails_a_biased_running_variance():
    bn_suite.check_torch_tracking(torch, _torch_layer(torch.nn.BatchNorm1d), TORCH_CASE)
    for momentum in (0.3, None):
        case = {**TORCH_CASE, "momentum": momentum}
        layer = _torch_layer(BiasedRunningVar)
        layer.momentum = momentum
        with pytest.raises(ToleranceExceeded, match=r"running_var after training steps \(unbiased batch variance"):
            bn_suite.check_torch_tracking(torch, layer, case)


def test_torch_untracked_passes_batchnorm_and_fails_initial_statistics_in_eval():
    bn_suite.check_torch_untracked(torch, _torch_layer(torch.nn.BatchNorm1d, track=False), TORCH_CASE, "eval")
    with pytest.raises(ToleranceExceeded, match=r"eval\(\) output without running stats, call 0 \(batch statistics\)"):
        bn_suite.check_torch_untracked(torch, _torch_layer(UntrackedEvalUsesInitialStats, track=False), TORCH_CASE, "eval")
    with pytest.raises(AssertionError, match="running_mean and running_var should be None"):
        bn_suite.check_torch_untracked(torch, _torch_layer(torch.nn.BatchNorm1d, track=True), TORCH_CASE, "eval")


# ------------------------------------------------------------------ Keras BatchNormalization

KERAS_CASE = {"shape": (6, 3), "axis": -1, "momentum": 0.8, "eps": 1e-3, "center": True, "scale": True, "steps": 1,
              "seed": 5}


def _ignores_trainable(keras):
    class IgnoresTrainable(keras.layers.BatchNormalization):
        """Runs in training mode with training=True even when frozen."""

        def call(self, inputs, training=None, mask=None):
            frozen = not self.trainable
            if frozen and training:
                self._trainable = True
            try:
                return super().call(inputs, training=training, mask=mask)
            finally:
                if frozen:
                    self._trainable = False

    return IgnoresTrainable


def _keras_twin(keras, cls):
    layer = cls(axis=-1, momentum=KERAS_CASE["momentum"], epsilon=KERAS_CASE["eps"])
    layer.build(KERAS_CASE["shape"])
    ref = bn_suite.keras_layer(keras, KERAS_CASE)
    layer.set_weights(ref.get_weights())
    return layer


def test_keras_modes_pass_batchnormalization_and_fail_one_that_ignores_trainable():
    keras = pytest.importorskip("keras")
    for mode in bn_suite.KERAS_MODES:
        bn_suite.check_keras_mode(keras, bn_suite.keras_layer(keras, KERAS_CASE), KERAS_CASE, mode)
    twin = _ignores_trainable(keras)
    with pytest.raises(ToleranceExceeded, match=r"trainable=False\+training=True: output \(moving statistics: inference mode\)"):
        bn_suite.check_keras_mode(keras, _keras_twin(keras, twin), KERAS_CASE, "trainable=False+training=True")


def test_keras_mask_mode_fails_a_layer_that_ignores_the_mask():
    keras = pytest.importorskip("keras")

    class IgnoresMask(keras.layers.BatchNormalization):
        def call(self, inputs, training=None, mask=None):
            return super().call(inputs, training=training, mask=None)

    case = {**KERAS_CASE, "shape": (5, 4, 3)}
    with pytest.raises(ToleranceExceeded, match=r"mask: output \(batch statistics\)"):
        layer = IgnoresMask(axis=-1, momentum=case["momentum"], epsilon=case["eps"])
        layer.build(case["shape"])
        bn_suite.check_keras_mode(keras, layer, case, "mask")


# ------------------------------------------------------------------ checkpoint


def test_checkpoint_modes_pass_torch_and_fail_wrong_checkpoints():
    from torch.utils.checkpoint import checkpoint

    for mode in ckpt_suite.TORCH_MODES:
        for reentrant in (False, True):
            if reentrant and mode in ("determinism_check=default", "determinism_check=none", "context_fn",
                                      "early_stop=False"):
                continue
            ckpt_suite.check_torch_checkpoint_mode(torch, checkpoint, mode, reentrant, 3, 4, 5)

    def always_preserves(fn, *args, preserve_rng_state=True, **kwargs):
        return checkpoint(fn, *args, preserve_rng_state=True, **kwargs)

    with pytest.raises(ToleranceExceeded, match=r"use_reentrant=False\), preserve_rng_state=False: gradient 0"):
        ckpt_suite.check_torch_checkpoint_mode(torch, always_preserves, "preserve_rng_state=False", False, 3, 4, 5)

    def ignores_context(fn, *args, context_fn=None, **kwargs):
        return checkpoint(fn, *args, **kwargs)

    with pytest.raises(AssertionError, match=r"after the forward pass the contexts entered were \[\], but should be"):
        ckpt_suite.check_torch_checkpoint_mode(torch, ignores_context, "context_fn", False, 3, 4, 5)

    def no_early_stop_anyway(fn, *args, early_stop=True, **kwargs):  # early_stop=False dropped: stops early
        return checkpoint(fn, *args, **kwargs)

    with pytest.raises(AssertionError, match=r"ran to its end 1 times, but should twice \(no early stop\)"):
        ckpt_suite.check_torch_checkpoint_mode(torch, no_early_stop_anyway, "early_stop=False", False, 3, 4, 5)


# ------------------------------------------------------------------ spectral norm


def test_eval_frozen_check_fails_a_spectral_norm_that_iterates_in_eval():
    from torch.nn.utils.parametrizations import spectral_norm

    sn_suite.check_torch_eval_frozen(torch, spectral_norm, 8, 8, 21, 2)

    def iterating(layer):
        module = spectral_norm(layer)
        train = module.train

        def keep_training(mode=True):
            train(mode)
            module.parametrizations.weight[0].train(True)  # the power iteration keeps running
            return module

        module.train = keep_training
        return module

    with pytest.raises(ToleranceExceeded, match=r"eval mode before convergence: weight after 1 forward\(s\)"):
        sn_suite.check_torch_eval_frozen(torch, iterating, 8, 8, 21, 2)


# ------------------------------------------------------------------ DataLoader: drop_last, shuffle, workers


def test_drop_last_check_fails_lengths_that_ignore_drop_last():
    from torch.utils.data import BatchSampler, DataLoader

    loader_suite.check_drop_last(torch, DataLoader, BatchSampler, 11, 4, True, 0)

    class CeilBatchSampler(BatchSampler):
        def __len__(self):
            return math.ceil(len(self.sampler) / self.batch_size)

    class CeilLoader(DataLoader):
        def __len__(self):
            return math.ceil(len(self.dataset) / self.batch_size)

    with pytest.raises(AssertionError, match=r"len\(BatchSampler\) 3 for n=11, batch_size=4, drop_last=True, but should be 2"):
        loader_suite.check_drop_last(torch, DataLoader, CeilBatchSampler, 11, 4, True, 0)
    with pytest.raises(AssertionError, match=r"len\(DataLoader\) 3 for n=11, batch_size=4, drop_last=True, but should be 2"):
        loader_suite.check_drop_last(torch, CeilLoader, BatchSampler, 11, 4, True, 0)
    loader_suite.check_drop_last(torch, CeilLoader, CeilBatchSampler, 12, 4, True, 0)  # no partial batch: no difference


def test_seeded_shuffle_check_fails_a_loader_that_ignores_its_generator():
    from torch.utils.data import DataLoader

    ds = loader_suite.Rows(12, 1, 0)
    for how in ("generator", "manual_seed"):
        loader_suite.check_seeded_shuffle(torch, DataLoader, ds, 3, 99, how)

    def ignores_generator(dataset, generator=None, **kwargs):
        return DataLoader(dataset, **kwargs)

    with pytest.raises(AssertionError, match=r"two loaders seeded the same way \(generator\) must yield the same epochs"):
        loader_suite.check_seeded_shuffle(torch, ignores_generator, ds, 3, 99, "generator")


def _worker_loader(generator_used: bool):
    from torch.utils.data import DataLoader

    def make(ds, generator):
        return DataLoader(ds, batch_size=None, num_workers=2, worker_init_fn=loader_suite._mark_worker,
                          generator=generator if generator_used else None, timeout=60)

    return make


def test_worker_seeding_check_fails_seeding_that_ignores_the_generator():
    with torch.device("cpu"):
        loader_suite.check_worker_seeding(torch, _worker_loader(True), 7, "generator")
        with pytest.raises(AssertionError, match=r"seeded the same way \(generator\) must give the same worker seeds"):
            loader_suite.check_worker_seeding(torch, _worker_loader(False), 7, "generator")


def test_worker_seeding_check_fails_a_missing_worker_init_fn():
    from torch.utils.data import DataLoader

    def make(ds, generator):
        return DataLoader(ds, batch_size=None, num_workers=2, generator=generator, timeout=60)

    with torch.device("cpu"), pytest.raises(AssertionError, match="worker_init_fn must run in each worker with its id"):
        loader_suite.check_worker_seeding(torch, make, 7, "manual_seed")


def test_persistent_workers_check_fails_workers_that_do_not_persist():
    from torch.utils.data import DataLoader

    def loader(persistent):
        return DataLoader(loader_suite.SeedProbe(), batch_size=None, num_workers=2, persistent_workers=persistent,
                          timeout=60)

    loader_suite.check_persistent_workers(torch, loader(True), True)
    loader_suite.check_persistent_workers(torch, loader(False), False)
    with pytest.raises(AssertionError, match=r"persistent_workers=True: worker pids .* should persist"):
        loader_suite.check_persistent_workers(torch, loader(False), True)


# ------------------------------------------------------------------ tf.data shuffle seeding


def test_shuffle_seeding_check_fails_shuffles_that_ignore_seed_or_reshuffle():
    tf = pytest.importorskip("tensorflow")
    from suites.data import test_tfdata as tfdata_suite

    n, buffer = 30, 30

    def right(b, s, r):
        return tf.data.Dataset.range(n).shuffle(b, seed=s, reshuffle_each_iteration=r)

    for seeding in tfdata_suite.SEEDINGS:
        for reshuffle in (True, False):
            tfdata_suite.check_shuffle_seeding(tf, right, n, buffer, 4, seeding, reshuffle)

    def ignores_seed(b, s, r):
        return tf.data.Dataset.range(n).shuffle(b, reshuffle_each_iteration=r)

    tf.random.set_seed(None)
    with pytest.raises(AssertionError, match=r"a second pipeline seeded the same way \(seed=op\) gave epochs"):
        tfdata_suite.check_shuffle_seeding(tf, ignores_seed, n, buffer, 4, "seed=op", True)

    def always_reshuffles(b, s, r):
        return tf.data.Dataset.range(n).shuffle(b, seed=s, reshuffle_each_iteration=True)

    with pytest.raises(AssertionError, match="reshuffle_each_iteration=False must repeat the first epoch's order"):
        tfdata_suite.check_shuffle_seeding(tf, always_reshuffles, n, buffer, 4, "seed=op", False)

    def one_op_seed(b, s, r):  # every shuffle gets the same operation seed under a global seed
        return tf.data.Dataset.range(n).shuffle(b, seed=1234, reshuffle_each_iteration=r)

    with pytest.raises(AssertionError, match=r"two shuffles created after one tf.random.set_seed\(4\) gave the same order"):
        tfdata_suite.check_shuffle_seeding(tf, one_op_seed, n, buffer, 4, "set_seed-distinct-ops", True)

