"""modules.spectral-norm: the normalised weight's largest singular value is 1 after enough
power iterations, and never below 1 (torch parametrizations.spectral_norm, Keras
SpectralNormalization).

Oracle: numpy's SVD in float64. Weights are generated with a known spectrum whose
second singular value is at most half the first, so power iteration gains a factor 4 in
the error per step. From a random start, the relative error of the estimate after k
steps is about tan^2(theta) * 4^-k, theta the start's angle to the top singular vector;
with k >= 40 it exceeds the float32 bound only if cos^2(theta) < 1e-18, which for
dimension d <= 32 has probability below sqrt(2 d 1e-18 / pi) < 1e-8.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, assert_equal, budget, evidence, tolerance

from ._host import host

CLAIM = "modules.spectral-norm"
ITERATIONS = 40  # total power iterations before the convergence check (see above)


def _weight(rng: np.random.Generator, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """A rows x cols matrix with singular values s, s[1] <= s[0] / 2; returns (W, s)."""
    k = min(rows, cols)
    u, _ = np.linalg.qr(rng.normal(size=(rows, k)))
    v, _ = np.linalg.qr(rng.normal(size=(cols, k)))
    top = rng.uniform(0.2, 20.0)
    s = np.sort(np.concatenate(([top], rng.uniform(0.0, top / 2, k - 1))))[::-1]
    return (u * s) @ v.T, s


def _sigma_max(w: np.ndarray) -> float:
    return float(np.linalg.svd(np.asarray(w, np.float64).reshape(-1, np.shape(w)[-1]), compute_uv=False)[0])


def _sigma_tol(rows: int, cols: int, device: str, framework: str):
    # A float32 power iteration: matrix-vector products over up to max(rows, cols) terms;
    # products that a GPU may run in TF32 where the framework's switch says so.
    return tolerance("float32", ops=8, reduction=max(rows, cols), device=device, framework=framework, matmul=True)


def _assert_unit_norm(w: np.ndarray, rows: int, cols: int, what: str, where: tuple[str, str]) -> None:
    assert_close(np.array([_sigma_max(w)]), np.array([1.0]), _sigma_tol(rows, cols, *where), what=what)


def _assert_not_below_one(w: np.ndarray, rows: int, cols: int, what: str, where: tuple[str, str]) -> None:
    __tracebackhide__ = True
    sigma, tol = _sigma_max(w), _sigma_tol(rows, cols, *where).rtol
    evidence.check(what, observed=max(0.0, 1.0 - sigma), tolerance=tol)
    assert sigma >= 1.0 - tol, f"{what}: largest singular value {sigma!r}, but should be >= 1 (up to {tol:.2e})"


@pytest.mark.claim(CLAIM)
@budget(10)
@given(rows=st.integers(1, 32), cols=st.integers(1, 32), per_call=st.sampled_from([1, 5, 13]),
       seed=st.integers(0, 2**32 - 1))
def test_torch_spectral_norm_converges_to_one(torch, dl_device, rows, cols, per_call, seed):
    from torch.nn.utils.parametrizations import spectral_norm

    where = (dl_device, "torch")

    w, _ = _weight(np.random.default_rng(seed), rows, cols)
    layer = torch.nn.Linear(cols, rows)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(w))
    layer = spectral_norm(layer, n_power_iterations=per_call)
    # Registration already runs 15 iterations; the estimate can only undershoot sigma_max.
    _assert_not_below_one(host(layer.weight), rows, cols, "sigma_max of the normalised weight, any time", where)
    x = torch.tensor(np.random.default_rng(seed + 1).normal(size=(3, cols)).astype(np.float32))
    calls = -(-max(0, ITERATIONS - 15) // per_call)
    for _ in range(calls):  # training mode: each forward runs per_call more iterations
        y = layer(x)
        _assert_not_below_one(host(layer.weight), rows, cols, "sigma_max of the normalised weight, any time", where)
    _assert_unit_norm(host(layer.weight), rows, cols, f"sigma_max after {15 + calls * per_call} iterations", where)
    weight = host(layer.weight)
    assert_close(host(y), host(x).astype(np.float64) @ weight.T.astype(np.float64) + host(layer.bias),
                 tolerance("float32", reduction=cols, device=dl_device, framework="torch", matmul=True),
                 what="forward uses the normalised weight")
    layer.eval()
    frozen = host(layer.weight).copy()
    layer(x), layer(x)
    assert_equal(host(layer.weight), frozen, what="eval mode: no power iteration, the weight is frozen")
    evidence.covers("torch.train", "torch.n_power_iterations", "torch.eval-after-convergence")


def _slow_weight(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A matrix whose top two singular values are close (ratio 0.9 to 0.99), so the 15 power
    iterations of registration leave the estimate short of convergence."""
    k = min(rows, cols)
    u, _ = np.linalg.qr(rng.normal(size=(rows, k)))
    v, _ = np.linalg.qr(rng.normal(size=(cols, k)))
    top = rng.uniform(0.5, 5.0)
    s = np.concatenate(([top, top * rng.uniform(0.9, 0.99)], rng.uniform(0.0, top / 2, k - 2)))
    return (u * s) @ v.T


def check_torch_eval_frozen(torch, spectral_norm, rows: int, cols: int, seed: int, calls: int) -> None:
    """eval() before convergence: every access gives the same weight, bitwise (no power
    iteration runs outside training mode), and train() resumes iterating from that estimate."""
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    layer = torch.nn.Linear(cols, rows)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(_slow_weight(rng, rows, cols)))
    layer = spectral_norm(layer).eval()
    frozen = host(layer.weight).copy()
    x = torch.tensor(rng.normal(size=(2, cols)).astype(np.float32))
    for i in range(calls):
        layer(x)
        assert_equal(host(layer.weight), frozen, what=f"eval mode before convergence: weight after {i + 1} forward(s)")
    _assert_not_below_one(frozen, rows, cols, "sigma_max of the frozen weight", ("cpu", "torch"))


def _reference_iterations(w: np.ndarray, v: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's documented power method in float64, from the right vector ``v``: n times
    u = W v / ||W v||, then v = W^T u / ||W^T u||; returns (u, v)."""
    u = np.zeros(w.shape[0])
    for _ in range(n):
        u = w @ v
        u = u / np.linalg.norm(u)
        v = w.T @ u
        v = v / np.linalg.norm(v)
    return u, v


def check_torch_training_iterations(torch, spectral_norm, rows: int, cols: int, per_call: int, calls: int,
                                    seed: int) -> float:
    """Each training-mode forward runs exactly ``per_call`` power iterations: after each, the
    layer's u, v and sigma (from the normalised weight) equal a float64 numpy power iteration
    of ``per_call`` steps from the layer's v before that forward. The spectra have a small gap
    (sigma_2 / sigma_1 in [0.9, 0.99]), so one iteration moves v by far more than the
    tolerance: a forward that skips iterations (or runs another number) is seen. Returns the
    smallest movement of v in one forward, relative to the tolerance."""
    __tracebackhide__ = True
    from torch.nn.utils import parametrize

    rng = np.random.default_rng(seed)
    w = _slow_weight(rng, rows, cols)
    layer = torch.nn.Linear(cols, rows)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(w))
    layer = spectral_norm(layer, n_power_iterations=per_call)
    sn = layer.parametrizations.weight[0]
    w32 = layer.parametrizations.weight.original.detach().cpu().numpy().astype(np.float64)
    x = torch.tensor(rng.normal(size=(2, cols)).astype(np.float32))
    # Each iteration: two float32 matrix-vector products over up to max(rows, cols) terms and
    # two normalisations; power iteration does not amplify an earlier step's rounding.
    tol = tolerance("float32", ops=4 * per_call, reduction=max(rows, cols))
    least = math.inf
    for call in range(calls):
        v0 = sn._v.detach().cpu().numpy().astype(np.float64)
        with parametrize.cached():  # one parametrization forward for the weight and the call
            normalised = layer.weight.detach().cpu().numpy().astype(np.float64)
            layer(x)
        u_ref, v_ref = _reference_iterations(w32, v0, per_call)
        sigma_ref = float(u_ref @ w32 @ v_ref)
        what = f"training forward {call + 1} with n_power_iterations={per_call}"
        assert_close(sn._v.detach().cpu().numpy(), v_ref, tol, what=f"{what}: v vs {per_call} numpy power iterations")
        assert_close(sn._u.detach().cpu().numpy(), u_ref, tol, what=f"{what}: u vs {per_call} numpy power iterations")
        sigma = float(np.linalg.norm(w32) / np.linalg.norm(normalised))  # the layer divides W by its sigma
        assert_close(np.array([sigma]), np.array([sigma_ref]), tol, what=f"{what}: sigma = u^T W v")
        least = min(least, float(np.max(np.abs(v_ref - v0))) / (tol.rtol * float(np.max(np.abs(v_ref)))))
    return least


@pytest.mark.claim(CLAIM)
@budget(8)
@given(rows=st.integers(2, 16), cols=st.integers(2, 16), per_call=st.sampled_from([1, 2, 5]),
       calls=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_torch_spectral_norm_runs_its_power_iterations_in_training(torch, rows, cols, per_call, calls, seed):
    from torch.nn.utils.parametrizations import spectral_norm

    with torch.device("cpu"):
        least = check_torch_training_iterations(torch, spectral_norm, rows, cols, per_call, calls, seed)
    # The check's power: a forward that skipped its iterations would have left v where it was.
    evidence.check("one training forward's movement of v, in tolerances (must exceed 1)", observed=1.0 / least,
                   tolerance=1.0)
    evidence.covers("torch.train", "torch.n_power_iterations")


@pytest.mark.claim(CLAIM)
@budget(6)
@given(rows=st.integers(4, 16), cols=st.integers(4, 16), calls=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_torch_spectral_norm_is_frozen_in_eval_before_convergence(torch, rows, cols, calls, seed):
    from torch.nn.utils.parametrizations import spectral_norm

    with torch.device("cpu"):
        check_torch_eval_frozen(torch, spectral_norm, rows, cols, seed, calls)
    evidence.covers("torch.eval-before-convergence")


@pytest.mark.claim(CLAIM)
@budget(4)
@given(out=st.integers(1, 6), inp=st.integers(1, 4), k=st.integers(1, 3), bias=st.integers(1, 8),
       seed=st.integers(0, 2**32 - 1))
def test_torch_spectral_norm_reshapes_and_normalises_vectors(torch, out, inp, k, bias, seed):
    """Documented: a weight of more than 2 dimensions is reshaped to (dim 0, rest) for the power
    method; a 1-d parameter is divided by its 2-norm."""
    from torch.nn.utils.parametrizations import spectral_norm

    rng = np.random.default_rng(seed)
    with torch.device("cpu"):
        conv = torch.nn.Conv2d(inp, out, k)
        w, _ = _weight(rng, out, inp * k * k)
        with torch.no_grad():
            conv.weight.copy_(torch.tensor(w.reshape(out, inp, k, k)))
        conv = spectral_norm(conv, n_power_iterations=30).eval()  # 15 + 30 iterations at registration
        _assert_unit_norm(host(conv.weight).reshape(out, -1), out, inp * k * k,
                          "sigma_max of the reshaped Conv2d weight", ("cpu", "torch"))
        lin = torch.nn.Linear(2, bias)
        b = rng.normal(size=bias).astype(np.float32)
        with torch.no_grad():
            lin.bias.copy_(torch.tensor(b))
        lin = spectral_norm(lin, name="bias")
        assert_close(host(lin.bias), b / np.linalg.norm(b.astype(np.float64)), tolerance("float32", ops=4, reduction=bias),
                     what="spectral_norm of a 1-d parameter: x / ||x||_2")
    evidence.covers("torch.conv-weight", "torch.vector")


@pytest.mark.claim(CLAIM)
@budget(6)
@given(rows=st.integers(1, 24), cols=st.integers(1, 24), per_call=st.sampled_from([8, 20]),
       seed=st.integers(0, 2**32 - 1))
def test_keras_spectral_normalization_converges_to_one(tf, dl_device, rows, cols, per_call, seed):
    import keras

    where = (dl_device, "keras")

    w, _ = _weight(np.random.default_rng(seed), cols, rows)  # Dense kernels are (inputs, units)
    layer = keras.layers.SpectralNormalization(keras.layers.Dense(rows), power_iterations=per_call)
    x = np.random.default_rng(seed + 1).normal(size=(3, cols)).astype(np.float32)
    layer.build((None, cols))
    layer.layer.kernel.assign(w.astype(np.float32))
    calls = -(-ITERATIONS // per_call)
    for _ in range(calls):
        y = np.asarray(layer(x, training=True))
        _assert_not_below_one(np.asarray(layer.layer.kernel), rows, cols, "sigma_max of the normalised kernel, any time", where)
    kernel = np.asarray(layer.layer.kernel)
    _assert_unit_norm(kernel, rows, cols, f"sigma_max after {calls * per_call} iterations", where)
    assert_close(y, x.astype(np.float64) @ kernel.astype(np.float64),
                 tolerance("float32", reduction=cols, device=dl_device, framework="keras", matmul=True),
                 what="forward uses the normalised kernel")
    evidence.covers("keras.training=True", "keras.power_iterations")
    # training=False (the call's default): no power iteration, the kernel is used as it is.
    before = np.asarray(layer.layer.kernel).copy()
    for call in (lambda: layer(x), lambda: layer(x, training=False)):
        y = np.asarray(call())
        assert_equal(np.asarray(layer.layer.kernel), before, what="inference call: kernel unchanged")
    assert_close(y, x.astype(np.float64) @ before.astype(np.float64),
                 tolerance("float32", reduction=cols, device=dl_device, framework="keras", matmul=True),
                 what="inference forward uses the current kernel")
    evidence.covers("keras.training=False")
