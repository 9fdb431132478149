"""The run's header on the terminal: the stack, the selected and found devices, and the
command that reproduces the run from any folder (recipe.run_line)."""

from __future__ import annotations

import os

import pytest

from ...core.versions import framework_version
from ...report import results
from .. import settings as opts
from . import identity, recipe
from .plan import DevicePlan


def header_lines(config: pytest.Config, s: opts.Settings, plan: DevicePlan) -> list[str]:
    versions = ", ".join(f"{fw} {framework_version(fw)}" for fw in s.frameworks)
    # The run's selection and settings, runnable from any folder (recipe.run_line). A
    # randomized run's examples: its hypothesis seed (chosen by profiles.choose_seed if
    # the user gave none) or its example database.
    line = recipe.run_line(
        [str(a) for a in config.args], pyargs=bool(config.getoption("pyargs", False)),
        here=config.invocation_params.dir, suites_dirs=identity.suites_dirs(), s=s,
        dlconform_run=os.environ.get(opts.PACKAGED_DIVERGENCES_VAR) == "1",
        hypothesis_seed=config.getoption("hypothesis_seed", None),
        keyword=config.getoption("keyword", "") or "", markexpr=config.getoption("markexpr", "") or "")
    # At most 120 columns a line: the device inventory wraps; the command continues with
    # a backslash, so that its lines paste as one command.
    return [
        *results.wrap_line(f"dlconform: {versions}; selected: {', '.join(plan.kinds)}; "
                           f"devices found: {plan.inventory_text}"),
        *results.wrap_command(f"dlconform: reproduce with: {line}"),
    ]
