"""A claim test's identity inside the package, and the seeds drawn from it.

A pytest node id starts with the test file's path relative to the rootdir, so the same
shipped test is ``suites/data/test_tfdata.py::...`` in a checkout and
``lib/python3.11/site-packages/pytest_dlconform/suites/data/test_tfdata.py::...`` (or
``../..``, or another prefix) in a wheel's venv, a tox env or a CI runner. Seeds derived
from it drew different "derandomized" examples per install, so two reports of an upgrade
check made from two venvs did not compare the same inputs, and a user's failure did not
reproduce from a checkout.

:func:`claim_identity` is the node id with the path above the suites package cut off: the
module path inside the suites (``suites/data/test_tfdata.py``), the class and function
name, and the parameter ids (``[tf-cpu]``, or ``[mymodels.gan:generator-torch-cpu]`` for a
user's model, named by its importable reference, never by its file). The per-test seed
(:func:`claim_seed`) and hypothesis's per-test key (:func:`hypothesis_key`) come from it
alone, so they are the same wherever the package and the user's files live.

It keeps the ``suites/`` folder in front: that is the node id of a checkout run from the
repository root, so the seeds and examples that runs from a checkout drew (and that the
known divergences and the false-alarm tests cite) stay what they were.

Pure functions of their arguments: the caller finds the suites package's folders
(:mod:`.guard`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath

#: The suites' folder: ``suites/`` in a checkout, ``pytest_dlconform/suites/`` installed.
SUITES_FOLDER = "suites"
#: The suites' package: what ``pytest --pyargs`` names them by, from any folder.
SUITES_PACKAGE = "pytest_dlconform.suites"


def claim_identity(nodeid: str, path: PurePath | None = None, suites_dirs: Iterable[PurePath] = ()) -> str:
    """``nodeid`` without anything that depends on where the package or the rootdir is.

    ``path`` is the test file (absolute, as the caller resolved it) and ``suites_dirs`` the
    folders of the ``pytest_dlconform.suites`` package: a file inside one is named by its
    path inside it, after ``suites/``. Otherwise the node id's file part is used from its
    last ``suites/`` folder on (a checkout's ``suites/`` run with an installed package
    elsewhere), else as pytest gave it relative to the rootdir (a project's own claim
    tests), and a file outside the rootdir (``../``, absolute) by its name alone.
    """
    file, sep, rest = nodeid.partition("::")
    local = _inside(path, suites_dirs) if path is not None else None
    return (local if local is not None else _cut(file)) + sep + rest


def claim_seed(run_seed: int | str, identity: str) -> int:
    """The seed of one claim test: from the run's ``--dl-seed`` and the test's identity (31 bits)."""
    return zlib.crc32(f"{run_seed}:{identity}".encode()) & 0x7FFFFFFF


def hypothesis_key(identity: str) -> bytes:
    """What distinguishes one test (one parametrization) for hypothesis, in place of its node
    id: with the test's source it seeds a derandomized run's examples and keys the example
    database (``hypothesis.internal.reflection.function_digest``). Independent of
    ``--dl-seed``, as hypothesis's own derandomization is."""
    return identity.encode()


def package_name(path: PurePath, suites_dirs: Iterable[PurePath]) -> str | None:
    """The dotted name of a file or folder of the suites package (``suites_dirs``), as
    ``pytest --pyargs`` takes it (``pytest_dlconform.suites.data.test_tfdata``), or None for
    one outside it (a project's own claim tests)."""
    local = _inside(path, suites_dirs)
    if local is None:
        return None
    parts = [part for part in local.split("/")[1:] if part != "."]
    if parts and parts[-1].endswith(".py"):
        parts[-1] = parts[-1][:-3]
    if parts and parts[-1] == "__init__":
        parts.pop()
    if not all(part.isidentifier() for part in parts):
        return None
    return ".".join([SUITES_PACKAGE, *parts])


def _inside(path: PurePath, suites_dirs: Iterable[PurePath]) -> str | None:
    for root in suites_dirs:
        if path.is_relative_to(root):
            return SUITES_FOLDER + "/" + path.relative_to(root).as_posix()
    return None


def _cut(file: str) -> str:
    parts = file.replace("\\", "/").split("/")
    folders = [i for i, part in enumerate(parts[:-1]) if part == SUITES_FOLDER]
    if folders:
        return "/".join(parts[folders[-1]:])
    posix = "/".join(parts)
    if posix.startswith("../") or PurePosixPath(posix).is_absolute() or PureWindowsPath(file).is_absolute():
        return parts[-1]
    return re.sub(r"^(?:\./)+", "", posix)


@functools.cache
def suites_dirs() -> tuple[Path, ...]:
    """The folders of the ``pytest_dlconform.suites`` package as imported here (the checkout's
    ``suites/`` under an editable install, ``site-packages/pytest_dlconform/suites`` from a wheel)."""
    try:
        spec = importlib.util.find_spec(SUITES_PACKAGE)
    except (ImportError, ValueError):
        return ()
    locations = (spec.submodule_search_locations or []) if spec is not None else []
    return tuple(Path(os.path.realpath(p)) for p in locations)
