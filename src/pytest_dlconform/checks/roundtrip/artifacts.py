"""Sealed artifacts: an artifact folder is complete and verified, or it is refused.

:func:`export_artifact` writes into a staging folder beside the target, records every
file's size and SHA-256 in a seal, then renames the folder into place;
:func:`open_artifact` refuses anything without a matching seal. A target that exists, an
unwritable folder, a truncated or altered file: each raises :class:`ArtifactError` (a
harness error) naming the step and the file. A writer (the framework's saver) that raises
or writes nothing raises :class:`WriteFailed` (a violation; ``__cause__`` is what it
raised). Nothing half written is ever taken for a good artifact.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...frameworks import HarnessError
from .errors import ArtifactError, WriteFailed, one_line

SEAL = ".dlconform-seal.json"
# The file (or folder, ".") inside an artifact folder that the format's loader opens.
MAIN_FILE = {
    "savedmodel": ".",
    "keras-export": ".",
    "keras": "model.keras",
    "tflite": "model.tflite",
    "torchscript": "model.pt",
    "torch-export": "model.pt2",
    "onnx": "model.onnx",
    "state-dict": "state_dict.pt",
}
FORMATS = tuple(MAIN_FILE)


@dataclass(frozen=True)
class Artifact:
    path: Path  # the artifact folder
    format: str
    files: Mapping[str, tuple[int, str]]  # relative path -> (size, sha256)

    @property
    def main(self) -> Path:
        return self.path / MAIN_FILE[self.format]


def _digest(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return path.stat().st_size, h.hexdigest()


def _inventory(folder: Path) -> dict[str, tuple[int, str]]:
    files = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name != SEAL:
            files[p.relative_to(folder).as_posix()] = _digest(p)
    return files


def _write_seal(folder: Path, fmt: str) -> dict[str, tuple[int, str]]:
    files = _inventory(folder)
    doc = {"format": fmt, "files": {k: {"size": s, "sha256": d} for k, (s, d) in files.items()}}
    tmp = folder / (SEAL + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, folder / SEAL)
    return files


def export_artifact(path: str | os.PathLike[str], fmt: str, write: Callable[[Path], Any]) -> Artifact:
    """Write an artifact folder at ``path``: ``write(main_path)`` produces the format's files.

    The writer runs in a staging folder next to ``path``; only a complete, sealed folder is
    renamed into place. Nothing is overwritten.
    """
    if fmt not in MAIN_FILE:
        raise ValueError(f"unknown artifact format {fmt!r}; use one of {FORMATS}")
    target = Path(path)
    if target.exists() or target.is_symlink():
        raise ArtifactError("export: check target", target, "already exists; refusing to overwrite an artifact "
                            "(remove it or choose a new path)")
    parent = target.parent
    if not parent.is_dir():
        raise ArtifactError("export: check target", target, f"the folder {parent} does not exist")
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=parent))
    except OSError as exc:
        raise ArtifactError("export: create staging folder", parent, f"the folder is not writable ({exc})") from exc
    try:
        main = staging / MAIN_FILE[fmt]
        try:
            write(main)
        except HarnessError:  # the harness around the saver failed (a fresh interpreter, a port): not a result
            raise
        except Exception as exc:
            raise WriteFailed(f"export: write {fmt}", target / MAIN_FILE[fmt], f"the writer raised {one_line(exc)}") from exc
        if not main.exists() or not (main.stat().st_size if main.is_file() else any(main.rglob("*"))):
            raise WriteFailed(f"export: write {fmt}", target / MAIN_FILE[fmt], "the writer returned without writing it")
        files = _write_seal(staging, fmt)
        if target.exists():  # appeared while writing (another process): still never overwrite
            raise ArtifactError("export: commit", target, "appeared while the artifact was being written; not replacing it")
        try:
            os.rename(staging, target)  # atomic: the folder is complete and sealed, or absent
        except OSError as exc:
            raise ArtifactError("export: commit", target, f"could not move the finished artifact into place ({exc})") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Artifact(target, fmt, files)


def open_artifact(path: str | os.PathLike[str], fmt: str | None = None) -> Artifact:
    """Verify an artifact folder against its seal: every file present, same size, same digest."""
    folder = Path(path)
    if not folder.is_dir():
        raise ArtifactError("verify: find artifact", folder, "no artifact folder here")
    seal_path = folder / SEAL
    try:
        doc = json.loads(seal_path.read_text(encoding="utf-8"))
        sealed = {k: (int(v["size"]), str(v["sha256"])) for k, v in doc["files"].items()}
        sealed_fmt = str(doc["format"])
    except FileNotFoundError:
        raise ArtifactError("verify: read seal", seal_path, "missing: the export did not finish (or the folder was not "
                            "written by export_artifact); refusing to load it") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ArtifactError("verify: read seal", seal_path, f"unreadable ({type(exc).__name__}: {exc})") from exc
    if fmt is not None and fmt != sealed_fmt:
        raise ArtifactError("verify: format", folder, f"sealed as {sealed_fmt!r}, but opened as {fmt!r}")
    found = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file() and p.name != SEAL}
    for name in sorted(set(sealed) - set(found)):
        raise ArtifactError("verify: files", folder / name, "listed in the seal but missing")
    for name in sorted(set(found) - set(sealed)):
        raise ArtifactError("verify: files", folder / name, "present but not in the seal (written after export?)")
    for name, (size, digest) in sorted(sealed.items()):
        got_size, got_digest = _digest(found[name])
        if got_size != size:
            raise ArtifactError("verify: size", folder / name,
                                f"{got_size} bytes, but the export wrote {size} (truncated or appended)")
        if got_digest != digest:
            raise ArtifactError("verify: checksum", folder / name,
                                "content differs from what the export wrote (corrupted or altered)")
    return Artifact(folder, sealed_fmt, sealed)


def reseal(path: str | os.PathLike[str]) -> Artifact:
    """Seal an artifact folder again after altering it on purpose.

    For meta-tests only: they plant wrong weights in a real artifact and show that the
    output and state oracles, not just the seal, catch it.
    """
    folder = Path(path)
    fmt = json.loads((folder / SEAL).read_text(encoding="utf-8"))["format"]
    return Artifact(folder, fmt, _write_seal(folder, fmt))
