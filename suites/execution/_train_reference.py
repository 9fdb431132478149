"""An independent float64 reference for the seed's train_step: the model Dense(4, relu) ->
Dense(1) with MeanSquaredError, its gradient written out by hand, and Keras 3's documented
update rules for SGD, SGD with momentum and Adam, applied to the framework's own float32
weights and optimizer slots before each step (so each step is judged on its own; errors
never accumulate over steps).

Error model of one float32 step against this reference (numerics.tolerance, docs/tolerances.md
"train step"): every gradient entry is a chain of about ``GRAD_OPS`` roundings and the sums
over the fan-ins (3, 4) and the batch; its rounding is bounded by the same chain run on
absolute values (``G``: |x| |W| + |b| forward, |dp| |W|^T backward), so a gradient that
cancels over the batch is judged against its terms. The update adds its own roundings and
carries the gradient's error through the optimizer's Lipschitz constant in the gradient:
``lr`` for SGD and momentum, and for Adam (``epsilon`` >= 1) at most
``alpha ((1 - beta_1) + |m'| sqrt(1 - beta_2))``; Adam's ``alpha = lr sqrt(1 - b2^t) / (1 - b1^t)``
cancels in ``1 - b^t`` (condition ``b^t / (1 - b^t)``, about 1000 for b2 = 0.999 at t = 1),
which multiplies the rounding of ``b^t``.

Importing this module imports no framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_dlconform.api import UNIT_ROUNDOFF, Tolerance, evidence, tolerance

U32 = UNIT_ROUNDOFF["float32"]
# Roundings along one gradient entry: two bias adds, the residual, square and mean scale,
# dp = 2 r / b, dh = dp W2^T, the relu mask (exact), the products of the weight gradients.
GRAD_OPS = 8


@dataclass(frozen=True)
class Hyper:
    """Optimizer hyperparameters as the framework holds them (float32 values)."""

    name: str  # "sgd" | "sgd-momentum" | "adam"
    lr: float
    momentum: float = 0.0
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-7


def _f32(v: float) -> float:
    return float(np.float32(v))


def hyper(name: str, lr: float, *, momentum: float = 0.0, epsilon: float = 1e-7) -> Hyper:
    """Keras casts every hyperparameter to the variables' dtype (float32) before it uses it."""
    return Hyper(name, _f32(lr), _f32(momentum), _f32(0.9), _f32(0.999), _f32(epsilon))


def forward_backward(ws: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, list[np.ndarray],
                                                                                 list[np.ndarray], float]:
    """(loss, gradients, gradient magnitudes G, smallest |pre-activation| / its rounding bound).

    ``G`` is the gradient computed on absolute values: every rounding of the real computation
    is below ``u`` times a term of it. The last value says whether a relu decision is
    within rounding of its threshold (below 1: float32 may take the other side)."""
    w1, b1, w2, b2 = (np.asarray(w, np.float64) for w in ws)
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    b = x.shape[0]
    z = x @ w1 + b1
    h = np.maximum(z, 0.0)
    p = h @ w2 + b2
    r = p - y
    loss = float(np.mean(r**2))
    dp = 2.0 * r / b
    dz = (dp @ w2.T) * (z > 0)
    grads = [x.T @ dz, dz.sum(axis=0), h.T @ dp, dp.sum(axis=0)]
    zm = np.abs(x) @ np.abs(w1) + np.abs(b1)
    pm = zm @ np.abs(w2) + np.abs(b2)
    dpm = 2.0 * (pm + np.abs(y)) / b
    dzm = (dpm @ np.abs(w2).T) * (z > 0)
    mags = [np.abs(x).T @ dzm, dzm.sum(axis=0), zm.T @ dpm, dpm.sum(axis=0)]
    z_err = tolerance("float32", ops=1, reduction=x.shape[1]).rtol * zm
    margin = float(np.min(np.abs(z) / np.maximum(z_err, 1e-300))) if z.size else np.inf
    return loss, grads, mags, margin


def gradient_tolerance(batch: int, magnitude: float) -> Tolerance:
    return tolerance("float32", ops=GRAD_OPS, reduction=3 + 4 + batch, magnitude=magnitude)


def loss_tolerance(batch: int, ws: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> Tolerance:
    """The loss: forward roundings on |p| + |y|, squared (twice the relative error) and averaged."""
    w1, b1, w2, b2 = (np.abs(np.asarray(w, np.float64)) for w in ws)
    pm = (np.abs(x) @ w1 + b1) @ w2 + b2
    return tolerance("float32", ops=2 * 4, reduction=3 + 4 + batch,
                     magnitude=float(np.mean((pm + np.abs(y)) ** 2)))


def reference_step(hp: Hyper, ws: list[np.ndarray], slots: dict[str, list[np.ndarray]], iteration: int,
                   x: np.ndarray, y: np.ndarray) -> tuple[float, list[np.ndarray], list[float], float]:
    """One documented step from the framework's state: (loss, new weights, per-tensor absolute
    bound on |float32 step - reference|, relu margin)."""
    loss, grads, mags, margin = forward_backward(ws, x, y)
    b = x.shape[0]
    new, bounds = [], []
    for k, (w, g, gm) in enumerate(zip(ws, grads, mags)):
        w = np.asarray(w, np.float64)
        g_tol = gradient_tolerance(b, float(np.max(gm)))
        e_g = g_tol.rtol * float(np.max(np.abs(g))) + g_tol.atol
        G = float(np.max(gm))
        if hp.name == "sgd":
            step = hp.lr * g
            bound = hp.lr * e_g + 2 * U32 * float(np.max(np.abs(w) + np.abs(step)))
        elif hp.name == "sgd-momentum":
            m = np.asarray(slots["momentum"][k], np.float64)
            m_new = hp.momentum * m - hp.lr * g
            step = -m_new
            bound = hp.lr * e_g + 4 * U32 * float(np.max(np.abs(w) + np.abs(hp.momentum * m) + hp.lr * gm))
        else:
            step, bound = _adam(hp, w, g, e_g, G, slots["momentum"][k], slots["velocity"][k], iteration)
        new.append(w - step)
        bounds.append(bound)
    return loss, new, bounds, margin


def _adam(hp: Hyper, w: np.ndarray, g: np.ndarray, e_g: float, G: float, m: Any, v: Any,
          iteration: int) -> tuple[np.ndarray, float]:
    """Keras 3 Adam: m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2);
    w -= alpha m / (sqrt(v) + eps), alpha = lr sqrt(1 - b2^t) / (1 - b1^t), t = iterations + 1."""
    m, v = np.asarray(m, np.float64), np.asarray(v, np.float64)
    t = iteration + 1
    p1, p2 = hp.beta_1**t, hp.beta_2**t
    alpha = hp.lr * np.sqrt(1 - p2) / (1 - p1)
    m_new = m + (g - m) * (1 - hp.beta_1)
    v_new = v + (g * g - v) * (1 - hp.beta_2)
    step = alpha * m_new / (np.sqrt(v_new) + hp.epsilon)
    if hp.epsilon < 1.0:
        raise ValueError("the Adam error model needs epsilon >= 1 (the update Lipschitz in the gradient)")
    ga = float(np.max(np.abs(g))) + e_g  # the float32 gradient's size
    top_m = float(np.max(np.abs(m))) + ga  # bounds |m'|
    # alpha's rounding: b^t (one op, 4u) amplified by 1 - b^t's condition b^t / (1 - b^t),
    # then lr *, sqrt and / (half of 1 - b2^t's error passes the sqrt).
    alpha_rel = U32 * (4 * (p1 / (1 - p1)) + 2 * (p2 / (1 - p2)) + 8)
    # dU/dg = alpha ((1 - b1) / (s + eps) - m' (1 - b2) g / (s (s + eps)^2)), s = sqrt(v') >=
    # sqrt(1 - b2) |g|, eps >= 1: |dU/dg| <= alpha ((1 - b1) + |m'| sqrt(1 - b2)).
    lipschitz = alpha * ((1 - hp.beta_1) + top_m * np.sqrt(1 - hp.beta_2))
    # m' and v' round three times each relative to their terms; v's error dv <= 3u (|v| + g^2)
    # reaches U through dU/dv' = alpha m' / (2 s (s + eps)^2), and (|v| + g^2) / s <=
    # sqrt(|v| / b2) + |g| / sqrt(1 - b2) (v' >= b2 v and >= (1 - b2) g^2).
    m_effect = alpha * 3 * U32 * top_m
    v_effect = alpha * top_m * 1.5 * U32 * (float(np.max(np.sqrt(np.abs(v)))) / np.sqrt(hp.beta_2)
                                            + ga / np.sqrt(1 - hp.beta_2))
    top_step = float(np.max(np.abs(step)))
    # sqrt, + eps, /, * alpha: four roundings of U; w - U one more (with |w|).
    bound = (top_step * (alpha_rel + 4 * U32) + m_effect + v_effect + lipschitz * e_g
             + 2 * U32 * float(np.max(np.abs(w) + np.abs(step))))
    return step, bound


class StepMismatch(AssertionError):
    """A float32 training step outside its rounding bound of the documented update."""


def assert_step(actual: list[np.ndarray], expected: list[np.ndarray], bounds: list[float], *, what: str) -> float:
    """Each weight tensor within its absolute bound of the reference; returns the worst error / bound."""
    __tracebackhide__ = True
    worst = 0.0
    for k, (a, e, bound) in enumerate(zip(actual, expected, bounds)):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        if a.shape != e.shape:
            raise StepMismatch(f"{what}: weight {k} has shape {a.shape}, but the reference's is {e.shape}")
        err = float(np.max(np.abs(a - e))) if e.size else 0.0
        err = err if np.all(np.isfinite(a)) else np.inf
        ratio = err / bound if bound > 0 else (0.0 if err == 0 else np.inf)
        evidence.check(f"{what.split(',')[0]}: weights vs float64 reference", observed=ratio, tolerance=1.0,
                       max_abs_error=err, bound=bound)
        if not ratio <= 1.0:
            raise StepMismatch(f"{what}: weight {k}: max|float32 step - documented update in float64| = {err:.3e}, "
                               f"but should be <= {bound:.3e} (the step's rounding bound; {ratio:.3g}x)")
        worst = max(worst, ratio)
    return worst
