"""precision.torch.autocast-autograd: autocast changes the dtype ops run in, not autograd's
semantics. Grad modes inside a region (no_grad, inference_mode, enable_grad, in either order
with a grad-mode forward), the weight cache on and off, backward inside and after the region,
weights updated between regions, a weight unfrozen inside one, and an enabled=False subregion:
the loss and every gradient are bitwise those of the explicit-cast program.

The oracle and its scenarios: pytest_dlconform.checks.precision.autocast_autograd (module
docstring). Every low dtype the device takes (bfloat16 and float16 on CPU) x cache_enabled
True/False x every scenario, by construction; no draws.
"""

from __future__ import annotations

import pytest

from pytest_dlconform.api import evidence
from pytest_dlconform.api.precision import autocast_autograd as aa
from pytest_dlconform.api.precision import device_of, low_dtypes

CLAIM = "precision.torch.autocast-autograd"
LOWS = ("bfloat16", "float16")


def _low(torch, device_type, name):
    if name not in low_dtypes(torch, device_type):
        from pytest_dlconform.api import not_applicable

        not_applicable(f"autocast on {device_type} does not take {name} here (torch.cuda.is_bf16_supported() is False)")
    return getattr(torch, name)


def _check(problems, what):
    assert not problems, f"{what}: {len(problems)} problem(s)\n" + "\n".join(problems)


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("low_name", LOWS)
@pytest.mark.parametrize("cache_enabled", [True, False], ids=["cache_enabled=True", "cache_enabled=False"])
@pytest.mark.parametrize("scenario", aa.SCENARIOS, ids=aa.scenario_names())
def test_grad_modes_inside_a_region_keep_their_meaning(torch, dl_device, low_name, cache_enabled, scenario):
    device, device_type = device_of(dl_device)
    low = _low(torch, device_type, low_name)
    _check(aa.scenario_mismatches(torch, device, device_type, low, scenario, cache_enabled), scenario.name)
    evidence.covers(scenario.name, f"cache_enabled={cache_enabled}", low_name)


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("low_name", LOWS)
@pytest.mark.parametrize("inside", [False, True], ids=["backward-after", "backward-inside"])
def test_backward_runs_in_the_forward_types(torch, dl_device, low_name, inside):
    device, device_type = device_of(dl_device)
    low = _low(torch, device_type, low_name)
    _check(aa.backward_mismatches(torch, device, device_type, low, inside), "backward")
    evidence.covers("backward-inside" if inside else "backward-after", low_name)


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("low_name", LOWS)
def test_weights_updated_between_regions_and_unfrozen_inside_one(torch, dl_device, low_name):
    device, device_type = device_of(dl_device)
    low = _low(torch, device_type, low_name)
    _check(aa.update_mismatches(torch, device, device_type, low), "weights between regions")
    evidence.covers("weights-updated-between-regions", "requires_grad-toggled", low_name)


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("low_name", LOWS)
def test_gradients_flow_through_an_enabled_false_subregion(torch, dl_device, low_name):
    device, device_type = device_of(dl_device)
    low = _low(torch, device_type, low_name)
    _check(aa.nested_mismatches(torch, device, device_type, low), "enabled=False subregion")
    evidence.covers("enabled=False-subregion-grad", low_name)
