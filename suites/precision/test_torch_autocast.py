"""precision.torch.autocast*: which ops run in which dtype under autocast, per device."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_equal, budget, evidence, not_applicable
from pytest_dlconform.api import precision as ref
from pytest_dlconform.api.precision import device_of, low_dtypes


@pytest.mark.claim("precision.torch.autocast")
@budget(2)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 4))
def test_ops_run_in_the_dtype_their_device_lists(torch, dl_device, seed, n):
    device, device_type = device_of(dl_device)
    problems: list[str] = []
    checked: list[str] = []
    for low in low_dtypes(torch, device_type):
        found, counts = ref.autocast_mismatches(torch, device, low, np.random.default_rng(seed), n)
        problems += found
        # The classes both devices list ("error", CUDA's binary_cross_entropy, is checked on CUDA only).
        checked += [f"{low}.{cls}" for cls in counts if cls in ("lower", "float32", "promote", "unlisted")]
    evidence.note(device_type=device_type, low_dtypes=low_dtypes(torch, device_type), ops_per_class=counts)
    if problems:
        raise ref.AutocastMismatch(f"{len(problems)} op/dtype combinations disagree with the Autocast Op Reference "
                                   f"for {device_type}:\n" + "\n".join(problems))
    evidence.covers(*checked)


@pytest.mark.claim("precision.torch.autocast")
def test_build_registers_the_documented_lists_for_cpu_and_cuda(torch):
    dump = getattr(torch._C, "_dispatch_dump", None)
    if dump is None:
        not_applicable(f"torch {torch.__version__} has no torch._C._dispatch_dump to read autocast registrations from")
    problems = ref.registration_mismatches(dump)
    evidence.note(ops_checked=len(ref.OPS), dispatch_keys=list(ref.DISPATCH_KEYS.values()))
    if problems:
        raise ref.AutocastMismatch(
            "the autocast kernels of this build differ from the documented lists:\n" + "\n".join(problems))
    evidence.covers("registration.AutocastCPU", "registration.AutocastCUDA")


def _pair(torch: Any, device: str) -> tuple[Any, Any]:
    g = torch.Generator(device="cpu").manual_seed(0)
    return (torch.randn(4, 4, generator=g).to(device), torch.randn(4, 4, generator=g).to(device))


@pytest.mark.claim("precision.torch.autocast-eligibility")
def test_in_place_out_and_explicit_dtype_are_not_autocast(torch, dl_device):
    device, device_type = device_of(dl_device)
    a, b = _pair(torch, device)
    low = getattr(torch, low_dtypes(torch, device_type)[0])
    expected = torch.mm(a, b)
    with torch.autocast(device_type, dtype=low):
        inplace = a.clone().addmm_(a, b, beta=0.0)
        out = torch.empty(4, 4, device=device)
        torch.mm(a, b, out=out)
        prod_low = torch.prod(a, dtype=low)  # prod is float32-listed on CPU and CUDA
        prod_f64 = torch.prod(a, dtype=torch.float64)
    assert inplace.dtype == torch.float32, f"a.addmm_ under autocast gave {inplace.dtype}: in-place ops are not eligible"
    assert_equal(out.cpu().numpy(), expected.cpu().numpy(), what="mm(out=float32 tensor) under autocast vs mm without")
    assert (prod_low.dtype, prod_f64.dtype) == (low, torch.float64), (
        f"prod(dtype=...) under autocast gave {prod_low.dtype}/{prod_f64.dtype}: an explicit dtype must be respected")
    evidence.covers("in-place", "out=", "dtype=")


@pytest.mark.claim("precision.torch.autocast-eligibility")
def test_disabled_region_thread_and_defaults(torch, dl_device):
    device, device_type = device_of(dl_device)
    a, b = _pair(torch, device)
    default = {"cpu": torch.bfloat16, "cuda": torch.float16}[device_type]
    assert torch.get_autocast_dtype(device_type) == default, (
        f"default autocast dtype on {device_type} is {torch.get_autocast_dtype(device_type)}, documented {default}")
    seen: dict[str, Any] = {}
    with torch.autocast(device_type):
        outer = torch.mm(a, b)
        with torch.autocast(device_type, enabled=False):
            inner = torch.mm(a, b)
        thread = threading.Thread(target=lambda: seen.update(dtype=torch.mm(a, b).dtype))
        thread.start()
        thread.join()
        again = torch.mm(a, b)
    assert (outer.dtype, again.dtype) == (default, default), (
        f"mm under autocast(): {outer.dtype}, {again.dtype}; should be {default}")
    assert inner.dtype == torch.float32, f"mm in a nested autocast(enabled=False) region gave {inner.dtype}"
    assert seen["dtype"] == torch.float32, f"mm in a new thread gave {seen['dtype']}: autocast state is thread-local"
    assert not torch.is_autocast_enabled(device_type), "autocast still enabled after the with block"
    evidence.covers("default-dtype", "enabled=False-nested", "thread-local", "restores-state")


@pytest.mark.claim("precision.torch.autocast-eligibility")
def test_unsupported_dtype_warns_and_decorator_restores(torch, dl_device):
    device, device_type = device_of(dl_device)
    a, b = _pair(torch, "cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast("cpu", dtype=torch.float32):
            plain = torch.mm(a, b)
            enabled = torch.is_autocast_enabled("cpu")
    assert not enabled and plain.dtype == torch.float32, f"CPU autocast with float32: enabled={enabled}, mm {plain.dtype}"
    assert any("CPU Autocast only supports dtypes of" in str(w.message) for w in caught), (
        f"no warning for an unsupported CPU autocast dtype; warnings: {[str(w.message) for w in caught]}")
    lows = low_dtypes(torch, device_type)
    outer_low, inner_low = getattr(torch, lows[0]), getattr(torch, lows[-1])
    a, b = _pair(torch, device)

    @torch.autocast(device_type, dtype=inner_low)
    def decorated() -> Any:
        return torch.mm(a, b)

    with torch.autocast(device_type, dtype=outer_low):
        inside = decorated()
        after = torch.mm(a, b)
        state = torch.get_autocast_dtype(device_type)
    assert inside.dtype == inner_low, f"decorated function ran mm in {inside.dtype}, should be {inner_low}"
    assert (after.dtype, state) == (outer_low, outer_low), (
        f"after the decorated call the outer region runs mm in {after.dtype} (autocast dtype {state}), should be {outer_low}")
    evidence.covers("unsupported-dtype-warns", "decorator")
