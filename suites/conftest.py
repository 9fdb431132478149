"""Fixtures of every area: the run's compiler cache (one per run, shared by its workers)."""

from __future__ import annotations

import pytest

from pytest_dlconform.api.harness import compiler_caches


def pytest_configure(config: pytest.Config) -> None:
    compiler_caches(config)
