"""interop.speed's side-by-side steps and their timing: the same training step as a torch
eager step, a TensorFlow eager step and a tf.function, each also convertible to a result
the claim checks. Only suites/interop/test_speed.py times steps, so this lives with it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_dlconform.api.crossframework import (
    Case,
    Result,
    keras_loss,
    keras_model,
    keras_trainables,
    torch_loss,
    torch_model,
    torch_trainables,
)
from pytest_dlconform.api.crossframework import to_float64 as _np


@dataclass
class Step:
    """One training step's computation (forward, loss, gradients), ready to time and to check."""

    run: Callable[[], Any]  # the step; returns framework values (synchronised: loss as a float)
    result: Callable[[], Result]  # one more step, converted to a result dict


def speed_steps(tf: Any, keras: Any, torch: Any, case: Case, dtype: str, tf_device: str, torch_device: str) -> dict[str, Step]:
    """The same model and batch as a torch eager step, a TensorFlow eager step and the
    same TensorFlow step under tf.function (traced once: fixed shapes and dtypes)."""
    x, labels = case.inputs()
    weights = case.weights()
    with tf.device(tf_device):
        model = keras_model(keras, case, weights, dtype)
        loss_obj, labels_for = keras_loss(keras, case, dtype)
        xt, yt = tf.constant(np.asarray(x, dtype=dtype)), tf.constant(labels_for(labels))
    names, variables = keras_trainables(model, case)

    def tf_step() -> Any:
        with tf.device(tf_device):
            with tf.GradientTape() as tape:
                logits = model(xt, training=case.training)
                loss = loss_obj(yt, logits)
            return logits, loss, tape.gradient(loss, variables)

    graph_step = tf.function(tf_step)
    tmodel = torch_model(torch, case, weights, dtype, torch_device)
    tmodel.train(case.training)
    tnames, params = torch_trainables(tmodel, case)
    xs = torch.tensor(x, dtype=getattr(torch, dtype), device=torch_device)
    ys = torch.tensor(labels, device=torch_device)

    def torch_step() -> Any:
        logits = tmodel(xs)
        loss = torch_loss(torch, case, logits, ys)
        return logits, loss, torch.autograd.grad(loss, params)

    def tf_result(step: Callable[[], Any]) -> Callable[[], Result]:
        def convert() -> Result:
            logits, loss, grads = step()
            return {"logits": _np(logits), "loss": _np(loss), **{f"grad/{n}": _np(g) for n, g in zip(names, grads)}}
        return convert

    def torch_result() -> Result:
        logits, loss, grads = torch_step()
        out = {"logits": _np(logits), "loss": _np(loss)}
        for n, g in zip(tnames, grads):
            g = _np(g)
            out[f"grad/{n}"] = g.T if n.endswith(".kernel") and g.ndim == 2 else g
        return out

    return {
        "torch eager": Step(lambda: float(torch_step()[1].detach()), torch_result),
        "tf eager": Step(lambda: float(tf_step()[1]), tf_result(tf_step)),
        "tf.function": Step(lambda: float(graph_step()[1]), tf_result(graph_step)),
    }


def time_per_call(fn: Callable[[], Any], *, number: int = 5, repeats: int = 5, warmup: int = 2) -> float:
    """Median seconds per call over ``repeats`` runs of ``number`` calls (a measurement, for
    evidence only: a test never asserts on it)."""
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)
