"""Fixtures of the model suites: the cluster pool, and the per-framework parameters of a model test.

A test parametrized over variants of both frameworks (export formats, compile modes) marks
them ``@pytest.mark.dl_model_variants(param_name, {framework: [...]})``; a model's variants
of the other framework are deselected here, so no test exists that could never apply.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_dlconform.api.harness import GroupPool

MARKER = "dl_model_variants"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(param, mapping): per-framework values of param (suites/model/conftest.py).")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, dropped = [], []
    for item in items:
        marker = item.get_closest_marker(MARKER)
        callspec = getattr(item, "callspec", None)
        model = callspec.params.get("dl_model") if callspec else None
        if marker is None or not isinstance(model, tuple):
            keep.append(item)
            continue
        param, mapping = marker.args
        # No model registered (each claim "not applicable"): one test per claim, not one per variant.
        wanted = mapping.get(model[0], ()) if model[0] else [next(iter(mapping.values()))[0]]
        (keep if callspec.params.get(param) in wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def dl_groups() -> Iterator[GroupPool]:
    """Clusters and in-process strategies of this xdist worker, reused across tests."""
    pool = GroupPool()
    try:
        yield pool
    finally:
        pool.close()
