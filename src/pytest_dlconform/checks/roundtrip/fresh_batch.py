"""Loading artifacts back in a fresh interpreter, as a server would: one interpreter per batch.

The spawning, the deadline and the report of a failing child are :mod:`pytest_dlconform.frameworks.fresh`'s
(:func:`fresh.call`); this module only says what the child does (:func:`fresh_main`) and how
the batch is handed over: a JSON job naming each artifact and its ``.npy`` inputs, and per
artifact ``.npz`` outputs and state and a JSON signature written back.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...core import evidence
from ...frameworks import fresh
from .artifacts import Artifact
from .loaders import load
from .models import ModelSpec
from .oracles import _jsonish

# What the fresh interpreter runs (module:function), given the job file's path.
FRESH_MAIN = "pytest_dlconform.checks.roundtrip.fresh_batch:fresh_main"


@dataclass
class FreshResult:
    outputs: list[dict[str, np.ndarray]]
    state: dict[str, np.ndarray]
    signature: dict[str, Any]
    load_seconds: float


@dataclass
class FreshBatch:
    """Artifacts to load back in one fresh interpreter, as a server would.

    ``add`` queues an artifact with its inputs; ``run`` starts one interpreter for the
    whole batch (a TensorFlow import costs seconds), which verifies each seal, loads the
    artifact with the same loader as this process, and writes outputs, state and
    signature to files that :meth:`run` reads back.
    """

    workdir: Path
    timeout: float
    entries: list[dict[str, Any]] = field(default_factory=list)

    def add(self, artifact: Artifact | str | os.PathLike[str], fmt: str, inputs: list[np.ndarray],
            spec: ModelSpec | None = None, device: str | None = None) -> int:
        index = len(self.entries)
        folder = Path(self.workdir) / f"fresh-{index}"
        folder.mkdir(parents=True, exist_ok=False)
        paths = []
        for j, x in enumerate(inputs):
            paths.append(str(folder / f"input-{j}.npy"))
            np.save(paths[-1], x)
        path = artifact.path if isinstance(artifact, Artifact) else Path(artifact)
        self.entries.append({"artifact": str(path), "format": fmt, "inputs": paths, "out": str(folder),
                             "spec": spec.to_json() if spec else None, "device": device})
        return index

    def run(self, *, what: str = "fresh interpreter") -> list[FreshResult]:
        if not self.entries:
            return []
        job = Path(self.workdir) / "fresh-job.json"
        job.write_text(json.dumps(self.entries), encoding="utf-8")
        started = time.perf_counter()
        report = fresh.call(FRESH_MAIN, str(job), timeout=self.timeout, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, what=what)
        evidence.note(fresh_interpreter_seconds=round(time.perf_counter() - started, 2), fresh_artifacts=len(self.entries))
        return [self._read(entry, info) for entry, info in zip(self.entries, report)]

    @staticmethod
    def _read(entry: Mapping[str, Any], info: Mapping[str, Any]) -> FreshResult:
        out = Path(entry["out"])
        outputs = []
        for j in range(len(entry["inputs"])):
            with np.load(out / f"output-{j}.npz") as z:
                outputs.append({k: z[k] for k in z.files})
        with np.load(out / "state.npz") as z:
            state = {_unkey(k): z[k] for k in z.files}
        signature = json.loads((out / "signature.json").read_text(encoding="utf-8"))
        return FreshResult(outputs, state, signature, float(info["load_seconds"]))


def _key(name: str) -> str:
    return name.replace("/", "|")  # npz member names cannot hold "/"


def _unkey(name: str) -> str:
    return name.replace("|", "/")


def fresh_main(job_path: str) -> list[dict[str, Any]]:
    """Runs in the fresh interpreter: load every queued artifact, write what came back."""
    report = []
    for entry in json.loads(Path(job_path).read_text(encoding="utf-8")):
        spec = ModelSpec.from_json(entry["spec"]) if entry["spec"] else None
        started = time.perf_counter()
        loaded = load(entry["artifact"], entry["format"], spec, entry.get("device"))
        seconds = time.perf_counter() - started
        out = Path(entry["out"])
        for j, path in enumerate(entry["inputs"]):
            outputs: dict[str, Any] = loaded.run(np.load(path))  # Any: numpy's stub types savez(**kw) as allow_pickle
            np.savez(out / f"output-{j}.npz", **outputs)
        state: dict[str, Any] = {_key(k): v for k, v in loaded.state().items()}
        np.savez(out / "state.npz", **state)
        (out / "signature.json").write_text(json.dumps(_jsonish(loaded.signature())), encoding="utf-8")
        report.append({"load_seconds": seconds})
    return report
