"""Our own tests under pytest-xdist: work stealing unless the command line names a --dist.

With ``-n 2`` and xdist's default scheduling the last tests go out in fixed chunks, one per
worker, and a worker whose chunk holds long end-to-end runs works alone while the other
idles (src/pytest_dlconform/core/scheduling.py has the measurement on the suites). Not an
``addopts`` entry: the subprocess pytest runs of these tests start from this checkout with
``-p no:xdist``, where ``--dist`` is an unknown option.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from pytest_dlconform.core.scheduling import xdist_args

    if config.getoption("dist") != "load" or not xdist_args(config.invocation_params.args):
        return None  # a --dist of the command line's own, or another mode: xdist decides
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)
