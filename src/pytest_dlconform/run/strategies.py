"""The distribution-strategy side of a run: which strategies a test covers, its clusters, its deadlines.

A test of distributed behaviour covers one family of strategies and says which with
``@pytest.mark.dl_strategies(...)``; the run's other ``dl_strategy`` parameters of that
test are deselected (:func:`deselect_uncovered`), so no test exists for a strategy it
does not cover. Starting a cluster costs seconds (each rank imports its framework), so
each xdist worker keeps one group per kind in a session-scoped pool (the ``dl_groups``
fixture) and closes them at the end of the session; a group that failed (a deadline
passed, a rank died) is killed at once and restarted on next use. ``dl_timeout`` is the
deadline of every start and call. On multi-gpu, a test takes the run's GPU lock
(:func:`gpu_turn`) so no two xdist workers drive all GPUs at once. Inside a TF_CONFIG
cluster, the MultiWorkerMirroredStrategy is built at the end of collection, before any
test initialises TensorFlow (:func:`prepare_outer_cluster`).

Plain functions for the plugin's hooks, and fixtures; importing this module imports
neither a framework nor the launcher (they load when a fixture or hook needs them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..harness.pool import GroupPool

MARKER = "dl_strategies"
MARKER_LINE = (f"{MARKER}(*names): the distribution strategies this test covers; its other dl_strategy "
               "parameters are deselected (pytest_dlconform.run.strategies).")


def register_marker(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_LINE)


def strategy_of(item: pytest.Item) -> str | None:
    """The strategy name of a test's ``dl_strategy`` parameter ((framework, name)), if any."""
    callspec = getattr(item, "callspec", None)
    param = callspec.params.get("dl_strategy") if callspec else None
    return param[1] if isinstance(param, tuple) else None


def deselect_uncovered(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``dl_strategy`` parameters a ``dl_strategies`` test does not cover."""
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker(MARKER)
        name = strategy_of(item)
        if marker is None or name is None:
            keep.append(item)
            continue
        (dropped if name not in marker.args else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def prepare_outer_cluster(items: Sequence[pytest.Item], logical_cpus: int, timeout: float) -> None:
    """Inside a TF_CONFIG cluster, build the MultiWorkerMirroredStrategy before any test
    initialises TensorFlow (see distribution.ranks.prepare_outer_multiworker); call it
    after collection with the run's logical CPU count and deadline."""
    from ..harness.clusters import external_tf_config

    if external_tf_config() is None or not any(strategy_of(item) == "multi-worker" for item in items):
        return
    from ..harness.distribution.ranks import prepare_outer_multiworker

    prepare_outer_multiworker(logical_cpus, timeout)


@contextmanager
def gpu_turn(node: pytest.Item, lock: str | None) -> Iterator[None]:
    """On multi-gpu, every xdist worker sees every GPU: a test that runs a distribution
    strategy there (it takes ``dl_strategy``) takes the run's GPU lock (``lock``, the run's
    ``gpu_lock``), so no two workers run NCCL groups or Mirrored replicas on them at once.
    Other tests pass through (a single-device test on multi-gpu uses one GPU, as elsewhere)."""
    callspec = getattr(node, "callspec", None)
    if (callspec is None or callspec.params.get("dl_device") != "multi-gpu"
            or "dl_strategy" not in getattr(node, "fixturenames", ())):
        yield
        return
    from ..core.devices import gpu_lock

    with gpu_lock(lock):
        yield


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def dl_groups(dl_settings: Any) -> Iterator[GroupPool]:
    """The clusters and in-process strategies of this xdist worker, reused across tests
    (TensorFlow clusters in private network namespaces, or, with --dl-allow-listen-all where
    none can be made, on this host's network)."""
    from ..harness.pool import GroupPool

    pool = GroupPool(allow_listen_all=dl_settings.allow_listen_all)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="session")
def dl_timeout(dl_settings: Any) -> float:
    """The deadline of each multi-process start and call (--dl-timeout)."""
    return float(dl_settings.timeout)
