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

from pytest_dlconform.api import evidence, fresh, not_applicable

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
    from pytest_dlconform.api import tfx as px

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
    evidence.covers("pusher=filesystem")
    w, b = served.w.numpy(), float(served.b.numpy())
    evidence.note(weights=w.tolist(), bias=b)

    def serve(examples: list[bytes]) -> np.ndarray:
        return served.signatures["serving_default"](examples=tf.constant(examples))["outputs"].numpy()

    # 1. Serving applies the Transform graph exactly as Transform did when it materialised the data.
    raw_eval = px.examples(tmp_path, "CsvExampleGen", "eval")
    pred = px.check_serving_matches_training(serve, raw_eval, px.examples(tmp_path, "Transform", "eval"), w, b)
    evidence.covers("serving=raw-examples")
    # 2. Transform's analyzers: mean and population variance over the train split, as numpy computes them.
    n = px.check_z_scores(px.examples(tmp_path, "CsvExampleGen", "train"), px.examples(tmp_path, "Transform", "train"))
    evidence.covers("transform=scale_to_z_score")
    evidence.note(train_rows=n, eval_rows=len(raw_eval), csv_rows=len(raw[px.ROW_ID]))
    # 3. The Evaluator's metrics, recomputed with numpy from the pushed model's own predictions.
    metrics = px.evaluator_metrics(tmp_path)
    evidence.note(evaluator_metrics=metrics)
    px.check_evaluator_metrics(metrics, px.parse(raw_eval)[px.LABEL], pred)
    evidence.covers("evaluator=ExampleCount", "evaluator=MeanSquaredError", "evaluator=MeanAbsoluteError")
