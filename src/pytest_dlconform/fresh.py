"""Fresh interpreters: run Python code in a new process, with a deadline, leaving nothing behind.

Loading an artifact in a fresh process is what a server does, and a Keras backend can only
be chosen before Keras is imported. A TensorFlow import costs about 3 s here, so callers
batch: one fresh interpreter per batch of artifacts, not one per example.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any, Mapping

from .frameworks import HarnessError

RESULT_MARKER = "__DLCONFORM_RESULT__"
GROWTH_VAR = "TF_FORCE_GPU_ALLOW_GROWTH"


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
    # A TensorFlow in the child must not try to take all of a GPU's memory, which the
    # parent (or a sibling) already uses: allocate as needed, unless the user decided.
    full_env = {GROWTH_VAR: "true", **os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", prelude + code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=full_env, cwd=cwd, start_new_session=True,
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


def kill_group(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(out: str | None, err: str | None, lines: int = 8) -> str:
    text = "\n".join(x for x in ((err or "").strip(), (out or "").strip()) if x)
    kept = [line for line in text.splitlines() if not line.startswith(RESULT_MARKER)][-lines:]
    return " | ".join(kept) or "(no output)"
