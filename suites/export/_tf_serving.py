"""TF Serving as export.savedmodel's suite sees it: the model base path layout its file-system
source serves, and its REST predict formats evaluated through a loaded signature.

Only suites/export/test_tensorflow_formats.py uses these, so they live with that suite, not in
the core (checks.roundtrip keeps the loaders and oracles every export suite shares).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_dlconform.api.roundtrip import tf_signature


@dataclass(frozen=True)
class ServingLayout:
    versions: list[int]  # numbered child folders holding a SavedModel, ascending
    base_is_savedmodel: bool  # a SavedModel directly in the base folder (TF Serving finds no version there)


def serving_layout(base: str | os.PathLike[str]) -> ServingLayout:
    """What TF Serving's file-system source sees under a model base path: it serves the
    numbered child folders (the highest by default) and nothing placed directly in the base."""
    import tensorflow as tf

    folder = Path(base)
    versions = sorted(int(p.name) for p in folder.iterdir()
                      if p.is_dir() and p.name.isdigit() and tf.saved_model.contains_saved_model(str(p)))
    return ServingLayout(versions, bool(tf.saved_model.contains_saved_model(str(folder))))


def tf_serving_rest_predict(fn: Any, request: Mapping[str, Any]) -> dict[str, Any]:
    """TF Serving's REST predict (documented request/response formats) evaluated through a signature.

    Row format ``{"instances": [...]}`` answers ``{"predictions": [...]}`` (one entry per
    instance; a bare value per instance for a single output, else an object); columnar
    ``{"inputs": ...}`` answers ``{"outputs": ...}`` (a bare value for a single output).
    """
    import tensorflow as tf

    sig = tf_signature(fn)
    names = list(sig["inputs"])
    if "instances" in request:
        rows = request["instances"]
        columns = {n: [r[n] for r in rows] for n in names} if len(names) > 1 else {names[0]: rows}
    else:
        given = request["inputs"]
        columns = given if isinstance(given, Mapping) else {names[0]: given}
    feeds = {n: tf.constant(np.asarray(columns[n], dtype=sig["inputs"][n][0])) for n in names}
    outputs = {k: v.numpy() for k, v in fn(**feeds).items()}
    if "instances" in request:
        n = len(request["instances"])
        if len(outputs) == 1:
            return {"predictions": next(iter(outputs.values())).tolist()}
        return {"predictions": [{k: v[i].tolist() for k, v in outputs.items()} for i in range(n)]}
    if len(outputs) == 1:
        return {"outputs": next(iter(outputs.values())).tolist()}
    return {"outputs": {k: v.tolist() for k, v in outputs.items()}}
