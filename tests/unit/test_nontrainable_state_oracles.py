"""Meta-tests for the numpy oracles of suites/distributed/test_nontrainable_state.py: each
reproduces the documented rule, and each check fails a deliberately wrong implementation (a
wrong twin) with a message naming what is wrong: a biased running variance, a DDP that skips
the buffer broadcast, a broadcast from the wrong rank, momentum=None taken as 0.1, synchronized
BatchNorm with local statistics, a wrong aggregation."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.api import assert_close, tolerance
from suites.distributed import test_nontrainable_state as ns

RNG = np.random.default_rng(0)
BATCHES = [[RNG.normal(loc=r, size=(5, 2)) for _ in range(3)] for r in range(3)]
INIT = [(np.full(2, 0.1 * r), np.full(2, 1.0 + r), r) for r in range(3)]
TOL = tolerance("float64", ops=12, reduction=5, magnitude=10.0)


def _as_seen(want, key_states):
    return {"running_mean": key_states[0], "running_var": key_states[1], "num_batches_tracked": np.array(key_states[2])}


def _run(want):
    """What a DDP run following ``want`` returns, per rank."""
    return {r: {"after_init": _as_seen(want, want["after_init"][r]),
                "after_step": [_as_seen(want, s[r]) for s in want["after_step"]],
                "after_eval": _as_seen(want, want["after_eval"][r])} for r in range(len(want["after_init"]))}


def test_running_update_follows_the_docstring():
    x = np.array([[1.0, 2.0], [3.0, 6.0]])
    mean, var, tracked = ns.bn_running_update((np.zeros(2), np.ones(2), 0), x, 0.1)
    np.testing.assert_allclose(mean, 0.1 * np.array([2.0, 4.0]))
    np.testing.assert_allclose(var, 0.9 + 0.1 * np.array([2.0, 8.0]))  # unbiased: ddof=1
    assert tracked == 1
    mean, _, tracked = ns.bn_running_update((np.full(2, 5.0), np.ones(2), 1), x, None)
    np.testing.assert_allclose(mean, 0.5 * 5.0 + 0.5 * np.array([2.0, 4.0]))  # cumulative: factor 1/2


def test_sync_rules_follow_the_docstring():
    assert ns.ddp_sync_rules({}) == (True, True)
    assert ns.ddp_sync_rules({"broadcast_buffers": False}) == (False, False)
    assert ns.ddp_sync_rules({"forward_sync_buffers": False}) == (True, False)
    assert ns.ddp_sync_rules({"broadcast_buffers": False, "forward_sync_buffers": True}) == (True, True)
    assert ns.ddp_sync_rules({"init_sync": False}) == (False, True)


def test_check_ddp_buffers_fails_a_ddp_that_skips_the_broadcast():
    want = ns.ddp_buffer_reference(INIT, BATCHES, 0.1, True, True)
    ns.check_ddp_buffers(_run(want), want, TOL, what="ok")
    skipped = ns.ddp_buffer_reference(INIT, BATCHES, 0.1, True, False)
    with pytest.raises(AssertionError, match=r"rank 1 after step 2: running_mean"):
        ns.check_ddp_buffers(_run(skipped), want, TOL, what="no broadcast")


def test_check_ddp_buffers_fails_a_broadcast_from_the_wrong_rank():
    want = ns.ddp_buffer_reference(INIT, BATCHES, 0.1, True, True)
    wrong = ns.ddp_buffer_reference(INIT[::-1], BATCHES, 0.1, True, True)
    with pytest.raises(AssertionError, match=r"rank 0 after construction: num_batches_tracked is 2, but should be 0"):
        ns.check_ddp_buffers(_run(wrong), want, TOL, what="from rank 2")


def test_check_ddp_buffers_fails_a_biased_running_variance(monkeypatch):
    want = ns.ddp_buffer_reference(INIT, BATCHES, 0.1, True, True)

    def biased(state, x, momentum):
        mean, var, tracked = state
        bmean, bvar, _, _ = ns.bn_batch_stats(x)
        return 0.9 * mean + 0.1 * bmean, 0.9 * var + 0.1 * bvar, tracked + 1

    monkeypatch.setattr(ns, "bn_running_update", biased)
    wrong = ns.ddp_buffer_reference(INIT, BATCHES, 0.1, True, True)
    monkeypatch.undo()
    with pytest.raises(AssertionError, match=r"after step 1: running_var \(unbiased batch variance\)"):
        ns.check_ddp_buffers(_run(wrong), want, TOL, what="biased")


def test_check_ddp_buffers_fails_momentum_none_taken_as_default():
    want = ns.ddp_buffer_reference(INIT, BATCHES, None, True, True)
    wrong = ns.ddp_buffer_reference(INIT, BATCHES, 0.1, True, True)
    with pytest.raises(AssertionError, match=r"after step 1: running_mean"):
        ns.check_ddp_buffers(_run(wrong), want, TOL, what="momentum None")


def test_keras_reference_fails_local_statistics_under_synchronized():
    shards = [RNG.normal(loc=3 * r, size=(4, 2)) for r in range(2)]
    synced = ns.keras_bn_reference(shards, -1, 0.9, 1e-3, True, 0.0, 1.0)
    local = ns.keras_bn_reference(shards, -1, 0.9, 1e-3, False, 0.0, 1.0)
    whole = np.concatenate(shards)
    np.testing.assert_allclose(synced["moving_mean"], 0.1 * whole.mean(0))
    np.testing.assert_allclose(synced["moving_variance"], 0.9 + 0.1 * whole.var(0))  # biased var(batch)
    with pytest.raises(AssertionError, match=r"replica 0 output"):
        assert_close(local["out"][0], synced["out"][0], tolerance("float32", ops=8, reduction=8, magnitude=5.0),
                     what="replica 0 output")


def test_aggregation_references_fail_a_wrong_aggregation():
    values = [np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([5.0, 9.0])]
    assert ns.aggregate("SUM", values).tolist() == [9.0, 15.0]
    assert ns.aggregate("MEAN", values).tolist() == [3.0, 5.0]
    assert ns.aggregate("ONLY_FIRST_REPLICA", values).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="NONE has no aggregate"):
        ns.aggregate("NONE", values)
    assert ns.on_write_reference("MEAN", "assign_add", np.array([5.0, 5.0]), values).tolist() == [8.0, 10.0]
    assert ns.on_write_reference("SUM", "assign", np.zeros(2), values).tolist() == [9.0, 15.0]
    assert [v.tolist() for v in ns.on_read_cross_assign_reference("SUM", np.array([6.0]), 3)] == [[2.0]] * 3
    with pytest.raises(AssertionError, match="cross-replica read is the SUM"):
        ns._exact_or_mean(ns.aggregate("MEAN", values), ns.aggregate("SUM", values), "SUM", 3,
                          "cross-replica read is the SUM")
    with pytest.raises(AssertionError, match="replica 1 copy"):
        ns._exact_or_mean(ns.aggregate("SUM", values), ns.aggregate("MEAN", values), "MEAN", 3, "replica 1 copy")


def test_pairwise_covers_every_pair():
    rows = ns.DDP_ROWS
    for a, b in [("sync", "init_sync"), ("sync", "momentum"), ("momentum", "ranks"), ("init_sync", "input")]:
        have = {(r[a], r[b]) for r in rows}
        assert have == {(x, y) for x in ns.DDP_FACTORS[a] for y in ns.DDP_FACTORS[b]}
