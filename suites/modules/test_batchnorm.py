"""modules.batchnorm: batch statistics in training (and their running averages), running
statistics in inference, for torch BatchNorm1d/2d and Keras BatchNormalization.

Oracle: the documented formulas in float64 numpy (checks/module_references.py). The layers compute in
float32: a per-channel mean and variance over m values, a normalisation of a few
elementwise operations, hence tolerance(float32, ops=8, reduction=m).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, assert_equal, budget, tolerance
from pytest_dlconform.api import module_references as ref

from ._host import host

CLAIM = "modules.batchnorm"


def _batches(rng: np.random.Generator, steps: int, shape: tuple[int, ...], channel_axis: int) -> list[np.ndarray]:
    """Batches with a per-channel offset and scale, so the statistics are far from (0, 1)."""
    c = shape[channel_axis]
    bshape = [1] * len(shape)
    bshape[channel_axis] = c
    loc, scale = rng.uniform(-3, 3, c).reshape(bshape), rng.uniform(0.5, 3, c).reshape(bshape)
    return [(loc + scale * rng.normal(size=shape)).astype(np.float32) for _ in range(steps)]


def _tol(x: np.ndarray, channel_axis: int, var: np.ndarray, eps: float, gamma: np.ndarray | None = None,
         reduction: int | None = None):
    """Output ``gamma * (x - mean) / sqrt(var + eps) + beta`` in float32.

    Centring cancels: ``x - mean`` carries an absolute error of u * |x| however small it is, and
    the normalisation divides that by ``sqrt(var + eps)``. So the output's error is relative to
    the magnitude ``|gamma| * max|x| / sqrt(var + eps)`` per channel (large when a channel's
    values nearly coincide and eps dominates its variance), not to the output's own size.
    ``reduction``: the statistics' terms (n for batch statistics, 1 for running ones).
    """
    axes = tuple(i for i in range(x.ndim) if i != channel_axis % x.ndim)
    shape = [1] * x.ndim
    shape[channel_axis % x.ndim] = x.shape[channel_axis]
    g = np.ones(shape) if gamma is None else np.abs(np.asarray(gamma, np.float64)).reshape(shape)
    scale = np.sqrt(np.asarray(var, np.float64).reshape(shape) + eps)
    magnitude = float(np.max(g * np.max(np.abs(x.astype(np.float64)), axis=axes, keepdims=True) / scale))
    n = x.size // x.shape[channel_axis] if reduction is None else reduction
    return tolerance("float32", ops=8, reduction=n, magnitude=magnitude)


def _running_tol(batches: list[np.ndarray], channel_axis: int, steps: int):
    """Running statistics after ``steps`` updates ``(1 - m) * old + m * batch statistic``.

    Each batch statistic is a reduction over the channel's values: its rounding error is
    ``gamma_n * mean|x|`` for the mean and at most ``gamma_n * mean(x**2)`` for the variance
    (the two-pass and the E[x^2] - E[x]^2 forms alike), which stays when a channel centred
    near 0 makes the mean itself small. The updates round relative to their terms, which
    include the initial statistics (0, 1). So: ops 4 per step, reduction n, and the
    magnitude of the intermediates max(1, mean|x|, mean x^2) over channels and batches.
    """
    n = batches[0].size // batches[0].shape[channel_axis]
    axes = tuple(i for i in range(batches[0].ndim) if i != channel_axis)
    terms = max(max(float(np.max(np.mean(np.abs(b.astype(np.float64)), axis=axes))),
                    float(np.max(np.mean(b.astype(np.float64) ** 2, axis=axes)))) for b in batches)
    return tolerance("float32", ops=4 * steps, reduction=n, magnitude=max(1.0, terms))


@st.composite
def torch_cases(draw):
    kind = draw(st.sampled_from(["1d-flat", "1d-seq", "2d"]))
    n = draw(st.integers(2, 6))
    c = draw(st.integers(1, 5))
    spatial = {"1d-flat": (), "1d-seq": (draw(st.integers(1, 4)),),
               "2d": (draw(st.integers(1, 3)), draw(st.integers(1, 3)))}[kind]
    return {
        "kind": kind, "shape": (n, c, *spatial),
        "momentum": draw(st.one_of(st.none(), st.floats(0.01, 0.99))),
        "eps": draw(st.sampled_from([1e-5, 1e-3, 0.1])),
        "affine": draw(st.booleans()),
        "steps": draw(st.integers(1, 3)),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


@pytest.mark.claim(CLAIM)
@budget(15)
@given(case=torch_cases())
def test_torch_batchnorm_training_and_inference(torch, case):
    rng = np.random.default_rng(case["seed"])
    shape, c = case["shape"], case["shape"][1]
    cls = torch.nn.BatchNorm2d if case["kind"] == "2d" else torch.nn.BatchNorm1d
    layer = cls(c, eps=case["eps"], momentum=case["momentum"], affine=case["affine"])
    gamma = beta = None
    if case["affine"]:
        gamma, beta = rng.uniform(0.5, 2, c), rng.uniform(-1, 1, c)
        with torch.no_grad():
            layer.weight.copy_(torch.tensor(gamma)), layer.bias.copy_(torch.tensor(beta))
        gamma, beta = host(layer.weight.double()), host(layer.bias.double())
    state = ref.BatchNormState(np.zeros(c), np.ones(c))
    batches = _batches(rng, case["steps"] + 1, shape, 1)
    for i, x in enumerate(batches[:-1]):
        y = host(layer(torch.tensor(x)))
        mean, var, count = ref.bn_moments(x.astype(np.float64), 1)
        want = ref.bn_normalise(x.astype(np.float64), mean, var, case["eps"], gamma, beta, 1)
        assert_close(y, want, _tol(x, 1, var, case["eps"], gamma),
                     what=f"training output, step {i} (batch mean, biased variance)")
        state = ref.torch_running_update(state, mean, var, count, case["momentum"])
    tol = _running_tol(batches[:-1], 1, case["steps"])
    assert_close(host(layer.running_mean), state.mean, tol, what="running_mean after training steps")
    assert_close(host(layer.running_var), state.var, tol, what="running_var (unbiased batch variance averaged)")
    assert int(layer.num_batches_tracked) == case["steps"], (
        f"num_batches_tracked {int(layer.num_batches_tracked)}, but should be {case['steps']}")
    layer.eval()
    x = batches[-1]
    before = layer.running_mean.clone()
    y = host(layer(torch.tensor(x)))
    want = ref.bn_normalise(x.astype(np.float64), host(layer.running_mean.double()), host(layer.running_var.double()),
                            case["eps"], gamma, beta, 1)
    assert_close(y, want, _tol(x, 1, host(layer.running_var.double()), case["eps"], gamma, reduction=1),
                 what="inference output (running statistics)")
    assert_equal(host(layer.running_mean), host(before), what="running_mean unchanged by inference")


@pytest.mark.claim(CLAIM)
@budget(8)
@given(n=st.integers(2, 6), c=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_torch_batchnorm_without_running_stats_uses_batch_statistics(torch, n, c, seed):
    x = _batches(np.random.default_rng(seed), 1, (n, c), 1)[0]
    layer = torch.nn.BatchNorm1d(c, track_running_stats=False, affine=False).eval()
    assert layer.running_mean is None and layer.running_var is None
    mean, var, _ = ref.bn_moments(x.astype(np.float64), 1)
    want = ref.bn_normalise(x.astype(np.float64), mean, var, layer.eps, None, None, 1)
    assert_close(host(layer(torch.tensor(x))), want, _tol(x, 1, var, layer.eps), what="eval() output without running stats")


@pytest.mark.claim(CLAIM)
def test_torch_batchnorm_single_value_per_channel_raises(torch):
    layer = torch.nn.BatchNorm1d(3)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        layer(torch.ones(1, 3))
    layer.eval()
    # In eval mode the running statistics are used, so a single sample is fine.
    assert_close(host(layer(torch.ones(1, 3))), np.full((1, 3), 1 / np.sqrt(1 + layer.eps)),
                 tolerance("float32", ops=4), what="eval output of one sample with initial running stats (0, 1)")


@st.composite
def keras_cases(draw):
    rank = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(2 if i == 0 else 1, 4)) for i in range(rank))
    return {
        "shape": shape,
        "axis": draw(st.sampled_from([-1, 1])) if rank > 2 else -1,
        "momentum": draw(st.floats(0.0, 0.99)),
        "eps": draw(st.sampled_from([1e-3, 1e-5, 0.1])),
        "center": draw(st.booleans()),
        "scale": draw(st.booleans()),
        "steps": draw(st.integers(1, 3)),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


@pytest.mark.claim(CLAIM)
@budget(10)
@given(case=keras_cases())
def test_keras_batchnorm_training_and_inference(tf, case):
    import keras

    rng = np.random.default_rng(case["seed"])
    shape, axis = case["shape"], case["axis"] % len(case["shape"])
    c = shape[axis]
    layer = keras.layers.BatchNormalization(axis=case["axis"], momentum=case["momentum"], epsilon=case["eps"],
                                            center=case["center"], scale=case["scale"])
    layer.build(shape)
    gamma = rng.uniform(0.5, 2, c).astype(np.float32) if case["scale"] else None
    beta = rng.uniform(-1, 1, c).astype(np.float32) if case["center"] else None
    if gamma is not None:
        layer.gamma.assign(gamma)
    if beta is not None:
        layer.beta.assign(beta)
    state = ref.BatchNormState(np.zeros(c), np.ones(c))
    batches = _batches(rng, case["steps"] + 1, shape, axis)
    g64 = None if gamma is None else gamma.astype(np.float64)
    b64 = None if beta is None else beta.astype(np.float64)
    for i, x in enumerate(batches[:-1]):
        y = np.asarray(layer(x, training=True))
        mean, var, _ = ref.bn_moments(x.astype(np.float64), axis)
        assert_close(y, ref.bn_normalise(x.astype(np.float64), mean, var, case["eps"], g64, b64, axis),
                     _tol(x, axis, var, case["eps"], g64),
                     what=f"training output, step {i}")
        state = ref.keras_moving_update(state, mean, var, case["momentum"])
    tol = _running_tol(batches[:-1], axis, case["steps"])
    assert_close(np.asarray(layer.moving_mean), state.mean, tol, what="moving_mean")
    assert_close(np.asarray(layer.moving_variance), state.var, tol, what="moving_variance")
    x = batches[-1]
    moving = (np.asarray(layer.moving_mean, np.float64), np.asarray(layer.moving_variance, np.float64))
    want = ref.bn_normalise(x.astype(np.float64), *moving, case["eps"], g64, b64, axis)
    inference = _tol(x, axis, moving[1], case["eps"], g64, reduction=1)
    assert_close(np.asarray(layer(x)), want, inference, what="inference output (default training=False)")
    # trainable=False: documented to run in inference mode even with training=True, and not update.
    layer.trainable = False
    assert_close(np.asarray(layer(x, training=True)), want, inference,
                 what="trainable=False layer called with training=True")
    assert_equal(np.asarray(layer.moving_mean, np.float64), moving[0], what="moving_mean unchanged when frozen")
