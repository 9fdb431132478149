"""How the compiled suites select and batch their (mode, op) tests: chunks of consecutive ops
(:func:`parts`), and the quick profile's selection (``--dl-profile=quick``).

Per compiled mode, the ops of :func:`pytest_dlconform.api.compiled_ops` for the run's
``--dl-seed`` (one op of every op family per mode, a deterministic rotation by the seed); the
suite's other (mode, op) tests are deselected (pytest counts them), before the plugin selects
claims and shards, so the suite's chunks compile the sampled ops only, and the coverage and
combinations ledgers expect exactly this subset of a quick report
(:mod:`pytest_dlconform.run.quick_selection`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import pytest

from pytest_dlconform.api import compiled_ops, quick_selection
from pytest_dlconform.api.programs import samples

#: An item's (compiled mode, op), or None for a test of the module that is not per op.
PairOf = quick_selection.PairOf


def parts(names: Sequence[str], n: int) -> tuple[tuple[str, ...], ...]:
    """``names`` (ops of the library) in ``n`` runs of consecutive ops with (about) as many
    parameter classes each."""
    weights = np.cumsum([len({s.params for s in samples(name)}) for name in names])
    cuts = [0, *(int(np.searchsorted(weights, weights[-1] * i / n)) + 1 for i in range(1, n)), len(names)]
    return tuple(tuple(names[a:b]) for a, b in itertools.pairwise(cuts) if b > a)


def register(metafunc: pytest.Metafunc, name: str, modes: Iterable[str], pair_of: PairOf) -> bool:
    """In the quick profile, register the selection of the compiled suite ``name`` (once per
    run): per mode of ``modes``, the ops of :func:`compiled_ops`; whether the run is quick."""
    modes = tuple(modes)
    return quick_selection.register(metafunc, name, pair_of,
                                    lambda seed: {mode: compiled_ops("quick", seed, mode) for mode in modes})
