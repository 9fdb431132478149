"""modules.torch.optimizer-base-class and modules.torch.lr-scheduler-base-class: the documented
protocols of torch.optim.Optimizer and torch.optim.lr_scheduler.LRScheduler, the base classes a
user writes against: add_param_group, state_dict / load_state_dict (the state keyed by
parameter ids matched by position, param_names), zero_grad(set_to_none), the step,
state_dict and load_state_dict hooks (call order, prepend, the pre-hooks' replacements,
handle.remove), a user Optimizer subclass written the way the Optimizer docstring describes
(defaults, param_groups, state), torch.optim.swap_in_optimizer_params_and_state, and a user
LRScheduler subclass overriding get_lr (last_epoch, base_lrs, get_last_lr, state_dict,
the documented step order, the deprecated step(epoch)).

Oracles. Parameter values are compared with a numpy reference of SGD's documented rule
(:func:`reference_sgd_step`: weight decay, momentum buffer with dampening, lr) run on the same
deterministic objective (a quadratic with a drifting linear term, :func:`gradient`), so the
learning rate and the state each step used are visible in the parameters. Round trips
(state_dict, the scheduler's state) are compared bitwise with the run never interrupted. The
protocols themselves (which hook runs when and with what, which group gets which default,
which epoch's value lands in the group) are compared exactly with what the docstrings say.

Error model (float64). One SGD step is at most 6 elementwise operations per side (weight
decay, momentum, update) plus the gradient's 4 (the cosine within 2 u), each within u; two
independently rounded computations differ by at most twice that. Rounding made at step s
reaches step t through the later step maps, whose normwise condition is at most K = 2 here
(|1 - lr a| <= 1 with lr a <= 0.5, a momentum buffer growing by at most 1 + momentum <= 1.9):
after t steps at most (K^t - 1) / (K - 1) times the one-step bound, 15x at t = 4, about 1e-14
relative. A wrong learning rate, a skipped or an extra step moves a parameter by 1e-3 relative
or more.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import Tolerance, assert_close, assert_equal, evidence, tolerance

OPT = "modules.torch.optimizer-base-class"
SCHED = "modules.torch.lr-scheduler-base-class"
STEPS = 4
K = 2.0  # the per-step condition of the error model (module docstring)
SHAPES = ((3, 4), (4,), (2, 3))


# ----------------------------------------------------------------- the numpy reference


def problem(shapes: Sequence[tuple[int, ...]] = SHAPES, seed: int = 7) -> list[dict[str, np.ndarray]]:
    """Per parameter: its start theta0 and the objective's curvature a (in [0.5, 1.5]), centre c
    and phase (the drifting linear term)."""
    rng = np.random.default_rng(seed)
    return [{"theta0": rng.normal(size=s), "a": rng.uniform(0.5, 1.5, size=s), "c": rng.normal(size=s),
             "phase": rng.uniform(0, 2 * np.pi, size=s)} for s in shapes]


def gradient(theta: np.ndarray, d: Mapping[str, np.ndarray], t: int) -> np.ndarray:
    """The objective's gradient at step t: a (theta - c) + 0.5 cos(1.3 t + phase)."""
    return d["a"] * (theta - d["c"]) + 0.5 * np.cos(1.3 * t + d["phase"])


def reference_sgd_step(theta: np.ndarray, buf: np.ndarray | None, g: np.ndarray, *, lr: float, momentum: float = 0.0,
                       dampening: float = 0.0, weight_decay: float = 0.0) -> tuple[np.ndarray, np.ndarray | None]:
    """SGD's documented box: g += weight_decay theta; with momentum, b = g at the first step and
    b = momentum b + (1 - dampening) g after, g = b; theta -= lr g. Returns (theta, b)."""
    if weight_decay:
        g = g + weight_decay * theta
    if momentum:
        buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
        g = buf
    return theta - lr * g, buf


def reference_sgd(data: Sequence[Mapping[str, np.ndarray]], options: Sequence[Mapping[str, float]], steps: int,
                  lrs: Callable[[int, int], float] | None = None) -> list[list[np.ndarray]]:
    """``steps`` steps of the reference, parameter i with ``options[i]`` (its group's options);
    ``lrs(t, i)``, when given, is the lr of parameter i at step t (a scheduler's). The
    parameters after each step."""
    theta = [np.asarray(d["theta0"], dtype=np.float64) for d in data]
    bufs: list[np.ndarray | None] = [None] * len(theta)
    out = []
    for t in range(1, steps + 1):
        for i, d in enumerate(data):
            opts = dict(options[i])
            if lrs is not None:
                opts["lr"] = lrs(t, i)
            theta[i], bufs[i] = reference_sgd_step(theta[i], bufs[i], gradient(theta[i], d, t), **opts)
        out.append([x.copy() for x in theta])
    return out


def step_tolerance(t: int) -> Tolerance:
    one = tolerance("float64", ops=2 * (6 + 4))
    return Tolerance(one.rtol * (K ** t - 1) / (K - 1), f"{t} steps x K={K:g} growth of [{one.why}]", dtype="float64")


def assert_matches_reference(got: Sequence[Sequence[np.ndarray]], want: Sequence[Sequence[np.ndarray]], *,
                             what: str) -> None:
    """``got[t][i]`` (parameter i after step t + 1) within the error model of the reference's."""
    __tracebackhide__ = True
    if len(got) != len(want):
        raise AssertionError(f"{what}: {len(got)} steps recorded, but the reference ran {len(want)}")
    for t, (row, ref) in enumerate(zip(got, want)):
        for i, (a, e) in enumerate(zip(row, ref)):
            assert_close(a, e, step_tolerance(t + 1), what=f"{what}: parameter {i} {np.shape(e)} after step {t + 1}",
                         name="parameters vs the SGD reference")


# ----------------------------------------------------------------- the torch side


def leaves(torch, data: Sequence[Mapping[str, np.ndarray]]) -> list[Any]:
    return [torch.tensor(d["theta0"], dtype=torch.float64, requires_grad=True) for d in data]


def set_gradients(torch, params: Sequence[Any], data: Sequence[Mapping[str, np.ndarray]], t: int,
                  only: Sequence[int] | None = None) -> None:
    """p.grad = the objective's gradient at step t, computed by torch (for the parameters in
    ``only``, all by default)."""
    for i, (p, d) in enumerate(zip(params, data)):
        if only is not None and i not in only:
            continue
        a, c, ph = (torch.tensor(d[k], dtype=torch.float64) for k in ("a", "c", "phase"))
        p.grad = a * (p.detach() - c) + 0.5 * torch.cos(1.3 * t + ph)


def run(torch, opt: Any, params: Sequence[Any], data: Sequence[Mapping[str, np.ndarray]], start: int, stop: int,
        scheduler: Any = None) -> list[list[np.ndarray]]:
    """Steps start..stop (gradient, optimizer step, then the scheduler's step); the parameters
    after each."""
    out = []
    for t in range(start, stop + 1):
        set_gradients(torch, params, data, t)
        opt.step()
        if scheduler is not None:
            scheduler.step()
        out.append([p.detach().cpu().numpy().copy() for p in params])
    return out


def host(t: Any) -> np.ndarray:
    """A tensor's values as a numpy array on the host."""
    return t.detach().cpu().numpy()


def snapshot(torch, opt: Any) -> dict[str, Any]:
    """A deep copy of the optimizer's state_dict (tensors cloned)."""
    return copy.deepcopy(opt.state_dict())


def assert_same_state(a: Mapping[int, Mapping[str, Any]], b: Mapping[int, Mapping[str, Any]], *, what: str) -> None:
    __tracebackhide__ = True
    assert sorted(a) == sorted(b), f"{what}: state keys {sorted(b)}, but should be {sorted(a)}"
    for k in a:
        assert sorted(a[k]) == sorted(b[k]), f"{what}: state[{k}] has {sorted(b[k])}, should have {sorted(a[k])}"
        for key, value in a[k].items():
            if hasattr(value, "detach"):
                assert_equal(b[k][key].detach().cpu().numpy(), value.detach().cpu().numpy(), what=f"{what}: state[{k}][{key!r}]")
            else:
                assert b[k][key] == value, f"{what}: state[{k}][{key!r}] is {b[k][key]!r}, should be {value!r}"


# ----------------------------------------------------------------- add_param_group

ADDED = [{"lr": 0.03}, {"weight_decay": 0.2, "dampening": 0.3}]


def check_add_param_group(torch, cls: Any) -> None:
    """``cls`` (torch.optim.SGD or a stand-in) built over parameter 0 with lr=0.1, momentum=0.9,
    weight_decay=0.01; parameters 1 and 2 added with add_param_group and their own options
    (ADDED): each new group holds the given options and, for every other option, the
    optimizer's default; the steps use each group's own options."""
    __tracebackhide__ = True
    data = problem()
    params = leaves(torch, data)
    base = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}
    opt = cls([params[0]], **base)
    for p, extra in zip(params[1:], ADDED):
        opt.add_param_group({"params": [p], **extra})
    for g, extra in enumerate(ADDED, start=1):
        group = opt.param_groups[g]
        want = {**opt.defaults, **extra}
        wrong = {k: (group.get(k, "<missing>"), v) for k, v in want.items() if group.get(k, "<missing>") != v}
        assert not wrong, f"add_param_group({extra}): option (got, should be): {wrong}"
        assert group["params"] == [params[g]], f"group {g} should hold the added parameter"
    options = [base] + [{k: v for k, v in {**opt.defaults, **extra}.items()
                         if k in ("lr", "momentum", "dampening", "weight_decay")} for extra in ADDED]
    got = run(torch, opt, params, data, 1, STEPS)
    assert_matches_reference(got, reference_sgd(data, options, STEPS), what=f"{cls.__name__} after add_param_group")


@pytest.mark.claim(OPT)
def test_add_param_group_fills_defaults_and_steps_with_its_options(torch):
    with torch.device("cpu"):
        check_add_param_group(torch, torch.optim.SGD)
    evidence.covers("add_param_group")


# ----------------------------------------------------------------- state_dict and load_state_dict

GROUPS = ((0,), (1, 2))  # parameter indices per group
GROUP_OPTIONS = ({"lr": 0.1}, {"lr": 0.2, "weight_decay": 0.05})
NAMES = ("enc.weight", "enc.bias", "head.weight")


def _grouped(torch, params: Sequence[Any], named: bool) -> list[dict[str, Any]]:
    return [{"params": [(NAMES[i], params[i]) if named else params[i] for i in idx], **o}
            for idx, o in zip(GROUPS, GROUP_OPTIONS)]


def check_state_dict_round_trip(torch, cls: Any, named: bool) -> None:
    """SGD(momentum=0.9) over two groups, 2 steps, group 1's lr changed to 0.05 by hand, then
    state_dict(): 'state' maps parameter ids to each parameter's state and 'param_groups' lists
    each group's options with its parameters' ids (and 'param_names' when built from names),
    the parameters themselves not saved; the ids matched by position to the optimizer's
    parameters give each its own state. Saved with torch.save and loaded into a fresh optimizer
    over copies (built with the old lr), 2 more steps equal the uninterrupted run bitwise, which
    follows the reference with the changed lr."""
    __tracebackhide__ = True
    data = problem()
    params = leaves(torch, data)
    opt = cls(_grouped(torch, params, named), momentum=0.9)
    run(torch, opt, params, data, 1, 2)
    opt.param_groups[1]["lr"] = 0.05
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}, f"state_dict keys {sorted(sd)}, should be ['param_groups', 'state']"
    ids = [list(g["params"]) for g in sd["param_groups"]]
    flat = [i for g in ids for i in g]
    assert [len(g) for g in ids] == [len(g) for g in GROUPS] and len(set(flat)) == len(flat), (
        f"param_groups' params {ids}: one distinct id per parameter, grouped as {GROUPS}")
    for g, (saved, live) in enumerate(zip(sd["param_groups"], opt.param_groups)):
        options = {k: v for k, v in live.items() if k not in ("params", "param_names")}
        assert {k: saved.get(k) for k in options} == options, f"group {g}: saved options {saved}, should be {options}"
        if named:
            want = [NAMES[i] for i in GROUPS[g]]
            assert saved.get("param_names") == want, f"group {g}: param_names {saved.get('param_names')}, should be {want}"
        for pid, p in zip(saved["params"], live["params"]):
            assert_equal(host(sd["state"][pid]["momentum_buffer"]), host(opt.state[p]["momentum_buffer"]),
                         what=f"state_dict()['state'][{pid}] vs the state of group {g}'s parameter at that position")
    stored = [v for s in sd["state"].values() for v in s.values()]
    assert not any(v is p for v in stored for p in params), "state_dict saved a parameter itself"
    evidence.covers("state_dict")
    if named:
        evidence.covers("state_dict+param_names")
    buf = io.BytesIO()
    torch.save(sd, buf)
    resumed = [p.detach().clone().requires_grad_(True) for p in params]
    uninterrupted = run(torch, opt, params, data, 3, STEPS)
    buf.seek(0)
    fresh = cls(_grouped(torch, resumed, named), momentum=0.9)
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    assert fresh.param_groups[1]["lr"] == 0.05, f"loaded lr {fresh.param_groups[1]['lr']}, should be the saved 0.05"
    again = run(torch, fresh, resumed, data, 3, STEPS)
    for t, (a, b) in enumerate(zip(again, uninterrupted)):
        for i, (x, y) in enumerate(zip(a, b)):
            assert_equal(x, y, what=f"parameter {i} at step {t + 3} after load_state_dict vs the uninterrupted run")
    assert_same_state(copy.deepcopy(opt.state_dict()["state"]), copy.deepcopy(fresh.state_dict()["state"]),
                      what="resumed optimizer")
    options = [GROUP_OPTIONS[0], GROUP_OPTIONS[1], GROUP_OPTIONS[1]]
    lr = lambda t, i: 0.05 if (i > 0 and t > 2) else options[i]["lr"]
    want = reference_sgd(data, [{**o, "momentum": 0.9} for o in options], STEPS, lrs=lr)
    assert_matches_reference(uninterrupted, want[2:], what="SGD with group 1's lr set to 0.05 after step 2")


@pytest.mark.claim(OPT)
@pytest.mark.parametrize("named", [False, True], ids=["parameters", "named_parameters"])
def test_state_dict_maps_state_by_ids_and_round_trips(torch, named):
    with torch.device("cpu"):
        check_state_dict_round_trip(torch, torch.optim.SGD, named)
    evidence.covers("load_state_dict+round-trip")


@pytest.mark.claim(OPT)
def test_load_state_dict_param_names_do_not_affect_loading(torch):
    """load_state_dict's note: param_names do not affect loading (the state goes by position,
    here to parameters named in the reverse order); names in the loaded dict are saved and
    override the optimizer's; without names in the loaded dict the optimizer keeps its own."""
    data = problem(((3,), (2,)))
    with torch.device("cpu"):
        src = leaves(torch, data)
        a = torch.optim.SGD([("w", src[0]), ("b", src[1])], lr=0.1, momentum=0.9)
        run(torch, a, src, data, 1, 1)
        sd = copy.deepcopy(a.state_dict())
        dst = leaves(torch, data)
        b = torch.optim.SGD([("b", dst[0]), ("w", dst[1])], lr=0.1, momentum=0.9)
        b.load_state_dict(sd)
        for i, p in enumerate(dst):
            assert_equal(host(b.state[p]["momentum_buffer"]), host(a.state[src[i]]["momentum_buffer"]),
                         what=f"momentum buffer of position {i} after loading, whatever the names")
        got = b.state_dict()["param_groups"][0].get("param_names")
        assert got == ["w", "b"], f"param_names after loading a named state_dict: {got}, should be the loaded ['w', 'b']"
        unnamed = torch.optim.SGD(leaves(torch, data), lr=0.1, momentum=0.9)
        run(torch, unnamed, list(unnamed.param_groups[0]["params"]), data, 1, 1)
        c = torch.optim.SGD([("x", dst[0]), ("y", dst[1])], lr=0.1, momentum=0.9)
        c.load_state_dict(unnamed.state_dict())
        kept = c.state_dict()["param_groups"][0].get("param_names")
        assert kept == ["x", "y"], f"param_names after loading an unnamed state_dict: {kept}, should stay ['x', 'y']"
    evidence.covers("load_state_dict+param_names")


# ----------------------------------------------------------------- zero_grad


def check_zero_grad(torch, cls: Any, set_to_none: bool) -> None:
    """After one step of cls(lr=0.1, momentum=0.9, weight_decay=0.1), zero_grad(set_to_none):
    the gradients are None, or zeros. A step then skips the parameters whose gradient is None
    (parameters and state unchanged) and steps with a zero gradient otherwise (weight decay and
    momentum still move them, as the reference says). After zero_grad(set_to_none=True) a
    backward pass leaves .grad None for the parameters that got no gradient."""
    __tracebackhide__ = True
    data = problem()
    params = leaves(torch, data)
    opts = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1}
    opt = cls(params, **opts)
    run(torch, opt, params, data, 1, 1)
    before = [p.detach().cpu().numpy().copy() for p in params]
    bufs = [opt.state[p]["momentum_buffer"].detach().cpu().numpy().copy() for p in params]
    opt.zero_grad(set_to_none=set_to_none)
    for i, p in enumerate(params):
        if set_to_none:
            assert p.grad is None, f"zero_grad(set_to_none=True): parameter {i}'s grad is {p.grad}, should be None"
        else:
            assert p.grad is not None and not bool(p.grad.any()), (
                f"zero_grad(set_to_none=False): parameter {i}'s grad should be a tensor of zeros, got {p.grad}")
    opt.step()
    for i, p in enumerate(params):
        got = p.detach().cpu().numpy()
        if set_to_none:
            assert_equal(got, before[i], what=f"parameter {i} after a step with grad None (the step is skipped)")
            assert_equal(host(opt.state[p]["momentum_buffer"]), bufs[i], what=f"momentum buffer {i} after a skipped step")
        else:
            want, _ = reference_sgd_step(before[i], bufs[i], np.zeros_like(before[i]), **opts)
            assert_close(got, want, step_tolerance(1), what=f"parameter {i} after a step with a zero gradient")
    if set_to_none:
        opt.zero_grad(set_to_none=True)
        (params[0] * params[0]).sum().backward()
        assert params[0].grad is not None and all(p.grad is None for p in params[1:]), (
            "after zero_grad(set_to_none=True) and a backward pass through parameter 0 only, the others' grads "
            f"should stay None, got {[None if p.grad is None else 'tensor' for p in params]}")


@pytest.mark.claim(OPT)
@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_set_to_none(torch, set_to_none):
    with torch.device("cpu"):
        check_zero_grad(torch, torch.optim.SGD, set_to_none)
    evidence.covers(f"zero_grad+set_to_none={set_to_none}")


# ----------------------------------------------------------------- step hooks


def check_step_hooks(torch, cls: Any) -> None:
    """register_step_pre_hook / register_step_post_hook on cls(lr=0.1): the pre-hook runs before
    the update (it sees the old parameters) with (optimizer, args, kwargs), the post-hook after
    (it sees the updated ones); a pre-hook returning (new_args, new_kwargs) makes step() run with
    them (here a replaced closure, whose loss step() returns); after handle.remove() neither
    runs."""
    __tracebackhide__ = True
    data = problem()
    params = leaves(torch, data)
    opt = cls(params, lr=0.1)
    calls: list[tuple[str, Any, Any, list[np.ndarray]]] = []

    def pre(o, args, kwargs):
        calls.append(("pre", o, dict(kwargs), [p.detach().cpu().numpy().copy() for p in params]))
        if "closure" in kwargs:
            return args, {**kwargs, "closure": lambda: 42.0}
        return None

    def post(o, args, kwargs):
        calls.append(("post", o, dict(kwargs), [p.detach().cpu().numpy().copy() for p in params]))

    h_pre, h_post = opt.register_step_pre_hook(pre), opt.register_step_post_hook(post)
    before = [p.detach().cpu().numpy().copy() for p in params]
    set_gradients(torch, params, data, 1)
    loss = opt.step(closure=lambda: 1.0)
    want = reference_sgd(data, [{"lr": 0.1}] * len(data), 1)[0]
    assert [c[0] for c in calls] == ["pre", "post"], f"hooks ran as {[c[0] for c in calls]}, should be ['pre', 'post']"
    assert all(c[1] is opt for c in calls), "a step hook's first argument should be the optimizer"
    for i in range(len(params)):
        assert_equal(calls[0][3][i], before[i], what=f"parameter {i} as the pre-hook saw it (before the update)")
        assert_close(calls[1][3][i], want[i], step_tolerance(1), what=f"parameter {i} as the post-hook saw it")
    evidence.covers("step_pre_hook", "step_post_hook")
    assert loss == 42.0, f"step() returned {loss}: the pre-hook's replaced closure (loss 42.0) should have run"
    assert calls[1][2].get("closure") is not None and calls[1][2]["closure"]() == 42.0, (
        "the post-hook should see the kwargs the pre-hook returned")
    evidence.covers("step_pre_hook+new-args")
    h_pre.remove()
    h_post.remove()
    set_gradients(torch, params, data, 2)
    opt.step()
    assert len(calls) == 2, f"hooks ran {len(calls) - 2} more times after handle.remove()"
    evidence.covers("hook-remove")


@pytest.mark.claim(OPT)
def test_step_hooks(torch):
    with torch.device("cpu"):
        check_step_hooks(torch, torch.optim.SGD)
        seen = []
        opt = torch.optim.SGD(leaves(torch, problem()), lr=0.1)
        opt.register_step_pre_hook(lambda o, args, kwargs: seen.append(len(args)))
        opt.step()
    # Recorded, not asserted: whether args holds the optimizer itself as args[0] (the docstring
    # does not say whether "args" includes self).
    evidence.note(step_hook_args_len_for_step_without_arguments=seen[0])


# ----------------------------------------------------------------- state_dict and load_state_dict hooks


def _order_hooks(register: Callable[..., Any], log: list[str], returns: Any = None) -> list[Any]:
    """Three hooks a, b (appended) and c (prepend=True): the documented firing order is c, a, b."""
    def hook(name):
        def h(*args):
            log.append(name)
            return returns(*args) if returns else None
        return h
    return [register(hook("a")), register(hook("b")), register(hook("c"), prepend=True)]


def check_state_dict_hooks(torch, cls: Any) -> None:
    """register_state_dict_pre_hook: hook(optimizer) runs before state_dict (it may change what
    is saved); register_state_dict_post_hook: hook(optimizer, state_dict) runs after, may edit
    the dict in place or return a new one, which state_dict() returns. prepend=True fires a hook
    before the ones already registered; handle.remove() removes it."""
    __tracebackhide__ = True
    params = leaves(torch, problem())
    opt = cls(params, lr=0.1)
    log: list[str] = []
    handles = _order_hooks(opt.register_state_dict_pre_hook, log)
    first = opt.register_state_dict_pre_hook(lambda o: o.param_groups[0].__setitem__("lr", 0.25))
    sd = opt.state_dict()
    assert log == ["c", "a", "b"], f"state_dict pre-hooks fired as {log}, should be ['c', 'a', 'b'] (c prepended)"
    assert sd["param_groups"][0]["lr"] == 0.25, "a state_dict pre-hook's change should be in the saved dict"
    evidence.covers("state_dict_pre_hook")
    for h in [*handles, first]:
        h.remove()
    log.clear()
    handles = _order_hooks(opt.register_state_dict_post_hook, log)
    edit = opt.register_state_dict_post_hook(lambda o, d: d.__setitem__("edited", True))
    sd = opt.state_dict()
    assert log == ["c", "a", "b"] and sd.get("edited") is True, (
        f"state_dict post-hooks fired as {log} (should be ['c', 'a', 'b']); an in-place edit should be returned")
    new = {"replaced": True}
    replace = opt.register_state_dict_post_hook(lambda o, d: new)
    assert opt.state_dict() is new, "a state_dict post-hook returning a new dict: state_dict() should return it"
    evidence.covers("state_dict_post_hook", "prepend")
    for h in [*handles, edit, replace]:
        h.remove()
    log.clear()
    sd = opt.state_dict()
    assert log == [] and "edited" not in sd, "state_dict hooks still ran after handle.remove()"


def check_load_state_dict_hooks(torch, cls: Any) -> None:
    """register_load_state_dict_pre_hook: hook(optimizer, state_dict) runs before loading with a
    shallow copy of the dict passed in; an in-place edit or a returned dict is what gets
    loaded. register_load_state_dict_post_hook: hook(optimizer) runs after loading (it sees the
    loaded options and state). prepend=True fires first; handle.remove() removes it."""
    __tracebackhide__ = True
    data = problem()
    src = leaves(torch, data)
    a = cls(src, lr=0.1, momentum=0.9)
    run(torch, a, src, data, 1, 1)
    sd = a.state_dict()
    b = cls(leaves(torch, data), lr=0.3, momentum=0.9)
    log: list[str] = []
    seen: dict[str, Any] = {}

    def record(o, d):
        seen["dict"] = d
        seen["top_keys_ok"] = set(d) == set(sd)
        d["extra"] = 1  # must not reach the caller's dict (a shallow copy)

    handles = [*_order_hooks(b.register_load_state_dict_pre_hook, log), b.register_load_state_dict_pre_hook(record)]
    post_log: list[tuple[float, int]] = []
    post = b.register_load_state_dict_post_hook(lambda o: post_log.append((o.param_groups[0]["lr"], len(o.state))))
    b.load_state_dict(sd)
    assert log == ["c", "a", "b"], f"load_state_dict pre-hooks fired as {log}, should be ['c', 'a', 'b'] (c prepended)"
    assert seen["dict"] is not sd and seen["top_keys_ok"] and "extra" not in sd, (
        "a load_state_dict pre-hook should get a shallow copy of the dict passed in, not the dict itself")
    assert post_log == [(0.1, len(src))], (f"the post-hook saw (lr, number of states) {post_log}, but after loading "
                                           f"they are (0.1, {len(src)})")
    evidence.covers("load_state_dict_post_hook")
    for h in [*handles, post]:
        h.remove()

    def lower(o, d):
        d = {**d, "param_groups": [{**g, "lr": 0.05} for g in d["param_groups"]]}
        return d

    c = cls(leaves(torch, data), lr=0.3, momentum=0.9)
    h = c.register_load_state_dict_pre_hook(lower)
    c.load_state_dict(sd)
    assert c.param_groups[0]["lr"] == 0.05, f"lr {c.param_groups[0]['lr']}: the pre-hook's returned dict (lr 0.05) should load"
    h.remove()
    d = cls(leaves(torch, data), lr=0.3, momentum=0.9)
    d.register_load_state_dict_pre_hook(lambda o, s: s["param_groups"][0].__setitem__("lr", 0.07))
    d.load_state_dict(copy.deepcopy(sd))
    assert d.param_groups[0]["lr"] == 0.07, f"lr {d.param_groups[0]['lr']}: the pre-hook's in-place edit (0.07) should load"
    evidence.covers("load_state_dict_pre_hook")


@pytest.mark.claim(OPT)
def test_state_dict_hooks(torch):
    with torch.device("cpu"):
        check_state_dict_hooks(torch, torch.optim.SGD)


@pytest.mark.claim(OPT)
def test_load_state_dict_hooks(torch):
    with torch.device("cpu"):
        check_load_state_dict_hooks(torch, torch.optim.SGD)


# ----------------------------------------------------------------- a user subclass


def user_optimizer(torch) -> type:
    """A heavy-ball optimizer written the way the Optimizer docstring describes: the options'
    defaults passed as ``defaults``, the step reading each group's options from param_groups
    and keeping per-parameter state in self.state (b = g, then b = momentum b + g;
    theta -= lr b: SGD's rule with dampening 0)."""

    class HeavyBall(torch.optim.Optimizer):
        def __init__(self, params, lr: float = 0.1, momentum: float = 0.0) -> None:
            super().__init__(params, {"lr": lr, "momentum": momentum})

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = p.grad.clone()
                    else:
                        state["momentum_buffer"].mul_(group["momentum"]).add_(p.grad)
                    p.add_(state["momentum_buffer"], alpha=-group["lr"])
            return loss

    return HeavyBall


@pytest.mark.claim(OPT)
def test_user_optimizer_subclass(torch):
    """A user subclass gets the base class's protocol: defaults fill each group (also an added
    one), its step follows its rule (the SGD reference with dampening 0), its state is keyed by
    parameter and round-trips through state_dict/load_state_dict bitwise, and the step hooks
    run around its step."""
    cls = user_optimizer(torch)
    data = problem()
    with torch.device("cpu"):
        params = leaves(torch, data)
        opt = cls([{"params": [params[0]], "lr": 0.05}, {"params": [params[1]]}], momentum=0.9)
        opt.add_param_group({"params": [params[2]], "momentum": 0.5})
        groups = [{k: g[k] for k in ("lr", "momentum")} for g in opt.param_groups]
        want = [{"lr": 0.05, "momentum": 0.9}, {"lr": 0.1, "momentum": 0.9}, {"lr": 0.1, "momentum": 0.5}]
        assert groups == want, f"the subclass's groups {groups}, should be {want} (defaults where a group is silent)"
        calls: list[str] = []
        opt.register_step_pre_hook(lambda *a: calls.append("pre"))
        opt.register_step_post_hook(lambda *a: calls.append("post"))
        got = run(torch, opt, params, data, 1, 2)
        assert calls == ["pre", "post"] * 2, f"step hooks on the subclass ran as {calls}"
        assert set(opt.state) == set(params), "the subclass's state should be keyed by its parameters"
        sd = snapshot(torch, opt)
        resumed = [p.detach().clone().requires_grad_(True) for p in params]
        got += run(torch, opt, params, data, 3, STEPS)
        fresh = cls([{"params": [resumed[0]], "lr": 0.05}, {"params": [resumed[1]]}], momentum=0.9)
        fresh.add_param_group({"params": [resumed[2]], "momentum": 0.5})
        fresh.load_state_dict(sd)
        again = run(torch, fresh, resumed, data, 3, STEPS)
    for t, (a, b) in enumerate(zip(again, got[2:])):
        for i, (x, y) in enumerate(zip(a, b)):
            assert_equal(x, y, what=f"subclass parameter {i} at step {t + 3} after load_state_dict vs uninterrupted")
    assert_matches_reference(got, reference_sgd(data, want, STEPS), what="user Optimizer subclass (heavy ball)")
    evidence.covers("subclass")


# ----------------------------------------------------------------- swap_in_optimizer_params_and_state


@pytest.mark.claim(OPT)
def test_swap_in_optimizer_params_and_state(torch):
    """swap_in_optimizer_params_and_state(optimizer, params, state_dict): inside the context
    step() acts on the supplied tensors with the supplied state and per-group options (hooks see
    them too); the supplied state's tensors are updated in place; on exit the live optimizer's
    parameters, options and state are as before, the live parameters untouched."""
    data = problem()
    with torch.device("cpu"):
        live = leaves(torch, data)
        opt = torch.optim.SGD(live, lr=0.1, momentum=0.9)
        run(torch, opt, live, data, 1, 1)  # 'its state must already be initialized'
        live_before = [p.detach().cpu().numpy().copy() for p in live]
        state_before = snapshot(torch, opt)
        swap_sd = snapshot(torch, opt)
        swap_sd["param_groups"][0]["lr"] = 0.5
        bufs = [swap_sd["state"][i]["momentum_buffer"].detach().cpu().numpy().copy() for i in range(len(live))]
        swap = {f"p{i}": torch.tensor(d["theta0"] + 1.0, dtype=torch.float64) for i, d in enumerate(data)}
        start = [t.numpy().copy() for t in swap.values()]
        set_gradients(torch, list(swap.values()), data, 2)
        seen: list[tuple[float, bool]] = []
        h = opt.register_step_pre_hook(lambda o, a, k: seen.append(
            (o.param_groups[0]["lr"], all(x is y for x, y in zip(o.param_groups[0]["params"], swap.values())))))
        with torch.optim.swap_in_optimizer_params_and_state(opt, swap, swap_sd):
            opt.step()
        h.remove()
        assert seen == [(0.5, True)], f"the step hook saw (lr, swapped parameters) {seen}, should be [(0.5, True)]"
        for i, (d, t) in enumerate(zip(data, swap.values())):
            want, buf = reference_sgd_step(start[i], bufs[i], gradient(start[i], d, 2), lr=0.5, momentum=0.9)
            assert_close(t.numpy(), want, step_tolerance(1), what=f"swapped-in parameter {i} after a step with lr 0.5")
            assert_close(swap_sd["state"][i]["momentum_buffer"].detach().cpu().numpy(), buf, step_tolerance(1),
                         what=f"the supplied state's momentum buffer {i} (updated in place)")
        for i, p in enumerate(live):
            assert_equal(p.detach().cpu().numpy(), live_before[i], what=f"live parameter {i} after the context")
        assert opt.param_groups[0]["lr"] == 0.1 and all(x is y for x, y in zip(opt.param_groups[0]["params"], live)), (
            "on exit the live param_groups (lr 0.1, the live parameters) should be restored")
        assert_same_state(state_before["state"], snapshot(torch, opt)["state"], what="live optimizer state after the context")
    evidence.covers("swap_in_optimizer_params_and_state")


# ----------------------------------------------------------------- LRScheduler subclasses

BASES = (0.1, 0.03)
GAMMA = 0.7


def closed_form(base: float, epoch: int) -> float:
    """The closed-form subclass's schedule: base / (1 + epoch) * GAMMA ** (epoch // 2)."""
    return base / (1 + epoch) * GAMMA ** (epoch // 2)


def chainable(base: float, epoch: int) -> float:
    """The chainable subclass's schedule: lr times GAMMA at each step after the first, so
    base * GAMMA^epoch, evaluated the same way (one multiplication per epoch)."""
    lr = base
    for _ in range(epoch):
        lr = lr * GAMMA
    return lr


REFERENCE = {"closed-form": closed_form, "chainable": chainable}


def user_schedulers(torch) -> dict[str, type]:
    """Two LRScheduler subclasses overriding get_lr as documented: one from base_lrs and
    last_epoch, one from the groups' current lrs."""
    from torch.optim.lr_scheduler import LRScheduler

    class ClosedForm(LRScheduler):
        def get_lr(self):
            return [closed_form(base, self.last_epoch) for base in self.base_lrs]

    class Chainable(LRScheduler):
        def get_lr(self):
            if self.last_epoch == 0:
                return [group["lr"] for group in self.optimizer.param_groups]
            return [group["lr"] * GAMMA for group in self.optimizer.param_groups]

    return {"closed-form": ClosedForm, "chainable": Chainable}


def _groups(torch, params: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"params": [params[0]], "lr": BASES[0]}, {"params": list(params[1:]), "lr": BASES[1]}]


def check_scheduler(torch, cls: Any, kind: str) -> None:
    """A user LRScheduler subclass over SGD with two groups: after construction last_epoch is 0,
    base_lrs are the groups' initial lrs and each group's lr is get_lr() at epoch 0; after each
    optimizer.step() then scheduler.step(), last_epoch is t, each group's lr is the schedule's
    value at t and get_last_lr() returns them; the optimizer's steps use them (the SGD
    reference with lr_t). state_dict holds every attribute but the optimizer; a scheduler and
    optimizer restored mid-run (scheduler first, as LRScheduler's warning says) continue
    bitwise."""
    __tracebackhide__ = True
    f = REFERENCE[kind]
    data = problem()
    params = leaves(torch, data)
    opt = torch.optim.SGD(_groups(torch, params), lr=1.0)
    sched = cls(opt)
    group_of = [0] + [1] * (len(params) - 1)
    assert sched.last_epoch == 0 and list(sched.base_lrs) == list(BASES), (
        f"after construction last_epoch {sched.last_epoch}, base_lrs {sched.base_lrs}; should be 0 and {list(BASES)}")
    history = [[g["lr"] for g in opt.param_groups]]
    last = [list(sched.get_last_lr())]
    got = []
    for t in range(1, STEPS + 1):
        got += run(torch, opt, params, data, t, t, scheduler=sched)
        assert sched.last_epoch == t, f"last_epoch {sched.last_epoch} after {t} steps"
        history.append([g["lr"] for g in opt.param_groups])
        last.append(list(sched.get_last_lr()))
        if t == 2:
            sd_sched, sd_opt = copy.deepcopy(sched.state_dict()), snapshot(torch, opt)
            resumed = [p.detach().clone().requires_grad_(True) for p in params]
    want = [[f(b, t) for b in BASES] for t in range(STEPS + 1)]
    assert history == want, f"{kind}: the groups' lrs per epoch {history}, but the schedule gives {want}"
    evidence.covers("base_lrs", "last_epoch")
    assert last == history, f"{kind}: get_last_lr() per epoch {last}, but the groups' lrs are {history}"
    evidence.covers("get_last_lr")
    ref = reference_sgd(data, [{"lr": 0.0}] * len(data), STEPS, lrs=lambda t, i: want[t - 1][group_of[i]])
    assert_matches_reference(got, ref, what=f"SGD driven by the {kind} LRScheduler subclass")
    evidence.covers(f"subclass+{kind}")
    keys = {k for k in sched.__dict__ if k != "optimizer"}
    assert set(sd_sched) == keys, f"state_dict keys {sorted(sd_sched)}, should be every attribute but optimizer {sorted(keys)}"
    fresh_opt = torch.optim.SGD(_groups(torch, resumed), lr=1.0)
    fresh = cls(fresh_opt)
    fresh.load_state_dict(sd_sched)
    fresh_opt.load_state_dict(sd_opt)
    again = run(torch, fresh_opt, resumed, data, 3, STEPS, scheduler=fresh)
    assert fresh.last_epoch == STEPS and [g["lr"] for g in fresh_opt.param_groups] == history[-1], (
        f"restored at epoch 2 and stepped to {STEPS}: last_epoch {fresh.last_epoch}, lrs "
        f"{[g['lr'] for g in fresh_opt.param_groups]}; should be {STEPS} and {history[-1]}")
    for t, (a, b) in enumerate(zip(again, got[2:])):
        for i, (x, y) in enumerate(zip(a, b)):
            assert_equal(x, y, what=f"{kind}: parameter {i} at step {t + 3} after restoring scheduler and optimizer")
    evidence.covers("state_dict")


@pytest.mark.claim(SCHED)
@pytest.mark.parametrize("kind", ["closed-form", "chainable"])
def test_user_lr_scheduler_subclass(torch, kind):
    with torch.device("cpu"):
        check_scheduler(torch, user_schedulers(torch)[kind], kind)


@pytest.mark.claim(SCHED)
def test_lr_scheduler_last_epoch_resume(torch):
    """'last_epoch ... Only use a non-default value when restoring this scheduler from a saved
    checkpoint': the closed-form subclass built with last_epoch = k - 1 over an optimizer
    restored from step k - 1 (whose groups hold initial_lr) sets the lrs of epoch k and goes on
    with the schedule."""
    cls = user_schedulers(torch)["closed-form"]
    with torch.device("cpu"):
        params = leaves(torch, problem())
        opt = torch.optim.SGD(_groups(torch, params), lr=1.0)
        sched = cls(opt)
        for _ in range(2):
            opt.step()
            sched.step()
        saved = snapshot(torch, opt)
        fresh_opt = torch.optim.SGD(_groups(torch, leaves(torch, problem())), lr=1.0)
        fresh_opt.load_state_dict(saved)
        fresh = cls(fresh_opt, last_epoch=2)
        got = [[g["lr"] for g in fresh_opt.param_groups]]
        for _ in range(2):
            fresh_opt.step()
            fresh.step()
            got.append([g["lr"] for g in fresh_opt.param_groups])
    want = [[closed_form(b, t) for b in BASES] for t in (3, 4, 5)]
    assert got == want and list(fresh.base_lrs) == list(BASES), (
        f"resumed with last_epoch=2: lrs {got} (base_lrs {fresh.base_lrs}), should be {want} ({list(BASES)})")
    evidence.covers("last_epoch-resume")


@pytest.mark.claim(SCHED)
def test_lr_scheduler_step_order(torch):
    """torch.optim 'How to adjust learning rate': 'If you use the learning rate scheduler
    (calling scheduler.step()) before the optimizer's update (calling optimizer.step()), this
    will skip the first value of the learning rate schedule': the first update then uses the
    epoch-1 value. Whether a warning says so is recorded, not asserted."""
    import warnings

    cls = user_schedulers(torch)["closed-form"]
    data = problem()
    with torch.device("cpu"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        params = leaves(torch, data)
        opt = torch.optim.SGD(_groups(torch, params), lr=1.0)
        sched = cls(opt)
        sched.step()
        set_gradients(torch, params, data, 1)
        opt.step()
        got = [[p.detach().cpu().numpy().copy() for p in params]]
    group_of = [0] + [1] * (len(params) - 1)
    want = reference_sgd(data, [{"lr": 0.0}] * len(data), 1, lrs=lambda t, i: closed_form(BASES[group_of[i]], 1))
    assert_matches_reference(got, want, what="first update after scheduler.step() came first (epoch 1's lr)")
    evidence.note(step_order_warning=any("before `optimizer.step()`" in str(w.message) for w in caught))
    evidence.covers("step-order")


@pytest.mark.claim(SCHED)
def test_lr_scheduler_deprecated_step_epoch(torch):
    """step(epoch) (deprecated since 1.4): 'sets last_epoch to epoch and uses
    _get_closed_form_lr if it is available', else get_lr: the subclass (no closed form method)
    gets get_lr's value at that epoch. Whether a deprecation warning is issued is recorded."""
    import warnings

    cls = user_schedulers(torch)["closed-form"]
    with torch.device("cpu"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = torch.optim.SGD(_groups(torch, leaves(torch, problem())), lr=1.0)
        sched = cls(opt)
        opt.step()
        sched.step(5)
    got = [g["lr"] for g in opt.param_groups]
    want = [closed_form(b, 5) for b in BASES]
    assert sched.last_epoch == 5 and got == want, f"step(5): last_epoch {sched.last_epoch}, lrs {got}; should be 5 and {want}"
    evidence.note(deprecation_warning=any("epoch" in str(w.message) for w in caught))
    evidence.covers("step-epoch-deprecated")


@pytest.mark.claim(SCHED)
def test_get_last_lr_copies_tensor_lrs(torch):
    """get_last_lr(): 'The returned Tensors are copies, and never alias the optimizer's
    group["lr"]s': with tensor learning rates, editing what get_last_lr() returned in place
    leaves the groups' lrs unchanged, and a later step does not change what was returned."""
    cls = user_schedulers(torch)["chainable"]
    with torch.device("cpu"):
        params = leaves(torch, problem())
        groups = [{"params": [params[0]], "lr": torch.tensor(BASES[0], dtype=torch.float64)},
                  {"params": list(params[1:]), "lr": torch.tensor(BASES[1], dtype=torch.float64)}]
        opt = torch.optim.SGD(groups, lr=1.0)
        sched = cls(opt)
        opt.step()
        sched.step()
        last = sched.get_last_lr()
        held = [float(x) for x in last]
        for g, x in zip(opt.param_groups, last):
            assert x is not g["lr"], "get_last_lr() returned the group's lr tensor itself"
        opt.step()
        sched.step()
        assert [float(x) for x in last] == held, (
            f"what get_last_lr() returned changed from {held} to {[float(x) for x in last]} at the next step: it aliases "
            "the groups' lr tensors")
        for x in last:
            x.mul_(0.0)
        lrs = [float(g["lr"]) for g in opt.param_groups]
    want = [chainable(b, 2) for b in BASES]
    # The same float64 multiplications on both sides (tensor and Python float): exact.
    assert lrs == want, f"editing get_last_lr()'s tensors changed the groups' lrs to {lrs}"
    evidence.covers("get_last_lr+tensor-lr-copies")
