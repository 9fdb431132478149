"""A compiled batch that raises names the op that raised and still checks the others.

Explore seed 20261201: torch.compile (inductor) of conv2d(F.pad(x, mode='replicate')) raises in
its backward (finding 27), and before the batch was split on failure, all 49 ops compiled with
it in the same half failed with that message. Here the suite's own ``_check_example`` compiles
that conv with tanh and relu: the conv fails with the compiler's words, the other two pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlconform.programs import InputRecipe, Op, Program, ProgramCase

REPLICATE = ProgramCase.from_recipe(
    Program(((2, 2, 3, 4),), (Op("conv2d_full", params=(("out_per_group", 1), ("kernel", (1, 1)), ("stride", 2),
                                                         ("padding", 1), ("dilation", 1), ("groups", 1),
                                                         ("padding_mode", "replicate"), ("seed", 0))),)),
    InputRecipe(226, ("dyadic",)),
)


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


def _case(op: str) -> ProgramCase:
    return ProgramCase.from_recipe(Program(((3, 4),), (Op(op),)), InputRecipe(5, ("unit",)))


def test_a_raising_op_fails_alone_and_the_rest_of_its_batch_is_checked(torch: Any) -> None:
    from pytest_dlconform.frameworks import adapter
    from pytest_dlconform.suites.execution import test_compiled_backward as suite

    outcome = suite.Outcome()
    cases = {"tanh": _case("tanh"), "conv2d_full": REPLICATE, "relu": _case("relu")}
    suite._check_example(adapter("torch"), "inductor", "cpu", cases, "float32", 0, outcome, suite._torch_build(torch))
    assert set(outcome.failures) == {"conv2d_full"}, outcome.failures
    assert "replication_pad2d_backward" in outcome.failures["conv2d_full"]
    assert "raised AssertionError" in outcome.failures["conv2d_full"]
