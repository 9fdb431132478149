"""The autocast x autograd oracle (checks/precision/autocast_autograd.py) says no to wrong
programs: a weight cache that remembers a no_grad cast (pytorch#65766/#112583), a cache that
outlives its region, a wrong cast, a graph built under no_grad, a subregion in low precision."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_dlconform.checks.precision import autocast_autograd as aa  # noqa: E402

LOW = torch.bfloat16
F = torch.nn.functional


def _scenario(name):
    return next(s for s in aa.SCENARIOS if s.name == name)


def test_the_real_program_holds_in_every_scenario():
    for s in aa.SCENARIOS:
        assert aa.scenario_mismatches(torch, "cpu", "cpu", LOW, s, True) == []
    assert aa.backward_mismatches(torch, "cpu", "cpu", LOW, inside=True) == []
    assert aa.update_mismatches(torch, "cpu", "cpu", LOW) == []
    assert aa.nested_mismatches(torch, "cpu", "cpu", LOW) == []


def _caching():
    """linear whose weight cast is cached by identity the first time, whatever the grad mode,
    and never dropped (the bugs: a cache that ignores grad mode, a cache that outlives its region)."""
    cache = {}

    def program(torch, v):
        w1 = cache.setdefault(id(v["w1"]), v["w1"].to(LOW))
        h = torch.relu(F.linear(v["x"], w1, v["b1"]))
        return F.mse_loss(torch.mm(h, v["w2"]), v["target"])
    return program


def test_a_cache_that_remembers_a_no_grad_cast_is_caught():
    problems = aa.scenario_mismatches(torch, "cpu", "cpu", LOW, _scenario("no_grad-then-grad"), True,
                                      program=_caching())
    assert any("step 2 (grad): d loss / d w1: no gradient (None)" in p for p in problems), problems
    assert all("d loss / d w2" not in p for p in problems), problems


def test_a_cache_that_outlives_its_region_is_caught():
    problems = aa.update_mismatches(torch, "cpu", "cpu", LOW, program=_caching())
    assert any("loss in the region after the weights changed" in p and "entries differ" in p for p in problems), problems


def test_a_wrong_cast_is_caught_bitwise():
    def mm_in_float32(torch, v):
        h = torch.relu(F.linear(v["x"], v["w1"], v["b1"]))
        with torch.autocast("cpu", enabled=False):
            y = torch.mm(h.float(), v["w2"])  # mm is lower-listed: it must run in bfloat16
        return F.mse_loss(y, v["target"])
    problems = aa.scenario_mismatches(torch, "cpu", "cpu", LOW, _scenario("repeated-grad"), False, program=mm_in_float32)
    assert any("step 1 (grad): loss: 1 of 1 entries differ from the explicit-cast program (bitwise" in p
               for p in problems), problems
    assert any("d loss / d w2" in p for p in problems), problems


def test_a_graph_under_no_grad_and_a_plain_tensor_under_inference_mode_are_caught():
    def leaky(torch, v):
        with torch.enable_grad():  # ignores the caller's grad mode
            return aa.forward(torch, v)
    problems = aa.scenario_mismatches(torch, "cpu", "cpu", LOW, _scenario("grad-then-no_grad"), True, program=leaky)
    assert problems == ["autocast(cpu, bfloat16, cache_enabled=True), grad-then-no_grad, step 2 (no_grad): "
                        "the loss requires grad"], problems

    def cloned(torch, v):
        out = aa.forward(torch, v)
        if torch.is_inference_mode_enabled():
            with torch.inference_mode(False):
                return out.clone()
        return out
    problems = aa.scenario_mismatches(torch, "cpu", "cpu", LOW, _scenario("grad-then-inference_mode"), True,
                                      program=cloned)
    assert any("step 2 (inference_mode): the loss is not an inference tensor" in p for p in problems), problems


def test_a_subregion_left_in_low_precision_is_caught():
    def low_subregion(torch, v):
        h = torch.relu(F.linear(v["x"], v["w1"], v["b1"]))
        with torch.autocast("cpu", enabled=False):
            return F.mse_loss(torch.mm(h, v["w2"].to(h.dtype)).float(), v["target"])
    problems = aa.nested_mismatches(torch, "cpu", "cpu", LOW, program=low_subregion)
    assert any("enabled=False subregion: loss: 1 of 1 entries differ" in p for p in problems), problems


def test_backward_that_loses_a_gradient_is_caught():
    def detached(torch, v):
        return aa.forward(torch, {**v, "b1": v["b1"].detach()})
    problems = aa.backward_mismatches(torch, "cpu", "cpu", LOW, inside=False, program=detached)
    assert problems == ["autocast(cpu, bfloat16), backward after: b1.grad: no gradient (None); "
                        "the explicit-cast program gives one"], problems
