"""Servers and clusters pick loopback ports one way: a PortLease, held until they stop.

TorchServe binds its five ports only when it starts, seconds after they were chosen; a
port picked by bind(0)-and-close could be handed to another dlconform process meanwhile.
The lease's per-port flock makes every other dlconform process skip the port until the
server has stopped. These tests read the lock files directly.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pytest_dlconform.harness import ports, serving


def _locked(lock_dir: Path, port: int) -> bool:
    """Whether some open file holds the port's lock (flock locks belong to open files, so
    a second open in this process conflicts like another process would)."""
    fd = os.open(lock_dir / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also drops the lock if this check took it
    return False


def test_the_lock_check_sees_a_port_that_nobody_holds(tmp_path):
    lease = ports.PortLease(2, lock_dir=str(tmp_path))
    held = list(lease.ports)
    assert all(_locked(tmp_path, p) for p in held)
    lease.release()
    assert not any(_locked(tmp_path, p) for p in held), "a released lease still holds its ports"


def test_torchserve_holds_its_ports_from_the_choice_until_it_stops(tmp_path):
    server = serving.TorchServe(tmp_path / "server")  # chooses ports and writes its config; starts nothing
    chosen = list(server.lease.ports)
    assert len(set(chosen)) == 5, chosen
    assert {server.inference_port, server.management_port, server.metrics_port} <= set(chosen)
    config = server.config.read_text(encoding="utf-8")
    assert all(str(p) in config for p in chosen), config
    unheld = [p for p in chosen if not _locked(server.lease.lock_dir, p)]
    assert not unheld, f"TorchServe's ports {unheld} are not leased between their choice and the server's bind"
    server.stop()
    assert not any(_locked(server.lease.lock_dir, p) for p in chosen), "the ports stay leased after stop()"
