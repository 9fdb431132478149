"""Wrong twins for the edge-case suite (suites/autodiff/test_op_edges.py), as a pytest plugin.

Loaded with ``-p edge_mutants`` (this folder on PYTHONPATH), it replaces some ops' templates
in the op table with implementations that are right away from the edges and wrong at one:
a kink's gradient, an extreme magnitude, an infinite input. test_op_edges_oracle.py runs the
ci profile with them and asserts that each is caught by its op's test, with its message.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_dlconform.programs import OPS

_M = "__import__('edge_mutants')"

#: op -> (framework, template, what is wrong, the test id that must catch it, message pattern)
MUTANTS: dict[str, tuple[str, str, str, str, str]] = {
    "relu": ("torch", _M + ".relu({a})", "custom autograd Function: gradient 1 at x = 0 (right elsewhere)",
             "test_torch_op_edge_cases[cpu-kink-relu]",
             r"relu kink \[default, float64\]: gradient of input 0 at x=0\.0 .* is 1\.0, documented 0\.0 \(rule 2: locally "
             r"convex: the sub-gradient of minimum norm\)"),
    "hardswish": ("torch", _M + ".hardswish({a})", "custom autograd Function: gradient 1.25 at x = 3, neither "
                  "one-sided derivative (1.5 or 1)", "test_torch_op_edge_cases[cpu-kink-hardswish]",
                  r"hardswish kink \[default, float64\]: gradient of input 0 at x=3\.0 .* is 1\.25, documented 1\.5 or 1\.0 "
                  r"\(rule 4"),
    "softplus": ("torch", "torch.log1p(torch.exp({beta} * {a})) / {beta}",
                 "softplus without its threshold: exp overflows for large x", "test_torch_op_edge_cases[cpu-extreme-softplus]",
                 r"softplus extreme \[beta=1\.0,threshold=20\.0, float64\]: value at x=1e\+300 is inf, documented 1e\+300"),
    "tanh": ("tensorflow", "(tf.math.exp({a}) - tf.math.exp(-{a})) / (tf.math.exp({a}) + tf.math.exp(-{a}))",
             "tanh from its exponential formula: inf / inf = nan at +-inf", "test_tensorflow_op_edge_cases[cpu-nonfinite-tanh]",
             r"tanh nonfinite \[default, float64\]: value at x=inf is nan, documented 1\.0 "),
    "logsumexp": ("tensorflow", "tf.math.log(tf.math.reduce_sum(tf.math.exp({a}), axis={axes}, keepdims={keepdims}))",
                  "log(sum(exp(x))) without the shift: exp overflows", "test_tensorflow_op_edge_cases[cpu-extreme-logsumexp]",
                  r"logsumexp extreme \[dims=\(-1,\),keepdims=False, float64\]: value at x=1e\+300 is inf, documented 1e\+300"),
}


def _functions() -> dict[str, Any]:
    import torch

    def unary(f: Any, df: Any) -> Any:
        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.save_for_backward(x)
                return f(x)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (x,) = ctx.saved_tensors
                return g * df(x)

        return Fn.apply

    one, zero = 1.0, 0.0
    return {
        "relu": unary(torch.relu, lambda x: torch.where(x >= 0, one, zero).to(x.dtype)),
        "hardswish": unary(torch.nn.functional.hardswish,
                           lambda x: torch.where(x == 3, 1.25, torch.where(x <= -3, zero, torch.where(
                               x >= 3, one, (2 * x + 3) / 6))).to(x.dtype)),
    }


_CACHE: dict[str, Any] = {}


def _fn(name: str) -> Any:
    if not _CACHE:
        _CACHE.update(_functions())
    return _CACHE[name]


def relu(x: Any) -> Any:
    return _fn("relu")(x)


def hardswish(x: Any) -> Any:
    return _fn("hardswish")(x)


def pytest_configure(config: Any) -> None:
    for op, (framework, template, *_rest) in MUTANTS.items():
        key = "torch" if framework == "torch" else "tf"
        OPS[op] = replace(OPS[op], **{key: template})
