"""modules.torch.module: an nn.Module subclass registers its parameters, submodules and buffers.

Generated module trees: each node holds a few parameters, a persistent and a non-persistent
buffer, a plain tensor attribute and children (as attributes, in a ModuleList or in a
ModuleDict). The oracle is the tree itself: the names it must report.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_equal, budget, evidence

from ._host import host

CLAIM = "modules.torch.module"

trees = st.recursive(
    st.fixed_dictionaries({"params": st.integers(0, 2), "kids": st.just([]), "holder": st.just("attr")}),
    lambda inner: st.fixed_dictionaries({
        "params": st.integers(0, 2), "kids": st.lists(inner, min_size=1, max_size=3),
        "holder": st.sampled_from(["attr", "list", "dict"]),
    }),
    max_leaves=6,
)


def build(torch, spec, prefix=""):
    """A module for the spec and the names it must register: (module, params, buffers, persistent)."""
    nn = torch.nn

    class Node(nn.Module):
        def __init__(self):
            super().__init__()
            for i in range(spec["params"]):
                setattr(self, f"p{i}", nn.Parameter(torch.randn(2, 3)))
            self.register_buffer("stat", torch.zeros(3))
            self.register_buffer("scratch", torch.ones(3), persistent=False)
            self.plain = torch.ones(3)  # a plain tensor attribute: not registered

        def forward(self, x):
            y = x * self.stat.sum() + x
            for i in range(spec["params"]):
                y = y + getattr(self, f"p{i}").sum()
            for kid in self.children():
                if isinstance(kid, nn.ModuleList):
                    for k in kid:
                        y = k(y)
                elif isinstance(kid, nn.ModuleDict):
                    for k in kid.values():
                        y = k(y)
                else:
                    y = kid(y)
            return y

    node = Node()
    params = [f"{prefix}p{i}" for i in range(spec["params"])]
    buffers, persistent = [f"{prefix}stat", f"{prefix}scratch"], [f"{prefix}stat"]
    kids = []
    for j, kid_spec in enumerate(spec["kids"]):
        where = {"attr": f"c{j}.", "list": f"items.{j}.", "dict": f"named.k{j}."}[spec["holder"]]
        kid, kp, kb, kper = build(torch, kid_spec, prefix + where)
        kids.append(kid)
        params, buffers, persistent = params + kp, buffers + kb, persistent + kper
    if spec["holder"] == "attr":
        for j, kid in enumerate(kids):
            setattr(node, f"c{j}", kid)
    elif spec["holder"] == "list":
        node.items = nn.ModuleList(kids)
    else:
        node.named = nn.ModuleDict({f"k{j}": kid for j, kid in enumerate(kids)})
    return node, params, buffers, persistent


@pytest.mark.claim(CLAIM)
@budget(15)
@given(spec=trees, seed=st.integers(0, 2**31 - 1))
def test_module_registers_parameters_buffers_and_state(torch, spec, seed):
    torch.manual_seed(seed)
    module, params, buffers, persistent = build(torch, spec)
    got = [name for name, _ in module.named_parameters()]
    assert sorted(got) == sorted(params), f"named_parameters {sorted(got)}, but should be {sorted(params)}"
    assert len(list(module.parameters())) == len(params)
    got_buffers = sorted(name for name, _ in module.named_buffers())
    assert got_buffers == sorted(buffers), f"named_buffers {got_buffers}, but should be {sorted(buffers)}"
    keys = sorted(module.state_dict())
    assert keys == sorted(params + persistent), (
        f"state_dict keys {keys}, but should be the parameters and persistent buffers {sorted(params + persistent)}"
    )
    x = torch.randn(2, 3)
    calls = []
    handle = module.register_forward_hook(lambda m, inp, out: calls.append(out))
    out = module(x)
    handle.remove()
    assert len(calls) == 1 and calls[0] is out, "calling the module runs forward and its forward hook once"
    assert_equal(host(out), host(module.forward(x)), what="module(x) vs module.forward(x)")
    # A fresh instance (new random parameters) loads the state and reproduces the output.
    torch.manual_seed(seed + 1)
    twin = build(torch, spec)[0]
    twin.load_state_dict(module.state_dict())
    assert_equal(host(twin(x)), host(out), what="output after load_state_dict into a fresh instance")
    # train()/eval() set .training on every submodule (nn.Module.train: "sets the module in
    # training mode", recursively); requires_grad_(False) freezes every parameter.
    for flag in (False, True):
        module.train(flag)
        modes = {name: m.training for name, m in module.named_modules()}
        assert all(v is flag for v in modes.values()), f"train({flag}): .training per submodule {modes}"
    assert module.eval() is module and not any(m.training for m in module.modules()), "eval() is train(False)"
    module.requires_grad_(False)
    assert not any(p.requires_grad for p in module.parameters()), "requires_grad_(False) freezes every parameter"
    module.requires_grad_(True)
    double = module.to(torch.float64)
    assert all(p.dtype == torch.float64 for p in double.parameters()), ".to(float64) converts every parameter"
    assert all(b.dtype == torch.float64 for b in double.buffers()), ".to(float64) converts floating buffers"
    holders = {"attr"} | {n["holder"] for n in _nodes(spec)}
    evidence.covers("parameters", "buffers", "persistent=False", "forward-hooks", "load_state_dict", "to-dtype",
                    "train/eval-recursive", "requires_grad_=False", *(f"children-{h}" for h in holders))


@pytest.mark.claim(CLAIM)
def test_plain_tensor_attribute_is_not_a_parameter(torch):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))
            self.t = torch.ones(2)

        def forward(self, x):
            return x * self.w * self.t

    m = M()
    assert [n for n, _ in m.named_parameters()] == ["w"], f"named_parameters {[n for n, _ in m.named_parameters()]}"
    assert "t" not in m.state_dict(), f"state_dict keys {list(m.state_dict())} include a plain tensor attribute"
    assert_equal(host(m(torch.ones(2))), np.ones(2, np.float32), what="forward of a module with a plain tensor attribute")
    evidence.covers("plain-tensor-attribute")


def _nodes(spec):
    yield spec
    for kid in spec["kids"]:
        yield from _nodes(kid)
