"""precision.torch.grad-scaler: GradScaler's dynamic loss scaling, on the test's device."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, assert_equal, budget, evidence, tolerance
from pytest_dlconform.api.precision import DynamicScale, check_scale, device_of, low_dtypes, scaled_gradient

STEP_KINDS = ("finite", "inf", "nan")


def _step(torch: Any, scaler: Any, opt: Any, p: Any, w: np.ndarray, explicit_unscale: bool) -> Any:
    """loss = sum(w * p): its gradient is exactly w, so every stage can be predicted."""
    opt.zero_grad()
    loss = (torch.tensor(w, device=p.device) * p).sum()
    scaler.scale(loss).backward()
    scaled = p.grad.detach().cpu().numpy().copy()
    if explicit_unscale:
        scaler.unscale_(opt)
    unscaled = p.grad.detach().cpu().numpy().copy()
    scaler.step(opt)
    scaler.update()
    return scaled, unscaled


@pytest.mark.claim("precision.torch.grad-scaler")
@budget(10)
@given(init=st.sampled_from([1.0, 2.0**10, 2.0**16, 2.0**24]) | st.floats(1.0, 1e6),
       growth=st.just(2.0) | st.floats(1.01, 4.0), backoff=st.just(0.5) | st.floats(0.05, 0.99),
       interval=st.integers(1, 3), lr=st.sampled_from([0.1, 1.0]),
       steps=st.lists(st.tuples(st.sampled_from(STEP_KINDS), st.booleans()), min_size=1, max_size=8),
       seed=st.integers(0, 2**32 - 1))
def test_grad_scaler_follows_dynamic_loss_scaling(torch, dl_device, init, growth, backoff, interval, lr, steps, seed):
    device, device_type = device_of(dl_device)
    rng = np.random.default_rng(seed)
    p = torch.nn.Parameter(torch.tensor(rng.normal(size=3).astype(np.float32), device=device))
    opt = torch.optim.SGD([p], lr=lr)
    scaler = torch.amp.GradScaler(device_type, init_scale=init, growth_factor=growth, backoff_factor=backoff,
                                  growth_interval=interval)
    ref = DynamicScale(init, growth, backoff, interval)
    for n, (kind, explicit) in enumerate(steps):
        w = rng.normal(size=3).astype(np.float32)
        if kind != "finite":
            w[rng.integers(3)] = np.inf if kind == "inf" else np.nan
        expected_scaled = scaled_gradient(w, ref.scale)
        finite = bool(np.all(np.isfinite(expected_scaled)))
        before = p.detach().cpu().numpy().copy()
        scaled, unscaled = _step(torch, scaler, opt, p, w, explicit)
        where = f"step {n} ({kind}, unscale_ first: {explicit})"
        assert_equal(scaled, expected_scaled, what=f"{where}: gradient of scaler.scale(loss)")
        after = p.detach().cpu().numpy()
        if finite:
            if explicit:
                assert_close(unscaled, w, tolerance("float32", ops=2), what=f"{where}: gradient after unscale_")
            # before - lr * w can cancel: the rounding of lr * w is relative to its own size, not the result's.
            terms = np.abs(before) + np.abs(np.float32(lr) * w)
            assert_close(after, before - np.float32(lr) * w, tolerance("float32", ops=4, magnitude=float(terms.max())),
                         what=f"{where}: parameter")
        else:
            assert_equal(after, before, what=f"{where}: parameter after a skipped step")
        grew = ref.scale
        ref.update(finite)
        check_scale(scaler.get_scale(), ref, where, tracker=scaler.state_dict()["_growth_tracker"], ulps=len(ref.history))
        evidence.covers("scale", f"skip-{kind}" if not finite else "step-unscales",
                        *(["unscale_-then-step"] if explicit and finite else []),
                        *(["growth"] if finite and ref.scale != grew else []), *(["backoff"] if not finite else []))
    state = scaler.state_dict()
    assert (state["growth_factor"], state["backoff_factor"], state["growth_interval"]) == (growth, backoff, interval), (
        f"state_dict {state} does not carry the factors and interval it was built with")
    resumed = torch.amp.GradScaler(device_type)
    resumed.load_state_dict(state)
    assert (resumed.get_scale(), resumed.state_dict()["_growth_tracker"]) == (scaler.get_scale(), state["_growth_tracker"]), (
        "load_state_dict did not restore the scale and the growth tracker")
    evidence.covers("state_dict", "load_state_dict")


@pytest.mark.claim("precision.torch.grad-scaler")
def test_grad_scaler_contract_edges(torch, dl_device):
    device, device_type = device_of(dl_device)
    p = torch.nn.Parameter(torch.ones(3, device=device))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler(device_type, init_scale=8.0)
    scaler.scale(p.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    # unscale_ then step unscales once: the gradient of sum(p) is 1, so p = 1 - 0.1 * 1 (not 1 - 0.1 / 8).
    assert_equal(p.detach().cpu().numpy(), np.full(3, np.float32(1) - np.float32(0.1)), what="parameter after unscale_, step")
    evidence.covers("unscale_-then-step")
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)"):
        scaler.unscale_(opt)
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0, f"update(new_scale=3.0) left the scale at {scaler.get_scale()}"
    for bad, message in (({"growth_factor": 1.0}, r"The growth factor must be > 1\.0\."),
                         ({"backoff_factor": 1.0}, r"The backoff factor must be < 1\.0\.")):
        with pytest.raises(AssertionError, match=message):  # GradScaler validates with assert statements
            torch.amp.GradScaler(device_type, **bad)
    half = torch.nn.Parameter(torch.ones(3, device=device, dtype=torch.float16))
    half_opt = torch.optim.SGD([half], lr=0.1)
    scaler = torch.amp.GradScaler(device_type)
    scaler.scale(half.float().sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.step(half_opt)
    evidence.covers("unscale_-twice-raises", "update=new_scale", "bad-factors-rejected",
                    "fp16-grads-raise")


@pytest.mark.claim("precision.torch.grad-scaler")
def test_disabled_grad_scaler_passes_through(torch, dl_device):
    device, device_type = device_of(dl_device)
    p = torch.nn.Parameter(torch.ones(3, device=device))
    opt = torch.optim.SGD([p], lr=0.5)
    scaler = torch.amp.GradScaler(device_type, enabled=False)
    loss = (p * torch.tensor([1.0, 2.0, 3.0], device=device)).sum()
    assert scaler.scale(loss) is loss, "a disabled scaler must return the loss unchanged"
    loss.backward()
    scaler.step(opt)
    scaler.update()
    assert_equal(p.detach().cpu().numpy(), np.array([0.5, 0.0, -0.5], np.float32), what="parameter after a disabled-scaler step")
    assert (scaler.get_scale(), scaler.state_dict(), scaler.is_enabled()) == (1.0, {}, False), (
        f"disabled scaler: get_scale {scaler.get_scale()}, state_dict {scaler.state_dict()}, enabled {scaler.is_enabled()}")
    evidence.covers("enabled=False")


@pytest.mark.claim("precision.torch.grad-scaler")
def test_autocast_training_skips_an_overflowing_step_then_trains(torch, dl_device, dl_seed):
    device, device_type = device_of(dl_device)
    low = getattr(torch, low_dtypes(torch, device_type)[0])
    g = torch.Generator(device="cpu").manual_seed(dl_seed)
    x, y = torch.randn(16, 8, generator=g).to(device), torch.randn(16, 4, generator=g).to(device)
    model = torch.nn.Linear(8, 4).to(device)
    reference = torch.nn.Linear(8, 4).to(device)
    reference.load_state_dict(model.state_dict())
    opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(reference.parameters(), lr=0.1)
    # Targets 100 above every prediction: the loss gradient 2 * (pred - target) / 64 is
    # about -3 everywhere, times 2**127 it overflows float32 (and float16). One backoff
    # lands on 2**5, whose scaled gradients (about 1e2, weight gradients 2e3) float16 holds.
    scaler = torch.amp.GradScaler(device_type, init_scale=2.0**127, backoff_factor=2.0**-122)
    start = [t.detach().clone() for t in model.parameters()]

    def step() -> None:
        opt.zero_grad()
        with torch.autocast(device_type, dtype=low):
            loss = torch.nn.functional.mse_loss(model(x), 100.0 + y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    step()
    for t0, t in zip(start, model.parameters()):
        assert_equal(t.detach().cpu().numpy(), t0.cpu().numpy(), what="parameters after the overflowing step")
    assert scaler.get_scale() == 2.0**5, f"scale after one backoff is {scaler.get_scale()}, should be 2**5"
    step()
    ref_opt.zero_grad()
    torch.nn.functional.mse_loss(reference(x), 100.0 + y).backward()
    ref_opt.step()
    for i, (t0, t, r) in enumerate(zip(start, model.parameters(), reference.parameters())):
        # The update of a forward pass in the low dtype against the float32 update.
        assert_close((t - t0).detach().cpu().numpy(), (r - t0).detach().cpu().numpy(),
                     tolerance(str(low).removeprefix("torch."), ops=6, reduction=16),
                     what=f"parameter {i}: autocast + GradScaler step vs float32 step")
    evidence.note(autocast_dtype=str(low), device_type=device_type)
    evidence.covers("autocast-training")
