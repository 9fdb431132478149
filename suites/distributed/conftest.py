"""Fixtures of the distributed suites: clusters kept alive across tests, and strategy families.

Starting a cluster costs seconds (each rank imports its framework), so each xdist worker
keeps one group per kind (torch process group, MultiWorkerMirrored cluster, parameter-server
cluster) in a session-scoped pool and closes them at the end of the session; a group that
failed (a deadline passed, a rank died) is killed at once and restarted on next use.

A test covers one family of strategies and says which with
``@pytest.mark.dl_strategies(...)``; the other ``dl_strategy`` parameters of that test are
deselected here, so no test exists for a strategy it does not cover.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from pytest_dlconform.cluster import GroupPool, external_tf_config
from pytest_dlconform.distribution import prepare_outer_multiworker

MARKER = "dl_strategies"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*names): the distribution strategies this test covers; its other dl_strategy "
        "parameters are deselected (suites/distributed/conftest.py).",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, dropped = [], []
    for item in items:
        marker = item.get_closest_marker(MARKER)
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("dl_strategy") if callspec else None
        if marker is None or not isinstance(param, tuple):
            keep.append(item)
            continue
        (dropped if param[1] not in marker.args else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Inside a TF_CONFIG cluster, build the MultiWorkerMirroredStrategy before any test
    initialises TensorFlow (see distribution.prepare_outer_multiworker)."""
    if external_tf_config() is None or not any(_strategy_of(item) == "multi-worker" for item in session.items):
        return
    from pytest_dlconform.plugin import KEY

    run = session.config.stash[KEY]
    logical = run.settings.replicas if "cpu" in run.kinds else 1
    prepare_outer_multiworker(logical, run.settings.timeout)


def _strategy_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    param = callspec.params.get("dl_strategy") if callspec else None
    return param[1] if isinstance(param, tuple) else None


@pytest.fixture(scope="session")
def dl_groups(dl_settings: Any) -> Iterator[GroupPool]:
    """The clusters and in-process strategies of this xdist worker, reused across tests
    (TensorFlow clusters in private network namespaces, or, with --dl-allow-listen-all where
    none can be made, on this host's network)."""
    pool = GroupPool(allow_listen_all=dl_settings.allow_listen_all)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(autouse=True)
def _dl_gpu_turn(request: pytest.FixtureRequest) -> Iterator[None]:
    """On multi-gpu, every xdist worker sees every GPU: its multi-GPU tests take the run's
    GPU lock, so no two workers run NCCL groups or Mirrored replicas on them at once."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or callspec.params.get("dl_device") != "multi-gpu":
        yield
        return
    from pytest_dlconform.devices import gpu_lock
    from pytest_dlconform.plugin import KEY

    with gpu_lock(getattr(request.config.stash[KEY], "gpu_lock", None)):
        yield


@pytest.fixture(scope="session")
def dl_timeout(dl_settings: Any) -> float:
    """The deadline of each multi-process start and call (--dl-timeout)."""
    return float(dl_settings.timeout)
