"""Mutants of mixed precision: torch GradScaler and autocast, Keras dtype policies and the
LossScaleOptimizer (claims precision.*)."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

SCALER = "https://github.com/pytorch/pytorch/pull/26512"  # the gradient scaling API and its update rule


@mutant("torch-gradscaler-growth-interval-off-by-one", areas="precision", claims="precision.torch.grad-scaler",
        target="torch", cite="https://github.com/pytorch/pytorch/issues/42226",
        bug="GradScaler grows the scale after growth_interval + 1 clean steps (issue 42226: the documented "
            "count of consecutive clean iterations was itself mis-stated).")
def _scaler_growth_off_by_one() -> None:
    import torch

    def make(orig: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            self._growth_interval += 1
        return init
    wrap(torch.amp.GradScaler, "__init__", make)


@mutant("torch-gradscaler-no-backoff", areas="precision", claims="precision.torch.grad-scaler", target="torch",
        cite=SCALER, bug="GradScaler.update keeps the scale after an inf/NaN step instead of multiplying it by "
                         "backoff_factor (the dynamic rule PR 26512 defines).")
def _scaler_no_backoff() -> None:
    import torch

    def make(orig: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            self._backoff_factor = 1.0
        return init
    wrap(torch.amp.GradScaler, "__init__", make)


@mutant("torch-gradscaler-steps-on-inf", areas="precision", claims="precision.torch.grad-scaler", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/67590",
        bug="GradScaler.step runs optimizer.step even when the unscaled gradients hold inf/NaN (issue 67590: "
            "callers cannot tell whether the step ran; PR 26512's skip_if_inf contract).")
def _scaler_steps_on_inf() -> None:
    import torch

    def make(orig: Any) -> Any:
        def maybe_step(self: Any, optimizer: Any, optimizer_state: Any, *args: Any, **kwargs: Any) -> Any:
            return optimizer.step(*args, **kwargs)
        return maybe_step
    wrap(torch.amp.GradScaler, "_maybe_opt_step", make)


@mutant("torch-gradscaler-scale-not-applied", areas="precision", claims="precision.torch.grad-scaler",
        target="torch", cite=SCALER,
        bug="GradScaler.scale returns the loss unscaled while unscale_ still divides by the scale.")
def _scaler_scale_identity() -> None:
    import torch

    def make(orig: Any) -> Any:
        def scale(self: Any, outputs: Any) -> Any:
            orig(self, outputs)  # keeps the lazy initialisation of the scale
            return outputs
        return scale
    wrap(torch.amp.GradScaler, "scale", make)


@mutant("torch-autocast-cpu-default-float16", areas="precision", claims="precision.torch.*", target="torch",
        cite="https://github.com/pytorch/pytorch/pull/63534",
        bug="torch.autocast('cpu') defaults to float16 instead of bfloat16 (the default PR 63534 changed).")
def _autocast_cpu_float16() -> None:
    import torch

    def make(orig: Any) -> Any:
        def init(self: Any, device_type: str, dtype: Any = None, *args: Any, **kwargs: Any) -> None:
            if device_type == "cpu" and dtype is None:
                dtype = torch.float16
            orig(self, device_type, dtype, *args, **kwargs)
        return init
    wrap(torch.autocast, "__init__", make)


@mutant("torch-autocast-enabled-false-ignored", areas="precision", claims="precision.torch.*", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/105682",
        bug="torch.autocast(enabled=False) leaves the enclosing autocast region active, so ops keep running in "
            "the low-precision dtype (issue 105682: autocast regions computing in an unexpected dtype).")
def _autocast_disable_ignored() -> None:
    import torch

    def make(orig: Any) -> Any:
        def init(self: Any, device_type: str, dtype: Any = None, enabled: bool = True, *args: Any,
                 **kwargs: Any) -> None:
            if not enabled and torch.is_autocast_enabled(device_type):
                enabled = True
                dtype = dtype or torch.get_autocast_dtype(device_type)
            orig(self, device_type, dtype, enabled, *args, **kwargs)
        return init
    wrap(torch.autocast, "__init__", make)


@mutant("keras-mixed-policy-float16-variables", areas="precision", claims="precision.keras.*", target="keras",
        cite="https://github.com/tensorflow/tensorflow/pull/32269",
        bug="The mixed_float16 policy creates float16 variables (variable dtype = compute dtype), the "
            "difference between the old float16 and the mixed_* policies PR 32269 introduced.")
def _keras_policy_float16_vars() -> None:
    from keras.src.dtype_policies import dtype_policy

    cls = dtype_policy.DTypePolicy
    original = cls.variable_dtype

    def variable_dtype(self: Any) -> Any:
        return self.compute_dtype if self.name.startswith("mixed_") else original.fget(self)
    cls.variable_dtype = property(variable_dtype)


@mutant("keras-loss-scale-no-growth", areas="precision", claims="precision.keras.loss-scale-optimizer",
        target="keras", cite="https://github.com/keras-team/tf-keras/issues/644",
        bug="LossScaleOptimizer never raises the loss scale after dynamic_growth_steps finite steps "
            "(issue 644: the dynamic scale stuck at a bound).")
def _lso_no_growth() -> None:
    import keras

    def make(orig: Any) -> Any:
        def init(self: Any, inner_optimizer: Any, initial_scale: float = 32768.0, dynamic_growth_steps: int = 2000,
                 name: Any = None, **kwargs: Any) -> None:
            orig(self, inner_optimizer, initial_scale, 2**31 - 1, name, **kwargs)
        return init
    wrap(keras.optimizers.LossScaleOptimizer, "__init__", make)


@mutant("keras-loss-scale-applies-non-finite", areas="precision", claims="precision.keras.*", target="keras",
        cite="https://github.com/keras-team/tf-keras/issues/644",
        bug="LossScaleOptimizer applies a step whose gradients are not finite instead of skipping it and "
            "halving the scale (issue 644: LossScaleOptimizer fails to prevent overflow).")
def _lso_applies_non_finite() -> None:
    import keras

    wrap(keras.optimizers.LossScaleOptimizer, "check_finite", lambda orig: lambda self, grads: True)


@mutant("torch-autocast-cache-ignores-grad-mode", areas="precision", claims="precision.torch.autocast-autograd",
        target="torch", cite="https://github.com/pytorch/pytorch/issues/112583",
        bug="Autocast's weight cache keeps the low-precision cast of a weight made under torch.no_grad or "
            "torch.inference_mode, and the next forward in grad mode in the same region reuses it: the weight "
            "gets no gradient (issues 65766, 112583, 158232; fixed by PRs 113685 and 165068).")
def _autocast_cache_ignores_grad_mode() -> None:
    import torch

    cache: dict[int, Any] = {}

    def make_linear(orig: Any) -> Any:
        def linear(input: Any, weight: Any, bias: Any = None) -> Any:
            kind = weight.device.type
            if (torch.is_autocast_enabled(kind) and torch.is_autocast_cache_enabled() and weight.is_leaf
                    and weight.requires_grad and weight.dtype == torch.float32):
                low = torch.get_autocast_dtype(kind)
                weight = cache.setdefault(id(weight), weight.to(low))  # cast in whatever grad mode is on
            return orig(input, weight, bias)
        return linear

    def make_exit(orig: Any) -> Any:
        def exit_(self: Any, *args: Any) -> Any:
            out = orig(self, *args)
            if not torch.is_autocast_enabled(self.device):
                cache.clear()  # the region's end drops the cache, as the real one does
            return out
        return exit_

    wrap(torch.nn.functional, "linear", make_linear)
    wrap(torch.autocast, "__exit__", make_exit)
