"""Localhost multi-process groups with deadlines, for the distributed suites.

A *group* is N worker processes (ranks, :mod:`.rank`) that stay alive across tests: the
parent ships them a program (a module-level function and a picklable payload), every rank
runs it, and the parent gets one result per rank. Starting a process that imports
TensorFlow or torch costs seconds, so the suites start one group per kind of cluster and
xdist worker (:mod:`.pool`) and batch their generated examples into few calls.

Deadlines, never hangs: every start and every call has a deadline. A rank that exits,
a peer that never joins and a collective that never completes end the call within its
deadline with a :class:`ClusterError` that names the rank(s) that did not arrive and where
(ranks report progress with :meth:`WorkerContext.arrive`), and every process of the group
is killed and reaped before the error is raised. Each rank is the leader of its own
process group (``start_new_session``), so ``os.killpg`` also takes down anything it
started; a rank whose parent disappears kills itself (watchdog thread).

Why not torch's own launchers (read against their documentation, torch 2.x):
``torch.multiprocessing.spawn`` runs one function once per process and joins it; when a
process exits non-zero it kills the others and forwards the child's traceback, and it
asks the kernel for SIGINT on the parent's death (PR_SET_PDEATHSIG). But
``join(timeout)`` only returns False when the time is up (nothing is killed, no rank is
named), a rank blocked in a collective is never noticed, the processes' own children
are out of its reach, and a SIGINT is handled only when the interpreter gets control
back (not inside a blocked C++ collective; our watchdog SIGKILLs the rank's whole
process group instead). ``torch.distributed.launcher.api.elastic_launch`` (what torchrun
runs) starts the workers of one entry point, returns each rank's output, watches their
exit every ``monitor_interval`` and restarts them all up to ``max_restarts`` times; it
bounds the rendezvous (900 s by default) but not the work, says nothing about which
rank stopped where, and keeps no worker for the next call. Both live in torch, which a
TensorFlow-only run need not have. What the suites need and neither gives: one group
reused across many tests and calls (each rank pays its framework import once), a
deadline on every call that ends with a diagnosis (which rank did not reach which
label) and with no process left, grandchildren included, and ranks that join a private
network namespace before their first thread. Inside a cluster that torchrun or
TF_CONFIG started, the programs run in-process through :class:`AttachedGroup` instead.

Rendezvous never collides between parallel xdist workers or runs: torch groups meet
through a file in a fresh temporary directory; TensorFlow clusters run in a private
network namespace of their own (``network=``, see :mod:`.netns`), where no other program
holds a port; without one (``--dl-allow-listen-all``) :func:`.ports.lease_ports` takes
free loopback ports and holds an exclusive ``flock`` on a per-port lock file for the life
of the cluster.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..frameworks import HarnessError
from . import netns
from .clusters import OUTER_CLUSTER_VARS
from .processes import TOKEN_VAR, group_members
from .rank import (
    DIR_VAR,
    ENTRY,
    PATH_VAR,
    RANK_VAR,
    WORLD_VAR,
    Frames,
    Program,
    RemoteError,
    WorkerContext,
    encode_frame,
    program_ref,
    write_all,
)

_STDERR_TAIL = 12


# --------------------------------------------------------------------------- errors



class ClusterError(HarnessError):
    """The group could not complete a call (a rank died, did not arrive, or the deadline
    passed). Raised only after every process of the group is gone."""

    def __init__(self, message: str, *, missing: Sequence[int] = (), died: Sequence[int] = (),
                 errors: Sequence[RemoteError] = (), token: str = "", pids: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)  # ranks that never reported back
        self.died = tuple(died)  # ranks whose process exited
        self.errors = tuple(errors)
        self.token, self.pids = token, tuple(pids)  # to check that nothing of the group is left


class TaskError(HarnessError):
    """A program raised in one or more ranks; every rank replied, so the group lives on."""

    def __init__(self, what: str, errors: Sequence[RemoteError]) -> None:
        self.errors = tuple(errors)
        detail = "\n".join(f"{e.line()}\n{e.traceback}" for e in self.errors)
        super().__init__(f"{what}: " + "; ".join(e.line() for e in self.errors) + "\n" + detail)



# --------------------------------------------------------------------------- parent side


class Group(Protocol):
    name: str
    world_size: int
    timeout: float

    @property
    def local_ranks(self) -> tuple[int, ...]:
        """The ranks whose results this process receives (all, or its own when attached)."""

    def run(self, program: Program, payload: Any = None, *, ranks: Iterable[int] | None = None,
            timeout: float | None = None, what: str | None = None) -> dict[int, Any]: ...

    def close(self) -> None: ...


@dataclass
class _Rank:
    rank: int
    proc: subprocess.Popen[bytes]
    log: Path
    frames: Frames = field(default_factory=Frames)
    arrivals: list[tuple[str, float]] = field(default_factory=list)

    @property
    def out(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    @property
    def inp(self) -> int:
        assert self.proc.stdin is not None
        return self.proc.stdin.fileno()

    def last(self) -> str:
        return self.arrivals[-1][0] if self.arrivals else "process start"

    def stderr_tail(self, lines: int = _STDERR_TAIL) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        kept = [ln for ln in text.splitlines() if ln.strip()][-lines:]
        return "\n    ".join(kept) or "(empty log)"


class LocalGroup:
    """N ranks on this machine, started with a deadline; see the module docstring."""

    def __init__(self, name: str, world_size: int, timeout: float, workdir: str, token: str,
                 teardown: str | None, network: str = "this host's network") -> None:
        self.name, self.world_size, self.timeout = name, world_size, timeout
        self.workdir, self.token, self.teardown = workdir, token, teardown
        self.network = network  # where the ranks' sockets live, for evidence and messages
        self.ranks: list[_Rank] = []
        self.dead: str | None = None  # why the group is gone, once it is
        self.pids: list[int] = []
        self._limit = timeout  # the deadline of the call in progress, for messages
        self._selected: list[int] = list(range(world_size))  # the ranks of that call

    # -- lifecycle

    @classmethod
    def start(cls, name: str, world_size: int, *, timeout: float,
              env: Callable[[int, str], Mapping[str, str]] | None = None,
              setup: Program | None = None, setup_payload: Any = None,
              teardown: Program | None = None, network: netns.PrivateNetwork | None = None) -> LocalGroup:
        """Start ``world_size`` ranks, wait for each to report, run ``setup`` on all of
        them; everything within ``timeout`` seconds, or ClusterError and nothing left.

        With ``network`` (see :func:`netns.create`) every rank runs in that private network
        namespace; the group takes it over and closes its descriptors once the ranks are
        started (they keep the namespace alive)."""
        workdir = tempfile.mkdtemp(prefix=f"dlconform-{_slug(name)}-")
        group = cls(name, world_size, timeout, workdir, uuid.uuid4().hex,
                    program_ref(teardown) if teardown else None,
                    network.describe() if network else "this host's network")
        deadline = time.monotonic() + timeout
        try:
            try:
                for rank in range(world_size):
                    group._spawn(rank, dict(env(rank, workdir)) if env else {}, network)
            finally:
                if network is not None:
                    network.close()
            group._await_hello(deadline)  # _limit is the start timeout here
            if setup is not None:
                group._call(program_ref(setup), setup_payload, range(world_size), deadline, f"setup of {name}")
        except BaseException:
            group._kill()
            raise
        return group

    def _spawn(self, rank: int, extra: dict[str, str], network: netns.PrivateNetwork | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k not in OUTER_CLUSTER_VARS}
        env.update({
            RANK_VAR: str(rank), WORLD_VAR: str(self.world_size), TOKEN_VAR: self.token,
            DIR_VAR: self.workdir, PATH_VAR: json.dumps([p for p in sys.path if p]),
            "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1",
        })
        env.update(extra)
        prelude = ""
        if network is not None:
            env[netns.NETNS_VAR] = network.child_env()
            prelude = netns.RANK_PRELUDE  # joins before anything starts a thread
        log = Path(self.workdir) / f"rank{rank}.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", prelude + ENTRY],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                cwd=self.workdir, start_new_session=True, pass_fds=network.pass_fds() if network else (),
            )
        for pipe in (proc.stdin, proc.stdout):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
        self.ranks.append(_Rank(rank, proc, log))
        self.pids.append(proc.pid)

    def _await_hello(self, deadline: float) -> None:
        waiting = {r.rank for r in self.ranks}
        while waiting:
            for rank, message in self._poll(waiting, deadline, f"start of {self.name}"):
                if message[0] == "hello":
                    waiting.discard(rank)

    @property
    def local_ranks(self) -> tuple[int, ...]:
        return tuple(range(self.world_size))

    def close(self) -> None:
        """Ask every rank to stop (running the teardown program), then make sure they are gone."""
        if self.dead is None:
            deadline = time.monotonic() + min(self.timeout, 30.0)
            for r in self.ranks:
                write_all(r.inp, encode_frame(("stop", self.teardown)), deadline)
            for r in self.ranks:
                try:
                    r.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            self.dead = "closed"
        self._kill()

    def _kill(self) -> None:
        if self.dead is None:
            self.dead = "killed"
        for r in self.ranks:
            try:
                os.killpg(r.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for r in self.ranks:
            for pipe in (r.proc.stdin, r.proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
            try:
                r.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL'd processes do exit
                pass
        # What the ranks started dies with them (same process group), a moment later.
        until = time.monotonic() + 10
        while time.monotonic() < until and any(group_members(r.proc.pid) for r in self.ranks):
            time.sleep(0.05)
        shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def alive(self) -> bool:
        return self.dead is None

    # -- calls

    def run(self, program: Program, payload: Any = None, *, ranks: Iterable[int] | None = None,
            timeout: float | None = None, what: str | None = None) -> dict[int, Any]:
        """Run ``program(ctx, payload)`` on ``ranks`` (default all); results by rank.

        A program that raises in some rank gives TaskError (the group lives on if every
        rank replied); a rank that dies or a deadline that passes gives ClusterError after
        killing the whole group."""
        if self.dead is not None:
            raise HarnessError(f"group {self.name} is no longer running ({self.dead}); start a new one")
        selected = sorted(set(range(self.world_size) if ranks is None else ranks))
        label = what or f"{program.__name__} on {self.name}"
        self._limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + self._limit
        try:
            return self._call(program_ref(program), payload, selected, deadline, label)
        except ClusterError:
            self._kill()
            raise

    def _call(self, ref: str, payload: Any, ranks: Iterable[int], deadline: float, what: str) -> dict[int, Any]:
        selected = list(ranks)
        self._selected = selected
        data = encode_frame(("run", ref, payload))
        for rank in selected:
            self.ranks[rank].arrivals.clear()
            if not write_all(self.ranks[rank].inp, data, deadline):
                self._check_exits(what, set(selected))
                raise self._timeout(what, set(selected), {}, deadline)
        results: dict[int, Any] = {}
        errors: dict[int, RemoteError] = {}
        pending = set(selected)
        grace_until: float | None = None
        while pending:
            # Once one rank failed, the others may wait forever for it in a collective:
            # give them a short grace, then give up on the group.
            limit = deadline if grace_until is None else min(deadline, grace_until)
            try:
                polled = self._poll(pending, limit, what)
            except ClusterError as exc:
                if errors and not exc.died:  # the others waited in vain for the failed rank
                    raise self._timeout(what, pending, errors, limit) from None
                if errors:
                    raise ClusterError(str(exc) + "; before that " + "; ".join(e.line() for e in errors.values()),
                                       missing=exc.missing, died=exc.died, errors=list(errors.values()),
                                       token=self.token, pids=self.pids) from None
                raise
            for rank, message in polled:
                if message[0] == "ok":
                    results[rank] = message[1]
                    pending.discard(rank)
                elif message[0] == "err":
                    errors[rank] = message[1]
                    pending.discard(rank)
                    grace_until = grace_until or time.monotonic() + min(10.0, self.timeout)
        if errors:
            raise TaskError(what, [errors[r] for r in sorted(errors)])
        return results

    def _poll(self, pending: set[int], deadline: float, what: str) -> list[tuple[int, Any]]:
        """Wait for messages from the pending ranks; ClusterError on a death or the deadline."""
        fds = {self.ranks[r].out: self.ranks[r] for r in pending}
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(what, pending, {}, deadline)
            readable, _, _ = select.select(list(fds), [], [], min(remaining, 1.0))
            got: list[tuple[int, Any]] = []
            for fd in readable:
                r = fds[fd]
                r.frames.feed(fd)
                for message in r.frames.pop():
                    if message[0] == "arrive":
                        r.arrivals.append((message[1], time.monotonic()))
                    else:
                        got.append((r.rank, message))
            if got:
                return got
            self._check_exits(what, pending)

    def _check_exits(self, what: str, pending: set[int]) -> None:
        dead = [self.ranks[r] for r in sorted(pending) if self.ranks[r].frames.eof or self.ranks[r].proc.poll() is not None]
        if not dead:
            return
        for r in dead:
            try:
                r.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        others = sorted(set(range(self.world_size)) - {r.rank for r in dead})
        lines = [
            f"rank {r.rank} (pid {r.proc.pid}) exited with {_exit_text(r.proc.returncode)} during {what}, "
            f"last seen at '{r.last()}'; its stderr:\n    {r.stderr_tail()}"
            for r in dead
        ]
        self._kill()
        tail = f"; ranks {others} were killed" if others else ""
        raise ClusterError(
            f"group {self.name}: " + "\n".join(lines) + tail,
            missing=[r.rank for r in dead], died=[r.rank for r in dead], token=self.token, pids=self.pids,
        )

    def _timeout(self, what: str, pending: set[int], errors: Mapping[int, RemoteError], deadline: float) -> ClusterError:
        now = time.monotonic()
        progress = {r: len(self.ranks[r].arrivals) for r in self._selected}
        furthest = max(progress.values(), default=0)
        behind = [r for r in sorted(pending) if progress[r] < furthest]
        lines = []
        for rank in sorted(pending):
            r = self.ranks[rank]
            since = now - r.arrivals[-1][1] if r.arrivals else None
            where = f"'{r.last()}'" + (f" for {since:.1f} s" if since is not None else "")
            if rank in behind:
                target = self._label_reached_by_others(rank, progress[rank])
                lines.append(f"rank {rank} (pid {r.proc.pid}) did not arrive at '{target}'; it was last at {where}")
            else:
                lines.append(f"rank {rank} (pid {r.proc.pid}) was waiting at {where}")
        lines += [e.line() for e in errors.values()]
        limit = self._limit
        self._kill()
        return ClusterError(
            f"group {self.name}: {what} did not complete within its deadline ({limit:g} s): "
            + "; ".join(lines) + f"; all {self.world_size} processes were killed",
            missing=behind or sorted(pending), errors=list(errors.values()), token=self.token, pids=self.pids,
        )

    def _label_reached_by_others(self, rank: int, count: int) -> str:
        for other in (self.ranks[r] for r in self._selected):
            if other.rank != rank and len(other.arrivals) > count:
                return other.arrivals[count][0]
        return "?"


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit code yet"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)[:40]


class AttachedGroup:
    """This process is one rank of a cluster started by someone else (torchrun, TF_CONFIG
    on every host): programs run in-process and return this rank's result only."""

    def __init__(self, name: str, rank: int, world_size: int, timeout: float,
                 setup: Program | None = None, setup_payload: Any = None,
                 teardown: Program | None = None) -> None:
        self.name, self.world_size, self.timeout = name, world_size, timeout
        self.ctx = WorkerContext(rank, world_size)
        self.teardown = teardown
        self.alive = True
        if setup is not None:
            setup(self.ctx, setup_payload)

    @property
    def local_ranks(self) -> tuple[int, ...]:
        return (self.ctx.rank,)

    def run(self, program: Program, payload: Any = None, *, ranks: Iterable[int] | None = None,
            timeout: float | None = None, what: str | None = None) -> dict[int, Any]:
        del timeout, what  # the outer launcher owns the processes; collectives carry their own timeout
        if ranks is not None and self.ctx.rank not in set(ranks):
            return {}
        return {self.ctx.rank: program(self.ctx, payload)}

    def close(self) -> None:
        if self.alive and self.teardown is not None:
            self.teardown(self.ctx, None)
        self.alive = False



__all__ = ["AttachedGroup", "ClusterError", "Group", "LocalGroup", "TaskError"]
