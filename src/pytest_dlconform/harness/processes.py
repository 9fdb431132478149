"""What is alive: the /proc readings every launcher here uses to prove nothing outlives it.

A local group (:mod:`.groups`) and a server (:mod:`.serving`) each start their processes
as leaders of a process group of their own, kill that group when they stop, and then
check, from ``/proc``, that none of its members (grandchildren included) is left. The
readings are Linux-only; elsewhere :func:`group_members` finds nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from . import netns

TOKEN_VAR = "DLCONFORM_GROUP_TOKEN"  # marks every process of a group (orphan checks)


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is ``pgid`` (a rank or a server and
    what it started); empty where there is no /proc."""
    if pgid <= 0 or not os.path.isdir("/proc"):
        return []
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()  # fields: state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def is_alive(pid: int) -> bool:
    """Running (a zombie has exited; its parent merely has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        if sys.platform.startswith("linux"):
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


__all__ = ["TOKEN_VAR", "group_members", "is_alive", "listening_addresses", "survivors"]
