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


def coverage_batch(seed: int, activations: Sequence[str] = ACTIVATIONS) -> list[Case]:
    """A batch that has every feature at least once, details from ``seed``: for fresh
    interpreters, where one example per process must still cover dense, conv, both
    normalisations in both modes and both losses."""
    c = RandomChooser(np.random.default_rng(seed))
    plan = [("dense", "none", False), ("dense", "layernorm", False), ("dense", "batchnorm", False),
            ("dense", "batchnorm", True), ("conv", "none", False), ("conv", "layernorm", True),
            ("conv", "batchnorm", False), ("conv", "batchnorm", True)]
    return [draw_case(c, family=f, norm=n, training=t, activations=activations) for f, n, t in plan]
