"""The TFX oracles (checks/tfx.py) on one real LocalDagRunner run, and on deliberately wrong twins.

Needs the tfx environment (``tox -e tfx``: tfx 1.16 on Python 3.10); in the main
environment it skips with the exact reason. Run it with
``.tox/tfx/bin/python -m pytest tests/integration/test_tfx_oracle.py -p no:cacheprovider``
(one pipeline run, about two minutes here).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tfx") is None,
                                reason="needs the tfx environment (`tox -e tfx`): tfx is not installed here "
                                       "(importlib.util.find_spec('tfx') is None)")


@pytest.fixture(scope="module")
def run(tmp_path_factory: Any) -> dict[str, Any]:
    import tensorflow as tf

    from pytest_dlconform.checks import tfx as px
    from pytest_dlconform.frameworks import fresh

    root = tmp_path_factory.mktemp("tfx")
    px.write_csv(root / "data" / "data.csv", 300, seed=11)
    fresh.run_python("from pytest_dlconform.checks import tfx as px\n"
                     f"px.run_pipeline({str(root)!r}, {str(root / 'data')!r}, {str(root / 'serving')!r})\nemit(1)\n",
                     timeout=1200, what="the TFX pipeline")
    served = tf.saved_model.load(px.pushed_model(root / "serving"))
    return {"root": root, "served": served, "w": served.w.numpy(), "b": float(served.b.numpy()),
            "serve": lambda ex: served.signatures["serving_default"](examples=tf.constant(ex))["outputs"].numpy()}


def _ex(root: Path, component: str, split: str) -> list[bytes]:
    from pytest_dlconform.checks import tfx as px

    return px.examples(root, component, split)


def test_the_real_run_holds(run):
    from pytest_dlconform.checks import tfx as px

    root = run["root"]
    raw_eval = _ex(root, "CsvExampleGen", "eval")
    pred = px.check_serving_matches_training(run["serve"], raw_eval, _ex(root, "Transform", "eval"), run["w"], run["b"])
    assert px.check_z_scores(_ex(root, "CsvExampleGen", "train"), _ex(root, "Transform", "train")) > 100
    px.check_evaluator_metrics(px.evaluator_metrics(root), px.parse(raw_eval)[px.LABEL], pred)
    assert px.blessed(root)


def test_serving_without_the_transform_fails(run):
    """A serving path that forgets the Transform graph (raw features into the model)."""
    from pytest_dlconform.checks import tfx as px

    def raw_serve(examples: list[bytes]) -> np.ndarray:
        cols = px.parse(examples)
        return np.stack([cols[f] for f in px.FEATURES], axis=1) @ run["w"] + run["b"]

    root = run["root"]
    with pytest.raises(AssertionError, match=r"pushed model on raw serialized tf.Examples vs the trained model"):
        px.check_serving_matches_training(raw_serve, _ex(root, "CsvExampleGen", "eval"), _ex(root, "Transform", "eval"),
                                          run["w"], run["b"])


def test_serving_that_reanalyses_the_serving_batch_fails(run):
    """Training/serving skew: z-scores from the serving batch's own mean and std instead of Transform's."""
    from pytest_dlconform.checks import tfx as px

    def skewed(examples: list[bytes]) -> np.ndarray:
        cols = px.parse(examples)
        x = np.stack([cols[f] for f in px.FEATURES], axis=1).astype(np.float64)
        return ((x - x.mean(0)) / x.std(0)) @ run["w"] + run["b"]

    root = run["root"]
    with pytest.raises(AssertionError, match="should be <="):
        px.check_serving_matches_training(skewed, _ex(root, "CsvExampleGen", "eval"), _ex(root, "Transform", "eval"),
                                          run["w"], run["b"])


def _examples_with(cols: dict[str, np.ndarray]) -> list[bytes]:
    import tensorflow as tf

    out = []
    for i in range(len(cols["row_id"])):
        feats = {k: (tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v[i])])) if k == "row_id"
                     else tf.train.Feature(float_list=tf.train.FloatList(value=[float(v[i])]))) for k, v in cols.items()}
        out.append(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    return out


def test_z_scores_with_the_sample_std_fail(run):
    """A Transform that divided by the sample standard deviation (ddof=1) instead of the population one."""
    from pytest_dlconform.checks import tfx as px

    raw_train = _ex(run["root"], "CsvExampleGen", "train")
    raw = px.parse(raw_train)
    wrong = {"row_id": raw["row_id"]}
    for f in px.FEATURES:
        x = raw[f].astype(np.float64)
        wrong[f"{f}_xf"] = (x - x.mean()) / x.std(ddof=1)
    with pytest.raises(AssertionError, match="Transform's z-score of x1 vs numpy's"):
        px.check_z_scores(raw_train, _examples_with(wrong))


def test_wrong_evaluator_metrics_fail(run):
    from pytest_dlconform.checks import tfx as px

    root = run["root"]
    raw_eval = _ex(root, "CsvExampleGen", "eval")
    y, pred = px.parse(raw_eval)[px.LABEL], run["serve"](raw_eval)
    metrics = px.evaluator_metrics(root)
    with pytest.raises(AssertionError, match="example_count"):
        px.check_evaluator_metrics({**metrics, "example_count": metrics["example_count"] - 1}, y, pred)
    with pytest.raises(AssertionError, match="Evaluator mean_squared_error vs numpy"):
        px.check_evaluator_metrics({**metrics, "mean_squared_error": metrics["mean_squared_error"] * 1.01}, y, pred)
    with pytest.raises(AssertionError, match=r"Evaluator mean_(squared|absolute)_error vs numpy"):  # another model's predictions
        px.check_evaluator_metrics(metrics, y, pred + 0.05)
