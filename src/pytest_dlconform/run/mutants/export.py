"""Mutants of export formats and checkpoints: torch.save/load, TorchScript, torch.export,
ONNX, SavedModel, .keras, TFLite (claims export.*). Several apply in the fresh interpreter
that loads the artifact, which the hook reaches like any other process."""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import default, wrap


@mutant("torch-load-weights-only-default-false", areas="export", claims="export.state-dict.weights-only",
        target="torch", cite="https://github.com/pytorch/pytorch/issues/151582",
        bug="torch.load defaults to weights_only=False again (the default flipped to True in torch 2.6; "
            "before it, loading a file ran arbitrary pickled code).")
def _load_unsafe_default() -> None:
    import torch

    def make(orig: Any) -> Any:
        def load(f: Any, *args: Any, weights_only: Any = None, **kwargs: Any) -> Any:
            return orig(f, *args, weights_only=False if weights_only is None else weights_only, **kwargs)
        return load
    wrap(torch, "load", make)


@mutant("torch-load-weights-only-ignored", areas="export", claims="export.state-dict.weights-only", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/151582",
        bug="torch.load(weights_only=True) unpickles arbitrary globals (the safety the weights_only loader "
            "promises is gone).")
def _load_weights_only_ignored() -> None:
    import torch

    wrap(torch, "load", lambda orig: default(orig, "weights_only", False))


@mutant("torch-state-dict-drops-buffers", areas=("export", "modules"),
        claims=("export.state-dict.*", "modules.torch.module"), target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/105233",
        bug="Module.state_dict leaves out persistent buffers (running statistics), so a restored model "
            "normalises with fresh statistics (issue 105233: buffers missing from state_dict).")
def _state_dict_drops_buffers() -> None:
    import torch.nn as nn

    def make(orig: Any) -> Any:
        def save_to_state_dict(self: Any, destination: Any, prefix: str, keep_vars: bool) -> None:
            orig(self, destination, prefix, keep_vars)
            for name in list(self._buffers):
                destination.pop(prefix + name, None)
        return save_to_state_dict
    wrap(nn.Module, "_save_to_state_dict", make)


@mutant("torch-load-state-dict-strict-ignored", areas="export", claims="export.state-dict.*", target="torch",
        select="torch", cite="https://github.com/pytorch/pytorch/issues/105233",
        bug="load_state_dict silently skips buffers (strict loading not enforced), so running statistics "
            "stay at their initial values after a restore.")
def _load_state_dict_skips_buffers() -> None:
    import torch.nn as nn

    def make(orig: Any) -> Any:
        def load(self: Any, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
            buffers = {n for n, _ in self.named_buffers()}
            return orig(self, {k: v for k, v in state_dict.items() if k not in buffers}, False, assign)
        return load
    wrap(nn.Module, "load_state_dict", make)


@mutant("torch-jit-load-in-training-mode", areas="export", claims="export.torchscript.roundtrip", target="torch",
        cite="https://github.com/pytorch/pytorch/issues/26884",
        bug="torch.jit.load returns the module in training mode whatever mode it was saved in, so dropout "
            "and batch norm behave as in training after loading (issue 26884, and 16742: the training flag not "
            "restored).")
def _jit_load_training() -> None:
    import torch

    def make(orig: Any) -> Any:
        def load(*args: Any, **kwargs: Any) -> Any:
            return orig(*args, **kwargs).train()
        return load
    wrap(torch.jit, "load", make)


@mutant("torch-export-dynamic-shapes-ignored", areas="export",
        claims=("export.torch-export.roundtrip", "export.chain.torch-export-onnx"), target="torch",
        cite="https://github.com/pytorch/pytorch/issues/140011",
        bug="torch.export.export ignores dynamic_shapes and specialises the batch dimension to the example's "
            "(issue 140011: export infers a dynamic shape as a constant).")
def _export_static() -> None:
    import torch

    wrap(torch.export, "export", lambda orig: default(orig, "dynamic_shapes", None))


@mutant("onnx-export-training-mode", areas="export", claims=("export.onnx.roundtrip", "export.chain.*"),
        target="torch", cite="https://github.com/pytorch/pytorch/issues/150842",
        bug="torch.onnx.export traces the module in training mode (dropout and batch statistics in the graph) "
            "instead of the eval mode it was given.")
def _onnx_training() -> None:
    import torch

    def make(orig: Any) -> Any:
        def export(model: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(model, torch.nn.Module):
                model.train()
            return orig(model, *args, **kwargs)
        return export
    wrap(torch.onnx, "export", make)


@mutant("tf-savedmodel-load-perturbs-variables", areas="export",
        claims=("export.savedmodel.*", "export.chain.keras-savedmodel-tflite"), target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/53064",
        bug="tf.saved_model.load restores float variables one float32 ulp-scale step off (restore of a "
            "checkpoint that is not the saved one; issue 53064 shows restores that silently lose state).")
def _savedmodel_perturbed() -> None:
    import tensorflow as tf

    def make(orig: Any) -> Any:
        def load(*args: Any, **kwargs: Any) -> Any:
            obj = orig(*args, **kwargs)
            found = list(getattr(obj, "variables", ()))
            found += list(dict(getattr(obj, "state", None) or {}).values())
            for fn in getattr(obj, "signatures", {}).values():
                found += list(getattr(fn, "variables", ()))
            seen: set[int] = set()
            for v in found:
                if isinstance(v, tf.Variable) and v.dtype.is_floating and id(v) not in seen:
                    seen.add(id(v))
                    v.assign(v * (1 + 2**-10))
            return obj
        return load
    wrap(tf.saved_model, "load", make)


@mutant("keras-load-model-resets-optimizer", areas="export", claims="export.keras.roundtrip", target="keras",
        cite="https://github.com/tensorflow/tensorflow/issues/52368",
        bug="keras.models.load_model returns a model whose optimizer starts fresh (issue 52368, "
            "tf-keras 70: load_model resets the optimizer's state).")
def _keras_load_resets_optimizer() -> None:
    import keras

    def make(orig: Any) -> Any:
        def load_model(*args: Any, **kwargs: Any) -> Any:
            model = orig(*args, **kwargs)
            opt = getattr(model, "optimizer", None)
            if opt is not None and getattr(opt, "variables", None):
                for v in opt.variables:
                    v.assign(keras.ops.zeros_like(v))
            return model
        return load_model
    wrap(keras.models, "load_model", make)
    keras.saving.load_model = keras.models.load_model


@mutant("tflite-converter-drops-optimizations", areas="export",
        claims=("export.tflite.roundtrip", "export.chain.keras-savedmodel-tflite"), target="tensorflow",
        cite="https://github.com/tensorflow/tensorflow/issues/44670",
        bug="TFLiteConverter quantises float weights to float16 even when no optimisation was requested, so "
            "the float model's outputs drift beyond float32 error.")
def _tflite_float16() -> None:
    import tensorflow as tf

    cls = tf.lite.TFLiteConverter

    def patch(name: str) -> None:
        def make(orig: Any) -> Any:
            def build(*args: Any, **kwargs: Any) -> Any:
                conv = orig(*args, **kwargs)
                if not conv.optimizations:
                    conv.optimizations = [tf.lite.Optimize.DEFAULT]
                    conv.target_spec.supported_types = [tf.float16]
                return conv
            return build
        original = getattr(cls, name).__func__
        setattr(cls, name, classmethod(make(lambda *a, **k: original(cls, *a[1:], **k))))
    for name in ("from_saved_model", "from_keras_model", "from_concrete_functions"):
        patch(name)
