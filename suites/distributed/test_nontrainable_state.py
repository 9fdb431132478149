"""Non-trainable state under data parallelism: BatchNorm buffers and statistics, and distributed
variables' synchronization and aggregation.

distributed.torch.ddp-buffers: DistributedDataParallel's buffer sync (broadcast_buffers,
forward_sync_buffers, init_sync) on a BatchNorm1d's running_mean, running_var and
num_batches_tracked over 2 and 3 gloo ranks. distributed.torch.sync-batchnorm: SyncBatchNorm
(not applicable on CPU, with torch's own message). distributed.keras.batchnorm-synchronized:
keras.layers.BatchNormalization(synchronized=True/False) under MirroredStrategy over 2 and 3
logical CPU devices. distributed.tf.variable-aggregation: ON_READ and ON_WRITE non-trainable
variables and each tf.VariableAggregation.

Oracles: numpy float64 simulations of the documented rules (below, fed wrong implementations in
tests/unit/test_nontrainable_state_oracles.py). Tolerances: torch runs in float64 (running
statistics: 4 operations per update, reductions over the batch's n values per channel); Keras
in float32 (outputs: tolerance(float32, ops=8, reduction=m) relative to the normalised
magnitude |x|/sqrt(var+eps), as in suites/modules/test_batchnorm.py; moving statistics: ops 4,
reduction m, relative to max(1, mean|x|, mean x^2)); variables: integer-valued float32 values,
exact sums, MEAN one rounded division.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import assert_close, assert_equal, evidence, not_applicable, tolerance
from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import reductions as oracle

from . import state_programs

FAMILY = "distributed non-trainable state"
Row = dict[str, Any]


def pairwise(factors: Mapping[str, Sequence[Any]]) -> list[Row]:
    """A covering array of strength 2, greedy and deterministic (ties to the earlier row)."""
    names = list(factors)
    rows = [dict(zip(names, combo)) for combo in itertools.product(*factors.values())]

    def pairs(row: Row) -> set[tuple[str, Any, str, Any]]:
        return {(a, repr(row[a]), b, repr(row[b])) for a, b in itertools.combinations(names, 2)}

    uncovered = set().union(*(pairs(r) for r in rows))
    chosen: list[Row] = []
    while uncovered:
        best = max(rows, key=lambda r: len(pairs(r) & uncovered))
        chosen.append(best)
        uncovered -= pairs(best)
    return chosen


def _label(row: Row) -> str:
    return ",".join(f"{k}={v}" for k, v in row.items())


def _profile_rows(rows: list[Row], settings: Any) -> list[Row]:
    """The quick profile checks one representative row per table; the others every row."""
    return rows[:1] if getattr(settings, "profile", "ci") == "quick" else rows


# =========================================================================== numpy oracles

State = tuple[np.ndarray, np.ndarray, int]  # running_mean, running_var, num_batches_tracked


def bn_batch_stats(x: np.ndarray, channel_axis: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per channel: mean, biased variance, unbiased variance, and the count n they are over."""
    x = np.asarray(x, np.float64)
    axes = tuple(i for i in range(x.ndim) if i != channel_axis % x.ndim)
    n = x.size // x.shape[channel_axis]
    mean = x.mean(axis=axes)
    biased = x.var(axis=axes)
    return mean, biased, biased * n / (n - 1), n


def bn_running_update(state: State, x: np.ndarray, momentum: float | None) -> State:
    """torch BatchNorm's documented update in training: num_batches_tracked += 1; with momentum
    m, running = (1 - m) * running + m * batch statistic; with momentum=None a cumulative
    moving average (factor 1 / num_batches_tracked); the running variance takes the unbiased
    batch variance."""
    mean, var, tracked = state
    bmean, _, unbiased, _ = bn_batch_stats(x)
    tracked += 1
    f = 1.0 / tracked if momentum is None else momentum
    return (1 - f) * mean + f * bmean, (1 - f) * var + f * unbiased, tracked


def ddp_sync_rules(kwargs: Mapping[str, Any]) -> tuple[bool, bool]:
    """(buffers synced from rank 0 at construction, buffers broadcast from rank 0 at the start of
    each forward) as DDP's docstring states them: forward_sync_buffers (None: True) replaces
    broadcast_buffers (deprecated; None: True) and 'does not affect initialization sync ...
    buffers are always synced at init'; 'the deprecated broadcast_buffers=False excludes
    buffers from this init sync'; init_sync=False syncs nothing at construction."""
    fwd = kwargs.get("forward_sync_buffers")
    legacy = kwargs.get("broadcast_buffers")
    if fwd is not None:
        forward, at_init = bool(fwd), True
    else:
        forward = at_init = True if legacy is None else bool(legacy)
    return at_init and kwargs.get("init_sync", True), forward


def ddp_buffer_reference(init: Sequence[State], batches: Sequence[Sequence[np.ndarray]], momentum: float | None,
                         init_synced: bool, forward_sync: bool) -> dict[str, Any]:
    """Each rank's buffers after construction, after each step, and after one more (eval) forward,
    rank 0's copy broadcast where the rules say so."""
    n = len(init)
    states = [init[0]] * n if init_synced else list(init)
    out: dict[str, Any] = {"after_init": list(states), "after_step": []}
    for t in range(len(batches[0])):
        if forward_sync:
            states = [states[0]] * n
        states = [bn_running_update(states[r], batches[r][t], momentum) for r in range(n)]
        out["after_step"].append(list(states))
    out["after_training"] = list(states)
    out["after_eval"] = [states[0]] * n if forward_sync else list(states)
    return out


def bn_normalize(x: np.ndarray, mean: np.ndarray, var: np.ndarray, eps: float, gamma: Any = None, beta: Any = None,
                 channel_axis: int = 1) -> np.ndarray:
    """gamma * (x - mean) / sqrt(var + eps) + beta, per channel along ``channel_axis``."""
    x = np.asarray(x, np.float64)
    shape = [1] * x.ndim
    shape[channel_axis % x.ndim] = x.shape[channel_axis]

    def b(v: Any, default: float) -> np.ndarray:
        return np.full(shape, default) if v is None else np.asarray(v, np.float64).reshape(shape)

    return b(gamma, 1.0) * (x - b(mean, 0.0)) / np.sqrt(b(var, 1.0) + eps) + b(beta, 0.0)


def keras_bn_reference(shards: Sequence[np.ndarray], axis: int, momentum: float, eps: float, synchronized: bool,
                       mean0: float, var0: float) -> dict[str, Any]:
    """Keras BatchNormalization in training (gamma 1, beta 0): synchronized=True normalises every
    replica with the global batch's mean and (biased, 'var(batch)') variance, and the moving
    statistics become moving * momentum + stat * (1 - momentum) of the global batch;
    synchronized=False normalises each replica with its own shard's statistics (the moving
    statistics are then not documented: ``local_moving`` holds each replica's own update)."""
    whole = np.concatenate([np.asarray(s, np.float64) for s in shards], axis=0)
    gmean, gvar, _, _ = bn_batch_stats(whole, axis)
    out, local_moving = [], []
    for s in shards:
        lmean, lvar, _, _ = bn_batch_stats(s, axis)
        mean, var = (gmean, gvar) if synchronized else (lmean, lvar)
        out.append(bn_normalize(s, mean, var, eps, channel_axis=axis))
        local_moving.append((mean0 * momentum + lmean * (1 - momentum), var0 * momentum + lvar * (1 - momentum)))
    return {"out": out, "moving_mean": mean0 * momentum + gmean * (1 - momentum),
            "moving_variance": var0 * momentum + gvar * (1 - momentum), "local_moving": local_moving}


def aggregate(aggregation: str, values: Sequence[np.ndarray]) -> np.ndarray:
    """tf.VariableAggregation: SUM adds the replicas' values, MEAN averages them,
    ONLY_FIRST_REPLICA takes replica 0's; NONE has no aggregate."""
    stack = np.stack([np.asarray(v, np.float64) for v in values])
    if aggregation == "SUM":
        return stack.sum(axis=0)
    if aggregation == "MEAN":
        return stack.mean(axis=0)
    if aggregation == "ONLY_FIRST_REPLICA":
        return stack[0]
    raise ValueError(f"aggregation {aggregation} has no aggregate")


def on_write_reference(aggregation: str, op: str, init: np.ndarray, values: Sequence[np.ndarray]) -> np.ndarray:
    """A mirrored (ON_WRITE) variable updated in replica context: the updates are aggregated
    (StrategyExtended: reduce_to(aggregation) then update), so assign gives the aggregate of the
    values and assign_add adds the aggregate of the increments (VariableAggregation's example:
    MEAN, 5.0 + mean(1.0, 1.0) = 6.0)."""
    agg = aggregate(aggregation, values)
    return np.asarray(init, np.float64) + agg if op == "assign_add" else agg


def on_read_cross_assign_reference(aggregation: str, value: np.ndarray, replicas: int) -> list[np.ndarray]:
    """StrategyExtended: one value assigned to a SyncOnRead variable in cross-replica context is
    'divided by the number of replicas and then assigned to each replica' with SUM, 'assigned
    to each replica directly' with MEAN."""
    value = np.asarray(value, np.float64)
    if aggregation == "SUM":
        return [value / replicas] * replicas
    if aggregation == "MEAN":
        return [value] * replicas
    raise ValueError(f"cross-replica assign of an ON_READ variable with {aggregation} is not documented")


def check_ddp_buffers(got: Mapping[int, Mapping[str, Any]], want: Mapping[str, Any], tol: Any, *, what: str) -> None:
    """Every rank's buffers at every point against the reference: running statistics within
    ``tol``, num_batches_tracked exactly."""
    __tracebackhide__ = True
    points = [("after construction", "after_init", None)] + [
        (f"after step {t + 1}", "after_step", t) for t in range(len(want["after_step"]))] + [
        ("after the eval forward", "after_eval", None)]
    for where, key, t in points:
        for rank in sorted(got):
            seen = got[rank][key] if t is None else got[rank][key][t]
            mean, var, tracked = want[key][rank] if t is None else want[key][t][rank]
            label = f"{what}: rank {rank} {where}"
            assert int(seen["num_batches_tracked"]) == tracked, (
                f"{label}: num_batches_tracked is {int(seen['num_batches_tracked'])}, but should be {tracked}")
            assert_close(seen["running_mean"], mean, tol, what=f"{label}: running_mean")
            assert_close(seen["running_var"], var, tol, what=f"{label}: running_var (unbiased batch variance)")


# =========================================================================== torch: DDP buffers

SYNC_KWARGS: dict[str, dict[str, Any]] = {
    "default": {},
    "broadcast_buffers=True": {"broadcast_buffers": True},
    "broadcast_buffers=False": {"broadcast_buffers": False},
    "forward_sync_buffers=True": {"forward_sync_buffers": True},
    "forward_sync_buffers=False": {"forward_sync_buffers": False},
    "both-given": {"broadcast_buffers": False, "forward_sync_buffers": True},
}
DDP_FACTORS: dict[str, Sequence[Any]] = {
    "sync": list(SYNC_KWARGS),
    "init_sync": [True, False],
    "momentum": [0.1, 0.35, None],
    "ranks": list(dist.REPLICA_COUNTS),
    "input": ["N,C", "N,C,L"],
}
DDP_ROWS = pairwise(DDP_FACTORS)
DDP_STEPS = 3


def _ddp_payload(row: Row, index: int) -> dict[str, Any]:
    """Rank-dependent batches (offset and scale per rank and channel, so the ranks' statistics
    differ by O(1)) and rank-dependent initial buffers, from a seed fixed per row."""
    rng = np.random.default_rng(1000 + index)
    n, c = int(row["ranks"]), 3
    length = 4 if row["input"] == "N,C,L" else None
    shape = (5, c) if length is None else (5, c, length)
    bshape = (1, c) if length is None else (1, c, 1)
    batches = [[(rng.uniform(-2, 2, c).reshape(bshape) + rng.uniform(0.5, 2, c).reshape(bshape) * rng.normal(size=shape))
                for _ in range(DDP_STEPS)] for _ in range(n)]
    init = [(rng.uniform(-1, 1, c), rng.uniform(0.5, 2, c), int(rng.integers(0, 4)) + r) for r in range(n)]
    return {"ranks": n, "channels": c, "length": length, "momentum": row["momentum"], "seed": index,
            "kwargs": {**SYNC_KWARGS[row["sync"]], **({"init_sync": False} if not row["init_sync"] else {})},
            "init_buffers": [(m.tolist(), v.tolist(), t) for m, v, t in init], "batches": batches,
            "eval_x": rng.normal(size=shape)}


BN_EPS = 1e-5  # BatchNorm1d's default eps


def _eval_tol(x: np.ndarray, state: State, gamma: np.ndarray, beta: np.ndarray) -> Any:
    """Eval output gamma * (x - mean) / sqrt(var + eps) + beta in float64: a few elementwise
    operations, relative to |gamma| * max|x - mean| / sqrt(min var + eps) + |beta|."""
    centred = float(np.max(np.abs(x))) + float(np.max(np.abs(state[0])))
    mag = float(np.max(np.abs(gamma))) * centred / float(np.sqrt(np.min(state[1]) + BN_EPS)) + float(np.max(np.abs(beta)))
    return tolerance("float64", ops=8, magnitude=mag)


def _ddp_modes(row: Row) -> list[str]:
    return [f"sync={row['sync']}", f"init_sync={row['init_sync']}", f"momentum={row['momentum']}",
            f"replicas={row['ranks']}", "eval-forward", "parameters-agree"]


@pytest.mark.claim("distributed.torch.ddp-buffers")
@pytest.mark.dl_strategies("ddp")
def test_ddp_buffers_follow_the_documented_sync(torch, dl_strategy, dl_groups, dl_timeout, dl_settings):
    group = dist.group_for(dl_groups, dl_strategy, dl_timeout, world=dist.torch_ranks(dl_strategy))
    rows = [r for r in _profile_rows(DDP_ROWS, dl_settings) if r["ranks"] <= group.world_size]
    # The largest groups first (a rank outside a smaller subgroup would otherwise wait alone).
    rows = sorted(rows, key=lambda r: -r["ranks"])
    payloads = [_ddp_payload(row, DDP_ROWS.index(row)) for row in rows]
    per_rank = group.run(state_programs.ddp_buffer_cases, payloads, what="DDP buffer sync cases")
    warned: dict[str, list[str]] = {}
    for i, row in enumerate(evidence.visiting(FAMILY, "DDP buffers", rows, _label)):
        p = payloads[i]
        n = p["ranks"]
        # Every rank's result in the pool; attached to an external group (torchrun, a cluster)
        # each process holds only its own rank's and checks that one against the reference.
        ranks = [r for r in sorted(per_rank) if r < n]
        got = {r: per_rank[r][i] for r in ranks}
        init_synced, forward = ddp_sync_rules(p["kwargs"])
        init = [(np.asarray(m), np.asarray(v), t) for m, v, t in p["init_buffers"]]
        want = ddp_buffer_reference(init, p["batches"], p["momentum"], init_synced, forward)
        what = (f"DDP({p['kwargs']}) over {n} gloo ranks, BatchNorm1d(momentum={p['momentum']}) on "
                f"{'(N, C, L)' if p['length'] else '(N, C)'} float64 batches")
        # float64: each update is 4 operations on values of magnitude max(1, mean|x|, mean x^2); each
        # batch statistic a reduction over n = N*L values; DDP_STEPS updates accumulate.
        x_all = np.concatenate([np.asarray(b).ravel() for rb in p["batches"] for b in rb])
        count = int(np.prod(np.shape(p["batches"][0][0]))) // p["channels"]
        tol = tolerance("float64", ops=4 * DDP_STEPS, reduction=count,
                        magnitude=max(1.0, float(np.mean(np.abs(x_all))), float(np.mean(x_all ** 2))))
        check_ddp_buffers(got, want, tol, what=what)
        oracle.check_replicas_agree([got[r]["params"] for r in ranks],
                                    what=f"{what}: parameters (gradients all-reduced)")
        gamma, beta = got[ranks[0]]["params"][0], got[ranks[0]]["params"][1]
        for r in ranks:
            for key, state in (("eval_bn", want["after_training"][r]), ("eval_bn_after_ddp_forward", want["after_eval"][r])):
                expected = bn_normalize(p["eval_x"], state[0], state[1], BN_EPS, gamma, beta)
                assert_close(got[r][key], expected, _eval_tol(p["eval_x"], state, gamma, beta),
                             what=f"{what}: rank {r} eval output ({key}) from its running statistics")
        warned[row["sync"]] = sorted(set(got[ranks[0]]["warnings"]))
        evidence.covers(*_ddp_modes(row))
    evidence.note(ddp_warnings=warned, rows=len(rows), backend=dl_strategy.torch_backend())


@pytest.mark.claim("distributed.torch.sync-batchnorm")
@pytest.mark.dl_strategies("ddp")
def test_sync_batchnorm_uses_global_statistics_or_is_not_applicable(torch, dl_strategy, dl_groups, dl_timeout):
    group = dist.group_for(dl_groups, dl_strategy, dl_timeout, world=dist.torch_ranks(dl_strategy))
    rng = np.random.default_rng(7)
    batches = [rng.uniform(-1, 1) + rng.normal(size=(3 + r, 2)) for r in range(group.world_size)]
    payload = {"batches": batches, "momentum": 0.2}
    per_rank = group.run(state_programs.sync_batchnorm_cpu, payload, what="SyncBatchNorm")
    errors = {how: per_rank[min(per_rank)][how]["error"] for how in ("alone", "ddp")}
    evidence.note(sync_batchnorm_errors=errors, device=dl_strategy.device)
    if all(errors.values()):
        if dl_strategy.device == "cpu":
            not_applicable(f"torch.nn.SyncBatchNorm does not run on CPU (its docstring: 'only supports "
                           f"DistributedDataParallel (DDP) with single GPU per process'): alone it raised "
                           f"{errors['alone']!r}; under DDP {errors['ddp']!r}")
        pytest.fail(f"SyncBatchNorm on {dl_strategy.device} raised {errors}")
    whole = np.concatenate(batches)
    gmean, gvar, unbiased, _ = bn_batch_stats(whole)
    for how in ("alone", "ddp"):
        if errors[how]:
            continue
        for r in sorted(per_rank):
            seen = per_rank[r][how]
            mag = float(np.max(np.abs(whole))) / float(np.sqrt(np.min(gvar)))
            tol = tolerance("float64", ops=8, reduction=len(whole), magnitude=mag)
            assert_close(seen["out"], bn_normalize(batches[r], gmean, gvar, 1e-5), tol,
                         what=f"SyncBatchNorm ({how}) rank {r}: output with the global batch statistics")
            assert_close(seen["running_mean"], 0.8 * 0 + 0.2 * gmean, tol, what=f"SyncBatchNorm ({how}) rank {r}: running_mean")
            assert_close(seen["running_var"], 0.8 * 1 + 0.2 * unbiased, tol, what=f"SyncBatchNorm ({how}) rank {r}: running_var")
    evidence.covers("global-statistics")


# =========================================================================== Keras BatchNormalization

KERAS_FACTORS: dict[str, Sequence[Any]] = {
    "synchronized": [True, False],
    "replicas": list(dist.REPLICA_COUNTS),
    "layout": ["N,C axis=-1", "N,C,H,W axis=1"],
    "shards": ["even", "uneven"],
    "momentum": [0.99, 0.6],
}
KERAS_ROWS = pairwise(KERAS_FACTORS)


def _keras_case(row: Row, index: int) -> dict[str, Any]:
    rng = np.random.default_rng(2000 + index)
    n, c = int(row["replicas"]), 3
    axis = -1 if row["layout"].endswith("-1") else 1
    rows = [4] * n if row["shards"] == "even" else [5 - min(r, 3) for r in range(n)]
    tail = (c,) if axis == -1 else (c, 2, 2)
    bshape = (1, c) if axis == -1 else (1, c, 1, 1)
    shards = [(rng.uniform(-2, 2, c).reshape(bshape) + rng.uniform(0.5, 2, c).reshape(bshape)
               * rng.normal(size=(m, *tail))).astype(np.float32) for m in rows]
    return {"synchronized": row["synchronized"], "axis": axis, "momentum": row["momentum"],
            "epsilon": 1e-3 if index % 2 else 0.05, "mean0": 0.25, "var0": 1.5, "shards": shards}


@pytest.mark.claim("distributed.keras.batchnorm-synchronized")
@pytest.mark.dl_strategies("mirrored")
@pytest.mark.min_devices(2)
def test_keras_batchnorm_synchronized_uses_global_statistics(tf, dl_strategy, dl_groups, dl_settings):
    rows = [r for r in _profile_rows(KERAS_ROWS, dl_settings) if r["replicas"] in dl_strategy.replica_counts()]
    local_moving: dict[str, Any] = {}
    for row in evidence.visiting(FAMILY, "Keras BatchNormalization", rows, _label):
        case = _keras_case(row, KERAS_ROWS.index(row))
        strategy = dist.inprocess_strategy(dl_groups, dl_strategy, row["replicas"])
        seen = state_programs.keras_bn_step(strategy, case)
        axis = case["axis"]
        want = keras_bn_reference(case["shards"], axis, case["momentum"], case["epsilon"], case["synchronized"],
                                  case["mean0"], case["var0"])
        what = (f"BatchNormalization(synchronized={case['synchronized']}, axis={axis}, momentum={case['momentum']}, "
                f"epsilon={case['epsilon']}) over {row['replicas']} replicas, shard rows "
                f"{[len(s) for s in case['shards']]}")
        whole = np.concatenate(case["shards"]).astype(np.float64)
        m = whole.size // whole.shape[axis]
        for r, (got, expected) in enumerate(zip(seen["out"], want["out"])):
            stats = bn_batch_stats(whole if case["synchronized"] else case["shards"][r], axis)
            centred = float(np.max(np.abs(case["shards"][r])) + np.max(np.abs(stats[0])))
            mag = centred / float(np.sqrt(np.min(stats[1]) + case["epsilon"]))
            assert_close(got, expected, tolerance("float32", ops=8, reduction=m, magnitude=mag),
                         what=f"{what}: replica {r} training output ({'global' if case['synchronized'] else 'local'} statistics)")
        mag = max(1.0, float(np.max(np.mean(np.abs(whole), axis=0))), float(np.max(np.mean(whole ** 2, axis=0))))
        moving_tol = tolerance("float32", ops=4, reduction=m, magnitude=mag)
        if case["synchronized"]:
            for r in range(row["replicas"]):
                assert_close(seen["moving_mean"][r], want["moving_mean"], moving_tol,
                             what=f"{what}: replica {r} moving_mean from the global batch")
                assert_close(seen["moving_variance"][r], want["moving_variance"], moving_tol,
                             what=f"{what}: replica {r} moving_variance from the global batch (biased var)")
        else:  # not documented: evidence only
            local_moving[_label(row)] = {
                "copies_agree": all(np.array_equal(seen["moving_mean"][0], c) for c in seen["moving_mean"]),
                "each_replica_its_own_update": all(
                    np.allclose(seen["moving_mean"][r], want["local_moving"][r][0], atol=1e-5)
                    for r in range(row["replicas"])),
            }
        evidence.covers(f"synchronized={case['synchronized']}", f"replicas={row['replicas']}",
                        f"axis={axis}", f"{row['shards']}-shards")
    evidence.note(unsynchronized_moving_statistics=local_moving)


# =========================================================================== tf.Variable aggregation

AGGREGATIONS = ("SUM", "MEAN", "ONLY_FIRST_REPLICA")


def _replica_values(n: int, seed: int) -> list[np.ndarray]:
    """Integer-valued, distinct per replica: SUM and ONLY_FIRST_REPLICA are exact in float32."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-20, 21, size=3).astype(np.float32) + 100 * r for r in range(n)]


def _counts(handle: Any) -> list[int]:
    return [n for n in dist.REPLICA_COUNTS if n in handle.replica_counts()]


def _exact_or_mean(got: Any, want: np.ndarray, aggregation: str, n: int, what: str) -> None:
    __tracebackhide__ = True
    if aggregation == "MEAN":  # one float32 division (and a sum of n integers, exact)
        assert_close(got, want, tolerance("float32", ops=2, reduction=n, magnitude=float(np.max(np.abs(want)))), what=what)
    else:
        assert_equal(np.asarray(got, np.float64), want, what=what)


@pytest.mark.claim("distributed.tf.variable-aggregation")
@pytest.mark.dl_strategies("mirrored")
@pytest.mark.min_devices(2)
def test_on_read_variables_are_local_in_replicas_and_aggregated_across(tf, dl_strategy, dl_groups):
    none_seen: dict[int, Any] = {}
    for n in _counts(dl_strategy):
        strategy = dist.inprocess_strategy(dl_groups, dl_strategy, n)
        for aggregation in AGGREGATIONS:
            values = _replica_values(n, 10 * n + len(aggregation))
            cross = np.array([6.0, -9.0, 12.0], np.float32)
            case = {"aggregation": aggregation, "values": values, "init": np.zeros(3, np.float32), "cross_assign": cross}
            seen = state_programs.tf_on_read(strategy, case)
            what = f"ON_READ variable, {aggregation}, MirroredStrategy over {n} replicas"
            assert seen["type"] == "SyncOnReadVariable", f"{what}: created as {seen['type']}"
            for r in range(n):
                assert_equal(seen["replica_reads"][r], values[r], what=f"{what}: replica {r} reads its own value")
                assert_equal(seen["components"][r], values[r], what=f"{what}: replica {r} component (no aggregation on write)")
            assert seen["cross_read_error"] is None, f"{what}: cross-replica read raised {seen['cross_read_error']}"
            _exact_or_mean(seen["cross_read"], aggregate(aggregation, values), aggregation, n,
                           f"{what}: cross-replica read is the {aggregation} of the replicas' values")
            evidence.covers(f"ON_READ+{aggregation}", f"replicas={n}")
            if aggregation in ("SUM", "MEAN"):
                after = seen["after_cross_assign"]
                assert not isinstance(after, str), f"{what}: a cross-replica assign raised {after}"
                for r, (got, want) in enumerate(zip(after, on_read_cross_assign_reference(aggregation, cross, n))):
                    assert_close(got, want, tolerance("float32", ops=1, magnitude=12.0),
                                 what=f"{what}: replica {r} after a cross-replica assign")
                evidence.covers(f"ON_READ+{aggregation}+cross-replica-assign")
            else:
                evidence.note(**{f"only_first_replica_cross_assign_{n}": str(seen["after_cross_assign"])})
        # NONE: no aggregate is documented for a read; observed only.
        seen = state_programs.tf_on_read(strategy, {"aggregation": "NONE", "values": _replica_values(n, 1),
                                                    "init": np.zeros(3, np.float32), "cross_assign": None})
        local = [np.array_equal(a, b) for a, b in zip(seen["replica_reads"], _replica_values(n, 1))]
        none_seen[n] = {"replica_reads_local": all(local), "cross_read_error": seen["cross_read_error"]}
    evidence.note(on_read_none=none_seen)


@pytest.mark.claim("distributed.tf.variable-aggregation")
@pytest.mark.dl_strategies("mirrored")
@pytest.mark.min_devices(2)
def test_on_write_updates_in_replica_context_are_aggregated(tf, dl_strategy, dl_groups):
    for n in _counts(dl_strategy):
        strategy = dist.inprocess_strategy(dl_groups, dl_strategy, n)
        for aggregation, op in itertools.product(AGGREGATIONS, ("assign", "assign_add")):
            values = _replica_values(n, 20 * n + len(op) + len(aggregation))
            init = np.array([5.0, -3.0, 0.5], np.float32)
            seen = state_programs.tf_on_write(strategy, {"aggregation": aggregation, "op": op, "values": values,
                                                         "init": init})
            what = f"ON_WRITE (mirrored) variable, {aggregation}, {op} in replica context over {n} replicas"
            assert seen["type"] == "MirroredVariable", f"{what}: created as {seen['type']}"
            assert seen["error"] is None, f"{what}: raised {seen['error']}"
            want = on_write_reference(aggregation, op, init, values)
            for r in range(n):
                _exact_or_mean(seen["components"][r], want, aggregation, n, f"{what}: replica {r} copy")
            evidence.covers(f"ON_WRITE+{aggregation}", f"ON_WRITE+{op}", f"replicas={n}")


@pytest.mark.claim("distributed.tf.variable-aggregation")
@pytest.mark.dl_strategies("mirrored")
@pytest.mark.min_devices(2)
def test_on_write_none_refuses_replica_updates(tf, dl_strategy, dl_groups):
    """tf.VariableAggregation.NONE: 'This is the default, giving an error if you use a
    variable-update operation with multiple replicas.'"""
    n = _counts(dl_strategy)[0]
    strategy = dist.inprocess_strategy(dl_groups, dl_strategy, n)
    values = _replica_values(n, 3)
    seen = state_programs.tf_on_write(strategy, {"aggregation": "NONE", "op": "assign_add", "values": values,
                                                 "init": np.zeros(3, np.float32)})
    evidence.note(components=[c.tolist() for c in seen["components"]])
    assert seen["error"] is not None, (
        f"ON_WRITE variable with aggregation NONE: assign_add with different values on {n} replicas raised "
        f"nothing, but VariableAggregation.NONE is documented as 'giving an error if you use a variable-update "
        f"operation with multiple replicas'; the mirrored copies now differ: {[c.tolist() for c in seen['components']]}")
    evidence.note(raised=seen["error"])
    evidence.covers(f"replicas={n}", "ON_WRITE+NONE")


