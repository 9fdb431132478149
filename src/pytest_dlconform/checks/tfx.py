"""A small TFX pipeline, run for real with LocalDagRunner, and what it must guarantee.

The pipeline (:func:`build_pipeline`): CsvExampleGen on a generated CSV, StatisticsGen,
SchemaGen, Transform (:func:`preprocessing_fn`: z-scores of three features, the label and
a row id passed through), Trainer (:func:`run_fn`: a linear model fitted by full-batch
gradient descent on the transformed training split, saved as a tf.Module whose
serving_default signature takes serialized raw tf.Examples and applies the Transform graph
first), Evaluator (TFMA: example count, mean squared and mean absolute error on the eval
split, through that signature) and Pusher (filesystem). It runs in a child process
(:func:`pytest_dlconform.frameworks.fresh.run_python`) with a deadline; :func:`read_run` then reads
what the components wrote, so the suite compares them with numpy.

No Keras model: a tf.Module keeps the check about TFX, not about a Keras version.
"""

from __future__ import annotations

import csv
import glob
import os
from pathlib import Path
from typing import Any

import numpy as np

FEATURES = ("x1", "x2", "x3")
LABEL = "y"
ROW_ID = "row_id"
TRUE_W, TRUE_B = np.array([1.5, -2.0, 0.5]), 0.25
STEPS, LEARNING_RATE = 200, 0.1


def write_csv(path: Path, rows: int, seed: int) -> dict[str, np.ndarray]:
    """A regression CSV with features of different offsets and scales (so the z-score matters)."""
    rng = np.random.default_rng(seed)
    x = rng.normal([3.0, -1.0, 10.0], [2.0, 0.5, 4.0], (rows, 3))
    y = ((x - [3.0, -1.0, 10.0]) / [2.0, 0.5, 4.0]) @ TRUE_W + TRUE_B + rng.normal(0, 0.1, rows)
    data = {ROW_ID: np.arange(rows), **{f: x[:, i] for i, f in enumerate(FEATURES)}, LABEL: y}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(data))
        for i in range(rows):
            # repr: the CSV carries the float64 value exactly; TFX parses it as float32
            w.writerow([int(data[ROW_ID][i]), *(repr(float(data[k][i])) for k in (*FEATURES, LABEL))])
    return data


# ----------------------------------------------------------------------------- module functions (TFX imports them by name)


def preprocessing_fn(inputs: dict[str, Any]) -> dict[str, Any]:
    import tensorflow as tf
    import tensorflow_transform as tft

    def dense(t: Any) -> Any:
        return tf.reshape(t, [-1])

    out = {f"{f}_xf": tft.scale_to_z_score(dense(inputs[f])) for f in FEATURES}
    out[LABEL] = dense(inputs[LABEL])
    out[ROW_ID] = dense(inputs[ROW_ID])
    return out


def _read_transformed(files: list[str], spec: dict[str, Any]) -> dict[str, np.ndarray]:
    import tensorflow as tf

    paths = sorted(p for pattern in files for p in glob.glob(pattern))
    ds = tf.data.TFRecordDataset(paths, compression_type="GZIP").batch(10_000).map(lambda s: tf.io.parse_example(s, spec))
    cols: dict[str, list[np.ndarray]] = {}
    for batch in ds:
        for k, v in batch.items():
            cols.setdefault(k, []).append(np.reshape(v.numpy(), [-1]))
    return {k: np.concatenate(v) for k, v in cols.items()}


def run_fn(fn_args: Any) -> None:
    """Fit y ~ w . xf + b by full-batch gradient descent (deterministic), save with a raw-example signature."""
    import tensorflow as tf
    import tensorflow_transform as tft

    tft_output = tft.TFTransformOutput(fn_args.transform_output)
    data = _read_transformed(fn_args.train_files, tft_output.transformed_feature_spec())
    x = tf.constant(np.stack([data[f"{f}_xf"] for f in FEATURES], axis=1), tf.float32)
    y = tf.constant(data[LABEL], tf.float32)

    class Served(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="dlconform_linear")
            self.w = tf.Variable(tf.zeros([len(FEATURES)]), name="w")
            self.b = tf.Variable(0.0, name="b")
            self.tft_layer = tft_output.transform_features_layer()  # tracked: saved with the model

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve(self, examples: Any) -> Any:
            raw_spec = tft_output.raw_feature_spec()
            raw_spec.pop(LABEL)
            xf = self.tft_layer(tf.io.parse_example(examples, raw_spec))
            cols = tf.stack([tf.reshape(xf[f"{f}_xf"], [-1]) for f in FEATURES], axis=1)
            return {"outputs": tf.linalg.matvec(cols, self.w) + self.b}

    model = Served()
    for _ in range(int(fn_args.train_steps or STEPS)):
        err = tf.linalg.matvec(x, model.w) + model.b - y  # gradient of the mean squared error / 2
        model.w.assign_sub(LEARNING_RATE * tf.linalg.matvec(x, err, transpose_a=True) / tf.cast(tf.size(y), tf.float32))
        model.b.assign_sub(LEARNING_RATE * tf.reduce_mean(err))
    tf.saved_model.save(model, fn_args.serving_model_dir, signatures={"serving_default": model.serve})


# ----------------------------------------------------------------------------- the pipeline


def build_pipeline(root: Path, data_dir: Path, serving_dir: Path) -> Any:
    import tensorflow_model_analysis as tfma
    from tfx import v1 as tfx

    example_gen = tfx.components.CsvExampleGen(input_base=str(data_dir))
    stats = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema = tfx.components.SchemaGen(statistics=stats.outputs["statistics"], infer_feature_shape=True)
    transform = tfx.components.Transform(examples=example_gen.outputs["examples"], schema=schema.outputs["schema"],
                                         preprocessing_fn=f"{__name__}.preprocessing_fn")
    trainer = tfx.components.Trainer(run_fn=f"{__name__}.run_fn", examples=transform.outputs["transformed_examples"],
                                     transform_graph=transform.outputs["transform_graph"], schema=schema.outputs["schema"],
                                     train_args=tfx.proto.TrainArgs(num_steps=STEPS), eval_args=tfx.proto.EvalArgs(num_steps=1))
    # The threshold only lets the Evaluator bless the model (so Pusher pushes); the suite
    # checks the metric values themselves against numpy.
    mse = tfma.MetricConfig(class_name="MeanSquaredError", threshold=tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(upper_bound={"value": 1e6})))
    eval_config = tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(label_key=LABEL, signature_name="serving_default", prediction_key="outputs")],
        metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="ExampleCount"), mse,
                                                 tfma.MetricConfig(class_name="MeanAbsoluteError")])],
        slicing_specs=[tfma.SlicingSpec()])
    evaluator = tfx.components.Evaluator(examples=example_gen.outputs["examples"], model=trainer.outputs["model"],
                                         eval_config=eval_config)
    pusher = tfx.components.Pusher(model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
                                   push_destination=tfx.proto.PushDestination(
                                       filesystem=tfx.proto.PushDestination.Filesystem(base_directory=str(serving_dir))))
    return tfx.dsl.Pipeline(
        pipeline_name="dlconform_tfx", pipeline_root=str(root / "pipeline"),
        components=[example_gen, stats, schema, transform, trainer, evaluator, pusher],
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(str(root / "metadata.db")),
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"])


def run_pipeline(root: str, data_dir: str, serving_dir: str) -> None:
    """Entry point of the child process."""
    from tfx import v1 as tfx

    tfx.orchestration.LocalDagRunner().run(build_pipeline(Path(root), Path(data_dir), Path(serving_dir)))


# ----------------------------------------------------------------------------- reading the run


def _one(pattern: str) -> str:
    found = sorted(glob.glob(pattern))
    if len(found) != 1:
        from ..frameworks import HarnessError

        raise HarnessError(f"expected one artifact at {pattern}, found {found}")
    return found[0]


def examples(root: Path, component: str, split: str) -> list[bytes]:
    """Serialized tf.Examples a component wrote for a split (the latest execution)."""
    folder = _one(str(root / "pipeline" / component / "*examples" / "*" / f"Split-{split}"))
    import tensorflow as tf

    return [r.numpy() for r in tf.data.TFRecordDataset(sorted(glob.glob(os.path.join(folder, "*"))), compression_type="GZIP")]


def parse(serialized: list[bytes]) -> dict[str, np.ndarray]:
    """Every feature of tf.Example protos as a numpy column (one value per example)."""
    import tensorflow as tf

    cols: dict[str, list[Any]] = {}
    for s in serialized:
        ex = tf.train.Example.FromString(s)
        for k, f in ex.features.feature.items():
            kind = f.WhichOneof("kind")
            cols.setdefault(k, []).append(next(iter(getattr(f, kind).value)))
    return {k: np.asarray(v) for k, v in cols.items()}


def pushed_model(serving_dir: Path) -> str:
    return _one(str(serving_dir / "*"))


def evaluator_metrics(root: Path) -> dict[str, float]:
    import tensorflow_model_analysis as tfma

    result = tfma.load_eval_result(_one(str(root / "pipeline" / "Evaluator" / "evaluation" / "*")))
    (_, by_output), = [(k, v) for k, v in result.slicing_metrics if k == ()]
    values = by_output[""][""]
    return {name: float(next(iter(v.values()))) for name, v in values.items() if isinstance(v, dict) and v}


def blessed(root: Path) -> bool:
    return os.path.exists(os.path.join(_one(str(root / "pipeline" / "Evaluator" / "blessing" / "*")), "BLESSED"))


# ----------------------------------------------------------------------------- the oracles


def check_serving_matches_training(serve: Any, raw_eval: list[bytes], transformed_eval: list[bytes],
                                   w: np.ndarray, b: float) -> np.ndarray:
    """``serve(serialized raw examples)`` equals ``w . xf + b`` on Transform's materialised ``xf``
    of the same rows (matched by row id); returns the served predictions.

    Tolerance: two float32 evaluations of a 3-term dot product, a bias and the z-score.
    """
    from .numerics import assert_close, combined, tolerance

    cols = parse(raw_eval)
    got = np.asarray(serve(raw_eval), np.float64).reshape(-1)
    xf = parse(transformed_eval)
    order = {int(r): i for i, r in enumerate(xf[ROW_ID])}
    idx = [order[int(r)] for r in cols[ROW_ID]]
    feats = np.stack([xf[f"{f}_xf"][idx] for f in FEATURES], axis=1).astype(np.float64)
    one = tolerance("float32", ops=len(FEATURES) + 3, reduction=len(FEATURES))
    assert_close(got, feats @ np.asarray(w, np.float64) + b, combined(one, one),
                 what="pushed model on raw serialized tf.Examples vs the trained model on Transform's materialised "
                 "features (eval split)", name="serving vs training-time transform")
    return got


def check_z_scores(raw_train: list[bytes], transformed_train: list[bytes]) -> int:
    """Transform's z-scores equal numpy's (x - mean) / std over the same train rows; returns the row count."""
    from .numerics import assert_close, tolerance

    raw, xf = parse(raw_train), parse(transformed_train)
    order = {int(r): i for i, r in enumerate(xf[ROW_ID])}
    idx = [order[int(r)] for r in raw[ROW_ID]]
    n = len(idx)
    for f in FEATURES:
        x = raw[f].astype(np.float32).astype(np.float64)  # the CSV is parsed as float32
        assert_close(xf[f"{f}_xf"][idx].astype(np.float64), (x - x.mean()) / x.std(), tolerance("float32", ops=4, reduction=n),
                     what=f"Transform's z-score of {f} vs numpy's (mean, std over {n} train rows)",
                     name="tft.scale_to_z_score vs numpy")
    return n


def check_evaluator_metrics(metrics: dict[str, float], labels: np.ndarray, predictions: np.ndarray) -> None:
    """The Evaluator's example count, MSE and MAE equal numpy's on the same labels and predictions."""
    from .numerics import assert_close, tolerance

    y, p = np.asarray(labels, np.float64), np.asarray(predictions, np.float64)
    count = metrics.get("example_count")
    if count != len(y):
        raise AssertionError(f"Evaluator example_count {count}, but the eval split has {len(y)} examples")
    tol = tolerance("float32", ops=3, reduction=len(y))
    for name, value in (("mean_squared_error", np.mean((y - p) ** 2)), ("mean_absolute_error", np.mean(np.abs(y - p)))):
        if name not in metrics:
            raise AssertionError(f"the Evaluator reported no {name}: it has {sorted(metrics)}")
        assert_close(np.array([metrics[name]]), np.array([value]), tol, what=f"Evaluator {name} vs numpy",
                     name=f"Evaluator {name} vs numpy")
