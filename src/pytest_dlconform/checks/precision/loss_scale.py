"""Dynamic loss scaling: the documented state machine of torch's GradScaler and Keras's
LossScaleOptimizer (the latter with factors 2 and 1/2), written here once from their
documentation, and the check that holds a scaler to it.

Importing this module imports no framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class DynamicScale:
    """The documented dynamic loss-scale state machine (torch GradScaler.update; Keras
    LossScaleOptimizer with growth 2, backoff 1/2 and dynamic_growth_steps as interval).

    A step with non-finite gradients is skipped and multiplies the scale by
    ``backoff_factor``; ``growth_interval`` consecutive finite steps multiply it by
    ``growth_factor``. The scale is a float32 value, each update rounded to float32.
    """

    scale: float
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    tracker: int = 0
    applied: int = 0
    history: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scale = float(np.float32(self.scale))

    def update(self, finite: bool) -> None:
        self.history.append(self.scale)
        if not finite:
            self.scale, self.tracker = float(np.float32(self.scale * self.backoff_factor)), 0
            return
        self.applied += 1
        self.tracker += 1
        if self.tracker == self.growth_interval:
            self.scale, self.tracker = float(np.float32(self.scale * self.growth_factor)), 0


class ScaleMismatch(AssertionError):
    """A loss scaler's scale or growth tracker left the documented state machine."""


def check_scale(scale: float, ref: DynamicScale, where: str, *, tracker: int | None = None, ulps: int = 0) -> None:
    """The observed scale (and growth tracker) against the state machine; ``ulps`` float32
    roundings of slack for factors that are not powers of two."""
    __tracebackhide__ = True
    slack = ulps * float(np.finfo(np.float32).eps) * abs(ref.scale)
    if not abs(scale - ref.scale) <= slack:
        raise ScaleMismatch(f"{where}: scale {scale!r}, but should be {ref.scale!r} (scales before each step so far: "
                            f"{ref.history}; growth factor {ref.growth_factor}, backoff {ref.backoff_factor}, "
                            f"interval {ref.growth_interval})")
    if tracker is not None and tracker != ref.tracker:
        raise ScaleMismatch(f"{where}: growth tracker {tracker}, but should be {ref.tracker} "
                            f"({ref.tracker} consecutive finite steps since the scale last changed)")


def scaled_gradient(gradient: np.ndarray, scale: float) -> np.ndarray:
    """The gradient of ``scale * loss`` in float32 (it may overflow to inf: that is the point)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (np.asarray(gradient, np.float32) * np.float32(scale)).astype(np.float32)
