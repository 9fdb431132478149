"""The controller: the role of the process that gathers the results (the xdist controller,
or the one process without xdist). It checks the run's input files up front, gives each
xdist worker its share of the machine, collects the verdicts from the test reports, and at
the end applies known divergences, compares with the baseline and writes the matrix, the
JSON and HTML reports and the saved copy. It never runs a test."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

from ...report import results
from .. import settings as opts
from .environment import Environment
from .header import header_lines
from .outcome import Conclusion
from .plan import DevicePlan


class Controller:
    def __init__(self, config: pytest.Config, settings: opts.Settings, plan: DevicePlan,
                 environment: Environment) -> None:
        _validate_input_files(settings)
        from .. import usermodels

        usermodels.validate(settings)  # --dl-model factories: a usage error before any test runs
        self.config = config
        self.settings = settings
        self.plan = plan
        self.collector = results.Collector()
        self.conclusion = Conclusion(config, settings, self.collector, environment)

    def header_lines(self) -> list[str]:
        return header_lines(self.config, self.settings, self.plan)

    def worker_input(self, node: Any) -> dict[str, Any]:
        """What the xdist worker ``node`` gets: its share of the machine (DevicePlan.share)."""
        # -n N sets numprocesses and leaves --tx empty; --tx lists the workers itself.
        numprocesses = getattr(self.config.option, "numprocesses", None)
        tx = getattr(self.config.option, "tx", None) or []
        n_workers = max(1, numprocesses if isinstance(numprocesses, int) and numprocesses > 0 else len(tx))
        index = int(str(node.gateway.id).removeprefix("gw") or 0)
        lock = os.path.join(tempfile.gettempdir(), f"dlconform-gpus-{os.getpid()}.lock")
        return self.plan.share(index, n_workers, lock)

    def add(self, report: pytest.TestReport) -> None:
        """A claim test's phase report, from whichever process ran it."""
        self.collector.add(report)

    def summarize(self, terminalreporter: Any, header: bool) -> None:
        self.conclusion.summarize(terminalreporter, self.header_lines() if header else [])

    def finish(self, session: pytest.Session) -> None:
        self.conclusion.finish(session)


def _validate_input_files(settings: opts.Settings) -> None:
    """A baseline or known-divergences file that cannot be used stops the run before it starts."""
    from ...report import compare, divergences

    try:
        if settings.divergences:
            divergences.load(settings.divergences)
        if settings.baseline:
            compare.load(settings.baseline, "baseline")
    except divergences.DivergenceError as exc:
        raise pytest.UsageError(f"{opts.flag(opts.DIVERGENCES)} (from {settings.describe(opts.DIVERGENCES)}): {exc}") from None
    except compare.UnusableReport as exc:
        raise pytest.UsageError(f"{opts.flag(opts.BASELINE)} (from {settings.describe(opts.BASELINE)}): {exc}") from None
