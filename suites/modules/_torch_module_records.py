"""ModuleInfo-style records of every public torch.nn module class (claim modules.torch.module-contract).

After the idea of PyTorch's ModuleInfo table (torch/testing/_internal/common_modules.py): one or more
records per class, each a documented constructor call, the inputs its docstring's Shape section
accepts and the output shape(s) that section states (worked out by hand from the formulas there,
e.g. Conv ``L_out = floor((L_in + 2 p - d (k - 1) - 1) / s + 1)``), plus the flags the generic
properties need. Plain Python data only: nothing here imports torch at import time.

Flags:

- ``random``: the forward draws random numbers in train mode (Dropout family, RReLU, recurrent and
  Transformer layers with dropout > 0); ``random_in_eval``: also in eval mode (FractionalMaxPool);
- ``batch_stats``: running statistics are tracked (BatchNorm*, InstanceNorm* with
  ``track_running_stats=True``): train and eval modes differ, as documented;
- ``lazy``: a Lazy* module, parameters inferred at the first forward;
- input kinds: ``F`` (float, differentiable), ``I`` (integer indices, not differentiable), ``C``
  (a constant given in the record, e.g. EmbeddingBag offsets), ``U`` (MaxUnpool's pooled values and
  indices, made by max pooling a float input: the values are differentiable, the indices are not);
- ``grad``: first-order gradients are checked (False only with a reason, ``no_grad``);
- ``hvp``: the module is twice differentiable at the record's inputs (smooth activations, affine
  maps, convolutions, normalisation, attention): Hessian-vector products are checked;
- ``kinks``: the points where a piecewise definition switches (ReLU at 0, Hardtanh at its bounds):
  inputs are moved at least 0.02 away from them so that finite differences are conclusive;
- error model (float32 against float64, and the rounding of the float64 forward that the finite
  differences allow for): ``ops`` chained elementwise operations per output entry, ``fan`` the length
  of the longest reduction (the fan-in), ``gain`` a bound on the module's amplification of its
  inputs' rounding (normalisation divides by a standard deviation: 4 where the record's inputs have
  a standard deviation of at least 1/4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Inp:
    """One positional input of the forward: kind F (float), I (indices below ``high``), C (constant
    ``value``) or U (MaxUnpool's (values, indices) pair, from max pooling a float input of ``shape``
    with kernel ``high``)."""

    shape: Shape
    kind: str = "F"
    high: int = 0
    value: Any = None
    dtype: str = "float64"


def F(*shape: int) -> Inp:
    return Inp(tuple(shape))


def I(*shape: int, high: int) -> Inp:  # noqa: E743 - the table reads better with a one-letter kind
    return Inp(tuple(shape), "I", high)


def C(value: Any) -> Inp:
    return Inp((), "C", value=value)


def U(*shape: int, kernel: int) -> Inp:
    return Inp(tuple(shape), "U", kernel)


@dataclass(frozen=True)
class Rec:
    """One constructor variant of ``torch.nn.<name>``."""

    name: str
    variant: str
    kwargs: dict[str, Any]
    inputs: tuple[Inp, ...]
    out: tuple[Shape, ...]  # the documented shape of each output (flattened, tensors only)
    args: tuple[Any, ...] = ()
    call_kwargs: dict[str, Any] = field(default_factory=dict)
    build: Callable[[Any], Any] | None = None  # build(torch) for containers and encoder stacks
    call: Callable[..., Any] | None = None  # call(module, *inputs) where there is no forward
    random: bool = False
    random_in_eval: bool = False
    batch_stats: bool = False
    lazy: bool = False
    grad: bool = True
    no_grad: str = ""
    hvp: bool = False
    kinks: tuple[float, ...] = ()
    ops: int = 4
    fan: int = 1
    gain: float = 1.0

    @property
    def id(self) -> str:
        return f"{self.name}-{self.variant}"


def R(name: str, variant: str, kwargs: dict[str, Any], inputs: Any, out: Any, **flags: Any) -> Rec:
    ins = inputs if isinstance(inputs, tuple) else (inputs,)
    outs = out if out and isinstance(out[0], tuple) else (out,)
    return Rec(name, variant, kwargs, ins, tuple(outs), **flags)


def _act(name: str, variant: str = "default", kwargs: dict[str, Any] | None = None, *, shape: Shape = (2, 3, 4),
         out: Shape | None = None, **flags: Any) -> Rec:
    flags.setdefault("hvp", not flags.get("kinks"))
    return R(name, variant, kwargs or {}, F(*shape), out or shape, **flags)


# ---------------------------------------------------------------- builders (containers, stacks)


def _sequential(torch: Any) -> Any:
    nn = torch.nn
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def _sequential_dict(torch: Any) -> Any:
    from collections import OrderedDict

    nn = torch.nn
    return nn.Sequential(OrderedDict([("lin", nn.Linear(3, 4)), ("act", nn.Softplus()), ("out", nn.Linear(4, 2))]))


def _module_list(torch: Any) -> Any:
    nn = torch.nn
    return nn.ModuleList([nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)])


def _module_dict(torch: Any) -> Any:
    nn = torch.nn
    return nn.ModuleDict({"lin": nn.Linear(3, 4), "act": nn.Sigmoid(), "out": nn.Linear(4, 2)})


def _parameter_list(torch: Any) -> Any:
    nn = torch.nn
    return nn.ParameterList([nn.Parameter(torch.randn(3, 4)), nn.Parameter(torch.randn(4))])


def _parameter_dict(torch: Any) -> Any:
    nn = torch.nn
    return nn.ParameterDict({"w": nn.Parameter(torch.randn(3, 4)), "b": nn.Parameter(torch.randn(4))})


def _apply_in_order(module: Any, x: Any) -> Any:
    """ModuleList / ModuleDict have no forward: iterate them in their documented (insertion) order."""
    for m in (module.values() if hasattr(module, "values") else module):
        x = m(x)
    return x


def _affine_list(module: Any, x: Any) -> Any:
    return x @ module[0] + module[1]


def _affine_dict(module: Any, x: Any) -> Any:
    return x @ module["w"] + module["b"]


def _encoder(torch: Any) -> Any:
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0)
    return nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(4), enable_nested_tensor=False)


def _decoder(torch: Any) -> Any:
    nn = torch.nn
    return nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, batch_first=True), num_layers=2)


# ---------------------------------------------------------------- the table

_ACTIVATIONS = [
    _act("CELU", "alpha=0.5", {"alpha": 0.5}, kinks=(0.0,), hvp=False),
    _act("ELU", "default", kinks=(0.0,)),
    _act("ELU", "alpha=0.7,inplace", {"alpha": 0.7, "inplace": True}, kinks=(0.0,)),
    _act("GELU", "none"),
    _act("GELU", "tanh", {"approximate": "tanh"}),
    _act("GLU", "dim=-1", out=(2, 3, 2)),
    _act("GLU", "dim=0", {"dim": 0}, shape=(4, 3), out=(2, 3)),
    _act("Hardshrink", "lambd=0.5", kinks=(-0.5, 0.5)),
    _act("Hardshrink", "lambd=1.2", {"lambd": 1.2}, kinks=(-1.2, 1.2)),
    _act("Hardsigmoid", "default", kinks=(-3.0, 3.0)),
    _act("Hardswish", "default", kinks=(-3.0, 3.0)),
    _act("Hardtanh", "default", kinks=(-1.0, 1.0)),
    _act("Hardtanh", "min=-0.5,max=2,inplace", {"min_val": -0.5, "max_val": 2.0, "inplace": True}, kinks=(-0.5, 2.0)),
    _act("Identity", "ignored-args", {"unused": 3}, hvp=True),
    _act("LeakyReLU", "default", kinks=(0.0,)),
    _act("LeakyReLU", "slope=0.2,inplace", {"negative_slope": 0.2, "inplace": True}, kinks=(0.0,)),
    _act("LogSigmoid"),
    _act("LogSoftmax", "dim=1", {"dim": 1}, fan=3),
    _act("LogSoftmax", "dim=-1", {"dim": -1}, fan=4),
    _act("Mish"),
    _act("PReLU", "single", kinks=(0.0,)),
    _act("PReLU", "per-channel,init=0.1", {"num_parameters": 3, "init": 0.1}, kinks=(0.0,)),
    _act("ReLU", "default", kinks=(0.0,)),
    _act("ReLU", "inplace", {"inplace": True}, kinks=(0.0,)),
    _act("ReLU6", "default", kinks=(0.0, 6.0)),
    _act("RReLU", "default", kinks=(0.0,), random=True),
    _act("RReLU", "lower=0.1,upper=0.5", {"lower": 0.1, "upper": 0.5}, kinks=(0.0,), random=True),
    _act("SELU", "default", kinks=(0.0,)),
    _act("SiLU"),
    _act("Sigmoid"),
    _act("Softmax", "dim=-1", {"dim": -1}, fan=4),
    _act("Softmax", "dim=0", {"dim": 0}, fan=2),
    _act("Softmax2d", "batched", shape=(2, 3, 2, 2), fan=3),
    _act("Softmax2d", "unbatched", shape=(3, 2, 2), fan=3),
    _act("Softmin", "dim=1", {"dim": 1}, fan=3),
    _act("Softplus", "default"),
    _act("Softplus", "beta=2,threshold=10", {"beta": 2.0, "threshold": 10.0}),
    _act("Softshrink", "default", kinks=(-0.5, 0.5)),
    _act("Softshrink", "lambd=1", {"lambd": 1.0}, kinks=(-1.0, 1.0)),
    _act("Softsign"),
    _act("Tanh"),
    _act("Tanhshrink"),
    _act("Threshold", "0.1->20", {"threshold": 0.1, "value": 20.0}, kinks=(0.1,)),
    _act("Threshold", "-1->0,inplace", {"threshold": -1.0, "value": 0.0, "inplace": True}, kinks=(-1.0,)),
]

_LINEAR = [
    R("Linear", "bias", {"in_features": 3, "out_features": 4}, F(2, 3), (2, 4), hvp=True, fan=3),
    R("Linear", "no-bias,3d", {"in_features": 3, "out_features": 4, "bias": False}, F(2, 5, 3), (2, 5, 4), fan=3),
    R("Bilinear", "bias", {"in1_features": 3, "in2_features": 2, "out_features": 4}, (F(2, 3), F(2, 2)), (2, 4),
      hvp=True, fan=6),
    R("Bilinear", "no-bias", {"in1_features": 2, "in2_features": 2, "out_features": 3, "bias": False},
      (F(4, 2), F(4, 2)), (4, 3), fan=4),
    R("LazyLinear", "default", {"out_features": 4}, F(2, 3), (2, 4), lazy=True, hvp=True, fan=3),
]

_CONV = [
    R("Conv1d", "default", {"in_channels": 2, "out_channels": 4, "kernel_size": 3}, F(2, 2, 7), (2, 4, 5), hvp=True,
      fan=6),
    R("Conv1d", "s2,p1,d2,g2,circular,no-bias",
      {"in_channels": 2, "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "groups": 2,
       "bias": False, "padding_mode": "circular"}, F(2, 2, 7), (2, 4, 3), fan=3),
    R("Conv1d", "same,reflect", {"in_channels": 2, "out_channels": 4, "kernel_size": 3, "padding": "same",
                                 "padding_mode": "reflect"}, F(2, 2, 7), (2, 4, 7), fan=6),
    R("Conv2d", "default", {"in_channels": 2, "out_channels": 4, "kernel_size": (2, 3)}, F(2, 2, 5, 6), (2, 4, 4, 4),
      hvp=True, fan=12),
    R("Conv2d", "s(2,1),p1,d(1,2),g2,replicate",
      {"in_channels": 2, "out_channels": 4, "kernel_size": (2, 3), "stride": (2, 1), "padding": 1, "dilation": (1, 2),
       "groups": 2, "padding_mode": "replicate"}, F(2, 2, 5, 6), (2, 4, 3, 4), fan=6),
    R("Conv3d", "default", {"in_channels": 2, "out_channels": 3, "kernel_size": 2}, F(1, 2, 3, 4, 4), (1, 3, 2, 3, 3),
      fan=16),
    R("Conv3d", "s2,p1,reflect", {"in_channels": 2, "out_channels": 3, "kernel_size": 2, "stride": 2, "padding": 1,
                                  "padding_mode": "reflect"}, F(1, 2, 3, 4, 4), (1, 3, 2, 3, 3), fan=16),
    R("ConvTranspose1d", "default", {"in_channels": 2, "out_channels": 4, "kernel_size": 3}, F(2, 2, 5), (2, 4, 7),
      hvp=True, fan=6),
    R("ConvTranspose1d", "s2,p1,op1,g2,no-bias",
      {"in_channels": 2, "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1,
       "groups": 2, "bias": False}, F(2, 2, 5), (2, 4, 10), fan=3),
    R("ConvTranspose2d", "default", {"in_channels": 2, "out_channels": 3, "kernel_size": (2, 3)}, F(1, 2, 3, 4),
      (1, 3, 4, 6), fan=12),
    R("ConvTranspose2d", "s2,p(1,0),op(1,0),d(1,2)",
      {"in_channels": 2, "out_channels": 3, "kernel_size": (2, 3), "stride": 2, "padding": (1, 0),
       "output_padding": (1, 0), "dilation": (1, 2)}, F(1, 2, 3, 4), (1, 3, 5, 11), fan=12),
    R("ConvTranspose3d", "default", {"in_channels": 2, "out_channels": 2, "kernel_size": 2}, F(1, 2, 2, 3, 3),
      (1, 2, 3, 4, 4), fan=16),
    R("ConvTranspose3d", "s2", {"in_channels": 2, "out_channels": 2, "kernel_size": 2, "stride": 2}, F(1, 2, 2, 3, 3),
      (1, 2, 4, 6, 6), fan=16),
    R("LazyConv1d", "default", {"out_channels": 4, "kernel_size": 3}, F(2, 2, 7), (2, 4, 5), lazy=True, fan=6),
    R("LazyConv2d", "default", {"out_channels": 4, "kernel_size": 2}, F(1, 2, 4, 4), (1, 4, 3, 3), lazy=True, fan=8),
    R("LazyConv3d", "default", {"out_channels": 2, "kernel_size": 2}, F(1, 2, 3, 3, 3), (1, 2, 2, 2, 2), lazy=True,
      fan=16),
    R("LazyConvTranspose1d", "default", {"out_channels": 3, "kernel_size": 2}, F(2, 2, 5), (2, 3, 6), lazy=True,
      fan=4),
    R("LazyConvTranspose2d", "default", {"out_channels": 3, "kernel_size": 2}, F(1, 2, 3, 3), (1, 3, 4, 4), lazy=True,
      fan=8),
    R("LazyConvTranspose3d", "default", {"out_channels": 2, "kernel_size": 2}, F(1, 2, 2, 2, 2), (1, 2, 3, 3, 3),
      lazy=True, fan=16),
]

_POOL = [
    R("MaxPool1d", "k3,s2", {"kernel_size": 3, "stride": 2}, F(2, 3, 9), (2, 3, 4)),
    R("MaxPool1d", "k2,s1,p1,d2,ceil,indices",
      {"kernel_size": 2, "stride": 1, "padding": 1, "dilation": 2, "return_indices": True, "ceil_mode": True},
      F(2, 3, 9), ((2, 3, 9), (2, 3, 9))),
    R("MaxPool2d", "k2", {"kernel_size": 2}, F(2, 2, 4, 6), (2, 2, 2, 3)),
    R("MaxPool2d", "k3,s2,p1,ceil", {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
      F(2, 2, 4, 6), (2, 2, 3, 4)),
    R("MaxPool3d", "k2,indices", {"kernel_size": 2, "return_indices": True}, F(1, 2, 4, 4, 4),
      ((1, 2, 2, 2, 2), (1, 2, 2, 2, 2))),
    R("AvgPool1d", "k2", {"kernel_size": 2}, F(2, 3, 8), (2, 3, 4), hvp=True, fan=2),
    R("AvgPool1d", "k3,s2,p1,ceil,exclude-pad",
      {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
      F(2, 3, 8), (2, 3, 5), fan=3),
    R("AvgPool2d", "k2", {"kernel_size": 2}, F(2, 2, 4, 6), (2, 2, 2, 3), fan=4),
    R("AvgPool2d", "k3,s2,p1,ceil,exclude-pad",
      {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
      F(2, 2, 4, 6), (2, 2, 3, 4), fan=9),
    R("AvgPool2d", "k2,divisor=3", {"kernel_size": 2, "divisor_override": 3}, F(2, 2, 4, 6), (2, 2, 2, 3), fan=4),
    R("AvgPool3d", "k2", {"kernel_size": 2}, F(1, 2, 4, 4, 4), (1, 2, 2, 2, 2), fan=8),
    R("AvgPool3d", "k3,s2,p1,exclude-pad", {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
      F(1, 2, 4, 4, 4), (1, 2, 2, 2, 2), fan=27),
    R("LPPool1d", "p2,k3,s2", {"norm_type": 2, "kernel_size": 3, "stride": 2}, F(2, 3, 8), (2, 3, 3), hvp=True, fan=3),
    R("LPPool1d", "p1,k2", {"norm_type": 1, "kernel_size": 2}, F(2, 3, 8), (2, 3, 4), fan=2, kinks=(0.0,)),
    R("LPPool2d", "p2,k(2,3)", {"norm_type": 2, "kernel_size": (2, 3)}, F(2, 2, 4, 6), (2, 2, 2, 2), fan=6),
    R("LPPool2d", "p2,k2,s2,ceil", {"norm_type": 2, "kernel_size": 2, "stride": 2, "ceil_mode": True},
      F(1, 2, 3, 5), (1, 2, 2, 3), fan=4),
    R("LPPool3d", "p2,k2", {"norm_type": 2, "kernel_size": 2}, F(1, 2, 4, 4, 4), (1, 2, 2, 2, 2), fan=8),
    R("AdaptiveAvgPool1d", "3", {"output_size": 3}, F(2, 3, 7), (2, 3, 3), fan=3, hvp=True),
    R("AdaptiveAvgPool2d", "(2,3)", {"output_size": (2, 3)}, F(2, 2, 5, 7), (2, 2, 2, 3), fan=9),
    R("AdaptiveAvgPool2d", "(None,2)", {"output_size": (None, 2)}, F(2, 2, 5, 7), (2, 2, 5, 2), fan=4),
    R("AdaptiveAvgPool3d", "2", {"output_size": 2}, F(1, 2, 3, 4, 5), (1, 2, 2, 2, 2), fan=18),
    R("AdaptiveMaxPool1d", "3,indices", {"output_size": 3, "return_indices": True}, F(2, 3, 7),
      ((2, 3, 3), (2, 3, 3))),
    R("AdaptiveMaxPool2d", "(2,3)", {"output_size": (2, 3)}, F(2, 2, 5, 7), (2, 2, 2, 3)),
    R("AdaptiveMaxPool3d", "2", {"output_size": 2}, F(1, 2, 3, 4, 5), (1, 2, 2, 2, 2)),
    R("FractionalMaxPool2d", "k2,output_size", {"kernel_size": 2, "output_size": (3, 3)}, F(1, 2, 6, 6), (1, 2, 3, 3),
      random=True, random_in_eval=True),
    R("FractionalMaxPool2d", "k2,ratio,indices", {"kernel_size": 2, "output_ratio": 0.5, "return_indices": True},
      F(1, 2, 6, 6), ((1, 2, 3, 3), (1, 2, 3, 3)), random=True, random_in_eval=True),
    R("FractionalMaxPool3d", "k2,output_size", {"kernel_size": 2, "output_size": 2}, F(1, 2, 5, 5, 5),
      (1, 2, 2, 2, 2), random=True, random_in_eval=True),
    R("MaxUnpool1d", "k2", {"kernel_size": 2}, U(2, 3, 8, kernel=2), (2, 3, 8), hvp=True),
    R("MaxUnpool2d", "k2", {"kernel_size": 2}, U(1, 2, 4, 6, kernel=2), (1, 2, 4, 6)),
    R("MaxUnpool3d", "k2", {"kernel_size": 2}, U(1, 2, 4, 4, 4, kernel=2), (1, 2, 4, 4, 4)),
]

_PAD = [
    R("ConstantPad1d", "2,3.5", {"padding": 2, "value": 3.5}, F(2, 3, 4), (2, 3, 8), hvp=True),
    R("ConstantPad1d", "(1,2),-1", {"padding": (1, 2), "value": -1.0}, F(3, 4), (3, 7)),
    R("ConstantPad2d", "(1,0,2,1),0.5", {"padding": (1, 0, 2, 1), "value": 0.5}, F(2, 3, 4), (2, 6, 5)),
    R("ConstantPad3d", "1,0", {"padding": 1, "value": 0.0}, F(1, 2, 2, 3), (1, 4, 4, 5)),
    R("ZeroPad1d", "(1,2)", {"padding": (1, 2)}, F(2, 3, 4), (2, 3, 7)),
    R("ZeroPad2d", "1", {"padding": 1}, F(1, 2, 3, 4), (1, 2, 5, 6)),
    R("ZeroPad3d", "(1,0,0,1,1,1)", {"padding": (1, 0, 0, 1, 1, 1)}, F(1, 2, 2, 3), (1, 4, 3, 4)),
    R("ReflectionPad1d", "2", {"padding": 2}, F(2, 3, 4), (2, 3, 8)),
    R("ReflectionPad2d", "(1,2,0,1)", {"padding": (1, 2, 0, 1)}, F(1, 2, 3, 4), (1, 2, 4, 7)),
    R("ReflectionPad3d", "1", {"padding": 1}, F(1, 2, 2, 3, 3), (1, 2, 4, 5, 5)),
    R("ReplicationPad1d", "2", {"padding": 2}, F(2, 3, 4), (2, 3, 8)),
    R("ReplicationPad2d", "(1,2,0,1)", {"padding": (1, 2, 0, 1)}, F(1, 2, 3, 4), (1, 2, 4, 7)),
    R("ReplicationPad3d", "1", {"padding": 1}, F(1, 2, 2, 3, 3), (1, 2, 4, 5, 5)),
    R("CircularPad1d", "2", {"padding": 2}, F(2, 3, 4), (2, 3, 8)),
    R("CircularPad2d", "(1,1,2,0)", {"padding": (1, 1, 2, 0)}, F(1, 2, 3, 4), (1, 2, 5, 6)),
    R("CircularPad3d", "1", {"padding": 1}, F(1, 2, 2, 3, 3), (1, 2, 4, 5, 5)),
]

_NORM: dict[str, Any] = {"hvp": True, "gain": 4.0, "ops": 8}
_NORMS = [
    R("BatchNorm1d", "default", {"num_features": 3}, F(4, 3), (4, 3), batch_stats=True, fan=4, **_NORM),
    R("BatchNorm1d", "eps,momentum=None,no-affine,3d", {"num_features": 3, "eps": 1e-3, "momentum": None,
                                                       "affine": False}, F(4, 3, 5), (4, 3, 5), batch_stats=True,
      fan=20, **_NORM),
    R("BatchNorm1d", "no-running-stats", {"num_features": 3, "track_running_stats": False}, F(4, 3), (4, 3), fan=4,
      **_NORM),
    R("BatchNorm2d", "default", {"num_features": 2}, F(3, 2, 2, 3), (3, 2, 2, 3), batch_stats=True, fan=18, **_NORM),
    R("BatchNorm3d", "momentum=0.5", {"num_features": 2, "momentum": 0.5}, F(2, 2, 2, 2, 3), (2, 2, 2, 2, 3),
      batch_stats=True, fan=24, **_NORM),
    R("LazyBatchNorm1d", "default", {}, F(4, 3), (4, 3), batch_stats=True, lazy=True, fan=4, **_NORM),
    R("LazyBatchNorm2d", "default", {}, F(3, 2, 2, 2), (3, 2, 2, 2), batch_stats=True, lazy=True, fan=12, **_NORM),
    R("LazyBatchNorm3d", "default", {}, F(2, 2, 2, 2, 2), (2, 2, 2, 2, 2), batch_stats=True, lazy=True, fan=16,
      **_NORM),
    R("InstanceNorm1d", "default", {"num_features": 3}, F(2, 3, 5), (2, 3, 5), fan=5, **_NORM),
    R("InstanceNorm1d", "affine,running-stats,unbatched", {"num_features": 3, "affine": True,
                                                          "track_running_stats": True},
      F(3, 5), (3, 5), batch_stats=True, fan=5, **_NORM),
    R("InstanceNorm2d", "affine", {"num_features": 2, "affine": True}, F(2, 2, 3, 3), (2, 2, 3, 3), fan=9, **_NORM),
    R("InstanceNorm3d", "running-stats", {"num_features": 2, "track_running_stats": True}, F(1, 2, 2, 3, 3),
      (1, 2, 2, 3, 3), batch_stats=True, fan=18, **_NORM),
    R("LazyInstanceNorm1d", "affine,running-stats", {"affine": True, "track_running_stats": True}, F(2, 3, 5),
      (2, 3, 5), batch_stats=True, lazy=True, fan=5, **_NORM),
    # relies on the documented default track_running_stats=False (the signature says True: a finding)
    R("LazyInstanceNorm2d", "affine", {"affine": True}, F(2, 2, 3, 3), (2, 2, 3, 3), lazy=True, fan=9, **_NORM),
    R("LazyInstanceNorm3d", "affine,no-running-stats", {"affine": True, "track_running_stats": False},
      F(1, 2, 2, 3, 3), (1, 2, 2, 3, 3), lazy=True, fan=18, **_NORM),
    R("LayerNorm", "last", {"normalized_shape": (4,)}, F(2, 3, 4), (2, 3, 4), fan=4, **_NORM),
    R("LayerNorm", "last-two,eps,no-bias", {"normalized_shape": [3, 4], "eps": 1e-3, "bias": False}, F(2, 3, 4),
      (2, 3, 4), fan=12, **_NORM),
    R("LayerNorm", "no-affine", {"normalized_shape": 4, "elementwise_affine": False}, F(3, 4), (3, 4), fan=4, **_NORM),
    R("GroupNorm", "2-groups", {"num_groups": 2, "num_channels": 4}, F(2, 4, 3), (2, 4, 3), fan=6, **_NORM),
    R("GroupNorm", "1-group,no-affine", {"num_groups": 1, "num_channels": 4, "affine": False, "eps": 1e-3},
      F(2, 4, 2, 2), (2, 4, 2, 2), fan=16, **_NORM),
    R("RMSNorm", "last", {"normalized_shape": [4]}, F(2, 3, 4), (2, 3, 4), fan=4, **_NORM),
    R("RMSNorm", "eps,no-affine", {"normalized_shape": 4, "eps": 1e-3, "elementwise_affine": False}, F(3, 4), (3, 4),
      fan=4, **_NORM),
    R("LocalResponseNorm", "size2", {"size": 2}, F(2, 4, 3), (2, 4, 3), fan=2, hvp=True),
    R("LocalResponseNorm", "size3,alpha,beta,k", {"size": 3, "alpha": 1e-2, "beta": 0.5, "k": 2.0}, F(2, 4, 3, 3),
      (2, 4, 3, 3), fan=3),
    R("CrossMapLRN2d", "size3", {"size": 3, "alpha": 1e-2, "beta": 0.75, "k": 1.0}, F(2, 4, 3, 3), (2, 4, 3, 3),
      fan=3),
]

# Recurrent: about 12 rounded operations per step and layer (gates, products, the state update), chained
# over T = 5 steps and the layers; each step's reduction is over input_size + hidden_size terms.
_RNN: dict[str, Any] = {"gain": 2.0}
_RECURRENT = [
    R("RNN", "tanh", {"input_size": 3, "hidden_size": 4}, F(5, 2, 3), ((5, 2, 4), (1, 2, 4)), ops=60, fan=7, hvp=True,
      **_RNN),
    R("RNN", "relu,2-layers,bi,batch_first,no-bias,h0",
      {"input_size": 3, "hidden_size": 4, "num_layers": 2, "nonlinearity": "relu", "bias": False,
       "batch_first": True, "bidirectional": True}, (F(2, 5, 3), F(4, 2, 4)), ((2, 5, 8), (4, 2, 4)), ops=120, fan=12,
      **_RNN),
    R("LSTM", "default", {"input_size": 3, "hidden_size": 4}, F(5, 2, 3), ((5, 2, 4), (1, 2, 4), (1, 2, 4)),
      ops=60, fan=7, hvp=True, **_RNN),
    R("LSTM", "proj,2-layers,bi,batch_first",
      {"input_size": 3, "hidden_size": 4, "num_layers": 2, "batch_first": True, "bidirectional": True,
       "proj_size": 2}, F(2, 5, 3), ((2, 5, 4), (4, 2, 2), (4, 2, 4)), ops=120, fan=8, **_RNN),
    R("LSTM", "2-layers,dropout", {"input_size": 3, "hidden_size": 4, "num_layers": 2, "dropout": 0.5}, F(5, 2, 3),
      ((5, 2, 4), (2, 2, 4), (2, 2, 4)), random=True, ops=120, fan=8, **_RNN),
    R("GRU", "bi", {"input_size": 3, "hidden_size": 4, "bidirectional": True}, F(5, 2, 3), ((5, 2, 8), (2, 2, 4)),
      ops=60, fan=7, hvp=True, **_RNN),
    R("GRU", "unbatched,no-bias", {"input_size": 3, "hidden_size": 4, "bias": False}, F(5, 3), ((5, 4), (1, 4)),
      ops=60, fan=7, **_RNN),
    R("RNNCell", "tanh", {"input_size": 3, "hidden_size": 4}, F(2, 3), (2, 4), ops=12, fan=7, hvp=True, **_RNN),
    R("RNNCell", "relu,no-bias,hx", {"input_size": 3, "hidden_size": 4, "nonlinearity": "relu", "bias": False},
      (F(2, 3), F(2, 4)), (2, 4), ops=12, fan=7, kinks=(0.0,), **_RNN),
    R("LSTMCell", "default", {"input_size": 3, "hidden_size": 4}, F(2, 3), ((2, 4), (2, 4)), ops=12, fan=7, hvp=True, **_RNN),
    R("GRUCell", "default", {"input_size": 3, "hidden_size": 4}, F(2, 3), (2, 4), ops=12, fan=7, hvp=True, **_RNN),
    R("GRUCell", "no-bias,hx", {"input_size": 3, "hidden_size": 4, "bias": False}, (F(2, 3), F(2, 4)), (2, 4), ops=12, fan=7,
      **_RNN),
]

# Attention stacks: about 40 chained operations per layer with one attention (projections, softmax, two
# LayerNorms, the feed-forward pair), 60 with two; the longest single reduction is dim_feedforward = 8.
_TR: dict[str, Any] = {"gain": 8.0, "fan": 8}
_TRANSFORMER = [
    R("TransformerEncoderLayer", "no-dropout", {"d_model": 4, "nhead": 2, "dim_feedforward": 8, "dropout": 0.0},
      F(3, 2, 4), (3, 2, 4), ops=40, **_TR),
    R("TransformerEncoderLayer", "gelu,norm_first,batch_first,no-bias,dropout",
      {"d_model": 4, "nhead": 2, "dim_feedforward": 8, "dropout": 0.1, "activation": "gelu", "norm_first": True,
       "batch_first": True, "bias": False}, F(2, 3, 4), (2, 3, 4), random=True, ops=40, hvp=True, **_TR),
    R("TransformerDecoderLayer", "no-dropout", {"d_model": 4, "nhead": 2, "dim_feedforward": 8, "dropout": 0.0},
      (F(3, 2, 4), F(5, 2, 4)), (3, 2, 4), ops=60, **_TR),
    R("TransformerDecoderLayer", "gelu,norm_first,batch_first",
      {"d_model": 4, "nhead": 2, "dim_feedforward": 8, "dropout": 0.0, "activation": "gelu", "norm_first": True,
       "batch_first": True}, (F(2, 3, 4), F(2, 5, 4)), (2, 3, 4), ops=60, **_TR),
    R("TransformerEncoder", "2-layers,norm", {}, F(3, 2, 4), (3, 2, 4), build=_encoder, ops=90, **_TR),
    R("TransformerDecoder", "2-layers,batch_first", {}, (F(2, 3, 4), F(2, 5, 4)), (2, 3, 4), build=_decoder,
      ops=120, **_TR),
    R("Transformer", "1+1-layers", {"d_model": 4, "nhead": 2, "num_encoder_layers": 1, "num_decoder_layers": 1,
                                    "dim_feedforward": 8, "dropout": 0.0}, (F(5, 2, 4), F(3, 2, 4)), (3, 2, 4),
      ops=110, **_TR),
    R("MultiheadAttention", "default", {"embed_dim": 4, "num_heads": 2}, (F(3, 2, 4), F(5, 2, 4), F(5, 2, 4)),
      ((3, 2, 4), (2, 3, 5)), fan=5, hvp=True, ops=16, gain=4.0),
    R("MultiheadAttention", "kdim,vdim,bias_kv,zero_attn,batch_first,no-bias,per-head",
      {"embed_dim": 4, "num_heads": 2, "kdim": 3, "vdim": 2, "bias": False, "add_bias_kv": True,
       "add_zero_attn": True, "batch_first": True}, (F(2, 3, 4), F(2, 5, 3), F(2, 5, 2)), ((2, 3, 4), (2, 2, 3, 7)),
      call_kwargs={"average_attn_weights": False}, fan=7, ops=16, gain=4.0),
]

_EMB = [
    R("Embedding", "default", {"num_embeddings": 10, "embedding_dim": 3}, I(2, 4, high=10), (2, 4, 3)),
    R("Embedding", "padding_idx,scale_grad_by_freq", {"num_embeddings": 6, "embedding_dim": 3, "padding_idx": 0,
                                                      "scale_grad_by_freq": True}, C([[0, 1, 1, 5], [2, 0, 1, 3]]),
      (2, 4, 3)),
    R("Embedding", "max_norm", {"num_embeddings": 6, "embedding_dim": 3, "max_norm": 1.0}, C([[0, 1, 5], [2, 0, 3]]),
      (2, 3, 3), grad=False, no_grad="max_norm renormalises the weight in place inside forward (documented), so "
                                      "finite differences of the weight would see a moving point"),
    R("EmbeddingBag", "mean,2d", {"num_embeddings": 10, "embedding_dim": 3, "mode": "mean"}, I(2, 4, high=10), (2, 3)),
    R("EmbeddingBag", "max,offsets", {"num_embeddings": 10, "embedding_dim": 3, "mode": "max"},
      (I(8, high=10), C([0, 3, 5])), (3, 3)),
    R("EmbeddingBag", "sum,per_sample_weights,padding_idx,include_last_offset",
      {"num_embeddings": 6, "embedding_dim": 3, "mode": "sum", "padding_idx": 1, "include_last_offset": True},
      (C([0, 1, 2, 3, 4, 5, 1, 2]), C([0, 3, 8]), F(8)), (2, 3), fan=5),
]

_DROP: dict[str, Any] = {"random": True}
_DROPOUT = [
    R("Dropout", "p=0.5", {"p": 0.5}, F(2, 3, 4), (2, 3, 4), **_DROP),
    R("Dropout", "p=0.2,inplace", {"p": 0.2, "inplace": True}, F(2, 3, 4), (2, 3, 4), **_DROP),
    R("Dropout1d", "p=0.5", {"p": 0.5}, F(2, 3, 4), (2, 3, 4), **_DROP),
    R("Dropout2d", "p=0.5", {"p": 0.5}, F(2, 3, 2, 2), (2, 3, 2, 2), **_DROP),
    R("Dropout3d", "p=0.5", {"p": 0.5}, F(1, 2, 2, 2, 2), (1, 2, 2, 2, 2), **_DROP),
    R("AlphaDropout", "p=0.2", {"p": 0.2}, F(2, 3, 4), (2, 3, 4), **_DROP),
    R("FeatureAlphaDropout", "p=0.2", {"p": 0.2}, F(2, 3, 2, 2), (2, 3, 2, 2), **_DROP),
]

_SHAPE = [
    R("Flatten", "default", {}, F(2, 3, 4), (2, 12), hvp=True),
    R("Flatten", "0..1", {"start_dim": 0, "end_dim": 1}, F(2, 3, 4), (6, 4)),
    R("Unflatten", "1->(3,2)", {"dim": 1, "unflattened_size": (3, 2)}, F(2, 6, 4), (2, 3, 2, 4)),
    R("Fold", "k2", {"output_size": (4, 5), "kernel_size": 2}, F(1, 8, 12), (1, 2, 4, 5), fan=4),
    R("Fold", "k2,s2,p1", {"output_size": (4, 5), "kernel_size": 2, "stride": 2, "padding": 1}, F(1, 8, 9),
      (1, 2, 4, 5), fan=4),
    R("Unfold", "k2", {"kernel_size": 2}, F(1, 2, 4, 5), (1, 8, 12)),
    R("Unfold", "k(2,3),p1,s2", {"kernel_size": (2, 3), "padding": 1, "stride": 2}, F(1, 2, 4, 5), (1, 12, 9)),
    R("PixelShuffle", "2", {"upscale_factor": 2}, F(1, 8, 2, 3), (1, 2, 4, 6)),
    R("PixelUnshuffle", "2", {"downscale_factor": 2}, F(1, 2, 4, 6), (1, 8, 2, 3)),
    R("ChannelShuffle", "2", {"groups": 2}, F(1, 4, 2, 2), (1, 4, 2, 2)),
    R("Upsample", "nearest,x2", {"scale_factor": 2, "mode": "nearest"}, F(1, 2, 3), (1, 2, 6)),
    R("Upsample", "linear,size", {"size": 5, "mode": "linear"}, F(1, 2, 3), (1, 2, 5), fan=2, hvp=True),
    R("Upsample", "bilinear,size,align_corners", {"size": (4, 5), "mode": "bilinear", "align_corners": True},
      F(1, 2, 2, 3), (1, 2, 4, 5), fan=4),
    R("Upsample", "bicubic,x1.5", {"scale_factor": 1.5, "mode": "bicubic"}, F(1, 1, 2, 2), (1, 1, 3, 3), fan=16),
    R("Upsample", "trilinear,x2,recompute", {"scale_factor": 2, "mode": "trilinear", "recompute_scale_factor": True},
      F(1, 1, 2, 2, 2), (1, 1, 4, 4, 4), fan=8),
    R("Upsample", "nearest-exact,x(2,3)", {"scale_factor": (2, 3), "mode": "nearest-exact"}, F(1, 1, 2, 2),
      (1, 1, 4, 6)),
    R("UpsamplingNearest2d", "x2", {"scale_factor": 2}, F(1, 2, 2, 3), (1, 2, 4, 6)),
    R("UpsamplingBilinear2d", "size", {"size": (3, 4)}, F(1, 2, 2, 3), (1, 2, 3, 4), fan=4),
    R("CosineSimilarity", "dim1", {"dim": 1}, (F(2, 3), F(2, 3)), (2,), fan=3, hvp=True, ops=8),
    R("CosineSimilarity", "dim0,eps", {"dim": 0, "eps": 1e-3}, (F(4, 2), F(4, 2)), (2,), fan=4, ops=8),
    R("PairwiseDistance", "p2", {}, (F(2, 3), F(2, 3)), (2,), fan=3, hvp=True, ops=6),
    R("PairwiseDistance", "p3,eps,keepdim", {"p": 3.0, "eps": 1e-3, "keepdim": True}, (F(2, 3), F(2, 3)), (2, 1), fan=3, ops=6),
]

_CONTAINERS = [
    R("Sequential", "positional", {}, F(2, 3), (2, 2), build=_sequential, fan=4, hvp=True, ops=8),
    R("Sequential", "OrderedDict", {}, F(2, 3), (2, 2), build=_sequential_dict, fan=4, ops=8),
    R("ModuleList", "in-order", {}, F(2, 3), (2, 2), build=_module_list, call=_apply_in_order, fan=4, ops=8),
    R("ModuleDict", "in-order", {}, F(2, 3), (2, 2), build=_module_dict, call=_apply_in_order, fan=4, ops=8),
    R("ParameterList", "affine", {}, F(2, 3), (2, 4), build=_parameter_list, call=_affine_list, fan=3, hvp=True),
    R("ParameterDict", "affine", {}, F(2, 3), (2, 4), build=_parameter_dict, call=_affine_dict, fan=3),
]

RECORDS: list[Rec] = [*_ACTIVATIONS, *_LINEAR, *_CONV, *_POOL, *_PAD, *_NORMS, *_RECURRENT, *_TRANSFORMER, *_EMB,
                      *_DROPOUT, *_SHAPE, *_CONTAINERS]

#: Public torch.nn Module classes with no record, each with the reason.
OUT_OF_SCOPE: dict[str, str] = {
    "Module": "the abstract base class: its forward raises NotImplementedError by design",
    "Container": "deprecated alias kept for old pickles (its docstring-less constructor warns to use Sequential)",
    "RNNBase": "base class of RNN/LSTM/GRU, constructed through them (recorded there)",
    "RNNCellBase": "base class of RNNCell/LSTMCell/GRUCell (recorded there)",
    "DataParallel": "replicates the module over CUDA devices; none here",
    "SyncBatchNorm": "synchronises statistics across a distributed process group of CUDA devices; none here",
    "NLLLoss2d": "a deprecated loss class (losses are another claim's scope)",
}


def is_loss(name: str) -> bool:
    return name.endswith("Loss")


def public_module_classes(nn: Any) -> list[str]:
    """Every public name of torch.nn bound to a subclass of torch.nn.Module."""
    return sorted(n for n in dir(nn) if not n.startswith("_") and isinstance(getattr(nn, n), type)
                  and issubclass(getattr(nn, n), nn.Module))


def table_gaps(names: list[str], records: list[Rec], out_of_scope: dict[str, str]) -> tuple[list[str], list[str]]:
    """(classes neither recorded nor listed out of scope, records or exclusions naming no public class)."""
    recorded = {r.name for r in records}
    missing = [n for n in names if not is_loss(n) and n not in recorded and n not in out_of_scope]
    stale = sorted((recorded | set(out_of_scope)) - set(names))
    return missing, stale


def input_values(shape: Shape, seed: int, kinks: tuple[float, ...] = ()) -> Any:
    """Distinct float64 values, a seeded permutation of a grid over [-2.5, 2.5] (no ties, so max
    pooling has a unique argmax at least 5/n apart, and no exact zero), moved at least 0.02 away
    from the record's kinks."""
    import numpy as np

    n = int(np.prod(shape)) if shape else 1
    grid = np.linspace(-2.5, 2.5, n) + 0.5 * 5.0 / max(n, 2) * 0.37 + 0.0113
    x = np.random.default_rng(seed).permutation(grid)
    for k in kinks:
        near = np.abs(x - k) < 0.02
        x[near] = k + np.where(x[near] >= k, 0.02, -0.02) + np.sign(x[near] - k + 1e-30) * 0.005
    return x.reshape(shape)
