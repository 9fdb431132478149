"""Moved to :mod:`pytest_dlconform.harness.netns`; this path keeps existing imports working."""

from __future__ import annotations

from .harness.netns import (
    CLONE_NEWNET,
    CLONE_NEWUSER,
    NETNS_VAR,
    PORT_BASE,
    RANK_PRELUDE,
    Listener,
    PrivateNetwork,
    Unavailable,
    create,
    enter_from_env,
    enter_or_exit,
    exposed,
    holder_main,
    listeners,
    loopback_up,
    proc_address,
    process_tree,
    summary,
)

__all__ = [
    "CLONE_NEWNET", "CLONE_NEWUSER", "NETNS_VAR", "PORT_BASE", "RANK_PRELUDE", "Listener", "PrivateNetwork",
    "Unavailable", "create", "enter_from_env", "enter_or_exit", "exposed", "holder_main", "listeners",
    "loopback_up", "proc_address", "process_tree", "summary",
]
