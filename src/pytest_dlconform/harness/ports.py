"""Loopback ports: the one way this package picks a free port for a server to bind.

A server that must bind a port itself (TensorFlow's gRPC servers, TorchServe's frontend)
is told a port number in advance; the number comes from :class:`PortLease`, which holds
an exclusive ``flock`` on a per-port lock file until the lease is released, so two
dlconform processes on one machine (parallel xdist workers, parallel runs) are never
handed the same port. Local TensorFlow clusters normally need none of this: they run in
a private network namespace (:mod:`pytest_dlconform.harness.netns`) where nothing else
holds a port.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path

from ..frameworks import HarnessError

LOOPBACK = "127.0.0.1"


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

    def __enter__(self) -> PortLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


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


__all__ = ["LOOPBACK", "PortLease", "lease_ports", "loopback_interface"]
