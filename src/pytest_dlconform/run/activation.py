"""When the plugin does anything at all: inert until a run asks for dlconform.

pytest-dlconform is installed into other people's environments. Like hypothesis's own
plugin, it stays out of runs that do not use it: until the run sets a ``--dl-*`` flag, a
``DLCONFORM_*`` environment variable or a ``dl_*`` ini key, or collects a claim test
(``@pytest.mark.claim``, or a test that uses one of the ``dl_*`` fixtures), it probes no
hardware, prints no header, validates no framework and touches no hypothesis settings.

Asked for up front (an option), the process's roles (session.start) are built at configure
time, so a bad option is a usage error before collection. Otherwise they are built at the
first claim test collected (or, on the xdist controller, which collects nothing, at the first
claim test's report).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from . import settings as opts

if TYPE_CHECKING:
    from .session import Process

MARKERS = (
    "claim(id): the documented claim this test checks, an id 'area.topic.name' from the claim "
    "registry (list them with `dlconform claims`); --dl-claims selects by it.",
    "min_devices(n): the test needs at least n devices of its device kind (logical CPU devices "
    "count on cpu, see --dl-replicas); with fewer it reports 'not applicable'.",
    "dl_shard_group(key=None, *, by=None): tests of one module with the same key run in the same --dl-shard "
    "(they share work whose result depends on which of them ran); by=f computes the key from the test's "
    "parameters, f(callspec.params) -> str.",
)

DL_FIXTURES = frozenset({"dl_framework", "dl_device", "dl_strategy", "dl_model", "dl_settings", "dl_tolerance",
                         "dl_seed", "dl_groups", "dl_timeout"})
EXTRA_FLAGS = ("dl_list_claims",)


def asked(config: pytest.Config, environ: Any = None) -> str | None:
    """What in this run asks for dlconform (for messages), or None."""
    environ = os.environ if environ is None else environ
    for name in opts.HELP:
        if config.getoption(f"dl_{name}", None) not in (None, "", []):
            return opts.flag(name)
    for dest in EXTRA_FLAGS:
        if config.getoption(dest, None):
            return "--" + dest.replace("_", "-")
    for var in sorted(environ):
        if var.startswith("DLCONFORM_") and environ[var] != "":
            return var
    for name in opts.HELP:
        try:
            value = config.getini(opts.ini_key(name))
        except ValueError:
            continue
        if value not in (None, "", []):
            return f"ini key {opts.ini_key(name)}"
    return None


def is_claim_function(definition: Any) -> bool:
    """Whether a collected function is a conformance test: a claim marker or a dl_* fixture."""
    if definition.get_closest_marker("claim") is not None:
        return True
    return bool(DL_FIXTURES & set(getattr(definition, "fixturenames", ())))


class Activation:
    """Holds the process's roles once something asked for them; ``process`` is None while the plugin is inert."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reason = asked(config)
        self.process: Process | None = None
        self.header_printed = False
        self.pending: BaseException | None = None  # a usage error met during collection

    def ensure(self) -> Process:
        if self.process is None:
            from .session import start

            self.process = start(self.config)  # raises pytest.UsageError on a bad option
        return self.process
