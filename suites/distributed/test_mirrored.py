"""MirroredStrategy and its relatives: full copies per replica, the default all-reduce,
and what strategy.scope() is required for.

distributed.mirrored.full-replica, distributed.mirrored.default-all-reduce,
distributed.mirrored.scope (seed 000's MirroredStrategy section and its scope() example).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence, not_applicable, shapes
from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import reductions as oracle
from pytest_dlconform.api.distribution import TrainCase, expensive, model_case

from . import tf_programs

OUTSIDE_FIT_ERRORS = {"sgd": "AssertionError", "adam": "RuntimeError: Mixing different tf.distribute.Strategy objects"}


def _local_counts(handle: Any) -> list[int]:
    """Components of a variable in one process, one per local replica device: Mirrored over
    2 and 3 devices (by construction), one elsewhere."""
    if handle.name == "mirrored":
        return [n for n in dist.REPLICA_COUNTS if n in handle.replica_counts()]
    return [1]


def _copies(handle: Any, pool: Any, timeout: float, shape_list: list[tuple[int, ...]],
            n: int) -> dict[str, list[dict[str, Any]]]:
    if handle.name == "multi-worker":
        per_rank = dist.group_for(pool, handle, timeout).run(tf_programs.mw_variable_copies, shape_list, what="variables")
        return {f"worker {rank}": found for rank, found in per_rank.items()}
    strategy = dist.inprocess_strategy(pool, handle, n if handle.name == "mirrored" else None)
    return {"this process": tf_programs.tf_variable_copies(strategy, shape_list)}


def _check_full_copies(entry: dict[str, Any], init: np.ndarray, replicas: int, where: str) -> None:
    __tracebackhide__ = True
    assert entry["in_scope"], f"{where}: a variable created in scope() is not owned by the strategy ({entry['type']})"
    assert len(entry["values"]) == replicas, (
        f"{where}: {entry['type']} has {len(entry['values'])} component(s) on {entry['devices']}, "
        f"but should have one per replica ({replicas})")
    assert len(set(entry["devices"])) == replicas, f"{where}: components share devices: {entry['devices']}"
    oracle.check_replicas_agree([[v] for v in [init, *entry["values"]]], what=f"{where}: initial value and each copy")


@pytest.mark.claim("distributed.mirrored.full-replica")
@pytest.mark.dl_strategies("default", "one-device", "mirrored", "multi-worker", "tpu")
@budget(2)
@given(shape_list=st.lists(shapes(0, 3, 1, 4), min_size=1, max_size=4))
def test_variables_in_scope_have_a_full_copy_per_replica(tf, dl_strategy, dl_groups, dl_timeout, shape_list):
    if dl_strategy.name == "tpu":
        dist.tpu_strategy()
    expected_type = {"mirrored": "MirroredVariable", "multi-worker": "MirroredVariable"}.get(dl_strategy.name, "ResourceVariable")
    for n in _local_counts(dl_strategy):
        for where, found in _copies(dl_strategy, dl_groups, dl_timeout, shape_list, n).items():
            for shape, entry in zip(shape_list, found):
                label = f"{dl_strategy.name} over {n} local replica(s), {where}, variable of shape {shape}"
                inside, outside = entry["inside"], entry["outside"]
                assert inside["type"] == expected_type, (f"{label}: created in scope() as {inside['type']}, "
                                                         f"but should be {expected_type}")
                _check_full_copies(inside, entry["init"], n, label)
                # Outside any scope the default strategy is in effect: only it owns the variable.
                owned = dl_strategy.name == "default"
                assert outside["in_scope"] == owned and len(outside["values"]) == 1, (
                    f"{label}: created outside scope() it is a {outside['type']} with {len(outside['values'])} "
                    f"component(s), owned by the strategy: {outside['in_scope']}; should be one plain copy, owned: {owned}")
        evidence.covers(*_full_replica_modes(dl_strategy.name, n))
    evidence.note(local_replicas=_local_counts(dl_strategy))


def _full_replica_modes(name: str, n: int) -> list[str]:
    kind = {"mirrored": f"MirroredStrategy+replicas={n}", "multi-worker": "MultiWorkerMirroredStrategy",
            "default": "default-strategy", "one-device": "OneDeviceStrategy"}.get(name)
    return ["outside-scope", *([kind] if kind else [])]


@pytest.mark.claim("distributed.mirrored.default-all-reduce")
@pytest.mark.dl_strategies("mirrored")
@pytest.mark.min_devices(2)
def test_default_all_reduce_depends_on_the_device_kind(tf, dl_strategy, dl_groups):
    for n in _local_counts(dl_strategy):
        _check_default_all_reduce(tf, dl_strategy, dist.inprocess_strategy(dl_groups, dl_strategy, n))
        evidence.covers(f"replicas={n}", f"{dl_strategy.device}-devices")


def _check_default_all_reduce(tf: Any, dl_strategy: Any, strategy: Any) -> None:
    seen = tf_programs.default_all_reduce_ops(strategy)
    types = set(seen["op_types"])
    collective = sorted(t for t in types if t.startswith("CollectiveReduce"))
    nccl = sorted(t for t in types if "Nccl" in t)
    evidence.note(device=dl_strategy.device, reduce_ops=collective + nccl,
                  private_cross_device_ops=seen["private_cross_device_ops"])
    replicas = len(strategy.extended.worker_devices)
    oracle.check_replicas_agree([[r] for r in seen["results"]], what="all_reduce results")
    np.testing.assert_array_equal(seen["results"][0], np.full(3, replicas * (replicas + 1) / 2, np.float32),
                                  err_msg="all_reduce(SUM) of replica ids 1..N")
    logical = len(tf.config.list_logical_devices("GPU")) != len(tf.config.list_physical_devices("GPU"))
    if dl_strategy.device != "cpu" and logical:
        not_applicable(
            f"the {replicas} replicas are logical GPUs of one physical GPU (--dl-device={dl_strategy.device}), where "
            "TensorFlow's select_cross_device_ops falls back to ReductionToOneDevice ('NCCL is not supported when using "
            "virtual GPUs'); the NCCL default needs two physical GPUs (--dl-device=multi-gpu)")
    if dl_strategy.device == "cpu":
        assert collective and not nccl, (
            f"MirroredStrategy over {replicas} CPU devices traced {sorted(types)}; the precise truth is a collective "
            "all-reduce (CollectiveReduceV*) on CPUs, not NCCL (the seed's 'NCCL by default' holds only on GPUs)")
    else:
        assert nccl, f"MirroredStrategy over {replicas} GPUs traced {sorted(types)}, but should use NCCL (NcclAllReduce)"


@pytest.mark.claim("distributed.mirrored.scope")
@pytest.mark.dl_strategies("mirrored")
@pytest.mark.min_devices(2)
# without and with slot variables; over 2 and 3 replicas (each count once, by construction)
@pytest.mark.parametrize("optimizer, replicas", [("sgd", 2), ("adam", 3)])
@expensive(1)
@given(model=model_case(), rows_per_replica=st.integers(1, 2))
def test_scope_is_required_and_strategy_run_distributes(tf, dl_strategy, dl_groups, optimizer, replicas, model,
                                                        rows_per_replica):
    if replicas not in dl_strategy.replica_counts():
        not_applicable(f"MirroredStrategy over {replicas} replicas: this run has {max(dl_strategy.replica_counts())} "
                       f"{dl_strategy.device} device(s)")
    strategy = dist.inprocess_strategy(dl_groups, dl_strategy, replicas)
    n = strategy.num_replicas_in_sync
    batch = n * rows_per_replica
    rng = np.random.default_rng(int(model["data_seed"]))
    case = TrainCase(widths=model["widths"], activation=model["activation"], weights=model["weights"],
                     x=rng.uniform(-1, 1, (batch, model["widths"][0])), y=rng.uniform(-1, 1, (batch, model["widths"][-1])),
                     optimizer=optimizer, lr=model["lr"], dtype=model["dtype"], batch=batch)
    seen = tf_programs.scope_observations(strategy, case)
    # Object addresses ("<... object at 0x7f...>") differ in every process: left out of the
    # notes, so that two reports of the same stack compare without drift.
    evidence.note(**{k: _without_addresses(seen[k]) for k in ("outside_fit", "bypass_in_scope", "bypass", "fit_traces")})

    # The error depends on what fit touches first: the strategy's update of a kernel it
    # does not own (AssertionError), or an optimizer creating slots under another strategy.
    assert seen["outside_fit"] and seen["outside_fit"].startswith(OUTSIDE_FIT_ERRORS[optimizer]), (
        f"fit under scope() of a model built outside it gave {seen['outside_fit']!r}, but should fail with "
        f"{OUTSIDE_FIT_ERRORS[optimizer]} (its variables are not the strategy's)")
    assert seen["bypass_in_scope"] and "outside the replica context" in seen["bypass_in_scope"], (
        f"a custom step called in scope() without strategy.run gave {seen['bypass_in_scope']!r}, but should raise "
        "ValueError (DistributedVariable.handle is not available outside the replica context)")
    _check_bypass_outside_scope(seen, case.optimizer, batch)
    assert seen["run_seen"] == [(r, rows_per_replica) for r in range(n)], (
        f"under strategy.run the step ran as (replica, rows) {seen['run_seen']}, but should run once on each of "
        f"{n} replicas with {rows_per_replica} of the {batch} rows")
    in_replica = [t for t in seen["fit_traces"] if not t[0]]
    assert in_replica and all(t == (False, n) for t in in_replica) and len(in_replica) == n, (
        f"fit traced its train step as (cross-replica, replicas in sync) {seen['fit_traces']}; it should be traced "
        f"once per replica in replica context with {n} replicas in sync: no code change needed for fit")
    evidence.covers(f"replicas={n}", f"optimizer={optimizer}", "fit-outside-scope-fails", "step-bypassing-run",
                    "strategy.run", "fit-in-scope")


def _check_bypass_outside_scope(seen: dict[str, Any], optimizer: str, batch: int) -> None:
    """Outside the scope a step that bypasses strategy.run is not distributed: one replica
    (id 0) computes on the whole batch. A stateless optimizer then updates every mirrored
    copy alike; one with slots (momentum, Adam) creates them on first use and raises."""
    __tracebackhide__ = True
    if optimizer == "sgd":
        assert seen["bypass"] is None, f"the bypassing step with SGD outside scope() raised {seen['bypass']}"
        assert seen["bypass_seen"] == [(0, batch)], (
            f"the bypassing step ran as (replica, rows) {seen['bypass_seen']}, but should run once, on replica 0 "
            f"with all {batch} rows (no data parallelism)")
        oracle.check_replicas_agree([[c] for c in seen["bypass_copies"]], what="mirrored copies after a bypassing step")
        assert seen["bypass_changed"], "the bypassing SGD step did not change the weights"
    else:
        assert seen["bypass"] and seen["bypass"].startswith("RuntimeError") and "strategy.scope()" in seen["bypass"], (
            f"the bypassing step with {optimizer} outside scope() gave {seen['bypass']!r}, but should raise RuntimeError "
            "('Need to be inside with strategy.scope()' when the optimizer creates its slots)")


def _without_addresses(value: Any) -> Any:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", value) if isinstance(value, str) else value
