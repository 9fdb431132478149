"""modules.dropout: training zeroes each element with probability p and scales the rest by
1/(1-p); inference is the identity (torch nn.Dropout / F.dropout / Dropout2d, Keras Dropout).

Counts are judged by exact binomial bounds (checks/stats.py) with a false-alarm probability
of at most 1e-6 per test; each tensor is large enough (stats.trials_for) that a rate off by
2% of p fails with probability >= 1 - 1e-6. The power reached is recorded as evidence.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import TEST_ALPHA, UNIT_ROUNDOFF, assert_equal, budget, check_dropout, dropout_elements, evidence

from ._host import host

CLAIM = "modules.dropout"
# p values at both ends and the middle; "drawn" takes one from the test seed.
RATES = [0.1, 0.5, 0.9, "drawn"]


def _rate(case: float | str, seed: int) -> float:
    return float(np.random.default_rng(seed).uniform(0.1, 0.9)) if case == "drawn" else float(case)


def _nonzero_input(n: int, seed: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Magnitudes in [1, 2) with random signs: no zero can be mistaken for a dropped element."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n)
    return x.reshape(shape) if shape else x


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("case", RATES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_dropout_training_zeroes_binomially_and_scales(torch, dl_seed, case, dtype):
    p = _rate(case, dl_seed)
    x = _nonzero_input(dropout_elements(p, calls=2), dl_seed).astype(dtype)
    xt = torch.tensor(x)  # on the test's device (torch.tensor follows the default device)
    layer = torch.nn.Dropout(p)  # a new module is in training mode
    assert layer.training
    # F.dropout's default is training=True (unlike the module, it does not follow .eval()).
    outs = [layer(xt), torch.nn.functional.dropout(xt, p)]
    check_dropout(x, [host(o) for o in outs], p, roundoff=UNIT_ROUNDOFF[dtype], alpha=TEST_ALPHA, what="torch dropout")
    evidence.covers("torch.module-train", "torch.F.dropout-default-training")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("case", [0.3, "drawn"])
def test_torch_dropout_gradient_uses_the_same_mask(torch, dl_seed, case):
    """The backward pass multiplies the incoming gradient by the forward mask and scale."""
    p = _rate(case, dl_seed)
    x = _nonzero_input(dropout_elements(p, calls=1), dl_seed)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.dropout(xt, p, training=True)
    (grad,) = torch.autograd.grad(y.sum(), xt)
    # y = x * g elementwise with g the scaled mask: y / x recovers the mask exactly where
    # dropped (0) and within the rounding of the scale 1/(1-p) and of the product where kept
    # (stats.dropout_scale_bound), as does the gradient.
    kept = host(y) != 0
    assert_equal(host(grad) == 0, ~kept, what="gradient zero exactly where the output was dropped")
    check_dropout(np.ones_like(x), [host(grad)], p, roundoff=UNIT_ROUNDOFF["float64"], what="torch dropout gradient")
    evidence.covers("torch.backward-mask")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("case", [0.2, "drawn"])
def test_torch_dropout2d_drops_whole_channels(torch, dl_seed, case):
    p = _rate(case, dl_seed)
    channels = dropout_elements(p, calls=2)
    # (N, C, H, W): the mask is (N, C, 1, 1), one draw per channel, so N*C counts toward power.
    shape = (-(-channels // 64), 64, 1, 2)
    x = _nonzero_input(int(np.prod(shape)), dl_seed, shape)
    layer = torch.nn.Dropout2d(p)
    x = x.astype(np.float32)
    outs = [host(layer(torch.tensor(x))) for _ in range(2)]
    check_dropout(x, outs, p, roundoff=UNIT_ROUNDOFF["float32"], mask_shape=(shape[0], shape[1], 1, 1), what="torch Dropout2d")
    evidence.covers("torch.Dropout2d")


@pytest.mark.claim(CLAIM)
@budget(10)
@given(data=st.data())
def test_torch_dropout_inference_is_identity(torch, data):
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4), label="shape"))
    p = data.draw(st.floats(0.0, 1.0), label="p")
    x = torch.tensor(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).normal(size=shape))
    layer = torch.nn.Dropout(p).eval()
    assert_equal(host(layer(x)), host(x), what=f"nn.Dropout({p}).eval() output")
    assert_equal(host(torch.nn.functional.dropout(x, p, training=False)), host(x), what="F.dropout(training=False)")
    # Edge rates in training mode: p=0 keeps everything unscaled, p=1 zeroes everything.
    assert_equal(host(torch.nn.functional.dropout(x, 0.0)), host(x), what="F.dropout(p=0) in training")
    assert_equal(host(torch.nn.functional.dropout(x, 1.0)), np.zeros(shape), what="F.dropout(p=1) in training")
    evidence.covers("torch.eval", "torch.F.dropout-training=False", "torch.p=0", "torch.p=1")


@pytest.mark.claim(CLAIM)
def test_torch_dropout_inplace_and_rate_validation(torch, dl_seed):
    x = torch.tensor(_nonzero_input(4096, dl_seed))
    before = x.clone()
    out = torch.nn.functional.dropout(x, 0.5, training=True, inplace=True)
    assert out.data_ptr() == x.data_ptr(), "inplace=True must return the input's storage"
    assert_equal(host(x == 0) | host(x == before * 2), np.ones(4096, bool), what="in-place result: zero or 2x")
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"dropout probability has to be between 0 and 1, but got -?\d"):
            torch.nn.Dropout(bad)
    evidence.covers("torch.inplace", "torch.rate-validation")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("case", RATES)
def test_keras_dropout_training_zeroes_binomially_and_scales(tf, dl_seed, case):
    import keras

    p = _rate(case, dl_seed)
    # Three checks share the test's false-alarm budget: a third each.
    alpha = TEST_ALPHA / 3
    x = _nonzero_input(dropout_elements(p, calls=2, alpha=alpha), dl_seed).astype(np.float32)
    layer = keras.layers.Dropout(p, seed=dl_seed % 2**31)
    xt = tf.constant(x)
    # Two calls of one layer: its seed generator advances, so each call draws a new mask.
    outs = [np.asarray(layer(xt, training=True)) for _ in range(2)]
    check_dropout(x, outs, p, roundoff=UNIT_ROUNDOFF["float32"], alpha=alpha, what="keras Dropout")
    evidence.covers("keras.training=True", "keras.seed")
    # tf.nn.dropout implements the same contract below Keras.
    check_dropout(x, [tf.nn.dropout(xt, p).numpy()], p, roundoff=UNIT_ROUNDOFF["float32"], alpha=alpha,
                  what="tf.nn.dropout")
    evidence.covers("tf.nn.dropout")
    # Documented: trainable does not affect Dropout (it has no weights to freeze); training=True drops.
    frozen = keras.layers.Dropout(p, seed=(dl_seed + 1) % 2**31)
    frozen.trainable = False
    check_dropout(x, [np.asarray(frozen(xt, training=True))], p, roundoff=UNIT_ROUNDOFF["float32"], alpha=alpha,
                  what="keras Dropout with trainable=False, training=True")
    evidence.covers("keras.trainable=False+training=True")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("case", [0.25, "drawn"])
def test_keras_dropout_noise_shape_broadcasts_the_mask(tf, dl_seed, case):
    import keras

    p = _rate(case, dl_seed)
    rows = -(-dropout_elements(p, calls=2) // 64)
    shape = (rows, 3, 64)
    x = _nonzero_input(int(np.prod(shape)), dl_seed, shape).astype(np.float32)
    layer = keras.layers.Dropout(p, noise_shape=(None, 1, 64), seed=dl_seed % 2**31)
    outs = [np.asarray(layer(x, training=True)) for _ in range(2)]
    check_dropout(x, outs, p, roundoff=UNIT_ROUNDOFF["float32"], mask_shape=(rows, 1, 64), what="keras Dropout noise_shape")
    evidence.covers("keras.noise_shape")


@pytest.mark.claim(CLAIM)
@budget(6)
@given(data=st.data())
def test_keras_dropout_inference_identity_and_seed(tf, data):
    import keras

    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3), label="shape"))
    p = data.draw(st.floats(0.0, 0.99), label="rate")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    layer = keras.layers.Dropout(p, seed=seed)
    assert_equal(np.asarray(layer(x)), x, what="Dropout called without training (the default is inference)")
    assert_equal(np.asarray(layer(x, training=False)), x, what="Dropout(training=False)")
    model = keras.Sequential([keras.Input(shape), keras.layers.Dropout(p)])
    assert_equal(model.predict(x[None], verbose=0)[0], x, what="model.predict runs Dropout in inference mode")
    # The same seed gives the same mask in two fresh layers (reproducibility).
    a = np.asarray(keras.layers.Dropout(p, seed=seed)(x, training=True))
    b = np.asarray(keras.layers.Dropout(p, seed=seed)(x, training=True))
    assert_equal(a, b, what=f"two Dropout({p}, seed={seed}) layers, first training call")
    with pytest.raises(ValueError, match=r"Invalid value received for argument `rate`\. Expected a float value between 0 and 1"):
        keras.layers.Dropout(1.5)
    evidence.covers("keras.training=None", "keras.training=False", "keras.predict", "keras.same-seed", "keras.rate-validation")
