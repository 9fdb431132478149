"""export: TFX — a small local pipeline run with LocalDagRunner, checked against numpy.

Runs where tfx is installed (``tox -e tfx``); elsewhere "not applicable" with the reason.
The pipeline (checks/tfx.py) runs in a child process with a deadline; its run time is
recorded, never asserted.
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest

from pytest_dlconform import evidence, fresh, not_applicable
from pytest_dlconform.checks.numerics import assert_close, combined, tolerance

ROWS = 300
# LocalDagRunner runs seven components on Beam's DirectRunner: minutes on 2 shared cores.
PIPELINE_DEADLINE_S = 1200.0


def _ready(tf: object) -> None:
    if importlib.util.find_spec("tfx") is None:
        not_applicable("tfx is not installed in this environment (importlib.util.find_spec('tfx') is None); run "
                       "`tox -e tfx`, the environment with tfx 1.16 on Python 3.10 (tfx 1.21 needs ml-metadata 1.21, "
                       "whose only Linux wheel needs glibc 2.39; docs/tfjs-tfx.md)")


@pytest.mark.claim("export.tfx.pipeline")
def test_pipeline_pushes_a_model_that_transforms_at_serving_like_at_training(tf, tmp_path, dl_seed):
    _ready(tf)
    from pytest_dlconform.checks import tfx as px

    data_dir, serving_dir = tmp_path / "data", tmp_path / "serving"
    raw = px.write_csv(data_dir / "data.csv", ROWS, dl_seed)
    t0 = time.perf_counter()
    fresh.run_python(
        "from pytest_dlconform.checks import tfx as px\n"
        f"px.run_pipeline({str(tmp_path)!r}, {str(data_dir)!r}, {str(serving_dir)!r})\nemit('done')\n",
        timeout=PIPELINE_DEADLINE_S, what="the TFX pipeline (LocalDagRunner)",
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONHASHSEED": "0"})
    evidence.note(pipeline_seconds=round(time.perf_counter() - t0, 1), pipeline_deadline_s=PIPELINE_DEADLINE_S, rows=ROWS)

    assert px.blessed(tmp_path), "the Evaluator did not bless the model (threshold MSE < 1e6), so Pusher pushed nothing"
    served = tf.saved_model.load(px.pushed_model(serving_dir))
    w, b = served.w.numpy().astype(np.float64), float(served.b.numpy())

    # 1. Serving applies the Transform graph exactly as Transform did when it materialised the data.
    raw_eval = px.examples(tmp_path, "CsvExampleGen", "eval")
    cols = px.parse(raw_eval)
    got = served.signatures["serving_default"](examples=tf.constant(raw_eval))["outputs"].numpy()
    xf = px.parse(px.examples(tmp_path, "Transform", "eval"))
    order = {int(r): i for i, r in enumerate(xf[px.ROW_ID])}
    idx = [order[int(r)] for r in cols[px.ROW_ID]]
    feats = np.stack([xf[f"{f}_xf"][idx] for f in px.FEATURES], axis=1).astype(np.float64)
    want = feats @ w + b
    one = tolerance("float32", ops=len(px.FEATURES) + 3, reduction=len(px.FEATURES))
    assert_close(got, want, combined(one, one), what="pushed model on raw serialized tf.Examples vs the trained "
                 "model on Transform's materialised features (eval split)", name="serving vs training-time transform")

    # 2. Transform's analyzers: mean and population variance over the train split, as numpy computes them.
    train = px.parse(px.examples(tmp_path, "CsvExampleGen", "train"))
    train_xf = px.parse(px.examples(tmp_path, "Transform", "train"))
    order_t = {int(r): i for i, r in enumerate(train_xf[px.ROW_ID])}
    n = len(train[px.ROW_ID])
    for f in px.FEATURES:
        x32 = train[f].astype(np.float32).astype(np.float64)  # CSV parsed as float32
        z = ((x32 - x32.mean()) / x32.std())
        z_tfx = np.array([train_xf[f"{f}_xf"][order_t[int(r)]] for r in train[px.ROW_ID]], np.float64)
        red = tolerance("float32", ops=4, reduction=n)
        assert_close(z_tfx, z, red, what=f"Transform's z-score of {f} vs numpy's (mean, std over {n} train rows)",
                     name="tft.scale_to_z_score vs numpy")
    evidence.note(train_rows=n, eval_rows=len(raw_eval), csv_rows=len(raw[px.ROW_ID]))

    # 3. The Evaluator's metrics, recomputed with numpy from the pushed model's own predictions.
    metrics = px.evaluator_metrics(tmp_path)
    evidence.note(evaluator_metrics=metrics)
    y = cols[px.LABEL].astype(np.float64)
    pred = got.astype(np.float64)
    assert metrics.get("example_count") == len(y), f"Evaluator example_count {metrics.get('example_count')}, but the eval split has {len(y)}"
    red = tolerance("float32", ops=3, reduction=len(y))
    for name, value in (("mean_squared_error", np.mean((y - pred) ** 2)), ("mean_absolute_error", np.mean(np.abs(y - pred)))):
        assert name in metrics, f"the Evaluator reported no {name}: it has {sorted(metrics)}"
        assert_close(np.array([metrics[name]]), np.array([value]), red, what=f"Evaluator {name} vs numpy",
                     name=f"Evaluator {name} vs numpy")
    evidence.note(weights=w.tolist(), bias=b)
