"""model.fit under a strategy: "the rest of the training code needs no change" (seed 000).

distributed.keras.fit-equivalence: every global batch splits evenly, fit equals
single-device fit. distributed.keras.fit-remainder: batches that do not split evenly are
averaged per replica (Keras scales each replica's mean loss by 1/N), which equals
single-device fit with per-row weights b/(N*b_r); and a first batch not divisible by N
must not break fit. distributed.multiworker.keras-fit: fit under MultiWorkerMirrored.
The oracle is ``fit`` of the same model under the default strategy in this process.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import HarnessError, bug_reference, evidence
from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import reductions as oracle
from pytest_dlconform.api.distribution import OPTIMIZERS, TrainCase, TrainResult, expensive, fit_case

from . import tf_programs


def _names(case: TrainCase) -> list[str]:
    return [f"{kind} {i}" for i in range(len(case.widths) - 1) for kind in ("kernel", "bias")]


def _row_weights(case: TrainCase, replicas: int) -> np.ndarray:
    """Per-row weights that make single-device fit (mean loss per batch) match Keras's
    per-replica means scaled by 1/N: b / (N * b_r) for a row of replica r in a batch of b."""
    weights = []
    for start in range(0, len(case.x), case.batch):
        b = min(case.batch, len(case.x) - start)
        weights.append(b * dist.sample_weights("default", dist.replica_split(b, replicas), b))
    return np.concatenate(weights)


LOSS_SCALE_REFERENCE = "keras-loss-scale-float32"  # known divergence: Keras scales the loss by float32(1/N)


def loss_scale_deviation(result: TrainResult, case: TrainCase, replicas: int, sample_weight: np.ndarray | None,
                         tol: Any) -> float:
    """How far the distributed weights are from single-device fit with the loss scaled by the
    bug reference's factor N * float32(1/N) (what Keras computes under the finding), in the
    error model of the weights check (max|a - e| / max|e| over tensors, per rtol); recorded as
    evidence.reference, so the known divergence matches only a fit that computes exactly that."""
    import tensorflow as tf

    factor = bug_reference(LOSS_SCALE_REFERENCE)(replicas)
    scaled = tf_programs.keras_fit(tf.distribute.get_strategy(), case, sample_weight=sample_weight, loss_scale=factor)
    worst = math.inf if "error" in scaled.info or len(scaled.weights) != len(result.weights) else 0.0
    for a, e in zip(result.weights, scaled.weights):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        scale = float(np.max(np.abs(e))) if e.size else 0.0
        err = float(np.max(np.abs(a - e))) if e.size else 0.0
        worst = max(worst, err / scale if scale > 0 else (0.0 if err == 0 else math.inf))
    evidence.reference(LOSS_SCALE_REFERENCE, observed=worst, tolerance=tol.rtol, basis=tol.why, replicas=replicas)
    return worst


def _check_fit(result: TrainResult, case: TrainCase, expected: TrainResult, what: str, device: str,
               replicas: int | None = None, sample_weight: np.ndarray | None = None) -> None:
    __tracebackhide__ = True
    if "error" in result.info:
        raise oracle.StepMismatch(f"{what}: model.fit raised {result.info['error']}")
    if "error" in expected.info:
        raise HarnessError(f"single-device fit (the oracle) raised {expected.info['error']}")
    copies = [list(c) for c in zip(*result.info["replica_weights"])]
    oracle.check_replicas_agree(copies, what=what, names=_names(case))
    steps = -(-len(case.x) // case.batch)
    tol = oracle.step_tolerance(case.dtype, layers=len(case.widths) - 1, steps=steps, batch=case.batch,
                                device=device, framework="tensorflow")
    try:
        oracle.check_weights(result.weights, expected.weights, tol, what=what, names=_names(case))
    except oracle.StepMismatch:
        if replicas is not None and case.dtype == "float64":  # the known divergence's computation, for its pin
            loss_scale_deviation(result, case, replicas, sample_weight, tol)
        raise


def _describe(case: TrainCase) -> str:
    return (f"fit(batch_size={case.batch}) on {len(case.x)} rows, widths {case.widths}, {case.activation}, "
            f"{case.optimizer}(lr={case.lr}), {case.dtype}")


FIT_OPTIMIZER = {2: 0, 3: 1}  # replicas -> index in OPTIMIZERS (sgd, momentum); other counts: adam


def _counts(handle: Any, pool: Any) -> list[int]:
    """Mirrored: 2 and 3 replicas (by construction); other strategies their own count."""
    if handle.name == "mirrored":
        return [n for n in dist.REPLICA_COUNTS if n in handle.replica_counts()]
    return [dist.inprocess_strategy(pool, handle).num_replicas_in_sync]


def _strategy(handle: Any, pool: Any, n: int) -> Any:
    return dist.inprocess_strategy(pool, handle, n if handle.name == "mirrored" else None)


FIT_DTYPES = ("float32", "float64")  # every case in both, by construction: a drawn dtype would leave one out


def _fit_modes(case: TrainCase, n: int) -> list[str]:
    return [f"optimizer={case.optimizer}", *([f"replicas={n}"] if n in dist.REPLICA_COUNTS else [])]


@pytest.mark.claim("distributed.keras.fit-equivalence")
@pytest.mark.dl_strategies("one-device", "mirrored", "tpu")
@expensive(1)
@pytest.mark.parametrize("dtype", FIT_DTYPES)
@given(data=st.data())
def test_fit_under_the_strategy_equals_single_device_fit(tf, dl_strategy, dl_groups, dtype, data):
    for n in _counts(dl_strategy, dl_groups):
        strategy = _strategy(dl_strategy, dl_groups, n)
        case = data.draw(fit_case(n, even=True, dtypes=(dtype,)), label=f"case over {n} replicas")
        # one optimizer per run of a count (Mirrored 2: SGD, 3: momentum; one device: Adam): all three per run
        case = dataclasses.replace(case, optimizer=OPTIMIZERS[FIT_OPTIMIZER.get(n, 2)])
        result = tf_programs.keras_fit(strategy, case)
        expected = tf_programs.keras_fit(tf.distribute.get_strategy(), case)
        _check_fit(result, case, expected, f"{dl_strategy.name} over {n} replica(s): {_describe(case)}",
                   dl_strategy.device, replicas=n)
        # recorded as each count holds: the float64 test's pinned failure over 3 replicas
        # (known divergence 23) leaves its 2-replica check on the record
        evidence.covers(*_fit_modes(case, n), f"dtype={dtype}")


@pytest.mark.claim("distributed.keras.fit-remainder")
@pytest.mark.dl_strategies("mirrored")
@pytest.mark.min_devices(2)
@expensive(1)
@pytest.mark.parametrize("dtype", FIT_DTYPES)
@given(data=st.data())
def test_partial_last_batch_is_averaged_per_replica(tf, dl_strategy, dl_groups, dtype, data):
    for n in _counts(dl_strategy, dl_groups):
        strategy = _strategy(dl_strategy, dl_groups, n)
        case = data.draw(fit_case(n, even=False, dtypes=(dtype,)), label=f"case over {n} replicas")
        result = tf_programs.keras_fit(strategy, case)
        expected = tf_programs.keras_fit(tf.distribute.get_strategy(), case, sample_weight=_row_weights(case, n))
        # no bug reference here: with per-row weights it does not reproduce the finding exactly
        # (1.5e-8 off on 2.21), so its known divergence keeps a ceiling
        _check_fit(result, case, expected, f"{dl_strategy.name} over {n} replicas, uneven last batch: {_describe(case)}",
                   dl_strategy.device)
        evidence.covers(f"replicas={n}", "partial-last-batch", f"dtype={dtype}")  # as each count holds


@pytest.mark.claim("distributed.keras.fit-remainder")
@pytest.mark.dl_strategies("mirrored")
@pytest.mark.min_devices(2)
@pytest.mark.parametrize("optimizer, replicas", [("sgd", 2), ("adam", 3)])
def test_first_batch_not_divisible_by_the_replicas_trains(tf, dl_strategy, dl_groups, dl_seed, optimizer, replicas):
    strategy = _strategy(dl_strategy, dl_groups, replicas)
    n = strategy.num_replicas_in_sync
    case = _seeded_case(dl_seed, batch=n + 1, rows=2 * (n + 1), optimizer=optimizer)
    result = tf_programs.keras_fit(strategy, case)
    expected = tf_programs.keras_fit(tf.distribute.get_strategy(), case, sample_weight=_row_weights(case, n))
    _check_fit(result, case, expected, f"{dl_strategy.name} over {n} replicas, global batch {n + 1}: {_describe(case)}",
               dl_strategy.device)


def _seeded_case(seed: int, *, batch: int, rows: int, optimizer: str) -> TrainCase:
    rng = np.random.default_rng(seed)
    widths = (3, 4, 2)
    weights = []
    for fan_in, fan_out in pairwise(widths):
        weights += [rng.normal(size=(fan_in, fan_out)) / np.sqrt(fan_in), rng.normal(size=fan_out) * 0.1]
    return TrainCase(widths, "tanh", tuple(weights), rng.uniform(-1, 1, (rows, 3)), rng.uniform(-1, 1, (rows, 2)),
                     optimizer, 0.1, "float64", batch=batch)


@pytest.mark.claim("distributed.multiworker.keras-fit")
@pytest.mark.dl_strategies("multi-worker")
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_fit_under_multiworker_equals_single_device_fit(tf, dl_strategy, dl_groups, dl_timeout, dl_seed, optimizer):
    group = dist.group_for(dl_groups, dl_strategy, dl_timeout)
    n = group.world_size
    case = _seeded_case(dl_seed, batch=2 * n, rows=4 * n, optimizer=optimizer)
    per_rank = group.run(tf_programs.mw_fit, [case], what="model.fit")
    expected = tf_programs.keras_fit(tf.distribute.get_strategy(), case)
    for rank, (result,) in sorted(per_rank.items()):
        _check_fit(result, case, expected, f"MultiWorkerMirrored worker {rank} of {n}: {_describe(case)}",
                   dl_strategy.device)
    evidence.covers(f"optimizer={optimizer}")
    evidence.note(workers=n)
