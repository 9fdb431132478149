"""Suite-only helpers of modules.torch.optimizer-*: the numpy references of torch.optim's update
rules, written from each optimizer's documented algorithm (the algorithm box of its docstring,
``help(torch.optim.Adam)``), the fixed objective whose gradients both sides compute, and a
deterministic pairwise covering-array generator (every pair of values of two options appears
in at least one row). No framework is imported here.

Each reference is ``step(theta, g, state, t, opts) -> theta`` for one parameter tensor: ``g`` the
raw gradient of the objective at ``theta`` (maximize, weight decay and the rest are the
reference's business), ``state`` a dict it owns, ``t`` the 1-based step count, ``opts`` the
optimizer's keyword arguments by their documented names. Where a box leaves out an option its
Args describe (maximize in Adagrad, Adadelta, Adamax, RMSprop, Rprop), the option is applied as
in the boxes that show it: g <- -grad before anything else.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

Row = dict[str, Any]
Reference = Callable[[np.ndarray, np.ndarray, dict[str, Any], int, Mapping[str, Any]], np.ndarray]


# ----------------------------------------------------------------- pairwise covering arrays


def _pairs_of(row: Mapping[str, Any], names: Sequence[str]) -> set[tuple[str, Any, str, Any]]:
    return {(a, repr(row[a]), b, repr(row[b])) for a, b in itertools.combinations(names, 2)}


def required_pairs(factors: Mapping[str, Sequence[Any]],
                   valid: Callable[[Row], bool] = lambda row: True) -> set[tuple[str, Any, str, Any]]:
    """Every pair of values of two factors that some valid full row contains."""
    names = list(factors)
    out: set[tuple[str, Any, str, Any]] = set()
    for row in _rows(factors):
        if valid(row):
            out |= _pairs_of(row, names)
    return out


def _rows(factors: Mapping[str, Sequence[Any]]) -> list[Row]:
    names = list(factors)
    return [dict(zip(names, values)) for values in itertools.product(*(factors[n] for n in names))]


def pairwise(factors: Mapping[str, Sequence[Any]], valid: Callable[[Row], bool] = lambda row: True) -> list[Row]:
    """A covering array of strength 2: rows (dicts factor -> value, all ``valid``) such that every
    pair of values of two factors that a valid row can hold appears in at least one row.

    Greedy set cover over the valid rows of the full product, in product order: each new row is
    the first one covering the most still-uncovered pairs. Deterministic (no randomness, ties go
    to the earlier row) and it terminates: every chosen row covers at least one new pair.

    Values are told apart by ``repr`` (as :func:`required_pairs` does); each row's pairs are held
    as one integer bit set, so a module that builds its tables at import (every pytest process
    that collects it) pays milliseconds, not seconds."""
    names = list(factors)
    if len(names) < 2:
        return [row for row in _rows(factors) if valid(row)]
    # each value's class: the first value of its factor with the same repr
    classes = []
    for n in names:
        first: dict[str, int] = {}
        classes.append([first.setdefault(repr(v), i) for i, v in enumerate(factors[n])])
    sizes = [len(factors[n]) for n in names]
    offsets: dict[tuple[int, int], int] = {}
    bit = 0
    for a, b in itertools.combinations(range(len(names)), 2):
        offsets[(a, b)] = bit
        bit += sizes[a] * sizes[b]
    pairs_of_index = list(itertools.combinations(range(len(names)), 2))
    candidates: list[tuple[Row, int]] = []
    for index in itertools.product(*(range(k) for k in sizes)):
        row = {n: factors[n][i] for n, i in zip(names, index)}
        if not valid(row):
            continue
        cls = [classes[f][i] for f, i in enumerate(index)]
        mask = 0
        for a, b in pairs_of_index:
            mask |= 1 << (offsets[(a, b)] + cls[a] * sizes[b] + cls[b])
        candidates.append((row, mask))
    uncovered = 0
    for _, mask in candidates:
        uncovered |= mask
    chosen: list[Row] = []
    while uncovered:
        best, gain = candidates[0], -1
        for cand in candidates:
            n = (cand[1] & uncovered).bit_count()
            if n > gain:
                best, gain = cand, n
        chosen.append(best[0])
        uncovered &= ~best[1]
    return chosen


def uncovered(rows: Sequence[Mapping[str, Any]], factors: Mapping[str, Sequence[Any]],
              valid: Callable[[Row], bool] = lambda row: True) -> set[tuple[str, Any, str, Any]]:
    """The pairs a valid row could hold that none of ``rows`` holds (empty for a covering array)."""
    have: set[tuple[str, Any, str, Any]] = set()
    for row in rows:
        have |= _pairs_of(row, list(factors))
    return required_pairs(factors, valid) - have


# ----------------------------------------------------------------- the objective


def problem(shapes: Sequence[tuple[int, ...]], seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Fixed float64 data per parameter: start value, curvature a in [0.5, 2], centre c, phase."""
    rng = np.random.default_rng(seed)
    return [{"theta0": rng.normal(size=s), "a": rng.uniform(0.5, 2.0, size=s), "c": rng.normal(size=s),
             "phase": rng.uniform(0, 2 * math.pi, size=s)} for s in shapes]


def gradient(theta: np.ndarray, data: Mapping[str, np.ndarray], t: int) -> np.ndarray:
    """The gradient of f_t(theta) = sum(a/2 (theta - c)^2 + 0.5 cos(1.3 t + phase) theta): a
    quadratic pull plus a drifting linear term whose sign changes between steps (so Rprop's
    sign-change branches and amsgrad's running maximum are exercised)."""
    return data["a"] * (theta - data["c"]) + 0.5 * np.cos(1.3 * t + data["phase"])


# ----------------------------------------------------------------- the documented update rules


def _signed(g: np.ndarray, opts: Mapping[str, Any]) -> np.ndarray:
    return -g if opts.get("maximize", False) else g


def sgd(theta, g, state, t, o):
    g = _signed(g, o)
    lr, mu, tau, wd = o.get("lr", 1e-3), o.get("momentum", 0), o.get("dampening", 0), o.get("weight_decay", 0)
    if wd != 0:
        g = g + wd * theta
    if mu != 0:
        b = g if t == 1 else mu * state["b"] + (1 - tau) * g
        state["b"] = b
        g = g + mu * b if o.get("nesterov", False) else b
    return theta - lr * g


def _adam_core(theta, g, state, t, o, *, decoupled: bool):
    lr, (b1, b2), eps, wd = o.get("lr", 1e-3), o.get("betas", (0.9, 0.999)), o.get("eps", 1e-8), o["weight_decay"]
    g = _signed(g, o)
    if decoupled:
        theta = theta - lr * wd * theta
    elif wd != 0:
        g = g + wd * theta
    m = b1 * state.get("m", 0.0) + (1 - b1) * g
    v = b2 * state.get("v", 0.0) + (1 - b2) * g * g
    state["m"], state["v"] = m, v
    m_hat = m / (1 - b1 ** t)
    if o.get("amsgrad", False):
        state["vmax"] = np.maximum(state.get("vmax", 0.0), v)
        v_hat = state["vmax"] / (1 - b2 ** t)
    else:
        v_hat = v / (1 - b2 ** t)
    return theta - lr * m_hat / (np.sqrt(v_hat) + eps)


def adam(theta, g, state, t, o):
    # decoupled_weight_decay=True: "this optimizer is equivalent to AdamW" (Adam's Args).
    return _adam_core(theta, g, state, t, {"weight_decay": 0, **o}, decoupled=o.get("decoupled_weight_decay", False))


def adamw(theta, g, state, t, o):
    return _adam_core(theta, g, state, t, {"weight_decay": 1e-2, **o}, decoupled=True)


def adagrad(theta, g, state, t, o):
    lr, eta, wd, eps = o.get("lr", 1e-2), o.get("lr_decay", 0), o.get("weight_decay", 0), o.get("eps", 1e-10)
    g = _signed(g, o)
    lr_t = lr / (1 + (t - 1) * eta)
    if wd != 0:
        g = g + wd * theta
    s = state.get("sum", o.get("initial_accumulator_value", 0)) + g * g
    state["sum"] = s
    return theta - lr_t * g / (np.sqrt(s) + eps)


def adadelta(theta, g, state, t, o):
    lr, rho, eps, wd = o.get("lr", 1.0), o.get("rho", 0.9), o.get("eps", 1e-6), o.get("weight_decay", 0)
    g = _signed(g, o)
    if wd != 0:
        g = g + wd * theta
    v = state.get("v", 0.0) * rho + g * g * (1 - rho)
    dx = np.sqrt(state.get("u", 0.0) + eps) / np.sqrt(v + eps) * g
    state["v"], state["u"] = v, state.get("u", 0.0) * rho + dx * dx * (1 - rho)
    return theta - lr * dx


def adamax(theta, g, state, t, o):
    lr, (b1, b2), eps, wd = o.get("lr", 2e-3), o.get("betas", (0.9, 0.999)), o.get("eps", 1e-8), o.get("weight_decay", 0)
    g = _signed(g, o)
    if wd != 0:
        g = g + wd * theta
    m = b1 * state.get("m", 0.0) + (1 - b1) * g
    u = np.maximum(b2 * state.get("u", 0.0), np.abs(g) + eps)
    state["m"], state["u"] = m, u
    return theta - lr * m / ((1 - b1 ** t) * u)


def nadam(theta, g, state, t, o):
    lr, (b1, b2), eps = o.get("lr", 2e-3), o.get("betas", (0.9, 0.999)), o.get("eps", 1e-8)
    wd, psi = o.get("weight_decay", 0), o.get("momentum_decay", 4e-3)
    g = _signed(g, o)
    if wd != 0:
        if o.get("decoupled_weight_decay", False):
            theta = theta - lr * wd * theta
        else:
            g = g + wd * theta
    mu = [b1 * (1 - 0.5 * 0.96 ** (i * psi)) for i in range(1, t + 2)]  # mu_1 .. mu_{t+1}
    m = b1 * state.get("m", 0.0) + (1 - b1) * g
    v = b2 * state.get("v", 0.0) + (1 - b2) * g * g
    state["m"], state["v"] = m, v
    m_hat = mu[t] * m / (1 - math.prod(mu[: t + 1])) + (1 - mu[t - 1]) * g / (1 - math.prod(mu[:t]))
    v_hat = v / (1 - b2 ** t)
    return theta - lr * m_hat / (np.sqrt(v_hat) + eps)


def radam_rho(t: int, beta2: float) -> float:
    rho_inf = 2 / (1 - beta2) - 1
    return rho_inf - 2 * t * beta2 ** t / (1 - beta2 ** t)


def radam(theta, g, state, t, o):
    lr, (b1, b2), eps, wd = o.get("lr", 1e-3), o.get("betas", (0.9, 0.999)), o.get("eps", 1e-8), o.get("weight_decay", 0)
    g = _signed(g, o)
    if wd != 0:
        if o.get("decoupled_weight_decay", False):
            theta = theta - lr * wd * theta
        else:
            g = g + wd * theta
    m = b1 * state.get("m", 0.0) + (1 - b1) * g
    v = b2 * state.get("v", 0.0) + (1 - b2) * g * g
    state["m"], state["v"] = m, v
    m_hat = m / (1 - b1 ** t)
    rho_inf, rho_t = 2 / (1 - b2) - 1, radam_rho(t, b2)
    if rho_t > 5:
        l_t = math.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps)
        r_t = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        return theta - lr * m_hat * r_t * l_t
    return theta - lr * m_hat


def rmsprop(theta, g, state, t, o):
    lr, alpha, eps, wd = o.get("lr", 1e-2), o.get("alpha", 0.99), o.get("eps", 1e-8), o.get("weight_decay", 0)
    mu = o.get("momentum", 0)
    g = _signed(g, o)
    if wd != 0:
        g = g + wd * theta
    v = alpha * state.get("v", 0.0) + (1 - alpha) * g * g
    state["v"] = v
    v_tilde = v
    if o.get("centered", False):
        state["gave"] = state.get("gave", 0.0) * alpha + (1 - alpha) * g
        v_tilde = v_tilde - state["gave"] ** 2
    if mu > 0:
        state["b"] = mu * state.get("b", 0.0) + g / (np.sqrt(v_tilde) + eps)
        return theta - lr * state["b"]
    return theta - lr * g / (np.sqrt(v_tilde) + eps)


def rprop(theta, g, state, t, o):
    eta_minus, eta_plus = o.get("etas", (0.5, 1.2))
    smin, smax = o.get("step_sizes", (1e-6, 50))
    g = _signed(g, o)
    prev = state.get("prev", np.zeros_like(g))
    eta = state.get("eta", np.full_like(g, o.get("lr", 1e-2)))
    sign = prev * g
    eta = np.where(sign > 0, np.minimum(eta * eta_plus, smax), np.where(sign < 0, np.maximum(eta * eta_minus, smin), eta))
    g = np.where(sign < 0, 0.0, g)
    state["prev"], state["eta"] = g, eta
    return theta - eta * np.sign(g)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x * x)))


def adafactor(theta, g, state, t, o):
    lr, tau, d, wd = o.get("lr", 1e-2), o.get("beta2_decay", -0.8), o.get("d", 1.0), o.get("weight_decay", 0.0)
    eps1, eps2 = o["eps"]
    g = _signed(g, o)
    beta2 = 1 - t ** tau
    rho = min(lr, 1 / math.sqrt(t))
    alpha = max(eps2, _rms(theta)) * rho
    theta = theta - lr * wd * theta
    if g.ndim > 1:
        r = beta2 * state.get("R", 0.0) + (1 - beta2) * (g * g).sum(axis=-1)  # (G . G) 1_m: row sums
        c = beta2 * state.get("C", 0.0) + (1 - beta2) * (g * g).sum(axis=-2)  # 1_n^T (G . G): column sums
        state["R"], state["C"] = r, c
        v = np.outer(r, c) / max(float(r.sum()), eps1)
    else:
        v = beta2 * state.get("V", 0.0) + (1 - beta2) * g * g
        state["V"] = v
    u = g / np.maximum(np.sqrt(v), eps1)
    u_hat = u / max(1.0, _rms(u) / d)
    # The box's last line reads theta_{t-1} - alpha U, which would undo the weight decay of the
    # line before; every other box (AdamW's) continues from theta_t, as read here.
    return theta - alpha * u_hat


def newton_schulz(b: np.ndarray, coeffs: tuple[float, float, float], steps: int, eps: float) -> np.ndarray:
    """k iterations of the Newton-Schulz orthogonalisation of the reference the Muon docstring
    cites (Keller Jordan's post): X = B / (||B||_F + eps), on the wide orientation,
    X <- a X + (b A + c A^2) X with A = X X^T."""
    a, bb, c = coeffs
    x = b / (np.linalg.norm(b) + eps)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (bb * gram + c * gram @ gram) @ x
    return x.T if tall else x


def muon(theta, g, state, t, o):
    lr, wd, mu = o.get("lr", 1e-3), o.get("weight_decay", 0.1), o.get("momentum", 0.95)
    b = mu * state.get("B", 0.0) + g
    state["B"] = b
    b_tilde = g + mu * b if o.get("nesterov", True) else b
    out = newton_schulz(b_tilde, o.get("ns_coefficients", (3.4445, -4.775, 2.0315)), o.get("ns_steps", 5),
                        o.get("eps", 1e-7))
    theta = theta - lr * wd * theta
    rows, cols = theta.shape
    if o.get("adjust_lr_fn") == "match_rms_adamw":
        lr = 0.2 * lr * math.sqrt(max(rows, cols))
    else:  # None and "original": Keller's sqrt(max(1, A / B))
        lr = lr * math.sqrt(max(1.0, rows / cols))
    return theta - lr * out


def sparse_adam(theta, g, state, t, o):
    """Masked Adam: moments and parameter change only where the (sparse) gradient has values.
    The docstring gives no box, only "a masked version of the Adam algorithm" and the Adam
    paper; the step is the paper's efficient form (its Section 2, last paragraph):
    theta -= lr sqrt(1 - beta2^t) / (1 - beta1^t) m / (sqrt(v) + eps), eps on the uncorrected
    sqrt(v) (Adam's own box adds it to sqrt(v_hat): the two differ by eps (1/sqrt(1-beta2^t) - 1))."""
    lr, (b1, b2), eps = o.get("lr", 1e-3), o.get("betas", (0.9, 0.999)), o.get("eps", 1e-8)
    mask = g != 0
    g = _signed(g, o)
    m, v = state.get("m", np.zeros_like(g)), state.get("v", np.zeros_like(g))
    m = np.where(mask, b1 * m + (1 - b1) * g, m)
    v = np.where(mask, b2 * v + (1 - b2) * g * g, v)
    state["m"], state["v"] = m, v
    step = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
    return np.where(mask, theta - step, theta)


REFERENCES: dict[str, Reference] = {
    "SGD": sgd, "Adam": adam, "AdamW": adamw, "Adagrad": adagrad, "Adadelta": adadelta, "Adamax": adamax,
    "NAdam": nadam, "RAdam": radam, "RMSprop": rmsprop, "Rprop": rprop, "Adafactor": adafactor, "Muon": muon,
    "SparseAdam": sparse_adam,
}


def reference_run(name: str, data: Sequence[Mapping[str, np.ndarray]], opts: Mapping[str, Any], steps: int,
                  masks: Sequence[Sequence[np.ndarray]] | None = None) -> list[list[np.ndarray]]:
    """The documented rule of optimizer ``name`` over ``steps`` steps of the objective: the
    parameters after each step, per parameter. ``masks[t][i]`` (SparseAdam) zeroes the gradient
    outside the rows that step's sparse gradient holds."""
    rule = REFERENCES[name]
    thetas = [np.array(d["theta0"], dtype=np.float64) for d in data]
    states: list[dict[str, Any]] = [{} for _ in data]
    history = []
    for t in range(1, steps + 1):
        for i, d in enumerate(data):
            g = gradient(thetas[i], d, t)
            if masks is not None:
                g = np.where(masks[t - 1][i], g, 0.0)
            thetas[i] = rule(thetas[i], g, states[i], t, opts)
        history.append([th.copy() for th in thetas])
    return history
