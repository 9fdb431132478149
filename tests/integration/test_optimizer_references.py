"""Wrong twins for modules.torch.optimizer-*: the numpy references of the documented update
rules and the state_dict round trip reject an optimizer with a planted bug, with a message
that names the optimizer, its options, the parameter and the step."""

from __future__ import annotations

import pytest

from pytest_dlconform.checks.numerics import ToleranceExceeded

torch = pytest.importorskip("torch")

from suites.modules import test_torch_optimizers as suite  # noqa: E402


class SGDDecayAfterMomentum(torch.optim.SGD):
    """Weight decay outside the momentum buffer (SGDW), where the box adds it to g first."""

    def step(self, closure=None):
        wd = [g["weight_decay"] for g in self.param_groups]
        before = [[p.detach().clone() for p in g["params"]] for g in self.param_groups]
        for g in self.param_groups:
            g["weight_decay"] = 0.0
        super().step(closure)
        with torch.no_grad():
            for g, w, old in zip(self.param_groups, wd, before):
                g["weight_decay"] = w
                for p, o in zip(g["params"], old):
                    p.sub_(g["lr"] * w * o)


class AdamWAsL2(torch.optim.AdamW):
    def step(self, closure=None):
        for g in self.param_groups:
            g["decoupled_weight_decay"] = False
        return super().step(closure)


class AmsgradForgetsMax(torch.optim.Adam):
    def step(self, closure=None):
        out = super().step(closure)
        for s in self.state.values():
            if "max_exp_avg_sq" in s:
                s["max_exp_avg_sq"].zero_()
        return out


class MaximizeIgnored(torch.optim.Adagrad):
    def __init__(self, params, **kw):
        kw["maximize"] = False
        super().__init__(params, **kw)


class ForgetsStateOnLoad(torch.optim.RMSprop):
    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict, state={})
        super().load_state_dict(state_dict)


CASES = [
    (SGDDecayAfterMomentum, "SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1, "impl": "for-loop"}),
    (AdamWAsL2, "AdamW", {"lr": 0.1, "weight_decay": 0.2, "impl": "foreach"}),
    (AmsgradForgetsMax, "Adam", {"lr": 0.1, "amsgrad": True, "betas": (0.5, 0.99), "impl": "for-loop"}),
    (MaximizeIgnored, "Adagrad", {"lr": 0.1, "maximize": True, "impl": "foreach"}),
]


@pytest.mark.parametrize(("cls", "name", "row"), CASES, ids=[c[1] for c in CASES])
def test_the_reference_rejects_a_planted_bug(cls, name, row):
    with torch.device("cpu"), pytest.raises(ToleranceExceeded) as info:
        suite.check_update_rule(torch, cls, name, row)
    message = str(info.value)
    assert f"{name}[{row['impl']}]" in message and "vs the documented rule" in message and "after step" in message


@pytest.mark.parametrize(("name", "row"), [(n, dict(r)) for _, n, r in CASES],
                         ids=[c[1] for c in CASES])
def test_the_reference_accepts_the_real_optimizer(name, row):
    with torch.device("cpu"):
        worst = suite.check_update_rule(torch, getattr(torch.optim, name), name, row)
    assert worst <= 1.0


def test_the_round_trip_rejects_an_optimizer_that_forgets_its_state_on_load():
    with torch.device("cpu"), pytest.raises(AssertionError, match="RMSprop: parameter 0 after load_state_dict"):
        suite.check_state_dict_round_trip(torch, ForgetsStateOnLoad, "RMSprop", {"momentum": 0.9, "centered": True})
