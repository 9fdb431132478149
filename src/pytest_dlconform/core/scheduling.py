"""How the pytest command lines dlconform starts share tests between pytest-xdist workers.

xdist's default scheduling (``--dist load``) sends the last tests of a run out in fixed
chunks, one per worker: a worker whose chunk holds the long tests runs alone while the other
waits. Measured on a quick run (-n 2, 2 cores, seed 20795): one worker was done at 175 s, the
other ran the export, compiled and Keras-backend tests of its chunk until 402 s (user+sys 532
CPU-s in 402 s of wall). ``--dist worksteal`` lets a worker that runs out take half of the
other's pending tests: the same run took 260 s. Each test runs once either way and its
verdict does not depend on the worker (tests/plugin/test_verdicts.py runs -n 0 and -n 2).

:func:`xdist_args` adds it to a command line that chose no scheduling of its own: ``dlconform
run``, the mutation runner and the soak. A user's own ``pytest -n 2`` keeps the user's choice.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

WORKSTEAL = "--dist=worksteal"


def xdist_args(args: Sequence[str]) -> list[str]:
    """``[WORKSTEAL]`` for a pytest command line that may start xdist workers and names no
    ``--dist`` of its own; ``[]`` when xdist is not installed or the line disables it."""
    args = list(args)
    if importlib.util.find_spec("xdist") is None:
        return []
    disabled = any(a == "-pno:xdist" or (a == "no:xdist" and i > 0 and args[i - 1] == "-p")
                   for i, a in enumerate(args))
    chosen = any(a in ("--dist", "-d") or a.startswith("--dist=") for a in args)
    return [] if disabled or chosen else [WORKSTEAL]
