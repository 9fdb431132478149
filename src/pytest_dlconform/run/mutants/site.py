"""The start-up directory that carries a mutant into every Python process of a run.

Python imports ``sitecustomize`` at start-up from the first ``sys.path`` entry that has
one, and ``PYTHONPATH`` entries come first; every child process inherits the environment.
So a directory holding our ``sitecustomize.py``, first on ``PYTHONPATH``, reaches the
xdist workers, rank processes and fresh interpreters without a ``.pth`` file or any change
to the installed environment. The file is written per run (so it works from a wheel as
well as from a checkout); if the environment has a sitecustomize of its own, ours runs
it too, so nothing it did is lost.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from . import ENV_VAR, LOG_VAR

SITECUSTOMIZE = '''\
"""dlconform mutation runs: apply $DLCONFORM_MUTANT when its framework is imported
(pytest_dlconform.run.mutants.hook), then run the environment's own sitecustomize, if any."""
import os as _os
import sys as _sys

if _os.environ.get("DLCONFORM_MUTANT"):
    from pytest_dlconform.run.mutants import hook as _hook
    _hook.from_environment()


def _chain():
    import importlib.machinery
    import importlib.util
    here = _os.path.dirname(_os.path.abspath(__file__))
    rest = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
'''


def prepare(folder: Path) -> Path:
    """Write ``folder/sitecustomize.py`` and return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def environment(folder: Path, mutant: str | None, log: Path | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the start-up folder first on
    PYTHONPATH and the mutant (none: a clean run through the same hook) and its log set."""
    env = dict(os.environ if base is None else base)
    env.pop(ENV_VAR, None)
    env.pop(LOG_VAR, None)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), *filter(None, [env.get("PYTHONPATH", "")])])
    if mutant:
        env[ENV_VAR] = mutant
    if log is not None:
        env[LOG_VAR] = str(log)
    return env
