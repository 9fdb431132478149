"""A compiled batch that raises names the op (and class) that raised and still checks the others.

Explore seed 20261201: torch.compile (inductor) of conv2d(F.pad(x, mode='replicate')) raises in
its backward (finding 27), and before the batch was split on failure, all 49 ops compiled with
it in the same half failed with that message. Here the suite's own ``_check_example`` compiles
that conv with tanh and relu: the conv fails with the compiler's words, the other two pass;
with a second, zero-padded class of the conv in the batch, the split goes on per class, so
the message names the replicate class and the zero-padded one is checked.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlconform.programs import InputRecipe, Op, Program, ProgramCase
from pytest_dlconform.programs.samples import ParamClass, Sample

REPLICATE = ProgramCase.from_recipe(
    Program(((2, 2, 3, 4),), (Op("conv2d_full", params=(("out_per_group", 1), ("kernel", (1, 1)), ("stride", 2),
                                                         ("padding", 1), ("dilation", 1), ("groups", 1),
                                                         ("padding_mode", "replicate"), ("seed", 0))),)),
    InputRecipe(226, ("dyadic",)),
)


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


ZEROS = ProgramCase.from_recipe(
    Program(((2, 2, 3, 4),), (Op("conv2d_full", params=(("out_per_group", 1), ("kernel", (1, 1)), ("stride", 2),
                                                         ("padding", 1), ("dilation", 1), ("groups", 1),
                                                         ("padding_mode", "zeros"), ("seed", 0))),)),
    InputRecipe(226, ("dyadic",)),
)


def _case(op: str) -> ProgramCase:
    return ProgramCase.from_recipe(Program(((3, 4),), (Op(op),)), InputRecipe(5, ("unit",)))


def _one(op: str, case: ProgramCase, label: str = "default") -> list[tuple[Sample, ProgramCase]]:
    return [(Sample(op, ParamClass((("class", label),)), "unit"), case)]


def test_a_raising_op_fails_alone_and_the_rest_of_its_batch_is_checked(torch: Any) -> None:
    from pytest_dlconform.frameworks import adapter
    from pytest_dlconform.suites.execution import test_compiled_backward as suite

    outcome = suite.Outcome()
    draws = {"tanh": _one("tanh", _case("tanh")), "conv2d_full": _one("conv2d_full", REPLICATE),
             "relu": _one("relu", _case("relu"))}
    suite._check_example(adapter("torch"), "inductor", "cpu", draws, "float32", 0, outcome, suite._torch_build(torch))
    assert set(outcome.failures) == {"conv2d_full"}, outcome.failures
    (message,) = outcome.failures["conv2d_full"]
    assert "replication_pad2d_backward" in message and "raised AssertionError" in message
    assert set(outcome.visits) == {"tanh", "relu", "conv2d_full"}  # all checked: the conv's check is that it raised
    assert outcome.raised == {"conv2d_full"} and outcome.checks["tanh"].checks and outcome.checks["relu"].checks


def test_a_raising_class_is_named_and_the_op_s_other_classes_are_checked(torch: Any) -> None:
    from pytest_dlconform.frameworks import adapter
    from pytest_dlconform.suites.execution import test_compiled_backward as suite

    outcome = suite.Outcome()
    draws = {"conv2d_full": _one("conv2d_full", ZEROS, "zeros") + _one("conv2d_full", REPLICATE, "replicate")}
    suite._check_example(adapter("torch"), "inductor", "cpu", draws, "float32", 0, outcome, suite._torch_build(torch))
    (message,) = outcome.failures["conv2d_full"]
    assert "class class='replicate'" in message and "replication_pad2d_backward" in message
    assert sorted(k[0] for k in outcome.visits["conv2d_full"]) == ["class='replicate'", "class='zeros'"]
    assert [w for w in outcome.checks["conv2d_full"].checks if "compiled gradient" in w]  # the zero-padded class was judged
