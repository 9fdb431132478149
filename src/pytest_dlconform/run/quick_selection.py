"""The quick profile's selection of per-op tests (``--dl-profile=quick``).

A per-op suite that the quick profile samples by op family (:data:`pytest_dlconform.run.profiles.QUICK_OP_SUITES`)
registers a :class:`OpSample` while its module collects (:func:`register`; a test module
cannot implement ``pytest_collection_modifyitems``). Once per run, before the plugin selects
claims and shards, it deselects the suite's (mode, op) tests outside the run's sample
(:func:`pytest_dlconform.run.profiles.quick_op_sample` for its ``--dl-seed``): pytest counts
them as deselected, and the coverage ledger expects exactly the sampled subset of a quick
report. Other profiles select nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

#: An item's (mode, op) in its suite's sample, or None for a test of the module that is not per op.
PairOf = Callable[[Any], "tuple[str, str] | None"]


class OpSample:
    """Keeps the tests whose (mode, op) is in ``sample``, and the tests that are not per op."""

    def __init__(self, sample: Mapping[str, Iterable[str]], pair_of: PairOf) -> None:
        self.sample = {mode: set(ops) for mode, ops in sample.items()}
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


def register(metafunc: pytest.Metafunc, name: str, pair_of: PairOf,
             sample: Callable[[int], Mapping[str, Iterable[str]]]) -> bool:
    """In the quick profile, register the plugin ``name`` (once per run) that keeps the tests
    in ``sample(seed)`` for the run's ``--dl-seed``; whether the run is quick."""
    from .profiles import of_run

    profile, seed = of_run(metafunc.config)
    manager = metafunc.config.pluginmanager
    if profile == "quick" and not manager.has_plugin(name):
        manager.register(OpSample(sample(seed), pair_of), name)
    return profile == "quick"


def register_suite(metafunc: pytest.Metafunc, suite: str, pair_of: PairOf) -> bool:
    """:func:`register` for a suite of :data:`~pytest_dlconform.run.profiles.QUICK_OP_SUITES`
    (its :func:`~pytest_dlconform.run.profiles.quick_op_sample`)."""
    from .profiles import quick_op_sample

    return register(metafunc, f"dlconform-{suite}-quick-sample", pair_of, lambda seed: quick_op_sample(suite, seed))


def callspec_pair(item: Any, module: str, mode_of: Callable[[Any], str | None],
                  param: str = "op") -> tuple[str, str] | None:
    """(mode, the value of ``param``) of a test of ``module`` parametrized by ``param`` (an op
    by default; ``mode_of`` its mode from the item, None for a test outside the sample), else None."""
    import sys

    if getattr(item, "module", None) is not sys.modules.get(module) or not hasattr(item, "callspec"):
        return None
    value = item.callspec.params.get(param)
    mode = mode_of(item)
    return None if value is None or mode is None else (mode, str(value))
