"""Autocast and autograd together: grad modes inside an autocast region, the weight cache,
nested regions, backward inside and outside (claim precision.torch.autocast-autograd).

torch.autocast changes the dtype an op runs in and nothing else: "Backward ops run in the same
type that autocast used for corresponding forward ops", ``cache_enabled`` only says whether
"the weight cache inside autocast should be enabled", and ``torch.no_grad`` /
``torch.inference_mode`` / ``torch.enable_grad`` keep their meaning inside a region. The
weight cache keeps the low-precision cast of each float32 leaf that requires grad for the rest
of the outermost region; the bugs this family models are the cache remembering a cast made
under ``no_grad`` or ``inference_mode`` (pytorch#65766, #112583, #158232: the next forward
in grad mode gets a weight that carries no gradient, or an inference tensor autograd cannot
save) and a cache that outlives its region (stale weights after ``optimizer.step()``).

Oracle: the explicit-cast program. Outside any region, the same ops run on operands cast as
the Autocast Op Reference lists each op for the device (:func:`.autocast.op_class`: the
lower-listed ``linear`` and ``mm`` on casts to the low dtype, the float32-listed ``mse_loss``
on float32 casts, the unlisted ``relu`` on what it gets). The kernels and their order are the
same, so the loss and every gradient must be bitwise equal; which list an op is on is the
single-op claim's business (precision.torch.autocast). A region's output in ``no_grad`` or
``inference_mode`` must not require grad, and an ``inference_mode`` output must be an
inference tensor.

Each scenario is a sequence of steps in one fresh region (the cache's state depends on what
ran first in it): ``(grad mode, backward?)`` per step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .autocast import op_class

#: grad modes a step of a scenario runs in
GRAD, NO_GRAD, INFERENCE, ENABLE_IN_NO_GRAD = "grad", "no_grad", "inference_mode", "enable_grad-in-no_grad"


@dataclass(frozen=True)
class Scenario:
    """Steps run one after another in one autocast region; ``backward`` steps must give the
    oracle's gradients, the others only the oracle's loss (and no graph)."""

    name: str
    steps: tuple[str, ...]


#: mode name -> steps (each scenario is the documented mode of the claim it checks)
SCENARIOS = (
    Scenario("no_grad-then-grad", (NO_GRAD, GRAD)),
    Scenario("grad-then-no_grad", (GRAD, NO_GRAD)),
    Scenario("inference_mode-then-grad", (INFERENCE, GRAD)),
    Scenario("grad-then-inference_mode", (GRAD, INFERENCE)),
    Scenario("enable_grad-in-no_grad", (NO_GRAD, ENABLE_IN_NO_GRAD)),
    Scenario("repeated-grad", (GRAD, GRAD)),
)

Forward = Callable[..., Any]


def make_inputs(torch: Any, device: str, seed: int = 0) -> dict[str, Any]:
    """Float32 input, target and parameters of a two-layer perceptron (leaves requiring grad)."""
    rng = np.random.default_rng(seed)

    def t(*shape: int, grad: bool = False) -> Any:
        return torch.tensor(rng.standard_normal(shape), dtype=torch.float32, device=device, requires_grad=grad)

    return {"x": t(5, 8), "target": t(5, 3), "w1": t(6, 8, grad=True), "b1": t(6, grad=True), "w2": t(6, 3, grad=True)}


def forward(torch: Any, v: dict[str, Any], cast: Callable[..., tuple[Any, ...]] | None = None) -> Any:
    """The program: mse_loss(relu(linear(x, w1, b1)) @ w2, target). ``cast(op, *operands)``
    casts an op's operands explicitly (the oracle); ``None`` leaves it to autocast."""
    c = cast or (lambda op, *ts: ts)
    f = torch.nn.functional
    h = f.linear(*c("linear", v["x"], v["w1"], v["b1"]))
    h = torch.relu(*c("relu", h))
    y = torch.mm(*c("mm", h, v["w2"]))
    return f.mse_loss(*c("mse_loss", y, v["target"]))


def explicit_cast(torch: Any, device_type: str, low: Any) -> Callable[..., tuple[Any, ...]]:
    """Cast an op's floating operands as the op reference lists the op on ``device_type``."""
    def cast(op: str, *operands: Any) -> tuple[Any, ...]:
        cls = op_class(device_type, op)
        if cls == "lower":
            return tuple(o.to(low) for o in operands)
        if cls == "float32":
            return tuple(o.to(torch.float32) for o in operands)
        if cls == "unlisted":
            return operands
        raise AssertionError(f"the program's op {op} is {cls} on {device_type}: pick ops that cast or pass through")
    return cast


PARAMS = ("w1", "b1", "w2")


def oracle(torch: Any, device_type: str, low: Any, v: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The explicit-cast program's loss and parameter gradients, outside any region."""
    with _autocast_off(torch, device_type):
        loss = forward(torch, v, explicit_cast(torch, device_type, low))
        grads = torch.autograd.grad(loss, [v[p] for p in PARAMS])
    return loss.detach(), dict(zip(PARAMS, grads))


@contextlib.contextmanager
def _autocast_off(torch: Any, device_type: str) -> Iterator[None]:
    with torch.autocast(device_type, enabled=False):
        yield


@contextlib.contextmanager
def _grad_mode(torch: Any, mode: str) -> Iterator[None]:
    if mode == GRAD:
        with torch.enable_grad():
            yield
    elif mode == NO_GRAD:
        with torch.no_grad():
            yield
    elif mode == INFERENCE:
        with torch.inference_mode():
            yield
    elif mode == ENABLE_IN_NO_GRAD:
        with torch.no_grad(), torch.enable_grad():
            yield
    else:
        raise ValueError(f"unknown grad mode {mode!r}")


def _bitwise(torch: Any, got: Any, want: Any, what: str) -> list[str]:
    if got is None:
        return [f"{what}: no gradient (None); the explicit-cast program gives one"]
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        return [f"{what}: {got.dtype} {tuple(got.shape)}, the explicit-cast program gives {want.dtype} {tuple(want.shape)}"]
    a, b = got.detach().cpu().double().numpy(), want.detach().cpu().double().numpy()
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    if same.all():
        return []
    i = np.unravel_index(int(np.argmin(same)), a.shape) if a.ndim else ()
    return [f"{what}: {int((~same).sum())} of {a.size} entries differ from the explicit-cast program (bitwise; "
            f"first at {tuple(int(k) for k in i)}: {a[i]!r} vs {b[i]!r})"]


def scenario_mismatches(torch: Any, device: str, device_type: str, low: Any, scenario: Scenario,
                        cache_enabled: bool, program: Forward = forward) -> list[str]:
    """Run ``scenario``'s steps in one region; every problem, one line each (empty: it holds)."""
    v = make_inputs(torch, device)
    want_loss, want_grads = oracle(torch, device_type, low, v)
    problems: list[str] = []
    where = f"autocast({device_type}, {str(low).replace('torch.', '')}, cache_enabled={cache_enabled}), {scenario.name}"
    with torch.autocast(device_type, dtype=low, cache_enabled=cache_enabled):
        for k, mode in enumerate(scenario.steps, 1):
            step = f"{where}, step {k} ({mode})"
            with _grad_mode(torch, mode):
                loss = program(torch, v)
                if mode in (NO_GRAD, INFERENCE):
                    if loss.requires_grad:
                        problems.append(f"{step}: the loss requires grad")
                    if mode == INFERENCE and not loss.is_inference():
                        problems.append(f"{step}: the loss is not an inference tensor")
                problems += _bitwise(torch, loss, want_loss, f"{step}: loss")
                if mode in (GRAD, ENABLE_IN_NO_GRAD):
                    if not loss.requires_grad:
                        problems.append(f"{step}: the loss does not require grad")
                        continue
                    try:
                        grads = torch.autograd.grad(loss, [v[p] for p in PARAMS], allow_unused=True)
                    except RuntimeError as exc:  # e.g. an inference tensor saved for backward
                        problems.append(f"{step}: backward raised {type(exc).__name__}: {str(exc).splitlines()[0]}")
                        continue
                    for p, g in zip(PARAMS, grads):
                        problems += _bitwise(torch, g, want_grads[p], f"{step}: d loss / d {p}")
    return problems


def backward_mismatches(torch: Any, device: str, device_type: str, low: Any, inside: bool,
                        program: Forward = forward) -> list[str]:
    """loss.backward() inside or after the region: float32 .grad of each float32 leaf, bitwise
    the explicit-cast program's ("Backward ops run in the same type that autocast used")."""
    v = make_inputs(torch, device)
    want_loss, want_grads = oracle(torch, device_type, low, v)
    where = f"autocast({device_type}, {str(low).replace('torch.', '')}), backward {'inside' if inside else 'after'}"
    with torch.autocast(device_type, dtype=low):
        loss = program(torch, v)
        if inside:
            loss.backward()
    if not inside:
        loss.backward()
    problems = _bitwise(torch, loss, want_loss, f"{where}: loss")
    for p in PARAMS:
        problems += _bitwise(torch, v[p].grad, want_grads[p], f"{where}: {p}.grad")
    return problems


def update_mismatches(torch: Any, device: str, device_type: str, low: Any, program: Forward = forward) -> list[str]:
    """Two regions with an in-place weight update between them (the documented training loop's
    optimizer.step()): the second region computes with the updated weights, and a weight frozen
    (requires_grad=False) in the first forward of a region and unfrozen for the second gets its
    gradient in the second."""
    v = make_inputs(torch, device)
    where = f"autocast({device_type}, {str(low).replace('torch.', '')})"
    problems: list[str] = []
    with torch.autocast(device_type, dtype=low):
        program(torch, v).backward()
    with torch.no_grad():
        for p in PARAMS:
            v[p].add_(0.25 * torch.sign(v[p].grad))  # an optimizer step: in place, outside the region
            v[p].grad = None
    want_loss, want_grads = oracle(torch, device_type, low, v)
    with torch.autocast(device_type, dtype=low):
        loss = program(torch, v)
        grads = torch.autograd.grad(loss, [v[p] for p in PARAMS])
    problems += _bitwise(torch, loss, want_loss, f"{where}: loss in the region after the weights changed")
    for p, g in zip(PARAMS, grads):
        problems += _bitwise(torch, g, want_grads[p], f"{where}: d loss / d {p} in the region after the weights changed")
    v["w1"].requires_grad_(False)
    with torch.autocast(device_type, dtype=low):
        frozen = program(torch, v)
        v["w1"].requires_grad_(True)
        loss = program(torch, v)
        if not loss.requires_grad:
            return [*problems, f"{where}: w1 unfrozen inside the region, the next loss does not require grad"]
        grads = torch.autograd.grad(loss, [v[p] for p in PARAMS], allow_unused=True)
    problems += _bitwise(torch, frozen.detach(), want_loss, f"{where}: loss with w1 frozen")
    for p, g in zip(PARAMS, grads):
        problems += _bitwise(torch, g, want_grads[p], f"{where}: d loss / d {p} after w1 was unfrozen in the region")
    return problems


def nested_mismatches(torch: Any, device: str, device_type: str, low: Any,
                      program: Forward | None = None) -> list[str]:
    """The documented subregion pattern: inside autocast, an ``autocast(enabled=False)`` block
    casts its low-precision input to float32 and runs mm in float32; gradients flow through both
    regions as through the explicit program (linear on low casts, mm and mse_loss in float32)."""
    v = make_inputs(torch, device)
    f = torch.nn.functional

    def subregion(torch: Any, v: dict[str, Any]) -> Any:
        h = torch.relu(f.linear(v["x"], v["w1"], v["b1"]))
        with torch.autocast(device_type, enabled=False):
            y = torch.mm(h.float(), v["w2"])
            return f.mse_loss(y, v["target"])

    run = program or subregion
    with _autocast_off(torch, device_type):
        h = torch.relu(f.linear(v["x"].to(low), v["w1"].to(low), v["b1"].to(low)))
        want = f.mse_loss(torch.mm(h.float(), v["w2"]), v["target"])
        want_grads = dict(zip(PARAMS, torch.autograd.grad(want, [v[p] for p in PARAMS])))
    where = f"autocast({device_type}, {str(low).replace('torch.', '')}) with an enabled=False subregion"
    with torch.autocast(device_type, dtype=low):
        loss = run(torch, v)
    problems = _bitwise(torch, loss, want.detach(), f"{where}: loss")
    grads = torch.autograd.grad(loss, [v[p] for p in PARAMS], allow_unused=True)
    for p, g in zip(PARAMS, grads):
        problems += _bitwise(torch, g, want_grads[p], f"{where}: d loss / d {p}")
    return problems


def scenario_names() -> Sequence[str]:
    return [s.name for s in SCENARIOS]
