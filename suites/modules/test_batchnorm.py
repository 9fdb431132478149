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

from pytest_dlconform.api import assert_close, assert_equal, budget, evidence, tolerance
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
        "momentum": draw(st.floats(0.01, 0.99)),
        "eps": draw(st.sampled_from([1e-5, 1e-3, 0.1])),
        "affine": draw(st.booleans()),
        "steps": draw(st.integers(1, 3)),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def torch_layer(torch, case, *, track: bool = True):
    """The documented layer for a case (BatchNorm2d for 4-d inputs), with generated affine weights."""
    cls = torch.nn.BatchNorm2d if case["kind"] == "2d" else torch.nn.BatchNorm1d
    layer = cls(case["shape"][1], eps=case["eps"], momentum=case["momentum"], affine=case["affine"],
                track_running_stats=track)
    if case["affine"]:
        rng = np.random.default_rng(case["seed"] + 7)
        with torch.no_grad():
            layer.weight.copy_(torch.tensor(rng.uniform(0.5, 2, case["shape"][1])))
            layer.bias.copy_(torch.tensor(rng.uniform(-1, 1, case["shape"][1])))
    return layer


def _affine(layer) -> tuple[np.ndarray | None, np.ndarray | None]:
    if getattr(layer, "weight", None) is None:
        return None, None
    return host(layer.weight.double()), host(layer.bias.double())


def _assert_batch_statistics_output(torch, layer, x: np.ndarray, eps: float, what: str) -> None:
    __tracebackhide__ = True
    gamma, beta = _affine(layer)
    mean, var, _ = ref.bn_moments(x.astype(np.float64), 1)
    want = ref.bn_normalise(x.astype(np.float64), mean, var, eps, gamma, beta, 1)
    assert_close(host(layer(torch.tensor(x))), want, _tol(x, 1, var, eps, gamma), what=what)


def check_torch_tracking(torch, layer, case) -> None:
    """train() x track_running_stats=True: batch statistics out, running statistics updated
    ((1 - m) * running + m * batch, unbiased variance; momentum=None the cumulative average,
    counted by num_batches_tracked); eval(): the running statistics, nothing updated; back
    in train() the averages continue from where they were."""
    __tracebackhide__ = True
    rng = np.random.default_rng(case["seed"])
    momentum, eps = layer.momentum, case["eps"]
    state = ref.BatchNormState(np.zeros(case["shape"][1]), np.ones(case["shape"][1]))
    batches = _batches(rng, case["steps"] + 2, case["shape"], 1)
    train, probe, last = batches[: case["steps"]], batches[-2], batches[-1]

    def train_step(i: int, x: np.ndarray) -> None:
        nonlocal state
        _assert_batch_statistics_output(torch, layer, x, eps, f"training output, step {i} (batch mean, biased variance)")
        mean, var, count = ref.bn_moments(x.astype(np.float64), 1)
        state = ref.torch_running_update(state, mean, var, count, momentum)

    def assert_running(steps: list[np.ndarray], what: str) -> None:
        tol = _running_tol(steps, 1, len(steps))
        assert_close(host(layer.running_mean), state.mean, tol, what=f"running_mean {what}")
        assert_close(host(layer.running_var), state.var, tol,
                     what=f"running_var {what} (unbiased batch variance, momentum={momentum})")
        assert int(layer.num_batches_tracked) == len(steps), (
            f"num_batches_tracked {int(layer.num_batches_tracked)}, but should be {len(steps)}")

    layer.train()
    for i, x in enumerate(train):
        train_step(i, x)
    assert_running(train, "after training steps")
    layer.eval()
    before = (host(layer.running_mean).copy(), host(layer.running_var).copy())
    gamma, beta = _affine(layer)
    running = (host(layer.running_mean.double()), host(layer.running_var.double()))
    want = ref.bn_normalise(probe.astype(np.float64), *running, eps, gamma, beta, 1)
    assert_close(host(layer(torch.tensor(probe))), want, _tol(probe, 1, running[1], eps, gamma, reduction=1),
                 what="eval() output (running statistics)")
    assert_equal(host(layer.running_mean), before[0], what="running_mean unchanged in eval()")
    assert_equal(host(layer.running_var), before[1], what="running_var unchanged in eval()")
    layer.train()
    train_step(len(train), last)
    assert_running([*train, last], "after eval() and one more training step")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("momentum", ["float", "None"])
@budget(8)
@given(case=torch_cases())
def test_torch_batchnorm_training_and_inference(torch, momentum, case):
    case = {**case, "momentum": None if momentum == "None" else case["momentum"]}
    check_torch_tracking(torch, torch_layer(torch, case), case)
    evidence.covers("torch.train+track_running_stats", "torch.eval+track_running_stats", f"torch.momentum={momentum}")
    evidence.covers(f"torch.affine={case['affine']}")


def check_torch_untracked(torch, layer, case, phase: str) -> None:
    """track_running_stats=False: no running buffers, batch statistics in train() and eval()."""
    __tracebackhide__ = True
    assert layer.running_mean is None and layer.running_var is None, (
        "track_running_stats=False: running_mean and running_var should be None")
    getattr(layer, phase)()
    for i, x in enumerate(_batches(np.random.default_rng(case["seed"]), 2, case["shape"], 1)):
        _assert_batch_statistics_output(torch, layer, x, case["eps"],
                                        f"{phase}() output without running stats, call {i} (batch statistics)")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("phase", ["train", "eval"])
@budget(5)
@given(case=torch_cases(), none=st.booleans())
def test_torch_batchnorm_without_running_stats_uses_batch_statistics(torch, phase, case, none):
    case = {**case, "momentum": None if none else case["momentum"]}
    check_torch_untracked(torch, torch_layer(torch, case, track=False), case, phase)
    evidence.covers(f"torch.{phase}-track_running_stats")


@pytest.mark.claim(CLAIM)
def test_torch_batchnorm_single_value_per_channel_raises(torch):
    layer = torch.nn.BatchNorm1d(3)
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, got input size "
                                         r"torch\.Size\(\[1, 3\]\)"):
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


KERAS_MODES = ("training=True", "training=False", "training=None", "trainable=False+training=True",
               "trainable=False+training=False", "nested-trainable=False", "mask")


def keras_layer(keras, case):
    """The layer of a case, built, with generated gamma and beta."""
    shape, axis = case["shape"], case["axis"] % len(case["shape"])
    layer = keras.layers.BatchNormalization(axis=case["axis"], momentum=case["momentum"], epsilon=case["eps"],
                                            center=case["center"], scale=case["scale"])
    layer.build(shape)
    rng = np.random.default_rng(case["seed"] + 7)
    if case["scale"]:
        layer.gamma.assign(rng.uniform(0.5, 2, shape[axis]).astype(np.float32))
    if case["center"]:
        layer.beta.assign(rng.uniform(-1, 1, shape[axis]).astype(np.float32))
    return layer


def _keras_affine(layer) -> tuple[np.ndarray | None, np.ndarray | None]:
    gamma = np.asarray(layer.gamma, np.float64) if layer.scale else None
    beta = np.asarray(layer.beta, np.float64) if layer.center else None
    return gamma, beta


def _masked_moments(x: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and biased variance over the positions the mask keeps (channels last)."""
    m = mask[..., None].astype(np.float64)
    axes = tuple(range(x.ndim - 1))
    mean = (x * m).sum(axes) / m.sum(axes)
    return mean, (((x - mean) ** 2) * m).sum(axes) / m.sum(axes)


def check_keras_mode(keras, layer, case, mode: str) -> None:
    """One documented (trainable, training) combination of keras BatchNormalization.

    training=True: batch statistics, moving = momentum * moving + (1 - momentum) * batch (the
    biased variance); training=False and the default (training=None, a direct call): the moving
    statistics, no update; trainable=False ("freezing") runs the layer in inference mode even with
    training=True, also when set on an enclosing model; mask: the statistics of the kept positions.
    """
    __tracebackhide__ = True
    axis = case["axis"] % len(case["shape"])
    rng = np.random.default_rng(case["seed"])
    x = _batches(rng, 1, case["shape"], axis)[0]
    x64 = x.astype(np.float64)
    # Moving statistics away from their initial (0, 1), so inference and training differ.
    c = case["shape"][axis]
    layer.moving_mean.assign(rng.uniform(-2, 2, c).astype(np.float32))
    layer.moving_variance.assign(rng.uniform(0.5, 3, c).astype(np.float32))
    moving = (np.asarray(layer.moving_mean, np.float64), np.asarray(layer.moving_variance, np.float64))
    gamma, beta = _keras_affine(layer)
    call = layer
    if mode.startswith("trainable=False"):
        layer.trainable = False
    elif mode == "nested-trainable=False":
        model = keras.Sequential([keras.Input(case["shape"][1:]), layer])
        model.trainable = False  # documented: recursively sets trainable on every inner layer
        call = model
    training = {"training=True": True, "training=False": False, "training=None": None, "mask": True,
                "trainable=False+training=True": True, "trainable=False+training=False": False,
                "nested-trainable=False": True}[mode]
    kwargs = {} if training is None else {"training": training}
    mask = None
    if mode == "mask":
        mask = rng.random(x.shape[:-1]) < 0.7
        mask.flat[0] = True  # at least one kept position per channel
        kwargs["mask"] = mask
    y = np.asarray(call(x, **kwargs))
    if training and mode in ("training=True", "mask"):
        mean, var = _masked_moments(x64, mask) if mask is not None else ref.bn_moments(x64, axis)[:2]
        assert_close(y, ref.bn_normalise(x64, mean, var, case["eps"], gamma, beta, axis),
                     _tol(x, axis, var, case["eps"], gamma), what=f"{mode}: output (batch statistics)")
        state = ref.keras_moving_update(ref.BatchNormState(*moving), mean, var, case["momentum"])
        tol = _running_tol([x], axis, 1)
        assert_close(np.asarray(layer.moving_mean), state.mean, tol, what=f"{mode}: moving_mean")
        assert_close(np.asarray(layer.moving_variance), state.var, tol, what=f"{mode}: moving_variance (biased)")
        return
    want = ref.bn_normalise(x64, *moving, case["eps"], gamma, beta, axis)
    assert_close(y, want, _tol(x, axis, moving[1], case["eps"], gamma, reduction=1),
                 what=f"{mode}: output (moving statistics: inference mode)")
    assert_equal(np.asarray(layer.moving_mean, np.float64), moving[0], what=f"{mode}: moving_mean unchanged")
    assert_equal(np.asarray(layer.moving_variance, np.float64), moving[1], what=f"{mode}: moving_variance unchanged")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("mode", KERAS_MODES)
@budget(3)
@given(case=keras_cases())
def test_keras_batchnorm_training_and_inference(tf, mode, case):
    import keras

    if mode == "mask":
        case = {**case, "axis": -1}  # the mask has one dimension less than the inputs (channels last)
    check_keras_mode(keras, keras_layer(keras, case), case, mode)
    evidence.covers(f"keras.{mode}")
    evidence.covers(*(f"keras.{k}=False" for k in ("center", "scale") if not case[k]))


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("trainable", [True, False])
@budget(1)
@given(case=keras_cases())
def test_keras_batchnorm_in_fit_and_predict(tf, trainable, case):
    """fit() runs the layer in training mode (moving statistics updated, gamma/beta trained) unless
    trainable=False, which freezes it: fit() then updates neither; predict() is inference."""
    import keras

    case = {**case, "center": True, "scale": True}
    layer = keras_layer(keras, case)
    layer.trainable = trainable
    model = keras.Sequential([keras.Input(case["shape"][1:]), layer])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    axis = case["axis"] % len(case["shape"])
    rng = np.random.default_rng(case["seed"])
    x = _batches(rng, 1, case["shape"], axis)[0]
    y = rng.normal(size=x.shape).astype(np.float32)
    weights = [w.copy() for w in model.get_weights()]  # gamma, beta, moving mean, moving variance
    model.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    after = model.get_weights()
    if trainable:
        mean, var, _ = ref.bn_moments(x.astype(np.float64), axis)
        state = ref.keras_moving_update(ref.BatchNormState(weights[2], weights[3]), mean, var, case["momentum"])
        tol = _running_tol([x], axis, 1)
        assert_close(after[2], state.mean, tol, what="fit(): moving_mean after one step")
        assert_close(after[3], state.var, tol, what="fit(): moving_variance after one step")
        assert any(not np.array_equal(a, b) for a, b in zip(after[:2], weights[:2])), "fit() did not train gamma/beta"
    else:
        for name, a, b in zip(("gamma", "beta", "moving_mean", "moving_variance"), after, weights):
            assert_equal(a, b, what=f"trainable=False: {name} unchanged by fit()")
    moving = (after[2].astype(np.float64), after[3].astype(np.float64))
    want = ref.bn_normalise(x.astype(np.float64), *moving, case["eps"], after[0].astype(np.float64),
                            after[1].astype(np.float64), axis)
    assert_close(model.predict(x, verbose=0), want,
                 _tol(x, axis, moving[1], case["eps"], after[0].astype(np.float64), reduction=1),
                 what="predict(): moving statistics")
    evidence.covers("keras.fit" if trainable else "keras.trainable=False+fit", "keras.predict")
