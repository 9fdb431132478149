"""Suite-only helpers of modules.keras.optimizer-update-rules: numpy references of the update rules
keras.optimizers (Keras 3.15.1) documents, and of the options every Keras optimizer shares
(``keras.optimizers.Optimizer``'s arguments). No framework is imported here.

Where each rule comes from (the docstring where it states the rule, else the paper it cites):

- SGD, Adamax, Ftrl: the update box of the class docstring.
- Adam, AdamW, Nadam, RMSprop: the docstrings say epsilon is "epsilon hat" of Kingma & Ba (the
  formula just before their Section 2.1): ``alpha_t = lr sqrt(1 - b2^t) / (1 - b1^t)``,
  ``theta -= alpha_t m / (sqrt(v) + eps_hat)``: epsilon added to the root, outside it.
  amsgrad: Reddi et al. (the running maximum of v is the denominator's v).
- AdamW: Adam plus the decoupled decay of Loshchilov & Hutter, ``theta -= lr wd theta`` (the
  shared ``weight_decay`` option, applied to the variable before the rule's step).
- Nadam: the docstring only cites Dozat (2015); the rule and its momentum schedule
  ``mu_t = b1 (1 - 0.5 0.96^(0.004 t))`` are the ones tf.keras's Nadam docstring wrote out from
  that report (m' = m / (1 - prod_{i<=t+1} mu_i), g' = g / (1 - prod_{i<=t} mu_i),
  mbar = (1 - mu_t) g' + mu_{t+1} m', v' = v / (1 - b2^t)).
- Adagrad: Duchi et al. (accumulator of squared gradients, starting at
  initial_accumulator_value as the Args say); the paper has no epsilon and the docstring does
  not say where it goes: the reference adds it inside the root (undocumented, a choice).
- Adadelta: Zeiler's Algorithm 1, RMS[y] = sqrt(E[y^2] + eps), the step scaled by
  learning_rate ("to match the exact form in the original paper, use 1.0").
- RMSprop: Hinton's lecture 6 (moving average of g^2, divided by its root; centered: minus the
  square of the moving average of g; momentum: plain, "a decay rate 1 - momentum" accumulating
  the increment), epsilon as "epsilon hat" (outside the root), as the docstring says.
- Lion: Chen et al. Algorithm 2 (c = b1 m + (1 - b1) g; theta -= lr sign(c); m = b2 m + (1 - b2) g).
- Lamb: You et al. Algorithm 2 with phi = identity and per-variable norms, bias-corrected moments,
  trust ratio ||x|| / ||r|| (1 where either is 0).
- Adafactor: Shazeer & Stern Algorithms 4 (matrices, row and column sums) and 5 (vectors), with
  rho_t = min(lr, 1/sqrt(t)) when relative_step and the learning rate is a constant (the Args
  of relative_step) and rho_t = lr otherwise, alpha_t = max(eps2, RMS(x_{t-1})) rho_t,
  beta2_t = 1 - t^beta_2_decay, d = clip_threshold.

Shared options (``Optimizer`` Args): the gradient is divided by loss_scale_factor; with
gradient_accumulation_steps = k the update happens every k-th call with the mean of the k
gradients, the rule's step count t counting updates, the learning rate schedule the calls ("real
iterations"); the gradient is clipped (clipnorm per tensor g c / max(||g||, c), global_clipnorm
all tensors by c / max(global norm, c), clipvalue elementwise to [-v, v]); weight_decay then
decays the variable by lr wd theta; then the rule. use_ema: new_average = m old + (1 - m) current
after each call (the average starts at the first updated value: the docstring leaves the start
open; keras PR 18972 fixed it to that), and every ema_overwrite_frequency calls the variable is
overwritten by its average.

Muon (Keras 3.15.1 docstring, its cited original implementation of K. Jordan and Liu et al.
2025): a variable that is not 2-D, an embedding when exclude_embeddings, or one whose path
matches an exclude_layers entry takes the AdamW step (the Adam rule above with adam_beta_1,
adam_beta_2, epsilon, at learning_rate * adam_lr_ratio, decayed by adam_weight_decay); any other
variable the Muon step: the "internal SGD" momentum as keras.optimizers.SGD documents it
(buf = momentum buf + g; Nesterov: g + momentum buf), orthogonalised by ns_steps Newton-Schulz
iterations X <- a X + (b A + c A A) X, A = X X^T, with (a, b, c) = (muon_a, muon_b, muon_c),
started from X = G / (||G||_F + 1e-7), on the transpose when G has more rows than columns (the
original implementation); scaled by rms_rate sqrt(max(n, m)) (Liu et al.; None: unscaled, "Set to
None to disable this feature"); weight_decay decays the Muon variables (lr wd theta, decoupled).

ScheduleFreeAdamW: Defazio et al. 2024, Algorithm 1 (Schedule-Free AdamW), which the cited
repository's reference implementation follows: z_1 = x_1 = y_1 = theta_0;
gamma_t = lr sqrt(1 - b2^t) min(1, t / warmup_steps); v_t = b2 v + (1 - b2) g^2;
z_{t+1} = z_t - gamma_t g / (sqrt(v_t) + eps) - gamma_t wd y_t;
c_{t+1} = gamma_t^2 / sum_{i<=t} gamma_i^2; x_{t+1} = (1 - c) x_t + c z_{t+1};
the variable (the training point) y_{t+1} = (1 - b1) z_{t+1} + b1 x_{t+1}.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ._optim_reference import gradient, pairwise, problem  # noqa: F401  (re-exported for the suite)

Rule = Callable[[np.ndarray, np.ndarray, dict[str, Any], int, float, Mapping[str, Any]], np.ndarray]


def schedule_lr(spec: Any, iteration: int) -> float:
    """The learning rate at a call: a float, or ("exp", lr0, decay_steps, rate) for
    ExponentialDecay's documented lr0 * rate^(step / decay_steps), at ``iteration`` calls so far."""
    if isinstance(spec, tuple):
        _, lr0, steps, rate = spec
        return float(lr0 * rate ** (iteration / steps))
    return float(spec)


def sgd(theta, g, s, t, lr, o):
    mu = o.get("momentum", 0.0)
    if mu == 0:
        return theta - lr * g
    v = s.get("v", np.zeros_like(theta))
    v = mu * v - lr * g
    s["v"] = v
    if o.get("nesterov", False):
        return theta + mu * v - lr * g
    return theta + v


def _betas(o: Mapping[str, Any], default: tuple[float, float] = (0.9, 0.999)) -> tuple[float, float]:
    return o.get("beta_1", default[0]), o.get("beta_2", default[1])


def adam(theta, g, s, t, lr, o):
    b1, b2 = _betas(o)
    eps = o.get("epsilon", 1e-7)
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    s["m"], s["v"] = m, v
    if o.get("amsgrad", False):
        v = np.maximum(s.get("vmax", 0.0), v)
        s["vmax"] = v
    alpha = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return theta - alpha * m / (np.sqrt(v) + eps)


def adamax(theta, g, s, t, lr, o):
    b1, b2 = _betas(o)
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    u = np.maximum(b2 * s.get("u", 0.0), np.abs(g))
    s["m"], s["u"] = m, u
    return theta - lr / (1 - b1 ** t) * m / (u + o.get("epsilon", 1e-7))


def nadam(theta, g, s, t, lr, o):
    b1, b2 = _betas(o)

    def mu(i: int) -> float:
        return b1 * (1 - 0.5 * 0.96 ** (0.004 * i))

    prod_t = math.prod(mu(i) for i in range(1, t + 1))
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    s["m"], s["v"] = m, v
    mbar = (1 - mu(t)) * g / (1 - prod_t) + mu(t + 1) * m / (1 - prod_t * mu(t + 1))
    return theta - lr * mbar / (np.sqrt(v / (1 - b2 ** t)) + o.get("epsilon", 1e-7))


def adagrad(theta, g, s, t, lr, o):
    acc = s.get("acc", np.full_like(theta, o.get("initial_accumulator_value", 0.1))) + g * g
    s["acc"] = acc
    return theta - lr * g / np.sqrt(acc + o.get("epsilon", 1e-7))


def adadelta(theta, g, s, t, lr, o):
    rho, eps = o.get("rho", 0.95), o.get("epsilon", 1e-7)
    eg = rho * s.get("eg", 0.0) + (1 - rho) * g * g
    dx = -np.sqrt(s.get("edx", 0.0) + eps) / np.sqrt(eg + eps) * g
    s["eg"], s["edx"] = eg, rho * s.get("edx", 0.0) + (1 - rho) * dx * dx
    return theta + lr * dx


def rmsprop(theta, g, s, t, lr, o):
    rho, eps, mom = o.get("rho", 0.9), o.get("epsilon", 1e-7), o.get("momentum", 0.0)
    v = rho * s.get("v", 0.0) + (1 - rho) * g * g
    s["v"] = v
    if o.get("centered", False):
        mg = rho * s.get("mg", 0.0) + (1 - rho) * g
        s["mg"] = mg
        v = v - mg * mg
    inc = lr * g / (np.sqrt(v) + eps)
    if mom > 0:
        inc = mom * s.get("mom", 0.0) + inc
        s["mom"] = inc
    return theta - inc


def lion(theta, g, s, t, lr, o):
    b1, b2 = _betas(o, (0.9, 0.99))
    m = s.get("m", np.zeros_like(theta))
    out = theta - lr * np.sign(b1 * m + (1 - b1) * g)
    s["m"] = b2 * m + (1 - b2) * g
    return out


def lamb(theta, g, s, t, lr, o):
    b1, b2 = _betas(o)
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    s["m"], s["v"] = m, v
    r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + o.get("epsilon", 1e-7))
    wn, rn = float(np.linalg.norm(theta)), float(np.linalg.norm(r))
    ratio = wn / rn if wn > 0 and rn > 0 else 1.0
    return theta - lr * ratio * r


def ftrl(theta, g, s, t, lr, o):
    p = o.get("learning_rate_power", -0.5)
    l1, l2 = o.get("l1_regularization_strength", 0.0), o.get("l2_regularization_strength", 0.0)
    beta, shrink = o.get("beta", 0.0), o.get("l2_shrinkage_regularization_strength", 0.0)
    n_prev = s.get("n", np.full_like(theta, o.get("initial_accumulator_value", 0.1)))
    z = s.get("z", np.zeros_like(theta))
    n = n_prev + g * g
    sigma = (n ** -p - n_prev ** -p) / lr
    z = z + (g + 2 * shrink * theta) - sigma * theta
    s["n"], s["z"] = n, z
    w = (np.sign(z) * l1 - z) / ((beta + n ** -p) / lr + l2)
    return np.where(np.abs(z) <= l1, 0.0, w)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x * x)))


def adafactor(theta, g, s, t, lr, o):
    eps1, eps2 = o.get("epsilon_1", 1e-30), o.get("epsilon_2", 1e-3)
    d, decay = o.get("clip_threshold", 1.0), o.get("beta_2_decay", -0.8)
    rho = min(lr, 1 / math.sqrt(t)) if o.get("relative_step", True) and not o.get("_schedule") else lr
    alpha = max(eps2, _rms(theta)) * rho
    b2 = 1 - t ** decay
    g2 = g * g + eps1
    if theta.ndim >= 2:
        r = b2 * s.get("r", 0.0) + (1 - b2) * g2.sum(axis=-1)
        c = b2 * s.get("c", 0.0) + (1 - b2) * g2.sum(axis=-2)
        s["r"], s["c"] = r, c
        v = np.outer(r, c) / r.sum()
    else:
        v = b2 * s.get("v", 0.0) + (1 - b2) * g2
        s["v"] = v
    u = g / np.sqrt(v)
    u = u / max(1.0, _rms(u) / d)
    return theta - alpha * u


def newton_schulz(g: np.ndarray, steps: int, a: float, b: float, c: float) -> np.ndarray:
    """Muon's orthogonalisation: ``steps`` iterations X <- a X + (b A + c A A) X, A = X X^T, from
    X = G / (||G||_F + 1e-7), on G^T when G has more rows than columns."""
    tall = g.shape[0] > g.shape[1]
    x = g.T if tall else g
    x = x / (float(np.linalg.norm(x)) + 1e-7)
    for _ in range(steps):
        aa = x @ x.T
        x = a * x + (b * aa + c * aa @ aa) @ x
    return x.T if tall else x


MUON_ABC = (3.4445, -4.775, 2.0315)


def muon(theta, g, s, t, lr, o):
    """One Muon call on one variable (``o["_adamw"]``: this variable takes the AdamW step)."""
    if o.get("_adamw"):
        adam_o = {"beta_1": o.get("adam_beta_1", 0.9), "beta_2": o.get("adam_beta_2", 0.999),
                  "epsilon": o.get("epsilon", 1e-7)}
        return adam(theta, g, s, t, lr * o.get("adam_lr_ratio", 1.0), adam_o)
    mu = o.get("momentum", 0.95)
    buf = mu * s.get("buf", 0.0) + g
    s["buf"] = buf
    u = g + mu * buf if o.get("nesterov", True) else buf
    a, b, c = o.get("muon_a", MUON_ABC[0]), o.get("muon_b", MUON_ABC[1]), o.get("muon_c", MUON_ABC[2])
    x = newton_schulz(u, o.get("ns_steps", 5), a, b, c)
    rms = o.get("rms_rate", 0.2)
    scale = 1.0 if rms is None else rms * math.sqrt(max(theta.shape))
    return theta - lr * scale * x


def muon_takes_adamw(shape: tuple[int, ...], path: str, opts: Mapping[str, Any]) -> bool:
    """The docstring's routing: not 2-D, an embedding (exclude_embeddings, default True), or a
    path containing an exclude_layers keyword."""
    if len(shape) != 2:
        return True
    if opts.get("exclude_embeddings", True) and "embedding" in path.lower():
        return True
    return any(k in path for k in (opts.get("exclude_layers") or ()))


def schedule_free_run(data: Sequence[Mapping[str, np.ndarray]], opts: Mapping[str, Any], base: Mapping[str, Any],
                      steps: int) -> list[list[np.ndarray]]:
    """ScheduleFreeAdamW by Defazio et al. Algorithm 1 (see the module docstring); ``base``:
    learning_rate (a float) and weight_decay. Returns the variables (y) after each call."""
    b1, b2 = opts.get("beta_1", 0.9), opts.get("beta_2", 0.999)
    eps, warm = opts.get("epsilon", 1e-8), opts.get("warmup_steps", 0)
    wd = base.get("weight_decay") or 0.0
    ys = [np.array(d["theta0"], dtype=np.float64) for d in data]
    zs, xs, vs = [y.copy() for y in ys], [y.copy() for y in ys], [np.zeros_like(y) for y in ys]
    weight_sum, history = 0.0, []
    for t in range(1, steps + 1):
        grads = [gradient(y, d, t) for y, d in zip(ys, data)]
        gamma = float(base["learning_rate"]) * math.sqrt(1 - b2 ** t) * (min(1.0, t / warm) if warm else 1.0)
        weight_sum += gamma * gamma
        c = gamma * gamma / weight_sum
        for i, g in enumerate(grads):
            vs[i] = b2 * vs[i] + (1 - b2) * g * g
            zs[i] = zs[i] - gamma * g / (np.sqrt(vs[i]) + eps) - gamma * wd * ys[i]
            xs[i] = (1 - c) * xs[i] + c * zs[i]
            ys[i] = (1 - b1) * zs[i] + b1 * xs[i]
        history.append([y.copy() for y in ys])
    return history


RULES: dict[str, Rule] = {"Muon": muon, "SGD": sgd, "Adam": adam, "AdamW": adam, "Adamax": adamax, "Nadam": nadam,
                          "Adagrad": adagrad, "Adadelta": adadelta, "RMSprop": rmsprop, "Lion": lion, "Lamb": lamb,
                          "Ftrl": ftrl, "Adafactor": adafactor}


def clip(grads: list[np.ndarray], base: Mapping[str, Any]) -> list[np.ndarray]:
    """The documented clipping of one update's gradients (at most one of the three is set)."""
    if base.get("clipnorm"):
        c = base["clipnorm"]
        return [g * c / max(float(np.linalg.norm(g)), c) for g in grads]
    if base.get("global_clipnorm"):
        c = base["global_clipnorm"]
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        return [g * c / max(norm, c) for g in grads]
    if base.get("clipvalue"):
        v = base["clipvalue"]
        return [np.clip(g, -v, v) for g in grads]
    return grads


def reference_run(name: str, data: Sequence[Mapping[str, np.ndarray]], opts: Mapping[str, Any],
                  base: Mapping[str, Any], steps: int, per_variable: Sequence[Mapping[str, Any]] | None = None,
                  ) -> tuple[list[list[np.ndarray]], list[np.ndarray] | None]:
    """``steps`` calls of optimizer ``name`` with its own ``opts`` and the shared options ``base``
    (learning_rate: float or ("exp", ...); weight_decay, clipnorm, global_clipnorm, clipvalue,
    use_ema, ema_momentum, ema_overwrite_frequency, gradient_accumulation_steps; the gradients are
    the objective's, so loss_scale_factor changes nothing here). Returns the variables after each
    call and, with use_ema, the moving averages after the last call (else None). ``per_variable``:
    options merged into ``opts`` for each variable (Muon's ``_adamw`` routing); a ``_weight_decay``
    there replaces base's weight_decay for that variable (Muon's adam_weight_decay)."""
    rule = RULES[name]
    o0 = dict(opts) | {"_schedule": isinstance(base["learning_rate"], tuple)}
    os_ = [o0 | dict(p) for p in per_variable] if per_variable is not None else [o0 for _ in data]
    thetas = [np.array(d["theta0"], dtype=np.float64) for d in data]
    states: list[dict[str, Any]] = [{} for _ in data]
    k = base.get("gradient_accumulation_steps") or 1
    acc = [np.zeros_like(th) for th in thetas]
    avg: list[np.ndarray] | None = None
    history = []
    for i in range(1, steps + 1):
        grads = [gradient(th, d, i) for th, d in zip(thetas, data)]
        acc = [a + g for a, g in zip(acc, grads)]
        if i % k == 0:
            lr = schedule_lr(base["learning_rate"], i - 1)
            mean = clip([a / k for a in acc], base)
            acc = [np.zeros_like(th) for th in thetas]
            wds = [o.get("_weight_decay", base.get("weight_decay")) for o in os_]
            thetas = [th - th * wd * lr if wd else th for th, wd in zip(thetas, wds)]
            thetas = [rule(th, g, st, i // k, lr, o) for th, g, st, o in zip(thetas, mean, states, os_)]
        if base.get("use_ema"):
            m = base.get("ema_momentum", 0.99)
            avg = [th.copy() for th in thetas] if avg is None else [m * a + (1 - m) * th for a, th in zip(avg, thetas)]
            freq = base.get("ema_overwrite_frequency")
            if freq and i % freq == 0:
                thetas = [a.copy() for a in avg]
        history.append([th.copy() for th in thetas])
    return history, avg


def loss_scale_run(data: Sequence[Mapping[str, np.ndarray]], lr: float, initial_scale: float, growth: int,
                   nonfinite: Sequence[bool]) -> tuple[list[list[np.ndarray]], list[float]]:
    """LossScaleOptimizer(SGD(lr)) as documented: each call's gradients are the objective's times
    the current scale (a scaled loss), one entry NaN/inf where ``nonfinite[i]``. A non-finite
    call halves the scale and skips the step; a finite one steps with the unscaled gradients, and
    after ``growth`` finite steps since the scale last changed the scale doubles. Returns the
    variables and the scale after each call."""
    thetas = [np.array(d["theta0"], dtype=np.float64) for d in data]
    scale, count = float(initial_scale), 0
    history, scales = [], []
    for i, bad in enumerate(nonfinite, start=1):
        if bad:
            scale, count = scale / 2, 0
        else:
            thetas = [th - lr * gradient(th, d, i) for th, d in zip(thetas, data)]
            count += 1
            if count == growth:
                scale, count = scale * 2, 0
        history.append([th.copy() for th in thetas])
        scales.append(scale)
    return history, scales
