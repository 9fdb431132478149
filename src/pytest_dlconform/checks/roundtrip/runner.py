"""The round trip as a suite runs it: export, load back here, compare, and queue the artifact
for one fresh interpreter per batch (:class:`RoundTrip`); :class:`Expected` says what an
artifact must give back, :func:`check_loaded` applies the oracles to what came back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..numerics import Tolerance
from .artifacts import Artifact
from .errors import OutputMismatch
from .fresh_batch import FreshBatch
from .loaders import Loaded, load
from .models import ModelSpec
from .oracles import (
    _same_keys,
    assert_close_outputs,
    assert_same_outputs,
    assert_same_signature,
    assert_same_state,
    assert_within_bound,
)


@dataclass
class Expected:
    """What an artifact must give back; ``tol`` None means bitwise outputs."""

    outputs: list[dict[str, np.ndarray]]
    state: dict[str, np.ndarray] | None = None  # None: the format keeps no named state
    signature: dict[str, Any] | None = None
    tol: Tolerance | None = None
    bounds: list[np.ndarray] | None = None  # elementwise error bounds (quantised formats), one per input
    scales: list[float] | None = None  # per input, the magnitude the tolerance is relative to


def check_loaded(outputs: Sequence[Mapping[str, Any]], state: Mapping[str, Any], signature: Mapping[str, Any],
                 expected: Expected, *, what: str, where: str) -> None:
    """Compare what came back from an artifact with what went in."""
    __tracebackhide__ = True
    for j, (got, want) in enumerate(zip(outputs, expected.outputs)):
        shape = next(iter(want.values())).shape if want else ()
        label = f"{what} [{where}, batch {j} of shape {shape}]"
        if expected.bounds is not None:
            _same_keys(got, want, label, "outputs", OutputMismatch)
            for key in sorted(want):
                assert_within_bound(got[key], want[key], expected.bounds[j], what=f"{label}, output {key!r}",
                                    name=f"quantisation error / bound ({where})")
        elif expected.tol is None:
            assert_same_outputs(got, want, what=label, name=f"outputs bitwise ({where})")
        else:
            scale = expected.scales[j] if expected.scales else 0.0
            assert_close_outputs(got, want, expected.tol, what=label, name=f"outputs normwise relative error ({where})",
                                 scale=scale)
    if expected.state is not None:
        assert_same_state(state, expected.state, what=f"{what} [{where}]")
    if expected.signature is not None:
        assert_same_signature(signature, expected.signature, what=f"{what} [{where}]")


@dataclass
class RoundTrip:
    """Export, load back here, compare; queue the artifact for one fresh interpreter per batch."""

    workdir: Path
    timeout: float
    fresh: bool = True
    _queued: list[tuple[int, Expected, str]] = field(default_factory=list)
    _count: int = 0

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self._batch = FreshBatch(self.workdir / "fresh", self.timeout)

    def path(self, fmt: str) -> Path:
        """A new artifact path (the export helper refuses to overwrite, so each example gets its own)."""
        self._count += 1
        folder = self.workdir / "artifacts"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{self._count:03d}-{fmt}"

    def check(self, artifact: Artifact, inputs: list[np.ndarray], expected: Expected, *, what: str,
              spec: ModelSpec | None = None, device: str | None = None) -> Loaded:
        loaded = load(artifact.path, artifact.format, spec, device)
        outputs = [loaded.run(x) for x in inputs]
        check_loaded(outputs, loaded.state(), loaded.signature(), expected, what=what, where="same process")
        if self.fresh:
            index = self._batch.add(artifact, artifact.format, inputs, spec, device)
            self._queued.append((index, expected, what))
        return loaded

    def finish(self) -> None:
        """Load every queued artifact in one fresh interpreter and compare (call once, at the end)."""
        __tracebackhide__ = True
        results = self._batch.run(what=f"fresh interpreter loading {len(self._queued)} artifact(s)")
        for (_, expected, what), res in zip(self._queued, results):
            check_loaded(res.outputs, res.state, res.signature, expected, what=what, where="fresh interpreter")
        self._queued.clear()
