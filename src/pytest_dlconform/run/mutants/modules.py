"""Mutants of layers and modules: dropout, batch normalisation, spectral normalisation,
gradient checkpointing, torch.nn.Module registration, Keras callbacks (claims modules.*)."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import default, wrap

# ----------------------------------------------------------------- dropout


@mutant("torch-dropout-no-rescale", areas="modules", claims="modules.dropout", target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/pull/10417",
        bug="F.dropout keeps the surviving elements unscaled (no 1/(1-p)); the functional dropout's "
            "documented contract was debated and mis-stated in the PR that fixed its docs.")
def _torch_dropout_no_rescale() -> None:
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
            out = orig(input, p, training, inplace)
            return out * (1 - p) if training and 0 < p < 1 else out
        return dropout
    wrap(F, "dropout", make)


@mutant("torch-dropout-active-in-eval", areas="modules", claims="modules.dropout", target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/pull/10417",
        bug="nn.Dropout ignores eval(): the module passes training=True to F.dropout (the functional's "
            "training default, which the PR above shows users confused with the module's mode).")
def _torch_dropout_active_in_eval() -> None:
    import torch.nn as nn
    import torch.nn.functional as F

    nn.Dropout.forward = lambda self, input: F.dropout(input, self.p, True, self.inplace)  # type: ignore[method-assign]


@mutant("torch-dropout2d-elementwise", areas="modules", claims="modules.dropout", target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/69801",
        bug="Dropout2d zeroes single elements instead of whole channels (issue 69801: Dropout2d does not "
            "drop channels for some input layouts; #77081 a silent behaviour change).")
def _torch_dropout2d_elementwise() -> None:
    import torch.nn.functional as F

    wrap(F, "dropout2d", lambda orig: lambda input, p=0.5, training=True, inplace=False:
         F.dropout(input, p, training, inplace))


@mutant("keras-dropout-rate-is-keep", areas="modules", claims="modules.dropout", target="keras", select="keras",
        cite="https://github.com/tensorflow/tensorflow/pull/24526",
        bug="Keras Dropout reads rate as the keep probability (the keep_prob -> rate change of TF 2.0 that "
            "PR 24526 carried into Keras).")
def _keras_dropout_rate_is_keep() -> None:
    import keras

    def make(orig: Any) -> Any:
        def call(self: Any, inputs: Any, training: Any = False) -> Any:
            rate = self.rate
            self.rate = 1.0 - rate if 0 < rate < 1 else rate
            try:
                return orig(self, inputs, training=training)
            finally:
                self.rate = rate
        return call
    wrap(keras.layers.Dropout, "call", make)


# ----------------------------------------------------------------- batch normalisation


def _biased_correction(F: Any) -> Any:
    import torch

    def make(orig: Any) -> Any:
        def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
                       training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Any:
            out = orig(input, running_mean, running_var, weight, bias, training, momentum, eps)
            if training and running_var is not None:
                with torch.no_grad():
                    dims = [d for d in range(input.dim()) if d != 1]
                    n = input.numel() // input.shape[1]
                    biased = input.double().var(dim=dims, unbiased=False)
                    running_var.sub_((momentum * biased / (n - 1)).to(running_var.dtype))  # unbiased -> biased
            return out
        return batch_norm
    return make


@mutant("torch-bn-running-var-biased", areas="modules", claims="modules.batchnorm", target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/77427",
        bug="BatchNorm averages the biased batch variance into running_var (its docs said biased; the "
            "implementation uses the unbiased estimator: issues 77427, 60528).")
def _torch_bn_running_var_biased() -> None:
    import torch.nn.functional as F

    wrap(F, "batch_norm", _biased_correction(F))


@mutant("torch-bn-momentum-keras-convention", areas="modules", claims="modules.batchnorm", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/issues/77427",
        bug="BatchNorm applies momentum in Keras's convention (running = m * running + (1 - m) * batch), "
            "the mix-up the reproduction in issue 77427 relies on (momentum=1-bn_momentum).")
def _torch_bn_momentum_flipped() -> None:
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
                       training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Any:
            m = 1.0 - momentum if training and running_mean is not None and momentum not in (0.0, 1.0) else momentum
            return orig(input, running_mean, running_var, weight, bias, training, m, eps)
        return batch_norm
    wrap(F, "batch_norm", make)


@mutant("torch-bn-eval-uses-batch-stats", areas="modules", claims="modules.batchnorm", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/issues/3122",
        bug="BatchNorm in eval() normalises with the batch statistics, not the running ones (the "
            "train/eval discrepancy users reported in issue 3122).")
def _torch_bn_eval_batch_stats() -> None:
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
                       training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Any:
            if not training and running_mean is not None and input.numel() > input.shape[1]:
                return orig(input, None, None, weight, bias, True, momentum, eps)
            return orig(input, running_mean, running_var, weight, bias, training, momentum, eps)
        return batch_norm
    wrap(F, "batch_norm", make)


@mutant("keras-bn-frozen-updates-statistics", areas="modules", claims="modules.batchnorm", target="keras",
        select="keras", cite="https://github.com/keras-team/keras/issues/6570",
        bug="BatchNormalization with trainable=False still uses batch statistics and updates its moving "
            "statistics (Keras before TF 2.0; issue 6570, PR 9965).")
def _keras_bn_frozen_updates() -> None:
    import keras

    def make(orig: Any) -> Any:
        def call(self: Any, inputs: Any, training: Any = None, mask: Any = None) -> Any:
            if self.trainable or not training:
                return orig(self, inputs, training=training, mask=mask)
            self._trainable = True  # the layer's own flag, as the old behaviour ignored it
            try:
                return orig(self, inputs, training=training, mask=mask)
            finally:
                self._trainable = False
        return call
    wrap(keras.layers.BatchNormalization, "call", make)


@mutant("keras-bn-momentum-torch-convention", areas="modules", claims="modules.batchnorm", target="keras",
        select="keras", cite="https://github.com/keras-team/keras-core/pull/339",
        bug="BatchNormalization updates moving statistics with momentum in torch's convention "
            "(moving = (1-m) * moving + m * batch); keras-core PR 339 fixed its moving-variance update.")
def _keras_bn_momentum_flipped() -> None:
    import keras

    def make(orig: Any) -> Any:
        def call(self: Any, inputs: Any, training: Any = None, mask: Any = None) -> Any:
            m = self.momentum
            self.momentum = 1.0 - m
            try:
                return orig(self, inputs, training=training, mask=mask)
            finally:
                self.momentum = m
        return call
    wrap(keras.layers.BatchNormalization, "call", make)


# ----------------------------------------------------------------- spectral normalisation


@mutant("torch-spectral-norm-no-power-iteration", areas="modules", claims="modules.spectral-norm", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/pull/7298",
        bug="parametrizations.spectral_norm skips the power iteration in training, so u and v never improve "
            "(the initial implementation's update bugs fixed in PR 7298).")
def _torch_sn_no_iteration() -> None:
    from torch.nn.utils import parametrizations

    wrap(parametrizations._SpectralNorm, "_power_method", lambda orig: lambda self, weight_mat, n: None)


@mutant("torch-spectral-norm-no-training-iteration", areas="modules", claims="modules.spectral-norm", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/pull/59564",
        bug="spectral_norm runs no power iteration in a training-mode forward (registration still runs its 15), "
            "so u, v and sigma stay where registration left them (the training/eval handling reworked in PR 59564).")
def _torch_sn_no_training_iteration() -> None:
    from torch.nn.utils import parametrizations

    def make(orig: Any) -> Any:
        def forward(self: Any, weight: Any) -> Any:
            training, self.training = self.training, False  # the forward's own iterations only
            try:
                return orig(self, weight)
            finally:
                self.training = training
        return forward
    wrap(parametrizations._SpectralNorm, "forward", make)


@mutant("torch-spectral-norm-iterates-in-eval", areas="modules", claims="modules.spectral-norm", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/pull/59564",
        bug="spectral_norm keeps running power iterations in eval mode, so the weight changes at inference "
            "(the training/eval handling reworked in PR 59564).")
def _torch_sn_eval_iterates() -> None:
    from torch.nn.utils import parametrizations

    def make(orig: Any) -> Any:
        def forward(self: Any, weight: Any) -> Any:
            if weight.ndim > 1 and not self.training:
                self._power_method(self._reshape_weight_to_matrix(weight), 1)
            return orig(self, weight)
        return forward
    wrap(parametrizations._SpectralNorm, "forward", make)


@mutant("keras-spectral-normalization-one-iteration", areas="modules", claims="modules.spectral-norm",
        target="keras", select="keras", cite="https://github.com/keras-team/keras/issues/18427",
        bug="SpectralNormalization ignores power_iterations and runs a single iteration per call.")
def _keras_sn_one_iteration() -> None:
    import keras

    def make(orig: Any) -> Any:
        def init(self: Any, layer: Any, power_iterations: int = 1, **kwargs: Any) -> None:
            orig(self, layer, power_iterations=1, **kwargs)
        return init
    wrap(keras.layers.SpectralNormalization, "__init__", make)


# ----------------------------------------------------------------- checkpointing (recomputation)


@mutant("torch-checkpoint-no-rng-preservation", areas="modules", claims="modules.checkpointing", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/pull/14253",
        bug="torch.utils.checkpoint recomputes dropout with a fresh RNG state (preserve_rng_state ignored), "
            "so gradients differ from the plain run: the bug PR 14253 added preserve_rng_state for.")
def _torch_checkpoint_rng() -> None:
    import torch.utils.checkpoint as cp

    wrap(cp, "checkpoint", lambda orig: default(orig, "preserve_rng_state", False))


@mutant("tf-recompute-grad-is-identity", areas="modules", claims="modules.checkpointing", target="tensorflow",
        select="tf or tensorflow", cite="https://github.com/tensorflow/tensorflow/issues/36981",
        bug="tf.recompute_grad returns the function unchanged: nothing is recomputed and no memory saved "
            "(issue 36981: recompute_grad does not save memory).")
def _tf_recompute_identity() -> None:
    import tensorflow as tf

    tf.recompute_grad = lambda f: f


# ----------------------------------------------------------------- torch.nn.Module


@mutant("torch-non-persistent-buffer-in-state-dict", areas=("modules", "export"),
        claims=("modules.torch.module", "export.state-dict.*"), target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/pull/37191",
        bug="register_buffer(persistent=False) is ignored: the buffer appears in state_dict (the flag "
            "PR 37191 introduced).")
def _torch_persistent_ignored() -> None:
    import torch.nn as nn

    def make(orig: Any) -> Any:
        def register_buffer(self: Any, name: str, tensor: Any, persistent: bool = True) -> None:
            orig(self, name, tensor, persistent=True)
        return register_buffer
    wrap(nn.Module, "register_buffer", make)


@mutant("torch-to-skips-buffers", areas="modules", claims="modules.torch.module", target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/pull/36623",
        bug="Module.to(dtype) converts parameters but leaves floating buffers in their old dtype "
            "(buffers and parameters were handled differently by .to/_apply until PR 36623).")
def _torch_to_skips_buffers() -> None:
    import torch
    import torch.nn as nn

    def make(orig: Any) -> Any:
        def to(self: Any, *args: Any, **kwargs: Any) -> Any:
            saved = {name: b.dtype for name, b in self.named_buffers() if b is not None and b.is_floating_point()}
            out = orig(self, *args, **kwargs)
            for name, b in list(out.named_buffers()):
                if name in saved and b.dtype != saved[name]:
                    owner = out.get_submodule(name.rpartition(".")[0]) if "." in name else out
                    owner._buffers[name.rpartition(".")[2]] = b.to(saved[name])
            return out
        return to
    del torch
    wrap(nn.Module, "to", make)


@mutant("torch-train-mode-not-recursive", areas=("modules", "export"),
        claims=("modules.dropout", "modules.torch.module", "export.torchscript.*"), target="torch", select="torch",
        cite="https://github.com/meta-pytorch/torchrec/pull/2464",
        bug="Module.train(mode)/eval() sets the flag on the module itself but not on its children "
            "(torchrec PR 2464: a submodule not put into eval mode).")
def _torch_train_not_recursive() -> None:
    import torch.nn as nn

    def train(self: Any, mode: bool = True) -> Any:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        return self
    nn.Module.train = train  # type: ignore[method-assign]


# ----------------------------------------------------------------- Keras callbacks


@mutant("keras-early-stopping-off-by-one", areas="modules", claims="modules.early-stopping", target="keras",
        cite="https://github.com/keras-team/keras/pull/8100",
        bug="EarlyStopping waits one epoch more than patience (the off-by-one fixed in Keras PR 8100).")
def _keras_es_off_by_one() -> None:
    import keras

    def make(orig: Any) -> Any:
        def on_train_begin(self: Any, logs: Any = None) -> None:
            orig(self, logs)
            if not getattr(self, "_dlconform_bumped", False):
                self.patience += 1
                self._dlconform_bumped = True
        return on_train_begin
    wrap(keras.callbacks.EarlyStopping, "on_train_begin", make)


@mutant("keras-early-stopping-min-delta-ignored", areas="modules", claims="modules.early-stopping", target="keras",
        cite="https://github.com/keras-team/keras/issues/4360",
        bug="EarlyStopping counts any change as an improvement, ignoring min_delta "
            "(issue 4360: min_delta does not function correctly).")
def _keras_es_min_delta() -> None:
    import keras

    def make(orig: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            self.min_delta = 0.0
        return init
    wrap(keras.callbacks.EarlyStopping, "__init__", make)


# ----------------------------------------------------------------- torch.optim update rules


def _with_groups(opt: Any, **values: Any) -> list[dict[str, Any]]:
    """Set ``values`` in every param group of ``opt``; returns the old values to restore."""
    saved = [{k: g.get(k) for k in values} for g in opt.param_groups]
    for g in opt.param_groups:
        g.update(values)
    return saved


def _restore(opt: Any, saved: list[dict[str, Any]]) -> None:
    for g, old in zip(opt.param_groups, saved):
        g.update(old)


@mutant("torch-sgd-weight-decay-outside-momentum", areas="modules", claims="modules.torch.optimizer-*",
        target="torch", select="torch", cite="https://github.com/pytorch/pytorch/pull/4429",
        bug="SGD applies weight decay to the parameter after the momentum step (SGDW's decoupled form of "
            "PR 4429) instead of adding lambda theta to the gradient before the momentum buffer, as its "
            "docstring's algorithm does.")
def _torch_sgd_weight_decay_outside_momentum() -> None:
    import torch

    def make(orig: Any) -> Any:
        def step(self: Any, closure: Any = None) -> Any:
            decays = [(g["lr"], g["weight_decay"], [p.detach().clone() for p in g["params"]]) for g in self.param_groups]
            saved = _with_groups(self, weight_decay=0.0)
            try:
                out = orig(self, closure)
            finally:
                _restore(self, saved)
            with torch.no_grad():
                for g, (lr, wd, before) in zip(self.param_groups, decays):
                    for p, old in zip(g["params"], before):  # without momentum both forms agree
                        p.sub_(lr * wd * old)
            return out
        return step
    wrap(torch.optim.SGD, "step", make)


@mutant("torch-adamw-decay-as-l2", areas="modules", claims="modules.torch.optimizer-*", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/pull/41679",
        bug="AdamW adds weight_decay * theta to the gradient (Adam's L2 penalty, which then passes through "
            "the moments) instead of decaying the weights directly: the coupling issue 41477 / PR 41679 "
            "documented for Adam and the reason AdamW (PR 3740) exists.")
def _torch_adamw_decay_as_l2() -> None:
    import torch

    def make(orig: Any) -> Any:
        def step(self: Any, closure: Any = None) -> Any:
            saved = _with_groups(self, decoupled_weight_decay=False)
            try:
                return orig(self, closure)
            finally:
                _restore(self, saved)
        return step
    wrap(torch.optim.AdamW, "step", make)


@mutant("torch-adam-amsgrad-max-not-kept", areas="modules", claims="modules.torch.optimizer-*", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/pull/4034",
        bug="Adam(amsgrad=True) does not keep its running maximum max_exp_avg_sq between steps (the review of "
            "PR 4034: 'You aren't updating the saved max_exp_avg_sq, you're only assigning it to a local'), "
            "so each step takes the maximum against a reset state.")
def _torch_adam_amsgrad_max_not_kept() -> None:
    import torch

    def make(orig: Any) -> Any:
        def step(self: Any, closure: Any = None) -> Any:
            out = orig(self, closure)
            with torch.no_grad():
                for state in self.state.values():
                    if "max_exp_avg_sq" in state:
                        state["max_exp_avg_sq"].zero_()
            return out
        return step
    wrap(torch.optim.Adam, "step", make)


@mutant("torch-foreach-adagrad-maximize-ignored", areas="modules", claims="modules.torch.optimizer-*",
        target="torch", select="torch", cite="https://github.com/pytorch/pytorch/pull/45299",
        bug="The foreach (multi-tensor) Adagrad ignores maximize and descends: a flag the for-loop path honours "
            "and the separately written _multi_tensor path drops (PR 45299 reimplemented every optimizer in a "
            "parallel torch.optim._multi_tensor namespace; issue 114165: foreach and for-loop paths diverge).")
def _torch_foreach_adagrad_maximize_ignored() -> None:
    import torch.optim.adagrad as adagrad

    wrap(adagrad, "_multi_tensor_adagrad", lambda orig: default(orig, "maximize", False))
