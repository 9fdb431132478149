"""The oracles of suites/modules/test_torch_module_records.py can fail: wrong shapes, a float32 output
that is zero, sign-flipped or 1% off, a table that misses a class, and stand-in modules that break
one property each (a wrong backward, a state that state_dict misses, eval-dependent output, a
zero_grad that keeps tensors, a float64 computation inside .float()) each fail naming the property."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from pytest_dlconform.api import ToleranceExceeded
from suites.modules import _torch_module_records as records
from suites.modules import test_torch_module_records as suite

LINEAR = next(r for r in records.RECORDS if r.id == "Linear-bias")


def _linear_outputs() -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(0)
    w, b, x = rng.uniform(-0.5, 0.5, (4, 3)), rng.uniform(-0.5, 0.5, 4), records.input_values((2, 3), 100)
    y64 = x @ w.T + b
    y32 = (x.astype(np.float32) @ w.T.astype(np.float32) + b.astype(np.float32)).astype(np.float32)
    mag = LINEAR.gain * (np.abs(y64).max() + LINEAR.fan * np.abs(w).max() * np.abs(x).max())
    return y32, y64, float(mag)


def test_float32_model_accepts_float32_rounding_and_rejects_wrong_outputs():
    y32, y64, mag = _linear_outputs()
    assert suite.check_float32(LINEAR, [y32], [y64], mag) <= 1.0
    for wrong in (np.zeros_like(y32), -y32, y32 * np.float32(1.01)):  # zeros, a sign flip, 1% scaled
        with pytest.raises(ToleranceExceeded, match=r"Linear-bias: float32 output 0 vs float64"):
            suite.check_float32(LINEAR, [wrong], [y64], mag)
    with pytest.raises(AssertionError, match="has dtype float64"):
        suite.check_float32(LINEAR, [y64 + 0.0], [y64], mag)


def test_shape_check_names_documented_and_actual_shapes():
    conv = next(r for r in records.RECORDS if r.id == "Conv1d-default")
    suite.check_shapes(conv, [(2, 4, 5)])
    with pytest.raises(AssertionError, match=re.escape("output shapes [(2, 4, 6)], but the docstring's Shape "
                                                       "section gives [(2, 4, 5)]")):
        suite.check_shapes(conv, [(2, 4, 6)])  # padding counted once too often


def test_table_gaps_find_new_and_stale_classes():
    names = ["Linear", "ReLU", "MSELoss", "Module", "BrandNewLayer"]
    recs = [r for r in records.RECORDS if r.name in ("Linear", "ReLU", "Tanh")]
    missing, stale = records.table_gaps(names, recs, {"Module": "base", "Gone": "removed"})
    assert missing == ["BrandNewLayer"]  # the loss is someone else's, Module is out of scope
    assert stale == ["Gone", "Tanh"]


def test_inputs_are_distinct_and_away_from_kinks():
    x = records.input_values((4, 30), 3, kinks=(0.0, 1.0, -0.5))
    assert len(np.unique(x)) == x.size
    for k in (0.0, 1.0, -0.5):
        assert np.min(np.abs(x - k)) >= 0.02


# ----------------------------------------------------------------- stand-in modules, one broken property each


class _WrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (1 + torch.tanh(x) ** 2)  # sign flip of the tanh^2 term


class WrongGradient(torch.nn.Module):
    def forward(self, x):
        return _WrongBackward.apply(x)


class HiddenState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.randn(3), persistent=False)  # not in state_dict

    def forward(self, x):
        return x + self.shift


class EvalDependent(torch.nn.Module):
    def forward(self, x):
        return x * (1.0 if self.training else 2.0)


class KeepsZeroGrads(torch.nn.Linear):
    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=False)


class SilentFloat64(torch.nn.Linear):
    def forward(self, x):
        return torch.nn.functional.linear(x.double(), self.weight.double(), self.bias.double())


def _rec(build, **flags):
    return records.Rec("Stand-in", "wrong", {}, (records.F(2, 3),), ((2, 3),), build=lambda t: build(), **flags)


@pytest.mark.parametrize(("build", "flags", "prop"), [
    (WrongGradient, {}, "gradcheck"),
    (HiddenState, {}, "state_dict-roundtrip"),
    (EvalDependent, {}, "train-eval"),
    (lambda: KeepsZeroGrads(3, 3), {}, "zero_grad"),
    (lambda: SilentFloat64(3, 3), {}, "to-float32"),
], ids=["wrong-backward", "state-outside-state_dict", "eval-dependent", "zero_grad-keeps-tensors", "float64-inside"])
def test_each_property_fails_on_a_module_that_breaks_it(build, flags, prop):
    rec = _rec(build, **flags)
    with pytest.raises(suite.PropertyFailed, match=rf"Stand-in-wrong: property {re.escape(prop)}:"):
        suite.check_record(torch, rec)


def test_a_conforming_stand_in_passes_every_property():
    rec = _rec(lambda: torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh()), fan=3, hvp=True)
    suite.check_record(torch, rec)


class Sine(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x)


class _SinDroppedSecond(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x.detach())  # right first order; its own derivative in x is dropped


class DroppedSecond(torch.nn.Module):
    def forward(self, x):
        return _SinDroppedSecond.apply(x)


def test_hvp_oracle_rejects_a_wrong_second_derivative():
    suite.check_record(torch, _rec(Sine, hvp=True))  # the true HVP, -sin(x) v, passes
    with pytest.raises(suite.PropertyFailed, match="Stand-in-wrong: property hvp:"):
        suite.check_record(torch, _rec(DroppedSecond, hvp=True))
