"""One rank of a local group: its entry point, the channel to the parent, what a program sees.

A rank is ``python -c 'from pytest_dlconform.harness.rank import worker_main; worker_main()'``
started by :class:`pytest_dlconform.harness.groups.LocalGroup`. It reads length-prefixed
pickles from stdin and writes them to the stdout it was given (a program's own prints go
to the rank's log): ``("run", "module:qualname", payload)`` runs a module-level function
``program(ctx, payload)``, ``("stop", teardown)`` ends the rank. The rank imports the
program's module by name, with the parent's ``sys.path`` (``DLCONFORM_SYS_PATH``), so a
program may live in the package, in a suite package (``suites.distributed...`` from a
checkout, ``pytest_dlconform.suites.distributed...`` when installed) or in a test module.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..frameworks import HarnessError

RANK_VAR = "DLCONFORM_RANK"
WORLD_VAR = "DLCONFORM_WORLD_SIZE"
DIR_VAR = "DLCONFORM_GROUP_DIR"
PATH_VAR = "DLCONFORM_SYS_PATH"
ENTRY = "from pytest_dlconform.harness.rank import worker_main; worker_main()"
_HEADER = struct.Struct("!Q")

Program = Callable[["WorkerContext", Any], Any]



@dataclass(frozen=True)
class RemoteError:
    """An exception raised by a program in one rank, as text (it may not unpickle here)."""

    rank: int
    type: str
    message: str
    traceback: str

    def line(self) -> str:
        return f"rank {self.rank} raised {self.type}: {self.message}"


# --------------------------------------------------------------------------- framing


def encode_frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


class Frames:
    """Incremental decoder of length-prefixed pickles read from a non-blocking fd."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.eof = False

    def feed(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.buf += chunk

    def pop(self) -> list[Any]:
        out = []
        while len(self.buf) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(self.buf)
            if len(self.buf) < _HEADER.size + n:
                break
            out.append(pickle.loads(bytes(self.buf[_HEADER.size:_HEADER.size + n])))
            del self.buf[:_HEADER.size + n]
        return out


def write_all(fd: int, data: bytes, deadline: float) -> bool:
    """Write to a non-blocking fd before the deadline; False if the reader is gone or stuck."""
    view = memoryview(data)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        _, writable, _ = select.select([], [fd], [], remaining)
        if not writable:
            continue
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue
        except (BrokenPipeError, OSError):
            return False
    return True


# --------------------------------------------------------------------------- worker side


@dataclass
class WorkerContext:
    """What a program sees in a rank: its rank, the group size, state kept by earlier
    programs (the framework's strategy or process group), and a progress reporter."""

    rank: int
    world_size: int
    state: dict[str, Any] = field(default_factory=dict)
    _report: Callable[[str], None] | None = None

    def arrive(self, label: str) -> None:
        """Tell the parent this rank reached ``label`` (e.g. just before a collective), so
        a deadline can name the ranks that never got there."""
        if self._report is not None:
            self._report(label)


def _resolve(ref: str) -> Callable[..., Any]:
    module, _, name = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def program_ref(fn: Callable[..., Any]) -> str:
    """'module:qualname' of a module-level function, to run it in another process."""
    if "<" in fn.__qualname__:
        raise HarnessError(f"{fn.__qualname__} is not a module-level function; ranks import programs by name")
    return f"{fn.__module__}:{fn.__qualname__}"


def _watch_parent(parent: int) -> None:
    # A rank outlives its parent only if the parent was killed; then nobody will reap or
    # stop it, so it ends itself (it may be blocked in a collective, where no signal from
    # the framework would reach Python).
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os.killpg(0, signal.SIGKILL)  # this rank leads its process group: take its children too


def worker_main() -> None:
    """Entry point of a rank (:data:`ENTRY`)."""
    extra = json.loads(os.environ.get(PATH_VAR, "[]"))
    sys.path[:0] = [p for p in extra if p not in sys.path]
    out_fd = os.dup(1)
    os.dup2(2, 1)  # anything a program prints goes to the rank's log, not into the channel
    parent = os.getppid()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    lock = threading.Lock()

    def send(obj: Any) -> None:
        data = encode_frame(obj)
        with lock:
            view = memoryview(data)
            while view:
                view = view[os.write(out_fd, view):]

    ctx = WorkerContext(int(os.environ[RANK_VAR]), int(os.environ[WORLD_VAR]),
                        _report=lambda label: send(("arrive", label)))
    send(("hello", ctx.rank, os.getpid()))
    frames = Frames()
    while True:
        messages = frames.pop()
        while not messages:
            frames.feed(0)
            if frames.eof:
                os._exit(0)  # parent closed the channel
            messages = frames.pop()
        for message in messages:
            if message[0] == "stop":
                _run_quietly(message[1], ctx)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)  # frameworks may hang in interpreter shutdown; nothing is left to do
            _, ref, payload = message
            ctx.arrive(f"start {ref.rpartition(':')[2]}")
            try:
                send(("ok", _resolve(ref)(ctx, payload)))
            except BaseException as exc:  # broad on purpose: reported to the parent, never swallowed
                send(("err", RemoteError(ctx.rank, type(exc).__name__, str(exc), traceback.format_exc())))


def _run_quietly(ref: str | None, ctx: WorkerContext) -> None:
    if ref:
        try:
            _resolve(ref)(ctx, None)
        except BaseException:  # broad on purpose: teardown of a group that is going away anyway
            traceback.print_exc()


__all__ = [
    "DIR_VAR",
    "ENTRY",
    "PATH_VAR",
    "RANK_VAR",
    "WORLD_VAR",
    "Program",
    "RemoteError",
    "WorkerContext",
    "program_ref",
    "worker_main",
]
