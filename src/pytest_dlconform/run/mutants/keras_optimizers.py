"""Mutants of keras.optimizers (claims modules.keras.optimizer-update-rules and -config).

Each patches Keras 3's optimizer base class or LossScaleOptimizer the way a reported bug broke
it; the suite's float64 references must notice (suites/modules/test_keras_optimizers.py). The
``select`` expressions pick the suite's tests that reach the patched code and hold on a clean
run (the Nadam rows, a documented divergence, are left out of the shared-options selection).
"""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

CLAIMS = "modules.keras.optimizer-update-rules"
SHARED = "test_keras_optimizer_shared_options and not Nadam"


@mutant("keras-ema-average-starts-at-zero", areas="modules", claims=CLAIMS, target="keras", select=SHARED,
        cite="https://github.com/keras-team/keras/pull/18972",
        bug="use_ema's moving average is not started at the variables' value: the first update blends the "
            "zero-initialised average with ema_momentum (PR 18972: 'the initial state of "
            "_model_variables_moving_average is INCORRECT when using tensorflow backend').")
def _keras_ema_starts_at_zero() -> None:
    from keras.src import ops
    from keras.src.optimizers import base_optimizer

    def make(orig: Any) -> Any:
        def _update_model_variables_moving_average(self: Any, trainable_variables: Any) -> None:
            if not self.use_ema:
                return
            for var, average in zip(trainable_variables, self._model_variables_moving_average):
                if average is not None:
                    m = ops.cast(self.ema_momentum, var.dtype)
                    average.assign(ops.add(ops.multiply(m, average), ops.multiply(ops.subtract(1, m), var)))
        return _update_model_variables_moving_average
    wrap(base_optimizer.BaseOptimizer, "_update_model_variables_moving_average", make)


@mutant("keras-accumulation-counts-real-iterations", areas="modules", claims=CLAIMS, target="keras", select=SHARED,
        cite="https://github.com/keras-team/keras/issues/19990",
        bug="With gradient_accumulation_steps, optimizer.iterations counts every call instead of the updates "
            "(issue 19990 'Gradient accumulation done wrong': Adam 'uses self.iterations which is different in "
            "every accumulation step'; fixed by PR 19998), so bias corrections and step counts run k times fast.")
def _keras_accumulation_real_iterations() -> None:
    from keras.src.optimizers import base_optimizer

    base_optimizer.BaseOptimizer.iterations = property(lambda self: self._iterations)


@mutant("keras-loss-scale-floored-at-one", areas="modules", claims=CLAIMS, target="keras",
        select="test_keras_loss_scale_optimizer",
        cite="https://github.com/keras-team/tf-keras/issues/644",
        bug="LossScaleOptimizer does not lower the loss scale below 1 on non-finite gradients (tf-keras issue "
            "644 'LossScaleOptimizer fails to prevent overflow': the scale is clamped at its lower bound 1).")
def _keras_loss_scale_floored() -> None:
    import keras

    def make(orig: Any) -> Any:
        def apply(self: Any, grads: Any, trainable_variables: Any = None) -> None:
            orig(self, grads, trainable_variables)
            self.dynamic_scale.assign(keras.ops.maximum(self.dynamic_scale, 1.0))
        return apply
    wrap(keras.optimizers.LossScaleOptimizer, "apply", make)


@mutant("keras-deserialize-misses-adamw", areas="modules", claims="modules.keras.optimizer-config", target="keras",
        select="test_keras_optimizer_config_round_trips and AdamW",
        cite="https://github.com/keras-team/keras/issues/18769",
        bug="keras.optimizers.deserialize(keras.optimizers.serialize(AdamW())) returns the string 'AdamW' instead of "
            "an optimizer (issue 18769 'Incorrect optimizer deserialization for AdamW': AdamW missing from the "
            "optimizers' module objects).")
def _keras_deserialize_misses_adamw() -> None:
    from keras.src import optimizers

    optimizers.ALL_OBJECTS_DICT.pop("adamw", None)


@mutant("keras-muon-aspect-ratio-scale", areas="modules", claims=CLAIMS, target="keras",
        select="test_keras_muon_follows",
        cite="https://github.com/keras-team/keras/pull/21859",
        bug="Muon scales its orthogonalised update by the KellerJordan factor max(1, rows/cols)^0.5 instead of "
            "Moonlight's rms_rate * sqrt(max(rows, cols)) (PR 21859 replaced 'max(d_out/d_in, 1)**0.5' by "
            "'max(d_out, d_in) * rate' and added rms_rate).")
def _keras_muon_aspect_ratio_scale() -> None:
    from keras.src.optimizers import muon

    def make(orig: Any) -> Any:
        def lr_adjust(self: Any, x: Any) -> Any:
            if self.rms_rate is None:
                return x
            return x * max(1.0, x.shape[0] / x.shape[1]) ** 0.5
        return lr_adjust
    wrap(muon.Muon, "lr_adjust", make)
