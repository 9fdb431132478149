"""Standalone scripts run as ``python SCRIPT`` would run them, without paying the framework's
import once per script: a zygote interpreter imports the frameworks a group of scripts
import (and nothing else runs in it), then forks one child per script, which runs the script
as ``__main__`` with its own argv, path and output files, and exits with the script's exit
code. The scripts still import what they need (from the child's copy of the zygote's
modules); a framework's runtime (devices, threads, kernels) starts in the child, as in a
fresh interpreter, since importing TensorFlow or torch starts neither.

Used by test_findings_scripts.py: 64 scripts, about 3 s of TensorFlow import each on these
machines (305 s of the own tests' 1,556 s of test time), now once per worker and group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

# The zygote: preloads argv[1:], then serves one JSON request per line on stdin
# ({"path", "stdout", "stderr", "timeout"}) with one JSON line on stdout ({"rc"}: the
# child's exit code, None when the deadline killed it).
SERVER = r"""
import json, os, runpy, sys, time, traceback
for name in sys.argv[1:]:
    __import__(name)
channel = sys.stdout
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            os.dup2(os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
            os.dup2(os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            sys.stdin = open(os.devnull)
            sys.argv = [req["path"]]
            sys.path[0] = os.path.dirname(req["path"])
            runpy.run_path(req["path"], run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    deadline = time.monotonic() + req["timeout"]
    rc = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            break
        time.sleep(0.02)
    channel.write(json.dumps({"rc": rc}) + "\n")
    channel.flush()
"""


class Zygote:
    """One zygote interpreter with ``preload`` imported, in environment ``env``."""

    def __init__(self, preload: Sequence[str], env: Mapping[str, str]) -> None:
        self.preload = tuple(preload)
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, *self.preload], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=dict(env))
        self.folder = tempfile.mkdtemp(prefix="dlconform-zygote-")

    def run(self, path: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """``python path`` as a forked child: its exit code, stdout and stderr; raises
        subprocess.TimeoutExpired past ``timeout`` seconds (the child killed)."""
        out, err = Path(self.folder, "stdout"), Path(self.folder, "stderr")
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps({"path": path, "stdout": str(out), "stderr": str(err),
                                              "timeout": timeout}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            raise RuntimeError(f"the zygote preloading {self.preload} exited with {self.proc.wait()}")
        rc = json.loads(line)["rc"]
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        if rc is None:
            raise subprocess.TimeoutExpired([path], timeout, stdout, stderr)
        return subprocess.CompletedProcess([sys.executable, path], rc, stdout, stderr)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for name in ("stdout", "stderr"):
            Path(self.folder, name).unlink(missing_ok=True)
        os.rmdir(self.folder)


def imported(source: str) -> set[str]:
    """The top-level packages a script imports, at top level or in functions."""
    import ast

    tree = ast.parse(source)
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


def preload_of(source: str) -> tuple[str, ...]:
    """What a zygote may import ahead of a script: the frameworks it imports (tensorflow,
    torch; keras only where the script leaves Keras on its default TensorFlow backend, since
    Keras fixes its backend when imported)."""
    names = imported(source)
    other_backend = any(f'"KERAS_BACKEND"] = "{b}"' in source or f'"KERAS_BACKEND", "{b}"' in source
                        for b in ("jax", "torch", "numpy", "openvino"))
    out = []
    if "tensorflow" in names or ("keras" in names and not other_backend):
        out.append("tensorflow")
    if "keras" in names and not other_backend:
        out.append("keras")
    if "torch" in names:
        out.append("torch")
    return tuple(out)
