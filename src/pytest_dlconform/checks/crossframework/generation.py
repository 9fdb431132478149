"""Generated cases: choices from hypothesis (which shrinks) or from a seeded rng (coverage
batches for fresh interpreters, where one process must still cover every feature)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import numpy as np

from .architectures import ACTIVATIONS, EPSILONS, MOMENTA, NORMS, Architecture, Case, Layer, Loss, conv_output

T = TypeVar("T")


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


class ForcingChooser:
    """A chooser that answers some labels with forced values (when they are among the
    options) and draws the rest from ``inner``: coverage batches force features by name."""

    def __init__(self, inner: Chooser, forced: dict[str, Any]) -> None:
        self.inner, self.forced = inner, forced

    def choice(self, options: Sequence[T], label: str) -> T:
        if label in self.forced and self.forced[label] in options:
            return self.forced[label]  # a forced value is one of the options
        return self.inner.choice(options, label)

    def integer(self, low: int, high: int, label: str) -> int:
        value = self.forced.get(label)
        return int(value) if isinstance(value, int) and low <= value <= high else self.inner.integer(low, high, label)


# Forced per coverage case (cycled): losses, and for conv cases the conv variants. Together
# with the activations (cycled too) every documented mode occurs in every batch.
_LOSSES = ({"loss": "sparse", "ignore a class": False}, {"loss": "sparse", "ignore a class": True},
           {"loss": "categorical", "label smoothing": 0.0}, {"loss": "categorical", "label smoothing": 0.35})
_CONVS = ({"stride": 2}, {"stride": 1, "dilation": 2, "padding": "valid"}, {"stride": 1, "padding": "same"},
          {"use_bias": False})


def coverage_batch(seed: int, activations: Sequence[str] = ACTIVATIONS) -> list[Case]:
    """A batch that has every feature at least once, details from ``seed``: for fresh
    interpreters, where one example per process must still cover dense, conv, both
    normalisations in both modes, each loss (sparse with and without ignore_class,
    categorical with and without label smoothing), strided, dilated and 'same'-padded
    convolutions, layers without bias and every activation."""
    c = RandomChooser(np.random.default_rng(seed))
    plan = [("dense", "none", False), ("dense", "layernorm", False), ("dense", "batchnorm", False),
            ("dense", "batchnorm", True), ("conv", "none", False), ("conv", "layernorm", True),
            ("conv", "batchnorm", False), ("conv", "batchnorm", True)]
    out = []
    for j, (f, n, t) in enumerate(plan):
        forced: dict[str, Any] = {"activation": activations[j % len(activations)], **_LOSSES[j % len(_LOSSES)]}
        if f == "conv":
            forced.update(_CONVS[j % len(_CONVS)])
        elif j % 2:
            forced["use_bias"] = False
        out.append(draw_case(ForcingChooser(c, forced), family=f, norm=n, training=t, activations=activations))
    return out


def case_modes(case: Case, dtype: str) -> list[str]:
    """The interop.same-model modes a case exercises."""
    arch, modes = case.arch, [f"dtype={dtype}", "mode=training" if case.training else "mode=inference"]
    modes.append("family=conv" if any(layer.kind == "conv" for layer in arch.layers) else "family=dense")
    norms = {layer.kind for layer in arch.layers if layer.kind in ("layernorm", "batchnorm")}
    modes += [f"norm={k}" for k in sorted(norms)] or ["norm=none"]
    for layer in arch.layers:
        if layer.kind in ("dense", "conv") and layer is not arch.layers[-1]:
            modes.append(f"act={layer.activation}")
        if layer.kind in ("dense", "conv") and not layer.use_bias:
            modes.append("use_bias=False")
        if layer.kind == "conv":
            modes.append(f"padding={layer.padding}")
            modes += ["conv-stride=2"] if layer.stride > 1 else []
            modes += ["conv-dilation=2"] if layer.dilation > 1 else []
    loss = arch.loss
    if loss.kind == "sparse":
        modes.append("loss=sparse+ignore_class" if loss.ignore_class is not None else "loss=sparse")
    else:
        modes.append("loss=categorical+label_smoothing" if loss.label_smoothing else "loss=categorical")
    return list(dict.fromkeys(modes))
