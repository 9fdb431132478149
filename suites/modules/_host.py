"""Device-neutral glue of the modules suites: a torch tensor as numpy, from any device."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_dlconform.api import adapter


def host(t: Any) -> np.ndarray:
    """A torch tensor as a numpy array, from whatever device the test runs on (the torch
    adapter's conversion: detached, on the host, bfloat16 widened to float32)."""
    return adapter("torch").numpy(t)
