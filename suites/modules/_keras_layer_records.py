"""The records of suites/modules/test_keras_layer_records.py: one entry per public keras.layers layer
class (aliases deduplicated), each with 1-3 constructor variants covering its documented arguments,
the input shape(s) and value kind, the documented output shape, and the flags the generic
properties need (after the idea of Keras's own ``run_layer_test``: records of constructor inputs
and expectations, one generic checker).

Shapes carry the batch dimension (2). Output shapes are written from each layer's docstring
("Output shape" sections and the formulas of its Args), not read off the layer.

Value kinds of an input: ``float`` (standard normal), ``image`` (uniform in [0, 255]),
``positive`` (uniform in [0.5, 1.5]), ``int:N`` (integers in [1, N)), ``str`` (tokens of
:data:`TOKENS`), ``text`` (space-separated tokens). Flags:

- ``weights``: (trainable, non-trainable) weight counts after the first call;
- ``kind``: ``plain`` (deterministic, no state updated by training=True), ``random`` (draws in
  training mode only; inference is the identity where ``identity``), ``stats`` (training=True
  uses or updates batch statistics / power iterations: output may differ), ``lookup``
  (integer or string outputs: no float policy, no gradient);
- ``mask``: the documented ``supports_masking``; ``propagates``: the input mask passes through
  unchanged (output mask == input mask);
- ``differentiable``: gradients w.r.t. the float inputs and trainable weights exist and are
  checked against finite differences (False for piecewise-constant outputs and for augmentation
  layers, which are the identity in inference);
- ``recurrent``: an RNN (all stateful=False: a stateful RNN carries its state from one inference
  call to the next, which the generic properties do not model; not covered);
- ``call``: ``list`` (the layer takes one list of tensors: merging, Attention, HashedCrossing) or
  ``args`` (positional tensors: MultiHeadAttention(query, value)).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TOKENS = ("a", "b", "c", "zz")
Shape = tuple[int, ...]


@dataclass(frozen=True)
class In:
    shape: Shape
    kind: str = "float"


@dataclass(frozen=True)
class Variant:
    """One constructor call: ``kwargs`` (or ``make(keras) -> kwargs`` for nested layers)."""

    kwargs: Mapping[str, Any] | Callable[[Any], Mapping[str, Any]]
    inputs: tuple[In, ...]
    output: Shape
    weights: tuple[int, int] = (0, 0)
    out_dtype: str = "float"  # float (the compute dtype) or int (an integer dtype)
    call: str = "single"  # single, list, args
    mask: bool = False
    propagates: bool = False
    differentiable: bool = True

    def build_kwargs(self, keras: Any) -> dict[str, Any]:
        return dict(self.kwargs(keras) if callable(self.kwargs) else self.kwargs)


@dataclass(frozen=True)
class Record:
    name: str  # the public keras.layers name (the first of its aliases)
    variants: tuple[Variant, ...]
    kind: str = "plain"  # plain, random, stats, lookup
    identity: bool = False  # random layers: inference is the identity
    recurrent: bool = False
    note: str = ""
    aliases: tuple[str, ...] = field(default=())
    # False where the layer documents no compute_output_shape of its own: it inherits the base
    # Layer's, whose docstring says subclasses "Should implement" it (NotImplementedError);
    # compute_output_spec is checked instead.
    shape_method: bool = True

    @property
    def numeric(self) -> bool:
        return self.kind != "lookup"


def V(kwargs: Any, *inputs: Shape | In, out: Shape, w: tuple[int, int] = (0, 0), **flags: Any) -> Variant:
    ins = tuple(i if isinstance(i, In) else In(i) for i in inputs)
    return Variant(kwargs, ins, out, w, **flags)


def R(name: str, *variants: Variant, **flags: Any) -> Record:
    return Record(name, tuple(variants), **flags)


def inputs_for(record: Record, variant: Variant, index: int, dtype: str = "float32") -> list[Any]:
    """Deterministic inputs of a variant (seeded by the record name and the variant index)."""
    rng = np.random.default_rng(zlib.crc32(f"{record.name}/{index}".encode()))
    out: list[Any] = []
    for spec in variant.inputs:
        kind = spec.kind
        if kind == "float":
            out.append(rng.standard_normal(spec.shape).astype(dtype))
        elif kind == "image":
            out.append(rng.uniform(0, 255, spec.shape).astype(dtype))
        elif kind == "positive":
            out.append(rng.uniform(0.5, 1.5, spec.shape).astype(dtype))
        elif kind.startswith("int:"):
            out.append(rng.integers(1, int(kind[4:]), spec.shape).astype("int64"))
        elif kind == "str":
            out.append(np.array(TOKENS, dtype=object)[rng.integers(0, len(TOKENS), spec.shape)])
        elif kind == "text":
            words = np.array(TOKENS, dtype=object)[rng.integers(0, len(TOKENS), (*spec.shape, 3))]
            out.append(np.array([" ".join(w) for w in words.reshape(-1, 3)], dtype=object).reshape(spec.shape))
        else:  # pragma: no cover - a typo in the table
            raise ValueError(f"unknown input kind {kind!r}")
    return out


# ------------------------------------------------------------------ the table

F1, F2, F3 = (2, 6, 3), (2, 5, 6, 3), (2, 4, 4, 4, 3)  # 1D, 2D, 3D spatial, channels_last
IMG = In((2, 5, 6, 3), "image")

CORE = [
    R("Dense", V({"units": 4}, (2, 3), out=(2, 4), w=(2, 0), mask=True, propagates=True),
      V({"units": 4, "use_bias": False, "activation": "tanh"}, (2, 5, 3), out=(2, 5, 4), w=(1, 0), mask=True,
        propagates=True)),
    R("EinsumDense", V({"equation": "ab,bc->ac", "output_shape": 4, "bias_axes": "c"}, (2, 3), out=(2, 4), w=(2, 0)),
      V({"equation": "abc,cd->abd", "output_shape": (5, 4), "activation": "relu"}, (2, 5, 3), out=(2, 5, 4),
        w=(1, 0))),
    R("Embedding", V({"input_dim": 10, "output_dim": 3}, In((2, 5), "int:10"), out=(2, 5, 3), w=(1, 0)),
      V({"input_dim": 10, "output_dim": 3, "mask_zero": True}, In((2, 5), "int:10"), out=(2, 5, 3), w=(1, 0),
        mask=True)),
    R("ReversibleEmbedding", V({"input_dim": 10, "output_dim": 3}, In((2, 5), "int:10"), out=(2, 5, 3), w=(1, 0)),
      V({"input_dim": 10, "output_dim": 3, "tie_weights": False}, In((2, 5), "int:10"), out=(2, 5, 3), w=(2, 0))),
    R("Identity", V({}, (2, 3), out=(2, 3), mask=True, propagates=True)),
    R("Masking", V({"mask_value": 0.0}, (2, 4, 3), out=(2, 4, 3), mask=True)),
    R("Activation", V({"activation": "tanh"}, (2, 3), out=(2, 3), mask=True, propagates=True),
      V({"activation": "softplus"}, (2, 4, 3), out=(2, 4, 3), mask=True, propagates=True)),
    R("ELU", V({"alpha": 0.5}, (2, 3), out=(2, 3), mask=True, propagates=True)),
    R("LeakyReLU", V({"negative_slope": 0.2}, (2, 3), out=(2, 3), mask=True, propagates=True)),
    R("PReLU", V({}, (2, 4, 3), out=(2, 4, 3), w=(1, 0), mask=True, propagates=True),
      V({"shared_axes": [1], "alpha_initializer": "ones"}, (2, 4, 3), out=(2, 4, 3), w=(1, 0), mask=True,
        propagates=True)),
    R("ReLU", V({}, (2, 3), out=(2, 3), mask=True, propagates=True),
      V({"max_value": 1.0, "negative_slope": 0.1, "threshold": 0.2}, (2, 3), out=(2, 3), mask=True,
        propagates=True)),
    R("Softmax", V({}, (2, 3), out=(2, 3), mask=True),
      V({"axis": 1}, (2, 4, 3), out=(2, 4, 3), mask=True)),
]

CONV = [
    R("Conv1D", V({"filters": 4, "kernel_size": 3}, F1, out=(2, 4, 4), w=(2, 0)),
      V({"filters": 4, "kernel_size": 3, "strides": 2, "padding": "same"}, F1, out=(2, 3, 4), w=(2, 0)),
      V({"filters": 4, "kernel_size": 2, "padding": "causal", "dilation_rate": 2, "use_bias": False}, F1,
        out=(2, 6, 4), w=(1, 0))),
    R("Conv2D", V({"filters": 4, "kernel_size": (2, 3)}, F2, out=(2, 4, 4, 4), w=(2, 0)),
      V({"filters": 4, "kernel_size": 3, "strides": 2, "padding": "same", "data_format": "channels_first"},
        (2, 3, 5, 6), out=(2, 4, 3, 3), w=(2, 0)),
      V({"filters": 4, "kernel_size": 2, "groups": 1, "dilation_rate": (2, 1), "activation": "tanh"}, F2,
        out=(2, 3, 5, 4), w=(2, 0))),
    R("Conv3D", V({"filters": 2, "kernel_size": 2}, F3, out=(2, 3, 3, 3, 2), w=(2, 0)),
      V({"filters": 2, "kernel_size": 3, "strides": 2, "padding": "same", "use_bias": False}, F3,
        out=(2, 2, 2, 2, 2), w=(1, 0))),
    R("Conv1DTranspose", V({"filters": 4, "kernel_size": 3}, (2, 5, 3), out=(2, 7, 4), w=(2, 0)),
      V({"filters": 4, "kernel_size": 3, "strides": 2, "padding": "same"}, (2, 5, 3), out=(2, 10, 4), w=(2, 0))),
    R("Conv2DTranspose", V({"filters": 4, "kernel_size": (2, 3), "strides": 2}, (2, 3, 4, 3), out=(2, 6, 9, 4),
                           w=(2, 0)),
      V({"filters": 4, "kernel_size": 3, "padding": "same", "use_bias": False}, (2, 3, 4, 3), out=(2, 3, 4, 4),
        w=(1, 0))),
    R("Conv3DTranspose", V({"filters": 2, "kernel_size": 2}, (2, 3, 3, 3, 3), out=(2, 4, 4, 4, 2), w=(2, 0))),
    R("DepthwiseConv1D", V({"kernel_size": 3, "depth_multiplier": 2}, F1, out=(2, 4, 6), w=(2, 0)),
      V({"kernel_size": 3, "padding": "same", "use_bias": False}, F1, out=(2, 6, 3), w=(1, 0))),
    R("DepthwiseConv2D", V({"kernel_size": 3}, F2, out=(2, 3, 4, 3), w=(2, 0)),
      V({"kernel_size": (2, 3), "depth_multiplier": 2, "strides": 2, "padding": "same"}, F2, out=(2, 3, 3, 6),
        w=(2, 0))),
    R("SeparableConv1D", V({"filters": 4, "kernel_size": 3}, F1, out=(2, 4, 4), w=(3, 0)),
      V({"filters": 4, "kernel_size": 3, "depth_multiplier": 2, "padding": "same", "use_bias": False}, F1,
        out=(2, 6, 4), w=(2, 0))),
    R("SeparableConv2D", V({"filters": 4, "kernel_size": 3}, F2, out=(2, 3, 4, 4), w=(3, 0)),
      V({"filters": 4, "kernel_size": 3, "depth_multiplier": 2, "strides": 2, "padding": "same"}, F2,
        out=(2, 3, 3, 4), w=(3, 0))),
]


def _pool(name: str, dims: int) -> Record:
    shape, out, same = {1: (F1, (2, 3, 3), (2, 6, 3)), 2: (F2, (2, 2, 3, 3), (2, 5, 6, 3)),
                        3: (F3, (2, 2, 2, 2, 3), (2, 4, 4, 4, 3))}[dims]
    return R(name, V({"pool_size": 2}, shape, out=out),
             V({"pool_size": 3, "strides": 1, "padding": "same"}, shape, out=same))


def _global(name: str, dims: int) -> Record:
    shape = {1: F1, 2: F2, 3: F3}[dims]
    return R(name, V({}, shape, out=(2, 3), mask=name.endswith("1D") and "Average" in name),
             V({"keepdims": True}, shape, out=(2, *([1] * dims), 3), mask=name.endswith("1D") and "Average" in name))


def _adaptive(name: str, dims: int) -> Record:
    shape, size, out = {1: (F1, 3, (2, 3, 3)), 2: ((2, 4, 6, 3), (2, 3), (2, 2, 3, 3)),
                        3: (F3, 2, (2, 2, 2, 2, 3))}[dims]
    return R(name, V({"output_size": size}, shape, out=out),
             V({"output_size": size, "data_format": "channels_first"}, (2, 3, *shape[1:-1]),
               out=(2, 3, *out[1:-1])))


POOL = [
    *[_pool(f"{kind}Pooling{d}D", d) for kind in ("Max", "Average") for d in (1, 2, 3)],
    *[_global(f"Global{kind}Pooling{d}D", d) for kind in ("Max", "Average") for d in (1, 2, 3)],
    *[_adaptive(f"Adaptive{kind}Pooling{d}D", d) for kind in ("Max", "Average") for d in (1, 2, 3)],
]

NORM = [
    R("BatchNormalization", V({}, (2, 3), out=(2, 3), w=(2, 2), mask=True, propagates=True),
      V({"axis": 1, "center": False, "scale": False, "momentum": 0.5, "epsilon": 0.1}, (2, 3, 4), out=(2, 3, 4),
        w=(0, 2), mask=True, propagates=True), kind="stats"),
    R("LayerNormalization", V({}, (2, 4, 3), out=(2, 4, 3), w=(2, 0), mask=True, propagates=True),
      V({"axis": [1, 2], "center": False, "epsilon": 0.1}, (2, 4, 3), out=(2, 4, 3), w=(1, 0), mask=True,
        propagates=True),
      V({"scale": False, "beta_initializer": "ones"}, (2, 4, 3), out=(2, 4, 3), w=(1, 0), mask=True,
        propagates=True)),
    R("GroupNormalization", V({"groups": 2}, (2, 5, 4), out=(2, 5, 4), w=(2, 0), mask=True, propagates=True),
      V({"groups": 3, "axis": 1, "scale": False}, (2, 3, 4), out=(2, 3, 4), w=(1, 0), mask=True,
        propagates=True)),
    R("UnitNormalization", V({}, (2, 3), out=(2, 3), mask=True, propagates=True),
      V({"axis": [1, 2]}, (2, 4, 3), out=(2, 4, 3), mask=True, propagates=True)),
    R("RMSNormalization", V({}, (2, 4, 3), out=(2, 4, 3), w=(1, 0)),
      V({"axis": 1, "epsilon": 0.1}, (2, 4, 3), out=(2, 4, 3), w=(1, 0))),
    R("SpectralNormalization", V(lambda k: {"layer": k.layers.Dense(4)}, (2, 3), out=(2, 4), w=(2, 1)),
      V(lambda k: {"layer": k.layers.Conv2D(2, 2), "power_iterations": 3}, F2, out=(2, 4, 5, 2), w=(2, 1)),
      kind="stats"),
]

QV = ((2, 3, 4), (2, 5, 4))
ATTENTION = [
    R("Attention", V({}, *QV, out=(2, 3, 4), call="list", mask=True),
      V({"use_scale": True, "score_mode": "concat"}, *QV, out=(2, 3, 4), w=(2, 0), call="list", mask=True)),
    R("AdditiveAttention", V({}, *QV, out=(2, 3, 4), w=(1, 0), call="list", mask=True),
      V({"use_scale": False}, *QV, out=(2, 3, 4), call="list", mask=True)),
    R("MultiHeadAttention", V({"num_heads": 2, "key_dim": 3}, *QV, out=(2, 3, 4), w=(8, 0), call="args", mask=True),
      V({"num_heads": 2, "key_dim": 2, "value_dim": 3, "output_shape": 5, "use_bias": False}, *QV, out=(2, 3, 5),
        w=(4, 0), call="args", mask=True)),
    R("GroupQueryAttention", V({"head_dim": 2, "num_query_heads": 2, "num_key_value_heads": 1}, *QV, out=(2, 3, 4),
                               w=(8, 0), call="args", mask=True),
      V({"head_dim": 3, "num_query_heads": 4, "num_key_value_heads": 2, "use_bias": False}, *QV, out=(2, 3, 4),
        w=(4, 0), call="args", mask=True)),
]

SEQ = (2, 3, 2)
RNNS = [
    R("SimpleRNN", V({"units": 4}, SEQ, out=(2, 4), w=(3, 0), mask=True),
      V({"units": 4, "return_sequences": True, "go_backwards": True, "activation": "relu"}, SEQ, out=(2, 3, 4),
        w=(3, 0), mask=True, propagates=True), recurrent=True),
    R("LSTM", V({"units": 4}, SEQ, out=(2, 4), w=(3, 0), mask=True),
      V({"units": 4, "return_sequences": True, "unit_forget_bias": False, "use_bias": False}, SEQ, out=(2, 3, 4),
        w=(2, 0), mask=True, propagates=True), recurrent=True),
    R("GRU", V({"units": 4}, SEQ, out=(2, 4), w=(3, 0), mask=True),
      V({"units": 4, "reset_after": False, "return_sequences": True}, SEQ, out=(2, 3, 4), w=(3, 0), mask=True,
        propagates=True), recurrent=True),
    R("SimpleRNNCell", V(lambda k: {"cell": k.layers.SimpleRNNCell(4)}, SEQ, out=(2, 4), w=(3, 0), mask=True),
      recurrent=True, note="a cell, checked inside keras.layers.RNN (a cell is called one step at a time)"),
    R("LSTMCell", V(lambda k: {"cell": k.layers.LSTMCell(4)}, SEQ, out=(2, 4), w=(3, 0), mask=True),
      recurrent=True, note="a cell, checked inside keras.layers.RNN"),
    R("GRUCell", V(lambda k: {"cell": k.layers.GRUCell(4, reset_after=False)}, SEQ, out=(2, 4), w=(3, 0), mask=True),
      recurrent=True, note="a cell, checked inside keras.layers.RNN"),
    R("StackedRNNCells", V(lambda k: {"cell": k.layers.StackedRNNCells([k.layers.SimpleRNNCell(3),
                                                                        k.layers.GRUCell(4)])},
                           SEQ, out=(2, 4), w=(6, 0), mask=True),
      recurrent=True, note="checked inside keras.layers.RNN"),
    R("RNN", V(lambda k: {"cell": k.layers.LSTMCell(3), "return_sequences": True}, SEQ, out=(2, 3, 3), w=(3, 0),
               mask=True, propagates=True),
      V(lambda k: {"cell": [k.layers.SimpleRNNCell(2), k.layers.SimpleRNNCell(3)], "unroll": True}, SEQ,
        out=(2, 3), w=(6, 0), mask=True), recurrent=True),
    R("Bidirectional", V(lambda k: {"layer": k.layers.LSTM(4)}, SEQ, out=(2, 8), w=(6, 0), mask=True),
      V(lambda k: {"layer": k.layers.GRU(3, return_sequences=True), "merge_mode": "sum"}, SEQ, out=(2, 3, 3),
        w=(6, 0), mask=True, propagates=True), recurrent=True),
    R("TimeDistributed", V(lambda k: {"layer": k.layers.Dense(4)}, SEQ, out=(2, 3, 4), w=(2, 0), mask=True,
                           propagates=True)),
    R("ConvLSTM1D", V({"filters": 2, "kernel_size": 2}, (2, 2, 4, 2), out=(2, 3, 2), w=(3, 0), mask=True),
      V({"filters": 2, "kernel_size": 3, "padding": "same", "return_sequences": True}, (2, 2, 4, 2),
        out=(2, 2, 4, 2), w=(3, 0), mask=True), recurrent=True),
    R("ConvLSTM2D", V({"filters": 2, "kernel_size": 2}, (2, 2, 3, 3, 2), out=(2, 2, 2, 2), w=(3, 0), mask=True),
      recurrent=True),
    R("ConvLSTM3D", V({"filters": 2, "kernel_size": 2}, (2, 2, 3, 3, 3, 2), out=(2, 2, 2, 2, 2), w=(3, 0), mask=True),
      recurrent=True),
]

RESHAPING = [
    R("Reshape", V({"target_shape": (3, 2)}, (2, 6), out=(2, 3, 2)),
      V({"target_shape": (-1, 2)}, (2, 3, 4), out=(2, 6, 2))),
    R("Flatten", V({}, (2, 3, 4), out=(2, 12)), V({"data_format": "channels_first"}, (2, 3, 2, 2), out=(2, 12))),
    R("Permute", V({"dims": (2, 1)}, (2, 3, 4), out=(2, 4, 3)), V({"dims": (3, 1, 2)}, (2, 3, 4, 5), out=(2, 5, 3, 4))),
    R("RepeatVector", V({"n": 3}, (2, 4), out=(2, 3, 4))),
    R("Cropping1D", V({"cropping": (1, 2)}, F1, out=(2, 3, 3))),
    R("Cropping2D", V({"cropping": ((1, 0), (1, 2))}, F2, out=(2, 4, 3, 3)),
      V({"cropping": 1, "data_format": "channels_first"}, (2, 3, 5, 6), out=(2, 3, 3, 4))),
    R("Cropping3D", V({"cropping": 1}, F3, out=(2, 2, 2, 2, 3)),
      V({"cropping": ((1, 0), (0, 1), (2, 1))}, (2, 4, 4, 4, 3), out=(2, 3, 3, 1, 3))),
    R("UpSampling1D", V({"size": 2}, (2, 3, 2), out=(2, 6, 2))),
    R("UpSampling2D", V({}, (2, 2, 3, 2), out=(2, 4, 6, 2)),
      V({"size": (2, 3), "interpolation": "bilinear"}, (2, 2, 3, 2), out=(2, 4, 9, 2))),
    R("UpSampling3D", V({"size": 2}, (2, 2, 2, 2, 3), out=(2, 4, 4, 4, 3))),
    R("ZeroPadding1D", V({"padding": (1, 2)}, (2, 3, 2), out=(2, 6, 2))),
    R("ZeroPadding2D", V({"padding": ((1, 0), (2, 1))}, (2, 2, 3, 2), out=(2, 3, 6, 2)),
      V({"padding": 1, "data_format": "channels_first"}, (2, 2, 2, 3), out=(2, 2, 4, 5))),
    R("ZeroPadding3D", V({"padding": 1}, (2, 2, 2, 2, 3), out=(2, 4, 4, 4, 3))),
]


def _merge(name: str, arity: int = 2) -> Record:
    return R(name, V({}, *[(2, 3)] * arity, out=(2, 3), call="list", mask=True, propagates=True),
             V({}, (2, 4, 3), (2, 1, 3), out=(2, 4, 3), call="list", mask=True))


MERGING = [
    _merge("Add", 3), _merge("Subtract"), _merge("Multiply", 3), _merge("Average"), _merge("Maximum"),
    _merge("Minimum"),
    R("Concatenate", V({}, (2, 3, 2), (2, 3, 4), out=(2, 3, 6), call="list", mask=True, propagates=True),
      V({"axis": 1}, (2, 3, 2), (2, 1, 2), out=(2, 4, 2), call="list", mask=True)),
    R("Dot", V({"axes": 1}, (2, 3), (2, 3), out=(2, 1), call="list", mask=True),
      V({"axes": (1, 1), "normalize": True}, (2, 3, 4), (2, 3, 5), out=(2, 4, 5), call="list", mask=True)),
]

REGULARIZATION = [
    R("Dropout", V({"rate": 0.5, "seed": 1}, (2, 3), out=(2, 3), mask=True, propagates=True),
      V({"rate": 0.3, "noise_shape": (None, 1, 3)}, (2, 4, 3), out=(2, 4, 3), mask=True, propagates=True),
      kind="random", identity=True),
    R("AlphaDropout", V({"rate": 0.3, "seed": 2}, (2, 3), out=(2, 3), mask=True, propagates=True),
      kind="random", identity=True),
    R("GaussianDropout", V({"rate": 0.3, "seed": 3}, (2, 3), out=(2, 3), mask=True, propagates=True),
      kind="random", identity=True),
    R("GaussianNoise", V({"stddev": 0.5, "seed": 4}, (2, 3), out=(2, 3), mask=True, propagates=True),
      kind="random", identity=True),
    R("SpatialDropout1D", V({"rate": 0.5, "seed": 5}, (2, 4, 3), out=(2, 4, 3), mask=True, propagates=True),
      kind="random", identity=True),
    R("SpatialDropout2D", V({"rate": 0.5}, (2, 3, 3, 2), out=(2, 3, 3, 2), mask=True, propagates=True),
      V({"rate": 0.5, "data_format": "channels_first"}, (2, 2, 3, 3), out=(2, 2, 3, 3), mask=True,
        propagates=True), kind="random", identity=True),
    R("SpatialDropout3D", V({"rate": 0.5}, (2, 2, 2, 2, 3), out=(2, 2, 2, 2, 3), mask=True, propagates=True),
      kind="random", identity=True),
    R("ActivityRegularization", V({"l1": 0.01, "l2": 0.02}, (2, 3), out=(2, 3), mask=True, propagates=True)),
]

STR2 = In((2, 3), "str")
PREPROCESSING = [
    R("Normalization", V({"mean": [0.0, 1.0, 2.0], "variance": [1.0, 2.0, 3.0]}, (2, 3), out=(2, 3), mask=True,
                         propagates=True),
      V({"axis": None, "mean": 0.5, "variance": 4.0, "invert": True}, (2, 4, 3), out=(2, 4, 3), mask=True,
        propagates=True)),
    R("Discretization", V({"bin_boundaries": [-0.5, 0.0, 0.5]}, (2, 3), out=(2, 3), out_dtype="int"),
      V({"bin_boundaries": [-0.5, 0.0, 0.5], "output_mode": "count"}, (2, 3), out=(2, 4), differentiable=False),
      kind="lookup"),
    R("Rescaling", V({"scale": 1 / 255}, IMG, out=(2, 5, 6, 3), mask=True, propagates=True),
      V({"scale": [0.5, 1.0, 2.0], "offset": -1.0}, IMG, out=(2, 5, 6, 3), mask=True, propagates=True)),
    R("Resizing", V({"height": 3, "width": 4}, IMG, out=(2, 3, 4, 3)),
      V({"height": 4, "width": 4, "interpolation": "nearest", "crop_to_aspect_ratio": True}, IMG,
        out=(2, 4, 4, 3)),
      V({"height": 3, "width": 8, "pad_to_aspect_ratio": True, "fill_value": 1.0}, IMG, out=(2, 3, 8, 3))),
    R("CenterCrop", V({"height": 3, "width": 4}, IMG, out=(2, 3, 4, 3))),
    R("CategoryEncoding", V({"num_tokens": 5, "output_mode": "multi_hot"}, In((2, 3), "int:5"), out=(2, 5)),
      V({"num_tokens": 5, "output_mode": "one_hot"}, In((2,), "int:5"), out=(2, 5)),
      V({"num_tokens": 5, "output_mode": "count"}, In((2, 3), "int:5"), out=(2, 5)), kind="lookup"),
    R("Hashing", V({"num_bins": 4}, STR2, out=(2, 3), out_dtype="int"),
      V({"num_bins": 4, "salt": 7, "mask_value": "zz"}, STR2, out=(2, 3), out_dtype="int"),
      V({"num_bins": 4, "output_mode": "multi_hot"}, In((2, 3), "int:9"), out=(2, 4)), kind="lookup"),
    R("HashedCrossing", V({"num_bins": 5}, In((2,), "int:9"), In((2,), "int:9"), out=(2,), out_dtype="int",
                          call="list"),
      V({"num_bins": 5, "output_mode": "one_hot"}, In((2,), "int:9"), In((2,), "str"), out=(2, 5), call="list"),
      kind="lookup"),
    R("IntegerLookup", V({"vocabulary": [1, 2, 3]}, In((2, 3), "int:6"), out=(2, 3), out_dtype="int"),
      V({"vocabulary": [1, 2, 3], "output_mode": "multi_hot", "num_oov_indices": 2}, In((2, 3), "int:6"),
        out=(2, 5), out_dtype="int"),
      V({"vocabulary": [1, 2, 3], "invert": True}, In((2, 3), "int:4"), out=(2, 3), out_dtype="int"),
      kind="lookup"),
    R("StringLookup", V({"vocabulary": ["a", "b"]}, STR2, out=(2, 3), out_dtype="int"),
      V({"vocabulary": ["a", "b"], "output_mode": "count", "mask_token": "zz"}, STR2, out=(2, 3), out_dtype="int"),
      V({"vocabulary": ["a", "b", "c"], "output_mode": "tf_idf", "idf_weights": [0.5, 1.0, 2.0]}, STR2,
        out=(2, 4)), kind="lookup"),
    R("TextVectorization", V({"vocabulary": ["a", "b"], "output_sequence_length": 4}, In((2,), "text"),
                             out=(2, 4), out_dtype="int"),
      V({"vocabulary": ["a", "b"], "output_mode": "multi_hot", "ngrams": 2}, In((2,), "text"), out=(2, 3), out_dtype="int"),
      kind="lookup"),
    R("MelSpectrogram", V({"fft_length": 64, "sequence_stride": 16, "sequence_length": 32, "num_mel_bins": 8,
                           "sampling_rate": 1600}, (2, 128), out=(2, 8, 9), differentiable=False),
      V({"fft_length": 32, "sequence_stride": 32, "num_mel_bins": 4, "sampling_rate": 800, "power_to_db": False,
         "mag_exp": 1.0}, (2, 128), out=(2, 4, 5), differentiable=False)),
    R("STFTSpectrogram", V({"frame_length": 16, "frame_step": 8, "fft_length": 16}, (2, 64, 1), out=(2, 7, 9),
                           w=(2, 0)),
      V({"frame_length": 16, "frame_step": 8, "mode": "stft", "window": None, "expand_dims": True}, (2, 64, 1),
        out=(2, 7, 18, 1), w=(2, 0))),
    R("Pipeline", V(lambda k: {"layers": [k.layers.Rescaling(0.5), k.layers.CenterCrop(3, 4)]}, IMG,
                    out=(2, 3, 4, 3)), shape_method=False),
]


def _aug(name: str, *kwargs: Mapping[str, Any], out: Shape = (2, 5, 6, 3)) -> Record:
    return R(name, *[V(dict(k), IMG, out=out, differentiable=False) for k in kwargs], kind="random", identity=True)


AUGMENTATION = [
    _aug("RandomFlip", {"seed": 1}, {"mode": "vertical", "seed": 2}),
    _aug("RandomRotation", {"factor": 0.2, "seed": 1}, {"factor": (-0.1, 0.3), "fill_mode": "constant",
                                                        "interpolation": "nearest"}),
    _aug("RandomZoom", {"height_factor": 0.2}, {"height_factor": (-0.3, -0.1), "width_factor": 0.2,
                                                "fill_mode": "nearest"}),
    _aug("RandomTranslation", {"height_factor": 0.1, "width_factor": 0.2},
         {"height_factor": (-0.2, 0.1), "width_factor": 0.1, "fill_mode": "wrap"}),
    _aug("RandomContrast", {"factor": 0.2}, {"factor": (0.1, 0.4), "value_range": (0, 255)}),
    _aug("RandomBrightness", {"factor": 0.2}, {"factor": (-0.3, 0.1), "value_range": (0, 255)}),
    _aug("AugMix", {"seed": 1}, {"num_chains": 2, "chain_depth": 2, "all_ops": False}),
    _aug("CutMix", {"seed": 1}, {"factor": 0.5}),
    _aug("MixUp", {"seed": 1}, {"alpha": 0.5}),
    _aug("RandAugment", {"seed": 1}, {"num_ops": 1, "factor": 0.3}),
    _aug("RandomColorDegeneration", {"factor": 0.5}),
    _aug("RandomColorJitter", {"brightness_factor": 0.2, "contrast_factor": 0.2}),
    _aug("RandomElasticTransform", {"seed": 1}, {"factor": 0.5, "scale": 0.5}),
    _aug("RandomErasing", {"seed": 1}, {"factor": 0.5, "scale": (0.1, 0.2)}),
    _aug("RandomGaussianBlur", {"seed": 1}, {"factor": 0.5, "kernel_size": 3, "sigma": 1.0}),
    _aug("RandomGrayscale", {"seed": 1}, {"factor": 0.8}),
    _aug("RandomHue", {"factor": 0.5}),
    _aug("RandomInvert", {"seed": 1}, {"factor": 0.8}),
    _aug("RandomPerspective", {"seed": 1}, {"factor": 0.5, "scale": 0.5}),
    _aug("RandomPosterization", {"factor": (1, 4)}),
    _aug("RandomSaturation", {"factor": 0.5}),
    _aug("RandomSharpness", {"factor": 0.5}),
    _aug("RandomShear", {"x_factor": 0.2}, {"x_factor": 0.1, "y_factor": 0.2, "fill_mode": "constant"}),
    _aug("Solarization", {"seed": 1}, {"addition_factor": 0.2, "threshold_factor": 0.5}),
    R("RandomCrop", V({"height": 3, "width": 4}, IMG, out=(2, 3, 4, 3), differentiable=False), kind="random"),
    R("AutoContrast", V({}, IMG, out=(2, 5, 6, 3), differentiable=False),
      V({"value_range": (0, 1)}, In((2, 5, 6, 3), "positive"), out=(2, 5, 6, 3), differentiable=False)),
    R("Equalization", V({}, IMG, out=(2, 5, 6, 3), differentiable=False),
      V({"bins": 16}, IMG, out=(2, 5, 6, 3), differentiable=False)),
    R("ContrastLimitedAdaptiveHistogramEqualization", V({"tile_grid_size": (2, 3)}, IMG, out=(2, 5, 6, 3),
                                                        differentiable=False)),
]

RECORDS: tuple[Record, ...] = (*CORE, *CONV, *POOL, *NORM, *ATTENTION, *RNNS, *RESHAPING, *MERGING, *REGULARIZATION,
                               *PREPROCESSING, *AUGMENTATION)
BY_NAME = {r.name: r for r in RECORDS}
FAMILIES = {"core": CORE, "conv": CONV, "pool": POOL, "norm": NORM, "attention": ATTENTION, "rnn": RNNS,
            "reshaping": RESHAPING, "merging": MERGING, "regularization": REGULARIZATION,
            "preprocessing": PREPROCESSING, "augmentation": AUGMENTATION}

# Public keras.layers layer classes left out, one line each why.
OUT_OF_SCOPE = {
    "Layer": "the abstract base class: no computation of its own",
    "Wrapper": "an abstract base of Bidirectional and TimeDistributed (its call raises NotImplementedError)",
    "InputLayer": "a placeholder made by keras.Input, never called on tensors",
    "Lambda": "wraps arbitrary Python code: its config round trip needs safe_mode=False and deserialises bytecode",
    "JaxLayer": "wraps a JAX function: runs only on the JAX backend",
    "FlaxLayer": "wraps a Flax module: runs only on the JAX backend",
    "TorchModuleWrapper": "wraps a torch.nn.Module: runs only on the torch backend",
    "TFSMLayer": "loads an exported SavedModel endpoint from disk: it has no constructor inputs of its own",
    "MaxNumBoundingBoxes": "acts on bounding-box dictionaries only; images pass through unchanged",
}

# Which recurrent records wrap their layer as keras.layers.RNN(cell=...) (the cells).
RNN_WRAPPED = {"SimpleRNNCell", "LSTMCell", "GRUCell", "StackedRNNCells"}


def layer_class(keras: Any, record: Record) -> Any:
    return keras.layers.RNN if record.name in RNN_WRAPPED else getattr(keras.layers, record.name)
