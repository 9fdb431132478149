"""The same model in TensorFlow (Keras) and torch: one architecture, one set of weights.

An :class:`Architecture` is plain data (dense, conv, layer/batch normalisation, flatten,
a final dense layer giving logits, softmax cross-entropy), so the same model can be built
as a Keras model (any Keras backend), as a ``torch.nn.Module``, and evaluated by a float64
numpy reference that shares no code with either framework. Weights live in Keras's layout
(dense kernel ``(in, out)``, conv kernel ``(kh, kw, in, out)``, channels last); the torch
builder transfers them the way a person porting a model must: transposed kernels, NCHW
inside, Keras's ``H, W, C`` flatten order, ``momentum_torch = 1 - momentum_keras``.

Results of a run are flat dicts of float64 arrays: ``logits``, ``loss``, ``grad/x``,
``grad/<i>.<weight>`` and ``state/<i>.moving_mean|moving_variance``; :func:`compare` checks
two of them with tolerances from the dtype and the model (:func:`tolerances`): the rounding
bound of checks.numerics for the model's depth and longest sum, times the case's
conditioning that the reference measures layer by layer (cancellation in products,
division by a small spread in normalisations, saturated softmax). A comparison whose
tolerance would exceed :data:`UNJUDGED_RTOL` is counted in the evidence, not judged: the
case is too ill-conditioned for the dtype, and no tolerance there could catch a bug.

Nothing here imports a framework at module import time.
"""

from __future__ import annotations

import json
import math
import statistics
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

import numpy as np

from .. import evidence
from .numerics import CONDITION, TF32_ROUNDOFF, Tolerance, ToleranceExceeded, assert_close, combined, tolerance

T = TypeVar("T")
Result = dict[str, np.ndarray]

ACTIVATIONS = ("linear", "relu", "tanh", "gelu", "sigmoid")
NORMS = ("none", "layernorm", "batchnorm")
EPSILONS = (1e-3, 1e-5, 0.1)
MOMENTA = (0.99, 0.9, 0.5)  # Keras convention: moving = momentum * moving + (1 - momentum) * batch
DTYPES = ("float32", "float64")


def activations_for(dtype: str) -> tuple[str, ...]:
    """The activations whole-model checks use in ``dtype``.

    TensorFlow's exact GELU is float32-accurate in float64 (tf.nn.gelu makes its 1/sqrt(2)
    a float32 constant before casting); interop.same-model.activations reports that defect
    on its own, so that it does not hide every other float64 disagreement of whole models.
    """
    return ACTIVATIONS if dtype != "float64" else tuple(a for a in ACTIVATIONS if a != "gelu")


def framework_devices(kind: str) -> tuple[str, str]:
    """(TensorFlow device, torch device) for a device kind, each checked usable by its adapter."""
    from ..frameworks import adapter

    return adapter("tensorflow").device(kind), adapter("torch").device(kind)


class ModelMismatch(ToleranceExceeded):
    """Two runs of the same model disagree on a quantity they must share."""


# --------------------------------------------------------------------------- architectures


@dataclass(frozen=True)
class Layer:
    kind: str  # dense | conv | layernorm | batchnorm | flatten
    units: int = 0  # dense units or conv filters
    kernel: int = 1
    stride: int = 1
    padding: str = "valid"  # conv: valid | same (same only with stride 1, as torch requires)
    dilation: int = 1
    activation: str = "linear"
    use_bias: bool = True
    epsilon: float = 1e-3
    momentum: float = 0.99


@dataclass(frozen=True)
class Loss:
    kind: str = "sparse"  # sparse: integer labels; categorical: one-hot labels
    label_smoothing: float = 0.0  # categorical only (Keras has no smoothing for sparse labels)
    ignore_class: int | None = None  # sparse only: Keras ignore_class, torch ignore_index


@dataclass(frozen=True)
class Architecture:
    input_shape: tuple[int, ...]  # without the batch: (features,) or (height, width, channels)
    layers: tuple[Layer, ...]
    loss: Loss = field(default_factory=Loss)

    @property
    def classes(self) -> int:
        return self.layers[-1].units

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Architecture:
        raw = json.loads(text)
        return cls(tuple(raw["input_shape"]), tuple(Layer(**d) for d in raw["layers"]), Loss(**raw["loss"]))


@dataclass(frozen=True)
class Case:
    """An architecture, a batch and a seed from which weights, inputs and labels follow."""

    arch: Architecture
    batch: int
    training: bool  # batch normalisation uses batch statistics and updates its moving ones
    seed: int
    logit_scale: float = 1.0  # scales the last kernel: large logits stress the cross-entropy

    def weights(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng([self.seed, 1])
        out = {name: _init(rng, name, shape) for name, shape in weight_shapes(self.arch)}
        last = f"{len(self.arch.layers) - 1}.kernel"
        out[last] = out[last] * self.logit_scale
        return out

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, 2])
        x = rng.normal(size=(self.batch, *self.arch.input_shape))
        labels = rng.integers(0, self.arch.classes, size=self.batch)
        ignore = self.arch.loss.ignore_class
        if ignore is not None and np.all(labels == ignore):
            labels[0] = (ignore + 1) % self.arch.classes  # an all-ignored batch has no mean loss
        return x, labels.astype(np.int64)


def _init(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    what = name.split(".", 1)[1]
    if what == "kernel":  # Glorot uniform over the receptive field (Keras's default initialiser)
        fan_in = int(np.prod(shape[:-1]))
        limit = math.sqrt(6.0 / (fan_in + shape[-1]))
        return rng.uniform(-limit, limit, size=shape)
    if what == "gamma":
        return rng.uniform(0.5, 1.5, size=shape)
    if what == "moving_variance":
        return rng.uniform(0.5, 2.0, size=shape)
    return rng.uniform(-0.5, 0.5, size=shape)  # bias, beta, moving_mean


def conv_output(size: int, layer: Layer) -> int:
    if layer.padding == "same":
        return -(-size // layer.stride)
    span = layer.dilation * (layer.kernel - 1) + 1
    return (size - span) // layer.stride + 1


def shapes(arch: Architecture) -> list[tuple[int, ...]]:
    """The per-example shape entering each layer, then the output shape."""
    out = [tuple(arch.input_shape)]
    for layer in arch.layers:
        s = out[-1]
        if layer.kind == "dense":
            s = (layer.units,)
        elif layer.kind == "conv":
            s = (conv_output(s[0], layer), conv_output(s[1], layer), layer.units)
        elif layer.kind == "flatten":
            s = (int(np.prod(s)),)
        out.append(s)
    return out


def weight_shapes(arch: Architecture) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every weight, in each Keras layer's ``get_weights()`` order."""
    result: list[tuple[str, tuple[int, ...]]] = []
    for i, (layer, s) in enumerate(zip(arch.layers, shapes(arch))):
        if layer.kind == "dense":
            result.append((f"{i}.kernel", (s[-1], layer.units)))
        elif layer.kind == "conv":
            result.append((f"{i}.kernel", (layer.kernel, layer.kernel, s[-1], layer.units)))
        if layer.kind in ("dense", "conv") and layer.use_bias:
            result.append((f"{i}.bias", (layer.units,)))
        if layer.kind in ("layernorm", "batchnorm"):
            result += [(f"{i}.gamma", (s[-1],)), (f"{i}.beta", (s[-1],))]
        if layer.kind == "batchnorm":
            result += [(f"{i}.moving_mean", (s[-1],)), (f"{i}.moving_variance", (s[-1],))]
    return result


# --------------------------------------------------------------------------- generation


class Chooser(Protocol):
    """Where the choices of a generated case come from: hypothesis (shrinks) or a seeded rng."""

    def choice(self, options: Sequence[T], label: str) -> T: ...

    def integer(self, low: int, high: int, label: str) -> int: ...


class RandomChooser:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def choice(self, options: Sequence[T], label: str) -> T:
        return options[int(self.rng.integers(len(options)))]

    def integer(self, low: int, high: int, label: str) -> int:
        return int(self.rng.integers(low, high + 1))


class HypothesisChooser:
    def __init__(self, draw: Callable[..., Any]) -> None:
        self.draw = draw

    def choice(self, options: Sequence[T], label: str) -> T:
        from hypothesis import strategies as st

        return self.draw(st.sampled_from(list(options)), label=label)

    def integer(self, low: int, high: int, label: str) -> int:
        from hypothesis import strategies as st

        return self.draw(st.integers(low, high), label=label)


def draw_case(c: Chooser, *, family: str | None = None, norm: str | None = None,
              training: bool | None = None, activations: Sequence[str] = ACTIVATIONS) -> Case:
    """A generated case; ``family``/``norm``/``training`` force a feature (for coverage batches)."""
    family = family or c.choice(("dense", "conv"), "family")
    training = c.choice((False, True), "training") if training is None else training
    layers: list[Layer] = []
    if family == "conv":
        input_shape: tuple[int, ...] = (c.integer(3, 7, "height"), c.integer(3, 7, "width"), c.integer(1, 3, "channels"))
        size = min(input_shape[:2])
        for _ in range(c.integer(1, 2, "conv blocks")):
            conv = _draw_conv(c, size, activations)
            size = conv_output(size, conv)
            layers += _with_norm(c, conv, norm, training)
        layers.append(Layer("flatten"))
        hidden = c.integer(0, 1, "dense blocks")
    else:
        input_shape = (c.integer(1, 6, "features"),)
        hidden = c.integer(1, 2, "dense blocks")
    for _ in range(hidden):
        dense = Layer("dense", units=c.integer(1, 8, "units"), activation=c.choice(activations, "activation"),
                      use_bias=c.choice((True, False), "use_bias"))
        layers += _with_norm(c, dense, norm, training)
    layers.append(Layer("dense", units=c.integer(2, 5, "classes")))
    arch = Architecture(input_shape, tuple(layers), _draw_loss(c, layers[-1].units))
    batch = c.integer(2 if training else 1, 6, "batch")
    return Case(arch, batch, training, c.integer(0, 2**32 - 1, "seed"), c.choice((1.0, 8.0), "logit scale"))


def _draw_conv(c: Chooser, size: int, activations: Sequence[str]) -> Layer:
    kernel = c.integer(1, 3, "kernel")
    stride = c.choice((1, 2), "stride")
    dilation = c.choice((1, 2), "dilation") if stride == 1 else 1  # Keras: no dilation with strides
    padding = c.choice(("valid", "same"), "padding") if stride == 1 else "valid"  # torch: 'same' needs stride 1
    layer = Layer("conv", units=c.integer(1, 4, "filters"), kernel=kernel, stride=stride, padding=padding,
                  dilation=dilation, activation=c.choice(activations, "activation"),
                  use_bias=c.choice((True, False), "use_bias"))
    if conv_output(size, layer) < 1:
        layer = replace(layer, padding="same" if stride == 1 else "valid", kernel=1 if stride > 1 else kernel)
    return layer


def _with_norm(c: Chooser, layer: Layer, norm: str | None, training: bool) -> list[Layer]:
    kind = norm or c.choice(NORMS, "norm")
    if kind == "none":
        return [layer]
    if kind == "batchnorm" and training:
        # A bias in front of batch statistics cancels exactly: its true gradient is 0 and
        # the computed one is rounding noise, which no relative tolerance can judge.
        layer = replace(layer, use_bias=False)
    if kind == "layernorm":
        # Normalising one feature gives beta whatever the input: again a zero gradient.
        layer = replace(layer, units=max(2, layer.units))
    norm_layer = Layer(kind, epsilon=c.choice(EPSILONS, "epsilon"),
                       momentum=c.choice(MOMENTA, "momentum") if kind == "batchnorm" else 0.99)
    return [layer, norm_layer]


def _draw_loss(c: Chooser, classes: int) -> Loss:
    if c.choice(("sparse", "categorical"), "loss") == "categorical":
        return Loss("categorical", label_smoothing=c.choice((0.0, 0.1, 0.35), "label smoothing"))
    ignore = c.choice((False, True), "ignore a class")
    return Loss("sparse", ignore_class=c.integer(0, classes - 1, "ignored class") if ignore else None)


def cases(**forced: Any) -> Any:
    """Hypothesis strategy of :class:`Case` (shrinks towards small dense models)."""
    from hypothesis import strategies as st

    return st.composite(lambda draw: draw_case(HypothesisChooser(draw), **forced))()


def coverage_batch(seed: int, activations: Sequence[str] = ACTIVATIONS) -> list[Case]:
    """A batch that has every feature at least once, details from ``seed``: for fresh
    interpreters, where one example per process must still cover dense, conv, both
    normalisations in both modes and both losses."""
    c = RandomChooser(np.random.default_rng(seed))
    plan = [("dense", "none", False), ("dense", "layernorm", False), ("dense", "batchnorm", False),
            ("dense", "batchnorm", True), ("conv", "none", False), ("conv", "layernorm", True),
            ("conv", "batchnorm", False), ("conv", "batchnorm", True)]
    return [draw_case(c, family=f, norm=n, training=t, activations=activations) for f, n, t in plan]


# --------------------------------------------------------------------------- float64 reference


def rounded(values: Mapping[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """What a framework holds after converting float64 data to ``dtype``, back in float64."""
    return {k: np.asarray(v, dtype=dtype).astype(np.float64) for k, v in values.items()}


def _act(name: str, x: np.ndarray) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 0.5 * (1.0 + np.tanh(0.5 * x))
    if name == "gelu":  # exact (erf) GELU: Keras approximate=False, torch approximate='none'
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    return x


def _conv(x: np.ndarray, kernel: np.ndarray, layer: Layer) -> np.ndarray:
    span = layer.dilation * (layer.kernel - 1) + 1
    if layer.padding == "same":  # TF and torch both put the odd pixel at the end
        before, after = (span - 1) // 2, (span - 1) - (span - 1) // 2
        x = np.pad(x, ((0, 0), (before, after), (before, after), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(x, (span, span), axis=(1, 2))
    win = win[:, :: layer.stride, :: layer.stride, :, :: layer.dilation, :: layer.dilation]
    return np.einsum("nhwcij,ijco->nhwo", win, kernel)


@dataclass
class Reference:
    """The float64 reference of one case: per-framework expectations and the conditioning."""

    keras: Result
    torch: Result
    condition: float  # product over layers of how much each magnifies relative rounding errors
    factors: dict[str, float] = field(default_factory=dict)  # extra magnification of single keys


def reference(case: Case, dtype: str) -> Reference:
    """float64 forward pass of ``case`` on its inputs and weights rounded to ``dtype``.

    Logits and loss are shared; the moving statistics follow each framework's documented
    update (Keras: biased batch variance; torch: unbiased batch variance in
    ``running_var``). ``condition`` estimates, layer by layer, how much a relative
    rounding error in a layer's input grows in its output: ``max(|W||h| + |b|) / max|Wh + b|``
    for a product (cancellation), ``max|h| / (min sigma * max|h_hat|)`` for a
    normalisation (division by a small spread), ``max|x f'(x)| / max|f(x)|`` for an
    activation; tolerances are multiplied by it (squared for gradients).
    """
    w = rounded(case.weights(), dtype)
    x, labels = case.inputs()
    h = np.asarray(x, dtype=dtype).astype(np.float64)
    states: dict[str, dict[str, np.ndarray]] = {"keras": {}, "torch": {}}
    condition = 1.0
    for i, layer in enumerate(case.arch.layers):
        h, magnification = _ref_layer(i, layer, h, w, case.training, states)
        condition *= magnification
    loss = np.asarray(reference_loss(h, labels, case.arch.loss))
    # The loss is log-sum-exp minus a logit: its rounding error is relative to the logits,
    # so a small loss (confident, correct logits) is known only to u * max|logits|.
    # Backwards, everything starts from softmax(z) - target, rounded relative to its terms:
    # saturated logits make it small and its relative error large.
    p, target, keep = _softmax_target(h, labels, case.arch.loss)
    factors = {"loss": _ratio(float(np.abs(h).max()), float(abs(loss))),
               "grad": _ratio(float((p + target)[keep].max()), float(np.abs(p - target)[keep].max()))}
    return Reference({"logits": h, "loss": loss, **states["keras"]}, {"logits": h, "loss": loss, **states["torch"]},
                     condition, factors)


def _ratio(num: float, den: float) -> float:
    return 1.0 if den == 0.0 else max(1.0, num / den)


def _ref_layer(i: int, layer: Layer, h: np.ndarray, w: Mapping[str, np.ndarray], training: bool,
               states: dict[str, dict[str, np.ndarray]]) -> tuple[np.ndarray, float]:
    if layer.kind == "flatten":
        return h.reshape(h.shape[0], -1), 1.0
    if layer.kind in ("dense", "conv"):
        kernel, bias = w[f"{i}.kernel"], w.get(f"{i}.bias") if layer.use_bias else None
        prod = (lambda a, k: a @ k) if layer.kind == "dense" else (lambda a, k: _conv(a, k, layer))
        z, z_abs = prod(h, kernel), prod(np.abs(h), np.abs(kernel))
        if bias is not None:
            z, z_abs = z + bias, z_abs + np.abs(bias)
        out = _act(layer.activation, z)
        slope = np.abs(_act(layer.activation, z * (1 + 1e-6)) - out) / 1e-6  # |x f'(x)|
        return out, _ratio(float(z_abs.max()), float(np.abs(z).max())) * _ratio(float(slope.max()), float(np.abs(out).max()))
    axes = tuple(range(h.ndim - 1)) if layer.kind == "batchnorm" else (h.ndim - 1,)
    mean, var = h.mean(axis=axes, keepdims=True), h.var(axis=axes, keepdims=True)
    if layer.kind == "batchnorm":
        mean, var = _batchnorm_stats(i, layer, h, mean, var, w, training, states)
    sigma = np.sqrt(var + layer.epsilon)
    h_hat = (h - mean) / sigma
    gamma, beta = w[f"{i}.gamma"], w[f"{i}.beta"]
    out = h_hat * gamma + beta
    # Rounding in h is relative to each row's (or channel's) own magnitude; dividing by
    # that row's sigma magnifies it.
    spread = np.abs(h).max(axis=axes, keepdims=True) / sigma
    magnification = _ratio(float(spread.max()), float(np.abs(h_hat).max()))
    magnification *= _ratio(float((np.abs(h_hat * gamma) + np.abs(beta)).max()), float(np.abs(out).max()))
    return out, magnification


def _batchnorm_stats(i: int, layer: Layer, h: np.ndarray, mean: np.ndarray, var: np.ndarray,
                     w: Mapping[str, np.ndarray], training: bool,
                     states: dict[str, dict[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    mm, mv, m = w[f"{i}.moving_mean"], w[f"{i}.moving_variance"], layer.momentum
    if not training:
        for fw in states:
            states[fw].update({f"state/{i}.moving_mean": mm, f"state/{i}.moving_variance": mv})
        return mm, mv
    n = h.size // h.shape[-1]
    bm, bv = mean.reshape(-1), var.reshape(-1)
    states["keras"].update({f"state/{i}.moving_mean": m * mm + (1 - m) * bm,
                            f"state/{i}.moving_variance": m * mv + (1 - m) * bv})
    states["torch"].update({f"state/{i}.moving_mean": m * mm + (1 - m) * bm,
                            f"state/{i}.moving_variance": m * mv + (1 - m) * bv * n / max(n - 1, 1)})
    return mean, var


def _softmax_target(logits: np.ndarray, labels: np.ndarray, loss: Loss) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """softmax(logits), the (smoothed) target distribution, and which examples count."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    classes = logits.shape[-1]
    target = np.eye(classes)[labels]
    if loss.kind == "categorical":
        target = target * (1.0 - loss.label_smoothing) + loss.label_smoothing / classes
    keep = labels != loss.ignore_class if loss.ignore_class is not None else np.ones(len(labels), bool)
    return p, target, keep


def reference_loss(logits: np.ndarray, labels: np.ndarray, loss: Loss) -> float:
    """Mean softmax cross-entropy over the examples not ignored; label smoothing as both
    frameworks document it: target = (1 - s) * one_hot + s / classes."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    _, target, keep = _softmax_target(logits, labels, loss)
    per_example = -(target * logp).sum(axis=-1)
    return float(per_example[keep].sum() / keep.sum())


# --------------------------------------------------------------------------- tolerances


def tolerances(case: Case, dtype: str, *, tf32: bool = False, condition: float = 1.0) -> tuple[Tolerance, Tolerance]:
    """(forward, backward) normwise tolerances of one framework's result against float64.

    ops: about four roundings per layer (product, bias, activation or normalisation
    steps) plus the loss's softmax; reduction: the longest sum in the forward pass (a
    fan-in, a batch-norm over N*H*W, the batch mean of the loss) and, backwards, the
    weight-gradient sums over batch and positions. ``tf32``: float32 products on a GPU
    in TensorFloat-32 (TensorFlow's default for matmul and conv, torch's for cuDNN conv).
    ``condition`` (from :func:`reference`) multiplies both: the backward pass goes through
    the same layers in reverse, dividing by the same normalisation spreads.
    """
    arch = case.arch
    depth = sum(layer.kind != "flatten" for layer in arch.layers)
    fwd_red, bwd_red = case.batch, case.batch
    for layer, s in zip(arch.layers, shapes(arch)):
        positions = int(np.prod(s[:-1])) if len(s) == 3 else 1
        if layer.kind == "dense":
            fwd_red = max(fwd_red, s[-1])
            bwd_red = max(bwd_red, layer.units, case.batch)
        elif layer.kind == "conv":
            fwd_red = max(fwd_red, layer.kernel**2 * s[-1])
            bwd_red = max(bwd_red, layer.kernel**2 * layer.units, case.batch * positions)
        elif layer.kind in ("layernorm", "batchnorm"):
            n = case.batch * positions if layer.kind == "batchnorm" else s[-1]
            fwd_red, bwd_red = max(fwd_red, n), max(bwd_red, n)
    ops = 4 * depth + 4
    return (_conditioned(_tol(dtype, ops, fwd_red, tf32), condition),
            _conditioned(_tol(dtype, 2 * ops, bwd_red, tf32), condition))


def _conditioned(tol: Tolerance, factor: float) -> Tolerance:
    return tol if factor <= 1.0 else Tolerance(tol.rtol * factor, f"{tol.why} * condition {factor:.3g}")


def _tol(dtype: str, ops: int, reduction: int, tf32: bool) -> Tolerance:
    if not (tf32 and dtype == "float32"):
        return tolerance(dtype, ops=ops, reduction=reduction)
    rtol = CONDITION * (ops + reduction) * TF32_ROUNDOFF
    return Tolerance(rtol, f"{CONDITION:g} * (ops {ops} + reduction {reduction}) * u(tf32)={TF32_ROUNDOFF:.3g} "
                           "(TensorFloat-32 products on the GPU)")


def tf32_in_use(framework: str, module: Any, case: Case, device_kind: str) -> bool:
    """Whether float32 products of ``case`` may run in TensorFloat-32 on this device: the
    frameworks' own switches (checks.tf32: TensorFlow on by default on Ampere+ GPUs; torch
    cuDNN convolutions on by default, matmul off by default, newer fp32_precision API first)."""
    if device_kind == "cpu":
        return False
    from .tf32 import tf32_reason  # reads torch's fp32_precision settings, or the legacy allow_tf32 ones

    del module  # the switches are read from the loaded framework itself
    return tf32_reason(framework, conv=any(layer.kind == "conv" for layer in case.arch.layers)) is not None


# A port's structural mistakes (a transposed kernel, another flatten order, a missing term)
# change results by tens of percent: beyond 10% a comparison cannot tell them from rounding.
# Such a case is too ill-conditioned for the dtype; the comparison is counted, not judged.
UNJUDGED_RTOL = 0.1


def compare(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
            fwd: Tolerance, bwd: Tolerance, *, what: str, factors: Mapping[str, float] | None = None,
            label: str = "") -> None:
    """Every key of ``expected`` must be in ``actual`` and agree within its tolerance.

    Logits, loss and states are compared normwise each; the gradients as one vector
    (input and all weights), normwise against the largest expected gradient entry: a
    gradient is a sum over examples and positions, and where those terms cancel (a bias
    before saturated logits) its rounding error is relative to the terms, not to the sum,
    so a per-tensor relative comparison would judge noise. A failure names the tensor.
    ``factors`` multiplies the forward tolerance of single keys (:attr:`Reference.factors`).
    ``label`` names the case in failure messages (evidence is kept per ``what``).
    """
    __tracebackhide__ = True
    missing = sorted(set(expected) - set(actual))
    if missing:
        raise ModelMismatch(f"{label}{what}: no result for {missing}, but both runs must give them")
    for key in sorted(k for k in expected if not k.startswith("grad/")):
        tol = _conditioned(fwd, (factors or {}).get(key, 1.0))
        if _judged(tol, what):
            try:
                assert_close(actual[key], expected[key], tol, what=f"{label}{what}: {key}", name=f"{what}: {key.split('/')[0]}")
            except ToleranceExceeded as exc:
                raise ModelMismatch(str(exc)) from None
    grads = sorted(k for k in expected if k.startswith("grad/"))
    bwd = _conditioned(bwd, (factors or {}).get("grad", 1.0))
    if grads and _judged(bwd, what):
        _compare_gradients({k: actual[k] for k in grads}, {k: expected[k] for k in grads}, bwd, what, label)


def _judged(tol: Tolerance, what: str) -> bool:
    if tol.rtol <= UNJUDGED_RTOL:
        return True
    recorder = evidence.current()
    if recorder is not None:
        recorder.notes["unjudged comparisons (ill-conditioned case)"] = (
            int(recorder.notes.get("unjudged comparisons (ill-conditioned case)", 0)) + 1)
    return False


def _compare_gradients(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], tol: Tolerance,
                       what: str, label: str) -> None:
    __tracebackhide__ = True
    scale = max(float(np.max(np.abs(v), initial=0.0)) for v in expected.values())
    errors = {}
    for key, e in expected.items():
        a = np.asarray(actual[key], dtype=np.float64)
        if a.shape != e.shape:
            raise ModelMismatch(f"{label}{what}: {key} has shape {a.shape}, but should be {e.shape}")
        if not np.all(np.isfinite(a)):
            raise ModelMismatch(f"{label}{what}: {key} has non-finite entries, the other run's are finite")
        errors[key] = float(np.max(np.abs(a - e), initial=0.0))
    worst = max(errors, key=lambda k: errors[k])
    rel = errors[worst] / scale if scale > 0 else (0.0 if errors[worst] == 0 else float("inf"))
    evidence.check(f"{what}: gradients", observed=rel, tolerance=tol.rtol, basis=tol.why, worst=worst)
    if not rel <= tol.rtol:
        raise ModelMismatch(
            f"{label}{what}: gradients: max|actual - expected| / max|expected gradient| = {rel:.3e}, but should be <= "
            f"{tol.rtol:.3e} [{tol.why}]; worst in {worst}: max abs error {errors[worst]:.3e}, largest gradient "
            f"entry {scale:.3e}"
        )


# --------------------------------------------------------------------------- Keras (any backend)


def keras_in_process(backend: str = "tensorflow") -> Any:
    """The Keras imported in this process, checked to run on ``backend`` (Keras fixes its
    backend at import: other backends run in fresh interpreters)."""
    import keras

    if keras.backend.backend() != backend:
        from ..frameworks import HarnessError

        raise HarnessError(
            f"Keras runs on the {keras.backend.backend()!r} backend in this process (KERAS_BACKEND); the in-process "
            f"tests need {backend!r}: unset KERAS_BACKEND for the pytest run"
        )
    return keras


def keras_model(keras: Any, case: Case, weights: Mapping[str, np.ndarray], dtype: str) -> Any:
    """A Keras Sequential model of ``case.arch`` holding ``weights`` (Keras layout)."""
    layers = [_keras_layer(keras, layer, dtype) for layer in case.arch.layers]
    model = keras.Sequential([keras.Input(shape=case.arch.input_shape, dtype=dtype), *layers])
    for i, layer in enumerate(layers):
        names = [n for n, _ in weight_shapes(case.arch) if n.split(".", 1)[0] == str(i)]
        if names:
            layer.set_weights([np.asarray(weights[n], dtype=dtype) for n in names])
    return model


def _keras_layer(keras: Any, layer: Layer, dtype: str) -> Any:
    L = keras.layers
    if layer.kind == "dense":
        return L.Dense(layer.units, activation=layer.activation, use_bias=layer.use_bias, dtype=dtype)
    if layer.kind == "conv":
        return L.Conv2D(layer.units, layer.kernel, strides=layer.stride, padding=layer.padding,
                        dilation_rate=layer.dilation, activation=layer.activation, use_bias=layer.use_bias, dtype=dtype)
    if layer.kind == "layernorm":
        return L.LayerNormalization(epsilon=layer.epsilon, dtype=dtype)
    if layer.kind == "batchnorm":
        return L.BatchNormalization(epsilon=layer.epsilon, momentum=layer.momentum, dtype=dtype)
    return L.Flatten(dtype=dtype)


def keras_loss(keras: Any, case: Case, dtype: str) -> tuple[Any, Callable[[np.ndarray], np.ndarray]]:
    """The Keras loss object and how it wants the labels (integers or one-hot)."""
    spec, classes = case.arch.loss, case.arch.classes
    if spec.kind == "categorical":
        obj = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=spec.label_smoothing, dtype=dtype)
        return obj, lambda y: np.eye(classes, dtype=dtype)[y]
    obj = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=spec.ignore_class, dtype=dtype)
    return obj, lambda y: y


def keras_state(keras: Any, model: Any, case: Case) -> Result:
    out: Result = {}
    for i, layer in enumerate(case.arch.layers):
        if layer.kind == "batchnorm":
            k = model.layers[i]
            out[f"state/{i}.moving_mean"] = _np(keras.ops.convert_to_numpy(k.moving_mean))
            out[f"state/{i}.moving_variance"] = _np(keras.ops.convert_to_numpy(k.moving_variance))
    return out


def _np(value: Any) -> np.ndarray:
    if hasattr(value, "numpy") and not hasattr(value, "detach"):
        value = value.numpy()
    elif hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


def tf_run(tf: Any, keras: Any, case: Case, dtype: str, device: str = "/CPU:0",
           weights: Mapping[str, np.ndarray] | None = None) -> Result:
    """The Keras model on TensorFlow: forward, loss and gradients (GradientTape).
    ``weights`` replaces the case's own (Keras layout)."""
    with tf.device(device):
        model = keras_model(keras, case, case.weights() if weights is None else weights, dtype)
        loss_obj, labels_for = keras_loss(keras, case, dtype)
        x, labels = case.inputs()
        xt = tf.constant(np.asarray(x, dtype=dtype))
        names, variables = _keras_trainables(model, case)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            logits = model(xt, training=case.training)
            loss = loss_obj(labels_for(labels), logits)
        grads = tape.gradient(loss, [xt, *variables])
    out = {"logits": _np(logits), "loss": _np(loss), "grad/x": _np(grads[0])}
    out.update({f"grad/{n}": _np(g) for n, g in zip(names, grads[1:])})
    return {**out, **keras_state(keras, model, case)}


def _keras_trainables(model: Any, case: Case) -> tuple[list[str], list[Any]]:
    names, variables = [], []
    for i, layer in enumerate(case.arch.layers):
        k = model.layers[i]
        attrs = {"dense": ("kernel", "bias"), "conv": ("kernel", "bias"),
                 "layernorm": ("gamma", "beta"), "batchnorm": ("gamma", "beta")}.get(layer.kind, ())
        for attr in attrs:
            if attr == "bias" and not layer.use_bias:
                continue
            names.append(f"{i}.{attr}")
            variables.append(getattr(k, attr))
    return names, variables


# --------------------------------------------------------------------------- torch


def torch_model(torch: Any, case: Case, weights: Mapping[str, np.ndarray], dtype: str, device: str = "cpu") -> Any:
    """``case.arch`` as a torch.nn.Module with ``weights`` transferred from Keras's layout.

    The module takes Keras-layout inputs (N, H, W, C) and runs NCHW inside."""
    nn = torch.nn
    modules = nn.ModuleList(_torch_layer(nn, layer, s) for layer, s in zip(case.arch.layers, shapes(case.arch)))
    modules.to(dtype=getattr(torch, dtype))  # first: copying float64 data into float32 modules would round it
    for i, layer in enumerate(case.arch.layers):
        _transfer(torch, modules[i], layer, i, weights)
    return _module_class(torch)(case.arch, modules).to(device=device)


def _torch_layer(nn: Any, layer: Layer, s: tuple[int, ...]) -> Any:
    if layer.kind == "dense":
        return nn.Linear(s[-1], layer.units, bias=layer.use_bias)
    if layer.kind == "conv":
        return nn.Conv2d(s[-1], layer.units, layer.kernel, stride=layer.stride, dilation=layer.dilation,
                         padding="same" if layer.padding == "same" else 0, bias=layer.use_bias)
    if layer.kind == "layernorm":
        return nn.LayerNorm(s[-1], eps=layer.epsilon)
    if layer.kind == "batchnorm":
        cls = nn.BatchNorm2d if len(s) == 3 else nn.BatchNorm1d
        return cls(s[-1], eps=layer.epsilon, momentum=1.0 - layer.momentum)
    return nn.Identity()


def _transfer(torch: Any, module: Any, layer: Layer, i: int, weights: Mapping[str, np.ndarray]) -> None:
    def put(param: Any, value: np.ndarray) -> None:
        with torch.no_grad():
            param.copy_(torch.from_numpy(np.ascontiguousarray(value, dtype=np.float64)))

    if layer.kind == "dense":
        put(module.weight, weights[f"{i}.kernel"].T)
    elif layer.kind == "conv":
        put(module.weight, weights[f"{i}.kernel"].transpose(3, 2, 0, 1))  # HWIO -> OIHW
    if layer.kind in ("dense", "conv") and layer.use_bias:
        put(module.bias, weights[f"{i}.bias"])
    if layer.kind in ("layernorm", "batchnorm"):
        put(module.weight, weights[f"{i}.gamma"])
        put(module.bias, weights[f"{i}.beta"])
    if layer.kind == "batchnorm":
        put(module.running_mean, weights[f"{i}.moving_mean"])
        put(module.running_var, weights[f"{i}.moving_variance"])


_MODULE_CLASS: dict[int, Any] = {}


def _module_class(torch: Any) -> Any:
    if id(torch) in _MODULE_CLASS:
        return _MODULE_CLASS[id(torch)]
    F = torch.nn.functional
    acts = {"linear": lambda h: h, "relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "gelu": F.gelu}

    class PortedModel(torch.nn.Module):
        def __init__(self, arch: Architecture, modules: Any) -> None:
            super().__init__()
            self.arch = arch
            self.blocks = modules

        def forward(self, x: Any) -> Any:
            h = x.permute(0, 3, 1, 2) if x.dim() == 4 else x
            for layer, module in zip(self.arch.layers, self.blocks):
                if layer.kind == "flatten":
                    h = h.permute(0, 2, 3, 1).flatten(1)  # Keras flattens channels-last: H, W, C
                elif layer.kind == "layernorm" and h.dim() == 4:
                    h = module(h.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # normalise over channels
                else:
                    h = module(h)
                if layer.kind in ("dense", "conv"):
                    h = acts[layer.activation](h)
            return h

    _MODULE_CLASS[id(torch)] = PortedModel
    return PortedModel


def torch_loss(torch: Any, case: Case, logits: Any, labels: Any) -> Any:
    spec = case.arch.loss
    ignore = -100 if spec.ignore_class is None else spec.ignore_class  # -100: torch's default, no class
    return torch.nn.functional.cross_entropy(logits, labels, ignore_index=ignore, label_smoothing=spec.label_smoothing)


def torch_run(torch: Any, case: Case, dtype: str, device: str = "cpu",
              weights: Mapping[str, np.ndarray] | None = None) -> Result:
    """The ported model on torch: forward, loss and gradients (autograd).
    ``weights`` replaces the case's own (Keras layout)."""
    model = torch_model(torch, case, case.weights() if weights is None else weights, dtype, device)
    model.train(case.training)
    x, labels = case.inputs()
    xt = torch.tensor(x, dtype=getattr(torch, dtype), device=device, requires_grad=True)
    with warnings.catch_warnings():
        # torch notes that padding='same' with an even kernel pads a copy: true, and harmless here.
        warnings.filterwarnings("ignore", message="Using padding='same' with even kernel")
        logits = model(xt)
    loss = torch_loss(torch, case, logits, torch.tensor(labels, device=device))
    names, params = _torch_trainables(model, case)
    grads = torch.autograd.grad(loss, [xt, *params])
    out = {"logits": _np(logits), "loss": _np(loss), "grad/x": _np(grads[0])}
    for name, g in zip(names, grads[1:]):
        g = _np(g)
        if name.endswith(".kernel"):
            g = g.T if g.ndim == 2 else g.transpose(2, 3, 1, 0)  # back to Keras layout
        out[f"grad/{name}"] = g
    for i, layer in enumerate(case.arch.layers):
        if layer.kind == "batchnorm":
            out[f"state/{i}.moving_mean"] = _np(model.blocks[i].running_mean)
            out[f"state/{i}.moving_variance"] = _np(model.blocks[i].running_var)
    return out


def _torch_trainables(model: Any, case: Case) -> tuple[list[str], list[Any]]:
    names, params = [], []
    for i, layer in enumerate(case.arch.layers):
        m = model.blocks[i]
        if layer.kind in ("dense", "conv"):
            names.append(f"{i}.kernel")
            params.append(m.weight)
            if layer.use_bias:
                names.append(f"{i}.bias")
                params.append(m.bias)
        elif layer.kind in ("layernorm", "batchnorm"):
            names += [f"{i}.gamma", f"{i}.beta"]
            params += [m.weight, m.bias]
    return names, params


# --------------------------------------------------------------------------- the claims' oracles


def check_same_model(tf_result: Result, torch_result: Result, case: Case, dtype: str, *,
                     tf32: tuple[bool, bool] = (False, False), label: str = "") -> None:
    """Each framework against the float64 reference, then TensorFlow against torch.

    The reference checks logits, loss and each framework's documented moving-statistics
    update; the cross check adds every gradient (input and weights)."""
    __tracebackhide__ = True
    ref = reference(case, dtype)
    tf_tol = tolerances(case, dtype, tf32=tf32[0], condition=ref.condition)
    torch_tol = tolerances(case, dtype, tf32=tf32[1], condition=ref.condition)
    compare(tf_result, ref.keras, *tf_tol, what="tensorflow vs float64 reference", label=label, factors=ref.factors)
    compare(torch_result, ref.torch, *torch_tol, what="torch vs float64 reference", label=label, factors=ref.factors)
    shared = {k: v for k, v in torch_result.items() if not k.startswith("state/")}
    both = (combined(tf_tol[0], torch_tol[0]), combined(tf_tol[1], torch_tol[1]))
    compare({k: v for k, v in tf_result.items() if not k.startswith("state/")}, shared, *both,
            what="tensorflow vs torch", label=label, factors=ref.factors)


def check_backends(results: Mapping[str, Result], case: Case, dtype: str, *, tf32: bool = False, label: str = "") -> None:
    """Keras on each backend against the float64 reference, then the backends pairwise."""
    __tracebackhide__ = True
    ref = reference(case, dtype)
    fwd, bwd = tolerances(case, dtype, tf32=tf32, condition=ref.condition)
    names = sorted(results)
    for name in names:
        compare(results[name], ref.keras, fwd, bwd, what=f"keras[{name}] vs float64 reference", label=label, factors=ref.factors)
    for a, b in zip(names, names[1:]):
        compare(results[a], results[b], combined(fwd, fwd), combined(bwd, bwd), what=f"keras[{a}] vs keras[{b}]", label=label,
                factors=ref.factors)


def check_backend(result: Result, case: Case, dtype: str, *, name: str, dtype_seen: str | None = None,
                  other: tuple[str, Result] | None = None, tf32: bool = False, label: str = "") -> None:
    """One Keras backend's verdict: its result against the float64 reference, then against
    ``other`` (another backend's result, both rounded: tolerances add), then the dtype Keras
    gave its logits (``dtype_seen``), which must be the model's. The reference comes first:
    a result that is wrong in value is reported as such, whatever its dtype."""
    __tracebackhide__ = True
    ref = reference(case, dtype)
    fwd, bwd = tolerances(case, dtype, tf32=tf32, condition=ref.condition)
    compare(result, ref.keras, fwd, bwd, what=f"keras[{name}] vs float64 reference", label=label, factors=ref.factors)
    if other is not None:
        compare(result, other[1], combined(fwd, fwd), combined(bwd, bwd), what=f"keras[{name}] vs keras[{other[0]}]",
                label=label, factors=ref.factors)
    if dtype_seen is not None and dtype_seen != dtype:
        raise ModelMismatch(f"{label}keras[{name}]: the logits of a {dtype} model are {dtype_seen} tensors, "
                            f"but layers with dtype={dtype!r} compute in {dtype}")


def check_devices(gpu: Result, cpu: Result, case: Case, dtype: str, *, tf32: bool, label: str) -> None:
    """A GPU run against the CPU run of the same oracle: both rounded, tolerances add."""
    __tracebackhide__ = True
    ref = reference(case, dtype)
    g_fwd, g_bwd = tolerances(case, dtype, tf32=tf32, condition=ref.condition)
    c_fwd, c_bwd = tolerances(case, dtype, condition=ref.condition)
    compare(gpu, cpu, combined(g_fwd, c_fwd), combined(g_bwd, c_bwd), what="gpu vs cpu", label=label, factors=ref.factors)


ACTIVATION_FORMULAS = ACTIVATIONS + ("gelu_tanh",)


def activation_reference(name: str, x: np.ndarray) -> np.ndarray:
    """The documented formula in float64; gelu_tanh is GELU's tanh approximation."""
    if name == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return _act(name, x)


def framework_activation(framework: str, module: Any, name: str) -> Callable[[Any], Any]:
    """The activation as a user of each framework calls it: Keras's activations on
    TensorFlow (what ``Dense(activation=...)`` runs), torch.nn.functional on torch."""
    if framework == "tensorflow":
        import keras

        if name == "gelu_tanh":
            return lambda t: keras.activations.gelu(t, approximate=True)
        return keras.activations.get(name)
    F = module.nn.functional
    table = {"linear": lambda t: t, "relu": F.relu, "tanh": module.tanh, "sigmoid": module.sigmoid,
             "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}
    return table[name]


def check_activation(actual: np.ndarray, x: np.ndarray, name: str, dtype: str, *, what: str) -> None:
    """Normwise against the float64 formula on the same (rounded) inputs; the tolerance is
    the dtype's for a few elementwise operations, times the normwise condition
    ``max|x f'(x)| / max|f(x)|`` of the function on these inputs."""
    __tracebackhide__ = True
    xr = np.asarray(x, dtype=dtype).astype(np.float64)
    expected = activation_reference(name, xr)
    slope = np.abs(activation_reference(name, xr * (1 + 1e-6)) - expected) / 1e-6
    tol = _conditioned(tolerance(dtype, ops=4), _ratio(float(slope.max(initial=0.0)), float(np.abs(expected).max(initial=0.0))))
    assert_close(actual, expected, tol, what=what, name=f"{name} ({dtype})")


# --------------------------------------------------------------------------- fresh interpreters


def write_batch(path: str, batch: Sequence[tuple[Case, str]]) -> None:
    """(case, dtype) pairs with their weights and inputs, for a fresh interpreter: weights
    as data, not as seeds, so both processes hold the very same arrays."""
    arrays: dict[str, np.ndarray] = {"count": np.asarray(len(batch))}
    for j, (case, dtype) in enumerate(batch):
        arrays[f"{j}/case"] = np.asarray(json.dumps({"arch": case.arch.to_json(), "batch": case.batch, "dtype": dtype,
                                                     "training": case.training, "seed": case.seed,
                                                     "logit_scale": case.logit_scale}))
        x, labels = case.inputs()
        arrays[f"{j}/x"], arrays[f"{j}/labels"] = x, labels
        arrays.update({f"{j}/w/{k}": v for k, v in case.weights().items()})
    np.savez(path, **arrays)


def read_batch(path: str) -> list[tuple[Case, str, dict[str, np.ndarray], np.ndarray, np.ndarray]]:
    with np.load(path) as data:
        out = []
        for j in range(int(data["count"])):
            raw = json.loads(str(data[f"{j}/case"]))
            case = Case(Architecture.from_json(raw["arch"]), raw["batch"], raw["training"], raw["seed"], raw["logit_scale"])
            weights = {k.split("/", 2)[2]: data[k] for k in data.files if k.startswith(f"{j}/w/")}
            out.append((case, str(raw["dtype"]), weights, data[f"{j}/x"], data[f"{j}/labels"]))
    return out


def keras_backend_worker(in_path: str, out_path: str, only: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs in a fresh interpreter with KERAS_BACKEND set: every case of the batch on it
    (or those whose dtype is in ``only``; the others get no results and dtype None).

    Besides the results, the file holds ``meta`` (:func:`read_meta`): the backend's own
    version and settings (:func:`backend_facts`), each case's logits dtype as Keras
    reports it, and the warnings the run gave (JAX warns when it truncates float64)."""
    import keras

    results: dict[str, np.ndarray] = {}
    dtypes: list[str | None] = []
    batch = read_batch(in_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # each distinct warning once: evidence, not noise
        for j, (case, dtype, weights, x, labels) in enumerate(batch):
            if only is not None and dtype not in only:
                dtypes.append(None)
                continue
            model = keras_model(keras, case, weights, dtype)
            loss_obj, labels_for = keras_loss(keras, case, dtype)
            logits = model(np.asarray(x, dtype=dtype), training=case.training)
            loss = loss_obj(labels_for(labels), logits)
            dtypes.append(keras.backend.standardize_dtype(logits.dtype))
            results[f"{j}/logits"] = _np(keras.ops.convert_to_numpy(logits))
            results[f"{j}/loss"] = _np(keras.ops.convert_to_numpy(loss))
            results.update({f"{j}/{k}": v for k, v in keras_state(keras, model, case).items()})
    seen = sorted({f"{w.category.__name__}: {str(w.message)[:300]}" for w in caught})
    meta = {**backend_facts(keras.backend.backend()), "dtypes": dtypes, "warnings": seen[:8], "warning_kinds": len(seen)}
    np.savez(out_path, meta=np.asarray(json.dumps(meta)), **results)
    return {"backend": keras.backend.backend(), "keras": keras.__version__, "cases": len(batch)}


def backend_facts(backend: str) -> dict[str, Any]:
    """The framework under a Keras backend: its version, and for JAX the two settings that
    decide what a float64 model computes in and where (jax_enable_x64, the platform)."""
    if backend == "jax":
        import jax

        return {"version": jax.__version__, "x64": bool(jax.config.jax_enable_x64), "platform": jax.default_backend()}
    module = __import__(backend)
    return {"version": str(module.__version__)}


def read_meta(path: str) -> dict[str, Any]:
    """The ``meta`` record :func:`keras_backend_worker` wrote beside the results."""
    with np.load(path) as data:
        return dict(json.loads(str(data["meta"]))) if "meta" in data.files else {}


# The Keras backends the seed names, as fresh-interpreter runs: the child's environment per
# run. JAX runs twice: as installed (jax_enable_x64 off, JAX's default) and with
# JAX_ENABLE_X64=1, the switch JAX documents for float64 arrays. The flag is set both ways,
# so a value inherited from the user's shell cannot turn one run into the other.
KERAS_RUNS: dict[str, dict[str, str]] = {
    "tensorflow": {"KERAS_BACKEND": "tensorflow"},
    "torch": {"KERAS_BACKEND": "torch"},
    "jax": {"KERAS_BACKEND": "jax", "JAX_ENABLE_X64": "0"},
    "jax-x64": {"KERAS_BACKEND": "jax", "JAX_ENABLE_X64": "1"},
}
JAX_INSTALL = "pip install 'pytest-dlconform[jax]' (jax and jaxlib, a CPU build)"


def keras_run_missing(run: str, find_spec: Callable[[str], Any] | None = None) -> str | None:
    """Why ``run`` cannot start here (a package this environment lacks), or None. TensorFlow
    and torch: the plugin's tf and torch fixtures report those missing."""
    if KERAS_RUNS[run]["KERAS_BACKEND"] != "jax":
        return None
    if find_spec is None:
        from importlib.util import find_spec
    absent = [name for name in ("jax", "jaxlib") if find_spec(name) is None]
    if not absent:
        return None
    return (f"{' and '.join(absent)} {'is' if len(absent) == 1 else 'are'} not installed "
            f"(importlib.util.find_spec returned None), so Keras has no JAX backend here: {JAX_INSTALL}")


def keras_run_env(run: str, device_kind: str) -> dict[str, str]:
    """The child's environment: the backend, its settings, and on the CPU instance of a test
    every backend kept on the CPU (JAX_PLATFORMS=cpu also skips JAX's GPU/TPU probing and
    its warnings)."""
    env = {**KERAS_RUNS[run], "TF_CPP_MIN_LOG_LEVEL": "2"}
    if device_kind == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        if env["KERAS_BACKEND"] == "jax":
            env["JAX_PLATFORMS"] = "cpu"
    return env


def keras_run_problem(run: str, meta: Mapping[str, Any]) -> str | None:
    """A child that did not get the settings its run asked for (a harness error), or None."""
    want = KERAS_RUNS[run].get("JAX_ENABLE_X64")
    if want is not None and meta.get("x64") != (want == "1"):
        return f"JAX_ENABLE_X64={want} gave jax_enable_x64={meta.get('x64')} in the child: {dict(meta)}"
    return None


def keras_run_device_reason(run: str, meta: Mapping[str, Any], device_kind: str) -> str | None:
    """Why a run that worked cannot stand for ``device_kind`` (a CPU-only jaxlib on a GPU test)."""
    if KERAS_RUNS[run]["KERAS_BACKEND"] == "jax" and device_kind != "cpu" and meta.get("platform") == "cpu":
        return (f"jax {meta.get('version')} here has no GPU backend (jax.default_backend() is 'cpu'), so Keras on "
                f"JAX cannot run on the {device_kind}: pip install 'jax[cuda12]'")
    return None


def read_results(path: str, count: int) -> list[Result]:
    with np.load(path) as data:
        return [{k.split("/", 1)[1]: data[k] for k in data.files if k.split("/", 1)[0] == str(j)} for j in range(count)]


# --------------------------------------------------------------------------- side-by-side steps


@dataclass
class Step:
    """One training step's computation (forward, loss, gradients), ready to time and to check."""

    run: Callable[[], Any]  # the step; returns framework values (synchronised: loss as a float)
    result: Callable[[], Result]  # one more step, converted to a result dict


def speed_steps(tf: Any, keras: Any, torch: Any, case: Case, dtype: str, tf_device: str, torch_device: str) -> dict[str, Step]:
    """The same model and batch as a torch eager step, a TensorFlow eager step and the
    same TensorFlow step under tf.function (traced once: fixed shapes and dtypes)."""
    x, labels = case.inputs()
    weights = case.weights()
    with tf.device(tf_device):
        model = keras_model(keras, case, weights, dtype)
        loss_obj, labels_for = keras_loss(keras, case, dtype)
        xt, yt = tf.constant(np.asarray(x, dtype=dtype)), tf.constant(labels_for(labels))
    names, variables = _keras_trainables(model, case)

    def tf_step() -> Any:
        with tf.device(tf_device):
            with tf.GradientTape() as tape:
                logits = model(xt, training=case.training)
                loss = loss_obj(yt, logits)
            return logits, loss, tape.gradient(loss, variables)

    graph_step = tf.function(tf_step)
    tmodel = torch_model(torch, case, weights, dtype, torch_device)
    tmodel.train(case.training)
    tnames, params = _torch_trainables(tmodel, case)
    xs = torch.tensor(x, dtype=getattr(torch, dtype), device=torch_device)
    ys = torch.tensor(labels, device=torch_device)

    def torch_step() -> Any:
        logits = tmodel(xs)
        loss = torch_loss(torch, case, logits, ys)
        return logits, loss, torch.autograd.grad(loss, params)

    def tf_result(step: Callable[[], Any]) -> Callable[[], Result]:
        def convert() -> Result:
            logits, loss, grads = step()
            return {"logits": _np(logits), "loss": _np(loss), **{f"grad/{n}": _np(g) for n, g in zip(names, grads)}}
        return convert

    def torch_result() -> Result:
        logits, loss, grads = torch_step()
        out = {"logits": _np(logits), "loss": _np(loss)}
        for n, g in zip(tnames, grads):
            g = _np(g)
            out[f"grad/{n}"] = g.T if n.endswith(".kernel") and g.ndim == 2 else g
        return out

    return {
        "torch eager": Step(lambda: float(torch_step()[1].detach()), torch_result),
        "tf eager": Step(lambda: float(tf_step()[1]), tf_result(tf_step)),
        "tf.function": Step(lambda: float(graph_step()[1]), tf_result(graph_step)),
    }


# --------------------------------------------------------------------------- timing


def time_per_call(fn: Callable[[], Any], *, number: int = 5, repeats: int = 5, warmup: int = 2) -> float:
    """Median seconds per call over ``repeats`` runs of ``number`` calls (a measurement, for
    evidence only: a test never asserts on it)."""
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)
