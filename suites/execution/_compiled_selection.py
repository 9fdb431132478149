"""How the compiled suites select and batch their (mode, op) tests: chunks of consecutive ops
(:func:`parts`), and the quick profile's selection (``--dl-profile=quick``).

Per compiled mode, the ops of :func:`pytest_dlconform.api.compiled_ops` for the run's
``--dl-seed`` (one op of every op family per mode, a deterministic rotation by the seed); the
suite's other (mode, op) tests are deselected (pytest counts them), before the plugin selects
claims and shards, so the suite's chunks compile the sampled ops only, and the coverage and
combinations ledgers expect exactly this subset of a quick report. A test module cannot
implement ``pytest_collection_modifyitems``: the selection is registered as a plugin object,
once per run, while the module collects (:func:`register`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import compiled_ops, of_run
from pytest_dlconform.api.programs import samples

#: An item's (compiled mode, op), or None for a test of the module that is not per op.
PairOf = Callable[[Any], "tuple[str, str] | None"]


def parts(names: Sequence[str], n: int) -> tuple[tuple[str, ...], ...]:
    """``names`` (ops of the library) in ``n`` runs of consecutive ops with (about) as many
    parameter classes each."""
    weights = np.cumsum([len({s.params for s in samples(name)}) for name in names])
    cuts = [0, *(int(np.searchsorted(weights, weights[-1] * i / n)) + 1 for i in range(1, n)), len(names)]
    return tuple(tuple(names[a:b]) for a, b in itertools.pairwise(cuts) if b > a)


class ModeOpSample:
    def __init__(self, profile: str, seed: int, modes: Iterable[str], pair_of: PairOf) -> None:
        self.sample = {mode: set(compiled_ops(profile, seed, mode)) for mode in modes}
        self.pair_of = pair_of

    def keeps(self, item: Any) -> bool:
        pair = self.pair_of(item)
        return pair is None or pair[1] in self.sample[pair[0]]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        dropped = [item for item in items if not self.keeps(item)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if self.keeps(item)]


def register(metafunc: pytest.Metafunc, name: str, modes: Iterable[str], pair_of: PairOf) -> bool:
    """In the quick profile, register the selection under ``name`` (once per run); whether the
    run is quick."""
    profile, seed = of_run(metafunc.config)
    manager = metafunc.config.pluginmanager
    if profile == "quick" and not manager.has_plugin(name):
        manager.register(ModeOpSample(profile, seed, modes, pair_of), name)
    return profile == "quick"
