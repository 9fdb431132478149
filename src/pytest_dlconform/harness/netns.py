"""Private network namespaces for local clusters, and what our processes listen on.

TensorFlow's gRPC server (``tf.distribute.Server``, and the servers MultiWorkerMirrored and
ParameterServer strategies start) has no bind-address option: it listens on every
interface (``[::]:port``). A conformance run on a shared CI host or a GPU machine inside a
network must not offer those ports to the network, so every task of a local TensorFlow
cluster runs in one private network namespace made for that cluster, in which only ``lo``
exists and is up: the tasks still reach each other on 127.0.0.1, and nothing outside the
namespace can reach them, whatever address they bind.

How a namespace is made (Linux): a short-lived *holder* process calls
``unshare(CLONE_NEWNET)`` (needs CAP_SYS_ADMIN, e.g. root), or, where that is refused,
``unshare(CLONE_NEWUSER | CLONE_NEWNET)`` (an unprivileged user namespace, where the kernel
allows them) and maps its own uid and gid; it brings ``lo`` up (a new namespace starts
with ``lo`` down) and reports. This process then opens ``/proc/<holder>/ns/net`` (and
``ns/user``): an open namespace file keeps the namespace alive, so the holder exits at
once. Each rank gets those descriptors and joins with ``setns`` first thing, before it
starts a thread (joining a user namespace requires a single-threaded process). The ranks
stay children of this process, so deadlines, the no-orphans kill of their process groups
and the diagnosis messages work as without a namespace.

Listeners: :func:`listeners` reads the TCP sockets in LISTEN state of a set of processes
from ``/proc/<pid>/net/tcp`` and ``tcp6`` of every network namespace those processes are in
(a namespace has its own tables), mapping socket inodes through ``/proc/<pid>/fd``.
:meth:`Listener.exposed` says whether the socket can be reached from beyond loopback.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import ipaddress
import json
import os
import select
import socket
import struct
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
NETNS_VAR = "DLCONFORM_NETNS"  # tells a rank which namespace descriptors to join
PORT_BASE = 20000  # ports inside a private namespace: nothing else is in it, so none can be taken
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sH22x")  # struct ifreq: name, then ifr_flags in a 24-byte union
_METHODS = (
    ("net", CLONE_NEWNET, "unshare(CLONE_NEWNET)"),
    ("user+net", CLONE_NEWUSER | CLONE_NEWNET, "unshare(CLONE_NEWUSER|CLONE_NEWNET)"),
)


_HINTS = {
    ("net", errno.EPERM): "needs CAP_SYS_ADMIN, which root normally has",
    ("user+net", errno.EPERM): "unprivileged user namespaces are refused here: kernel.unprivileged_userns_clone=0, "
                               "a container's seccomp profile, or AppArmor's userns restriction",
    ("user+net", errno.ENOSPC): "the user.max_user_namespaces limit is 0 or reached",
    ("user+net", errno.EUSERS): "too many nested user namespaces",
}


class Unavailable(Exception):
    """The kernel refuses every way to make a private network namespace here; the message
    says what was tried and why each attempt failed. (This module imports nothing else of
    the package, so the holder process starts in a few milliseconds.)"""


# --------------------------------------------------------------------------- system calls


def _libc_call(name: str, *args: int) -> None:
    fn = getattr(ctypes.CDLL(None, use_errno=True), name)  # glibc/musl: the process's own libc
    if fn(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{os.strerror(code)} ({errno.errorcode.get(code, code)})")


def loopback_up(name: str = "lo") -> None:
    """Set IFF_UP on the loopback interface of the calling process's namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = _IFREQ.unpack(fcntl.ioctl(s, _SIOCGIFFLAGS, _IFREQ.pack(name.encode(), 0)))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, _IFREQ.pack(name.encode(), flags | _IFF_UP))


def _map_own_ids() -> None:
    """In a new user namespace: map our uid and gid to themselves (the one mapping an
    unprivileged process may write), so files and /proc look the same from inside."""
    uid, gid = os.geteuid(), os.getegid()
    Path("/proc/self/setgroups").write_text("deny")  # required before an unprivileged gid_map
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


# --------------------------------------------------------------------------- the holder


def holder_main() -> None:
    """Entry point of the holder process: make the namespace, bring lo up, report one JSON
    line, then wait until this process's parent closes stdin (or dies)."""
    tried: list[str] = []
    made = None
    for mode, flags, call in _METHODS:
        try:
            _libc_call("unshare", flags)
        except OSError as exc:
            hint = _HINTS.get((mode, exc.errno or 0), "")
            tried.append(f"{call} failed: {exc.strerror}" + (f": {hint}" if hint else ""))
            continue
        try:
            if flags & CLONE_NEWUSER:
                _map_own_ids()
            loopback_up()
        except OSError as exc:
            tried.append(f"{call} worked, but then {exc.filename or 'bringing lo up'}: {exc.strerror or exc}")
            break  # this process is now inside a namespace it cannot use; report, do not retry here
        made = mode
        break
    sys.stdout.write(json.dumps({"mode": made, "tried": tried, "uid": os.geteuid()}) + "\n")
    sys.stdout.flush()
    sys.stdin.buffer.read()


_HOLDER = ("import json, os, sys; sys.path[:0] = json.loads(os.environ['DLCONFORM_SYS_PATH']); "
           "from pytest_dlconform.harness.netns import holder_main; holder_main()")


@dataclass
class PrivateNetwork:
    """Descriptors of a fresh network namespace with only ``lo`` (up). Pass it to
    ``LocalGroup.start(network=...)``; the group closes it once its ranks have joined."""

    mode: str  # "net" (made with CAP_SYS_ADMIN) or "user+net" (in an unprivileged user namespace)
    inode: int  # of the network namespace, as in /proc/<pid>/ns/net -> net:[inode]
    fds: dict[str, int]

    def addresses(self, count: int) -> list[str]:
        """``count`` loopback addresses for the cluster's servers: the namespace is empty, so
        no other program can hold these ports (no lease needed)."""
        return [f"127.0.0.1:{PORT_BASE + i}" for i in range(count)]

    def child_env(self) -> str:
        return json.dumps({"user": self.fds.get("user"), "net": self.fds["net"], "inode": self.inode})

    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self.fds.values())

    def describe(self) -> str:
        how = "as a privileged process" if self.mode == "net" else "in an unprivileged user namespace"
        return f"private network namespace net:[{self.inode}] with only lo, made {how}"

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def create(timeout: float = 30.0) -> PrivateNetwork:
    """A new network namespace with only loopback, or :class:`Unavailable` saying why not.

    A holder that crashes or does not answer in time is a HarnessError (something is
    wrong with this installation), not a missing capability."""
    if not sys.platform.startswith("linux"):
        raise Unavailable(f"network namespaces are a Linux feature; this is {sys.platform}")
    env = {**os.environ, "DLCONFORM_SYS_PATH": json.dumps([p for p in sys.path if p])}
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else b""
        if not line:
            proc.kill()
            err = proc.communicate(timeout=10)[1].decode(errors="replace").strip().splitlines()[-5:]
            from ..frameworks import HarnessError

            what = f"did not answer within {timeout:g} s" if not ready else f"exited with code {proc.returncode}"
            raise HarnessError(f"the network-namespace holder ({sys.executable} -c ...) {what}: {' | '.join(err)}")
        report = json.loads(line)
        if report["mode"] is None:
            raise Unavailable(f"as uid {report['uid']}, " + "; ".join(report["tried"]))
        fds = {}
        for kind in (("user", "net") if report["mode"] == "user+net" else ("net",)):
            fds[kind] = os.open(f"/proc/{proc.pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        return PrivateNetwork(report["mode"], os.fstat(fds["net"]).st_ino, fds)
    finally:
        if proc.returncode is None:
            try:  # closing its stdin is the holder's cue to exit; the namespace lives on in our descriptors
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


RANK_PRELUDE = "from pytest_dlconform.harness.netns import enter_or_exit; enter_or_exit(); "  # before any other import


def enter_or_exit() -> None:
    """The first statement of a rank: join its namespace, or exit with code 3 and one line
    on stderr (the launcher's diagnosis quotes it). It runs before anything else is
    imported because numpy's BLAS starts threads, and a process with threads cannot join
    a user namespace (and would join a network namespace with the calling thread only)."""
    try:
        enter_from_env()
    except OSError as exc:
        sys.stderr.write(f"dlconform: cannot join the cluster's private network namespace: {exc}\n")
        sys.stderr.flush()
        os._exit(3)


def enter_from_env() -> None:
    """In a rank, before any thread starts: join the namespace named by DLCONFORM_NETNS."""
    raw = os.environ.pop(NETNS_VAR, None)  # a rank's own children inherit the namespace anyway
    if not raw:
        return
    spec = json.loads(raw)
    if spec["user"] is not None:
        _libc_call("setns", spec["user"], CLONE_NEWUSER)
        os.close(spec["user"])
    _libc_call("setns", spec["net"], CLONE_NEWNET)
    os.close(spec["net"])
    joined = os.stat("/proc/self/ns/net").st_ino
    if joined != spec["inode"]:
        raise OSError(f"after setns this process is in net:[{joined}], not the cluster's net:[{spec['inode']}]")


# --------------------------------------------------------------------------- listeners


@dataclass(frozen=True)
class Listener:
    """A TCP socket in LISTEN state: who holds it, where it listens, in which namespace."""

    pids: tuple[int, ...]
    address: str
    port: int
    netns: int
    private: bool  # in a namespace other than this process's own
    ns_addresses: tuple[str, ...]  # every local address configured in that namespace

    @property
    def loopback(self) -> bool:
        ip = ipaddress.ip_address(self.address)
        mapped = getattr(ip, "ipv4_mapped", None)
        return (mapped or ip).is_loopback

    @property
    def exposed(self) -> bool:
        """Reachable from beyond loopback: any non-loopback address in this process's own
        namespace (the one the host's interfaces are in); in a private namespace, a wildcard
        or other address counts only if the namespace has some non-loopback address."""
        if self.loopback:
            return False
        if not self.private:
            return True
        return any(not ipaddress.ip_address(a).is_loopback for a in self.ns_addresses)

    def line(self) -> str:
        where = f"private netns net:[{self.netns}] with addresses {list(self.ns_addresses)}" if self.private \
            else f"this process's netns net:[{self.netns}]"
        shown = f"[{self.address}]" if ":" in self.address else self.address
        return f"{shown}:{self.port} held by pid(s) {list(self.pids)} in {where}"


def process_tree(root: int) -> set[int]:
    """``root`` and all its live descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def listeners(pids: Iterable[int]) -> list[Listener]:
    """Every TCP listener held by these processes, read from the tables of each network
    namespace they are in (processes that exit meanwhile are skipped)."""
    own = os.stat("/proc/self/ns/net").st_ino
    holders: dict[str, set[int]] = {}  # socket inode -> pids holding it
    namespaces: dict[int, int] = {}  # netns inode -> one pid in it
    for pid in pids:
        try:
            namespaces.setdefault(os.stat(f"/proc/{pid}/ns/net").st_ino, pid)
            fd_dir = f"/proc/{pid}/fd"
            for name in os.listdir(fd_dir):
                link = os.readlink(f"{fd_dir}/{name}")
                if link.startswith("socket:["):
                    holders.setdefault(link[8:-1], set()).add(pid)
        except OSError:
            continue
    found = []
    for ns, pid in namespaces.items():
        rows = _listen_rows(pid)
        addresses = _local_addresses(pid)
        for inode, address, port in rows:
            if inode in holders:
                found.append(Listener(tuple(sorted(holders[inode])), address, port, ns, ns != own, addresses))
    return found


def exposed(pids: Iterable[int]) -> list[Listener]:
    return [item for item in listeners(pids) if item.exposed]


def _listen_rows(pid: int) -> list[tuple[str, str, int]]:
    rows = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                address, port = fields[1].split(":")
                rows.append((fields[9], proc_address(address, family), int(port, 16)))
    return rows


def proc_address(hexaddr: str, family: int) -> str:
    """An address as /proc/net/tcp* print it (each 32-bit word in host byte order)."""
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)) if sys.byteorder == "little" else raw
    return socket.inet_ntop(family, words)


def _local_addresses(pid: int) -> tuple[str, ...]:
    """Local addresses of a process's network namespace: IPv4 from the LOCAL entries of
    the fib trie, IPv6 from if_inet6."""
    found: list[str] = []
    try:
        lines = Path(f"/proc/{pid}/net/fib_trie").read_text().splitlines()
    except OSError:
        lines = []
    current = None
    for line in lines:
        if "|--" in line:
            current = line.split("|--")[1].strip()
        elif line.strip().startswith("/32 host LOCAL") and current:
            found.append(current)
    try:
        for line in Path(f"/proc/{pid}/net/if_inet6").read_text().splitlines():
            hexaddr = line.split()[0]
            found.append(str(ipaddress.IPv6Address(bytes.fromhex(hexaddr))))
    except OSError:
        pass
    return tuple(dict.fromkeys(found))


def summary(items: Iterable[Listener]) -> Mapping[str, int]:
    """Counts by kind, for evidence: loopback, private (wildcard inside a private namespace), exposed."""
    counts = {"loopback": 0, "private": 0, "exposed": 0}
    for item in items:
        counts["loopback" if item.loopback else "exposed" if item.exposed else "private"] += 1
    return counts
