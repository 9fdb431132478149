"""Meta-tests for the data-pipeline oracles (checks/pipelines.py) and the modules suites'
float64 references (checks/module_references.py): each passes a right implementation and
fails a deliberately wrong one with a message a person can act on.

numpy only, except the last test, which plants wrong dropout layers in torch.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.checks import module_references as ref
from pytest_dlconform.checks.numerics import ToleranceExceeded, assert_close, tolerance
from pytest_dlconform.checks.pipelines import (
    PipelineMismatch,
    assert_batches_equal,
    assert_buffered_shuffle,
    assert_partition,
    assert_permutation,
    assert_worker_seeds,
    reference_batches,
    same_order_bound,
)

# ------------------------------------------------------------------ pipelines


def loader(x: np.ndarray, batch: int, drop: bool, *, lose_last: bool = False, swap: bool = False) -> list[np.ndarray]:
    """A reference batching loop with planted faults."""
    out = [x[i: i + batch] for i in range(0, len(x), batch)]
    if drop and out and len(out[-1]) < batch:
        out.pop()
    if lose_last and out:
        out.pop()
    if swap and len(out) > 1:
        out[0], out[1] = out[1], out[0]
    return out


def test_reference_batches_sizes():
    assert [len(b) for b in reference_batches(10, 3, False)] == [3, 3, 3, 1]
    assert [len(b) for b in reference_batches(10, 3, True)] == [3, 3, 3]
    assert reference_batches(0, 3, False) == []


def test_batches_pass_a_right_loader_and_fail_wrong_ones():
    x = np.arange(20).reshape(10, 2)
    want = [x[idx] for idx in reference_batches(10, 3, False)]
    assert_batches_equal(loader(x, 3, False), want, what="loader")
    with pytest.raises(PipelineMismatch, match=r"loader: 3 batches \(sizes \[3, 3, 3\]\), but should be 4"):
        assert_batches_equal(loader(x, 3, False, lose_last=True), want, what="loader")
    with pytest.raises(PipelineMismatch, match=r"batch 0 differs at index \(0, 0\): 6, but should be 0"):
        assert_batches_equal(loader(x, 3, False, swap=True), want, what="loader")
    with pytest.raises(PipelineMismatch,
                       match=r"batch 0 has shape \(3, 2\), dtype float64, but should have shape \(3, 2\), dtype int64"):
        assert_batches_equal([b.astype(float) for b in loader(x, 3, False)], want, what="loader")


def test_permutation_names_missing_and_extra():
    assert_permutation([3, 1, 2], [1, 2, 3], what="p")
    with pytest.raises(PipelineMismatch, match=r"missing \{3: 1\}, extra \{1: 1\}"):
        assert_permutation([1, 1, 2], [1, 2, 3], what="p")


def buffered_shuffle(n: int, buffer: int, rng: np.random.Generator) -> list[int]:
    pool, out, nxt = list(range(min(buffer, n))), [], min(buffer, n)
    while pool:
        out.append(pool.pop(int(rng.integers(len(pool)))))
        if nxt < n:
            pool.append(nxt)
            nxt += 1
    return out


def test_buffered_shuffle_passes_a_buffer_and_fails_a_full_shuffle():
    rng = np.random.default_rng(0)
    for _ in range(200):
        assert_buffered_shuffle(buffered_shuffle(30, 4, rng), 30, 4, what="buffer 4")
    full = list(np.random.default_rng(1).permutation(30))  # a global shuffle ignores the buffer
    with pytest.raises(PipelineMismatch, match=r"output \d+ is input \d+, but a buffer of 4 only holds inputs"):
        assert_buffered_shuffle(full, 30, 4, what="buffer 4")
    assert_buffered_shuffle(list(range(5)), 5, 1, what="buffer 1 keeps the order")


def test_same_order_bound_is_an_upper_bound():
    assert same_order_bound(5, 1) == 1.0
    # two independent buffered shuffles of 6 with buffer 2: estimate the repeat rate
    rng = np.random.default_rng(2)
    trials = 20000
    repeats = sum(buffered_shuffle(6, 2, rng) == buffered_shuffle(6, 2, rng) for _ in range(trials))
    assert repeats / trials <= same_order_bound(6, 2) * 1.5 + 0.005
    assert same_order_bound(21, 2) <= 1e-6


def test_worker_seeds_pass_base_plus_id_and_fail_duplicates():
    assert assert_worker_seeds({0: 100, 1: 101, 2: 102}, what="seeds") == 100
    with pytest.raises(PipelineMismatch, match=r"worker seeds \[7, 7\], but should be base_seed \+ worker_id"):
        assert_worker_seeds({0: 7, 1: 7}, what="seeds")
    with pytest.raises(PipelineMismatch, match="with base_seed 5"):
        assert_worker_seeds({0: 6, 1: 7}, 5, what="seeds")


def test_partition_counts_copies():
    assert_partition([[0, 2], [1, 3]], 4, what="shards")
    with pytest.raises(PipelineMismatch, match=r"missing \{3: 1\}"):
        assert_partition([[0, 2], [1, 1]], 4, what="shards")
    assert_partition([[0, 1, 0, 1]], 2, copies=2, what="replicas")


# ------------------------------------------------------------------ modules references


def test_batchnorm_reference_catches_wrong_conventions():
    rng = np.random.default_rng(3)
    x = rng.normal(2.0, 3.0, (8, 4))
    mean, var, count = ref.bn_moments(x, 1)
    state = ref.torch_running_update(ref.BatchNormState(np.zeros(4), np.ones(4)), mean, var, count, 0.1)
    right_var = 0.9 + 0.1 * x.var(axis=0, ddof=1)
    assert_close(state.var, right_var, tolerance("float64"), what="torch running_var")
    biased = 0.9 + 0.1 * x.var(axis=0)  # a layer that averages the biased variance
    with pytest.raises(ToleranceExceeded, match="running_var"):
        assert_close(biased, state.var, tolerance("float32", ops=4), what="running_var")
    swapped = ref.keras_moving_update(ref.BatchNormState(np.zeros(4), np.ones(4)), mean, var, 0.99)
    wrong_momentum = 0.99 * mean  # momentum applied to the batch instead of the average
    with pytest.raises(ToleranceExceeded, match="moving_mean"):
        assert_close(wrong_momentum, swapped.mean, tolerance("float32", ops=4), what="moving_mean")
    y = ref.bn_normalise(x, mean, var, 1e-5, None, None, 1)
    np.testing.assert_allclose(y.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=0), var / (var + 1e-5), rtol=1e-12)


def test_early_stopping_reference_follows_the_documented_examples():
    # keras docstring: patience=3 on a loss that stops improving after the first epoch -> 4 epochs
    assert ref.early_stopping([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], patience=3).epochs_run == 4
    assert ref.early_stopping([5, 4, 3, 2, 1], patience=0).epochs_run == 5  # always improving: never stops
    assert ref.early_stopping([5, 4, 4, 4], patience=0).epochs_run == 3
    assert ref.early_stopping([5, 4.9, 4.8, 4.7], patience=1, min_delta=0.5).epochs_run == 2
    assert ref.early_stopping([1, 2, 3, 0], patience=2, mode="max").epochs_run == 4
    assert ref.early_stopping([9, 9, 9, 9, 9], patience=1, start_from_epoch=2).epochs_run == 4
    out = ref.early_stopping([3, 1, 2, 2, 2], patience=2)
    assert (out.epochs_run, out.best_epoch, out.stopped) == (4, 1, True)


def off_by_one_early_stopping(values, patience):
    """A wrong rule: waits one epoch longer than patience."""
    return ref.early_stopping(values, patience=patience + 1)


def test_early_stopping_reference_tells_an_off_by_one_rule_apart():
    values = [3.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    assert off_by_one_early_stopping(values, 2).epochs_run != ref.early_stopping(values, patience=2).epochs_run


def test_generator_reference_matches_a_direct_evaluation():
    rng = np.random.default_rng(4)
    z, w1, b1, w2, b2 = (rng.normal(size=s) for s in [(3, 5), (128, 5), (128,), (784, 128), (784,)])
    out = ref.generator_forward(z, w1, b1, w2, b2)
    assert out.shape == (3, 1, 28, 28) and np.all(np.abs(out) <= 1)
    pre = ref.generator_forward(z, w1, b1, w2, b2, activation=False)
    np.testing.assert_array_equal(np.tanh(pre), out)
    with pytest.raises(ToleranceExceeded, match="generator"):  # a generator that forgot the ReLU
        assert_close(np.tanh((z @ w1.T + b1) @ w2.T + b2).reshape(-1, 1, 28, 28), out, tolerance("float32"), what="generator")


def test_dropout_oracle_fails_planted_torch_layers():
    torch = pytest.importorskip("torch")
    from pytest_dlconform.checks.stats import StatisticalViolation, check_dropout, dropout_elements

    p = 0.5
    rng = np.random.default_rng(5)
    x = (rng.uniform(1, 2, dropout_elements(p, calls=1)) * rng.choice([-1, 1], dropout_elements(p, calls=1))).astype(np.float32)
    xt = torch.tensor(x)
    torch.manual_seed(0)
    check_dropout(x, [torch.nn.functional.dropout(xt, p).numpy()], p, roundoff=2.0**-24)  # the real one passes
    wrong_rate = torch.nn.functional.dropout(xt, p * 1.02) * (1 - p * 1.02) / (1 - p)  # right scale, wrong rate
    with pytest.raises(StatisticalViolation, match="zeros in call 0"):
        check_dropout(x, [wrong_rate.numpy()], p, roundoff=2.0**-24)
    wrong_scale = torch.nn.functional.dropout(xt, p) * 1.02
    with pytest.raises(StatisticalViolation, match="kept values scaled"):
        check_dropout(x, [wrong_scale.numpy()], p, roundoff=2.0**-24)
