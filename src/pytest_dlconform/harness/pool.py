"""Groups kept alive across tests: one per kind of cluster and process (the ``dl_groups`` fixture).

Starting a group costs seconds (each rank imports its framework), so a pool keeps one
per key (framework, strategy, replicas, device) for the life of an xdist worker, and
starts a new one when the kept one died (a deadline passed, a rank exited: the group
killed itself). In-process TensorFlow strategies are kept here too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


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


__all__ = ["GroupPool"]
