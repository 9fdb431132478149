"""Fresh interpreters: the one way the project runs Python work in a new process.

Loading an artifact in a fresh process is what a server does, and a Keras backend can only
be chosen before Keras is imported. A TensorFlow import costs about 3 s here, so callers
batch: one fresh interpreter per batch of artifacts, not one per example.

One protocol, two entry points:

- :func:`run_python` runs code in ``python -c`` in a session (process group) of its own,
  under a deadline; the child reports its result with ``emit(obj)`` (a JSON line after
  :data:`RESULT_MARKER`). A non-zero exit (the child's traceback), a missing result or the
  deadline raise :class:`HarnessError` with the child's last output lines; at the deadline
  the whole process group is killed, so no grandchild outlives the call.
- :func:`call` runs ``module:function(*args)`` that way (JSON arguments, JSON result): what
  ``checks.roundtrip`` (a batch of artifacts to load back) and ``checks.crossframework``
  (a batch of models on one Keras backend) build on. Bulk data goes through files the
  caller names in the arguments.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from . import HarnessError

RESULT_MARKER = "__DLCONFORM_RESULT__"
GROWTH_VAR = "TF_FORCE_GPU_ALLOW_GROWTH"
_TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def run_python(code: str, *, timeout: float, env: Mapping[str, str] | None = None,
               cwd: str | None = None, what: str = "fresh interpreter") -> Any:
    """Run ``code`` in ``python -c``; it reports its result with ``emit(obj)`` (JSON).

    Returns the emitted object. A non-zero exit, a missing result or a timeout raises
    HarnessError with the command's last output lines; the whole process group is killed
    on timeout, so no child outlives the call.
    """
    prelude = (
        "import json as _j, sys as _s\n"
        f"def emit(obj):\n    _s.stdout.write({RESULT_MARKER!r} + _j.dumps(obj) + '\\n'); _s.stdout.flush()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", prelude + code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=child_env(env), cwd=cwd, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise HarnessError(f"{what} did not finish within {timeout:g} s and was killed; last output: {_tail(out, err)}") from None
    if proc.returncode != 0:
        raise HarnessError(f"{what} exited with code {proc.returncode}: {_tail(out, err)}")
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    raise HarnessError(f"{what} exited without reporting a result: {_tail(out, err)}")


def call(target: str, *args: Any, timeout: float, env: Mapping[str, str] | None = None, cwd: str | None = None,
         what: str = "fresh interpreter") -> Any:
    """``module:function(*args)`` in a fresh interpreter (:func:`run_python`); returns what it returns.

    ``args`` and the return value travel as JSON (paths, names, small settings); a function
    that makes arrays writes them to files its arguments name.
    """
    if not _TARGET.fullmatch(target):
        raise ValueError(f"fresh.call target {target!r} is not 'package.module:function'")
    module, function = target.split(":")
    payload = json.dumps(list(args))  # fails here, in the caller, for an argument JSON cannot carry
    code = f"import json\nfrom {module} import {function} as _target\nemit(_target(*json.loads({payload!r})))\n"
    return run_python(code, timeout=timeout, env=env, cwd=cwd, what=what)


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: this one, then ``env``; unbuffered output, so the last lines
    before a hang or a crash are in what a failure reports."""
    # A TensorFlow in the child must not try to take all of a GPU's memory, which the
    # parent (or a sibling) already uses: allocate as needed, unless the user decided.
    return {GROWTH_VAR: "true", **os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill the process group a child started with ``start_new_session=True`` leads."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(out: str | None, err: str | None, lines: int = 8) -> str:
    text = "\n".join(x for x in ((err or "").strip(), (out or "").strip()) if x)
    kept = [line for line in text.splitlines() if not line.startswith(RESULT_MARKER)][-lines:]
    return " | ".join(kept) or "(no output)"
