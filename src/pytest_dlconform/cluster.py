"""Localhost multi-process groups with deadlines, for the distributed suites.

A *group* is N worker processes (ranks) that stay alive across tests: the parent ships
them a program (a module-level function and a picklable payload), every rank runs it,
and the parent gets one result per rank. Starting a process that imports TensorFlow or
torch costs seconds, so the suites start one group per kind of cluster and xdist worker
and batch their generated examples into few calls.

Deadlines, never hangs: every start and every call has a deadline. A rank that exits,
a peer that never joins and a collective that never completes end the call within its
deadline with a :class:`ClusterError` that names the rank(s) that did not arrive and where
(ranks report progress with :meth:`WorkerContext.arrive`), and every process of the group
is killed and reaped before the error is raised. Each rank is the leader of its own
process group (``start_new_session``), so ``os.killpg`` also takes down anything it
started; a rank whose parent disappears kills itself (watchdog thread).

Rendezvous never collides between parallel xdist workers or runs: torch groups meet
through a file in a fresh temporary directory; TensorFlow clusters run in a private
network namespace of their own (``network=``, see :mod:`pytest_dlconform.netns`), where
no other program holds a port; without one (``--dl-allow-listen-all``) :func:`lease_ports`
takes free loopback ports and holds an exclusive ``flock`` on a per-port lock file for
the life of the cluster.

When this process already runs inside a cluster (``TF_CONFIG`` or a torchrun
environment, see :func:`external_tf_config` and :func:`external_torch_env`),
:class:`AttachedGroup` runs the same programs in-process as this host's rank.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import pickle
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from . import netns
from .frameworks import HarnessError

LOOPBACK = "127.0.0.1"
RANK_VAR = "DLCONFORM_RANK"
WORLD_VAR = "DLCONFORM_WORLD_SIZE"
TOKEN_VAR = "DLCONFORM_GROUP_TOKEN"  # marks every process of a group (orphan checks)
DIR_VAR = "DLCONFORM_GROUP_DIR"
PATH_VAR = "DLCONFORM_SYS_PATH"
# Environment that would make a local rank believe it is part of an outer cluster.
OUTER_CLUSTER_VARS = (
    "TF_CONFIG", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
)
_HEADER = struct.Struct("!Q")
_STDERR_TAIL = 12

Program = Callable[["WorkerContext", Any], Any]


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class RemoteError:
    """An exception raised by a program in one rank, as text (it may not unpickle here)."""

    rank: int
    type: str
    message: str
    traceback: str

    def line(self) -> str:
        return f"rank {self.rank} raised {self.type}: {self.message}"


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


# --------------------------------------------------------------------------- framing


def _encode(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


class _Frames:
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


def _write_all(fd: int, data: bytes, deadline: float) -> bool:
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


# --------------------------------------------------------------------------- ports and env


class PortLease:
    """Free loopback ports, each claimed by an exclusive flock on a per-port lock file.

    A free port is found with bind(127.0.0.1:0) and released, because the framework must
    bind it itself (TensorFlow's gRPC server refuses a port that is still held, even with
    SO_REUSEPORT). Between the release and the framework's bind, another dlconform process
    on this machine (a parallel xdist worker) could be handed the same port by the kernel;
    the lock file makes it skip that port. The locks go when the lease is released or the
    process dies.
    """

    def __init__(self, count: int, lock_dir: str | None = None) -> None:
        self.lock_dir = Path(lock_dir or Path(tempfile.gettempdir()) / "dlconform-ports")
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        self.ports: list[int] = []
        self._fds: list[int] = []
        for _ in range(200 * count):
            if len(self.ports) == count:
                break
            self._try_one()
        if len(self.ports) < count:
            self.release()
            raise HarnessError(f"could not lease {count} free loopback ports (lock files in {self.lock_dir})")

    def _try_one(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
        if port in self.ports:
            return
        fd = os.open(self.lock_dir / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # another dlconform process holds this port
            return
        self.ports.append(port)
        self._fds.append(fd)

    def addresses(self) -> list[str]:
        return [f"{LOOPBACK}:{p}" for p in self.ports]

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds, self.ports = [], []


def lease_ports(count: int) -> PortLease:
    return PortLease(count)


def loopback_interface() -> str:
    """Name of the loopback interface (``lo`` on Linux, ``lo0`` on macOS), for
    GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, so collectives listen on loopback only."""
    names = [name for _, name in socket.if_nameindex()]
    for name in names:
        if name == "lo" or name.startswith("lo"):
            return name
    raise HarnessError(f"no loopback network interface found among {names}")


def tf_config(cluster: Mapping[str, Sequence[str]], task_type: str, index: int) -> str:
    """A TF_CONFIG value: the cluster spec and this process's task."""
    return json.dumps({"cluster": {k: list(v) for k, v in cluster.items()}, "task": {"type": task_type, "index": index}})


def external_tf_config(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The cluster this process already belongs to through TF_CONFIG, if any."""
    raw = (os.environ if env is None else env).get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"TF_CONFIG is set but is not JSON ({exc}): {raw[:200]!r}") from None
    if not isinstance(config, dict) or not config.get("cluster") or not config.get("task"):
        raise HarnessError(f"TF_CONFIG must have 'cluster' and 'task' entries, got {raw[:200]!r}")
    return config


@dataclass(frozen=True)
class TorchEnv:
    rank: int
    world_size: int
    local_rank: int


def external_torch_env(env: Mapping[str, str] | None = None) -> TorchEnv | None:
    """The torchrun (or other env:// launcher) rank of this process, if any.

    torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; all of them
    must be present for ``init_process_group(init_method="env://")`` to work."""
    env = os.environ if env is None else env
    needed = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    if not all(env.get(k) for k in needed):
        return None
    return TorchEnv(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", env["RANK"])))


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
    """Entry point of a rank (``python -c 'from pytest_dlconform.cluster import worker_main; worker_main()'``)."""
    extra = json.loads(os.environ.get(PATH_VAR, "[]"))
    sys.path[:0] = [p for p in extra if p not in sys.path]
    out_fd = os.dup(1)
    os.dup2(2, 1)  # anything a program prints goes to the rank's log, not into the channel
    parent = os.getppid()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    lock = threading.Lock()

    def send(obj: Any) -> None:
        data = _encode(obj)
        with lock:
            view = memoryview(data)
            while view:
                view = view[os.write(out_fd, view):]

    ctx = WorkerContext(int(os.environ[RANK_VAR]), int(os.environ[WORLD_VAR]),
                        _report=lambda label: send(("arrive", label)))
    send(("hello", ctx.rank, os.getpid()))
    frames = _Frames()
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
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, never swallowed
                send(("err", RemoteError(ctx.rank, type(exc).__name__, str(exc), traceback.format_exc())))


def _run_quietly(ref: str | None, ctx: WorkerContext) -> None:
    if ref:
        try:
            _resolve(ref)(ctx, None)
        except BaseException:  # noqa: BLE001 - teardown of a group that is going away anyway
            traceback.print_exc()


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
    frames: _Frames = field(default_factory=_Frames)
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
                [sys.executable, "-c", prelude + "from pytest_dlconform.cluster import worker_main; worker_main()"],
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
                _write_all(r.inp, _encode(("stop", self.teardown)), deadline)
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
        data = _encode(("run", ref, payload))
        for rank in selected:
            self.ranks[rank].arrivals.clear()
            if not _write_all(self.ranks[rank].inp, data, deadline):
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


# --------------------------------------------------------------------------- reuse and checks


class GroupPool:
    """Groups kept alive across tests (one per key and process), restarted if one died."""

    def __init__(self, *, allow_listen_all: bool = False) -> None:
        # --dl-allow-listen-all: where no private network namespace can be made, start
        # TensorFlow clusters on this host's network anyway (their servers listen on every interface)
        self.allow_listen_all = allow_listen_all
        self._groups: dict[Any, Any] = {}
        self.started: dict[Any, float] = {}  # key -> seconds its last start took

    def get(self, key: Any, factory: Callable[[], Any]) -> Any:
        group = self._groups.get(key)
        if group is not None and getattr(group, "alive", True):
            return group
        t0 = time.monotonic()
        group = factory()
        self.started[key] = time.monotonic() - t0
        self._groups[key] = group
        return group

    def discard(self, key: Any) -> None:
        group = self._groups.pop(key, None)
        close = getattr(group, "close", None)  # in-process strategies are kept here too
        if close is not None:
            close()

    def close(self) -> None:
        for key in list(self._groups):
            self.discard(key)


def survivors(token: str) -> list[int]:
    """Pids of live processes that carry a group's token in their environment (Linux /proc):
    after a group is gone this must be empty, grandchildren included."""
    marker = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0") and _state(entry) != "Z":
                found.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def listening_addresses(pids: Iterable[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state owned by these processes, in
    whichever network namespace each one is (Linux /proc; see :func:`netns.listeners`)."""
    return [(item.address, item.port) for item in netns.listeners(pids)]


def _state(entry: Path) -> str:
    stat = (entry / "stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid`` (a rank and what it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # fields: state, ppid, pgrp, ...
            found.append(int(entry.name))
    return found


__all__ = [
    "AttachedGroup", "ClusterError", "Group", "GroupPool", "LocalGroup", "PortLease", "RemoteError",
    "TaskError", "TorchEnv", "WorkerContext", "external_tf_config", "external_torch_env", "lease_ports",
    "listening_addresses", "loopback_interface", "program_ref", "survivors", "tf_config", "worker_main",
]
