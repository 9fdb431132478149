"""Results computed once per test run and shared by its xdist workers.

A suite whose tests each read a part of one expensive computation (the compiled-backward
suite: a compiled batch of the op library per chunk of ops) computes each part once per run.
The first worker that needs a part claims it (a claim file created exclusively, holding its
pid), computes it and publishes it (pickled to a temporary name, then renamed, so no reader
sees half a file). A worker that needs a part another worker is computing first computes the
unclaimed parts of every family registered with it (work some test will need anyway: the
same family's first, then the others'), then waits for it. A
part whose claimant died (its pid is gone) is computed by the waiter. Without a directory
(no xdist) every part is computed in this process, once.

The directory is per run: xdist's documented recipe for work done once per session is the
parent of each worker's ``basetemp``, which the run's workers share (:func:`run_directory`).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..frameworks import HarnessError
from .processes import is_alive

#: How often a waiting worker looks for the result (seconds).
POLL_S = 0.2


class SharedResults:
    """Parts of named families of computations, each computed once per run."""

    def __init__(self, root: Path | None, timeout_s: float = 3600.0) -> None:
        self.root = root
        self.timeout_s = timeout_s
        self._local: dict[tuple[str, str], Any] = {}
        self._families: dict[str, tuple[tuple[str, ...], Callable[[str], Any]]] = {}
        self.computed: list[tuple[str, str]] = []  # the parts this process computed, in order

    def register(self, family: str, parts: Sequence[str], compute: Callable[[str], Any]) -> None:
        """``family``'s parts and how to compute one (``compute(part)``); the first registration wins."""
        self._families.setdefault(family, (tuple(parts), compute))

    def get(self, family: str, part: str) -> Any:
        """The registered family's ``part``, computed once per run."""
        key = (family, part)
        if key in self._local:
            return self._local[key]
        compute = self._families[family][1]
        if self.root is None:
            return self._compute(family, part, compute)
        if self._claim(family, part):
            return self._compute(family, part, compute)
        # Someone computes it: meanwhile compute what nobody has claimed, this family first.
        for fam in sorted(self._families, key=lambda f: f != family):
            parts, fn = self._families[fam]
            for other in parts:
                if (fam, other) not in self._local and (fam, other) != key and self._claim(fam, other):
                    self._compute(fam, other, fn)
        return self._wait(family, part, compute)

    # ------------------------------------------------------------------ files

    def _path(self, family: str, part: str, suffix: str) -> Path:
        assert self.root is not None
        digest = hashlib.sha1(f"{family}\0{part}".encode()).hexdigest()[:20]
        return self.root / f"{digest}{suffix}"

    def _claim(self, family: str, part: str) -> bool:
        try:
            fd = os.open(self._path(family, part, ".claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True

    def _compute(self, family: str, part: str, compute: Callable[[str], Any]) -> Any:
        try:
            value = compute(part)
        except BaseException as exc:
            self._publish(family, part, ("error", f"{type(exc).__name__}: {exc}"))
            raise
        self._local[(family, part)] = value
        self.computed.append((family, part))
        self._publish(family, part, ("value", value))
        return value

    def _publish(self, family: str, part: str, record: tuple[str, Any]) -> None:
        if self.root is None:
            return
        final = self._path(family, part, ".pickle")
        tmp = final.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(record))
        os.replace(tmp, final)

    def _claimant_alive(self, family: str, part: str) -> bool:
        try:
            pid = int(self._path(family, part, ".claim").read_text() or "0")
        except (OSError, ValueError):
            return True  # being written: the claimant is there
        return pid in (0, os.getpid()) or is_alive(pid)  # 0: created, its pid not written yet

    def _wait(self, family: str, part: str, compute: Callable[[str], Any]) -> Any:
        final = self._path(family, part, ".pickle")
        deadline = time.monotonic() + self.timeout_s
        while not final.exists():
            if not self._claimant_alive(family, part) or time.monotonic() > deadline:
                return self._compute(family, part, compute)  # its claimant died or hangs: do it here
            time.sleep(POLL_S)
        kind, value = pickle.loads(final.read_bytes())
        if kind == "error":
            raise HarnessError(f"the shared computation {family} / {part} failed in another worker: {value}")
        self._local[(family, part)] = value
        return value


def run_directory(config: Any, basetemp: Path, name: str) -> Path | None:
    """The run's shared directory ``name`` for xdist workers (the parent of ``basetemp``,
    which all workers of the run share), or None outside xdist."""
    if not hasattr(config, "workerinput"):
        return None
    root = basetemp.parent / name
    root.mkdir(exist_ok=True)
    return root


def compiler_caches(config: Any) -> Path:
    """One TorchInductor/Triton cache for this run, shared by its xdist workers; returns it.

    Set before any torch.compile runs (inductor reads the variables when it compiles). The
    workers of one run share it (the run's directory, :func:`run_directory`'s parent of every
    worker's basetemp; inductor writes its cache entries atomically and compiles under file
    locks), so a graph two workers need is compiled once per run; a new run starts empty, so
    a conformance run exercises the compiler instead of replaying artifacts of an earlier run
    or another torch. Outside xdist the process has a temporary cache of its own, removed at
    exit; pytest's retention of old basetemps removes a run's shared one."""
    basetemp = getattr(getattr(config, "option", None), "basetemp", None)
    if hasattr(config, "workerinput") and basetemp:
        root = Path(basetemp).parent / "dlconform-compiler-cache"
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="dlconform-compile-"))
        atexit.register(shutil.rmtree, str(root), True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")
    return root
