"""Generated programs (pytest_dlconform.programs) in torch and TensorFlow against numpy.

The tolerance is a forward-error bound, not a number that made the tests green. For a
case ``(program, xs)`` and a run in ``dtype``::

    max|f_dtype(xs) - f_numpy(xs)| <= SAFETY * (B_dtype + B_float64)

``B_d = Program.error_bound(xs, d)`` is the first-order bound for a conforming run in
``d``: ``u_d * E``, where ``E`` adds over the program's ops, each op contributing its
Lipschitz constant times the error it receives plus ``ULPS * W * scale`` of its own
rounding (``W`` = 1 for elementwise ops, the number of terms for reductions and
contractions, n**3 for n-by-n factorisations, 0 for data movement; ``scale`` = the
magnitudes of its output and inputs at ``xs``), and the input rounding ``u_d * max|x|``
when ``d`` is narrower than float64. So the tolerance grows with the program's size and
conditioning; ``B_float64`` is the numpy reference's own share. In float64 it is below
4e-12 relative to the output on 400 generated cases (median 1e-15), far below the 1e-3
that the meta-tests plant. SAFETY = 2 covers the first-order approximation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pytest_dlconform import programs
from pytest_dlconform.programs import (
    LAYOUTS,
    OPS,
    InputRecipe,
    Op,
    Program,
    ProgramCase,
    program_cases,
    to_layout,
)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SAFETY = 2.0


def examples(n: int) -> Callable[[Any], Any]:
    return settings(derandomize=True, database=None, deadline=None, max_examples=n,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tf() -> Any:
    return pytest.importorskip("tensorflow")


def run(case: ProgramCase, framework: str, dtype: str = "float64", layout: str = "contiguous") -> np.ndarray:
    out = case.program.build(framework, dtype, layout)(case.inputs)
    out = out.detach().numpy() if framework == "torch" else out.numpy()
    return np.asarray(out, dtype=np.float64)


def assert_matches(out: np.ndarray, expected: np.ndarray, case: ProgramCase, dtype: str, what: str) -> None:
    """``out`` (a ``dtype`` run) within SAFETY * (B_dtype + B_float64) of ``expected``."""
    __tracebackhide__ = True
    if out.shape != expected.shape:
        raise AssertionError(f"{what}: shape {out.shape}, but should be {expected.shape} [{case!r}]")
    if not np.all(np.isfinite(out)):
        raise AssertionError(f"{what}: non-finite output {out}, but should be finite [{case!r}]")
    tol = SAFETY * (case.program.error_bound(case.inputs, dtype) + case.program.error_bound(case.inputs, "float64"))
    err = float(np.max(np.abs(out - expected))) if out.size else 0.0
    if not err <= tol:
        raise AssertionError(
            f"{what}: max|out - expected| = {err:.3e}, but should be <= {tol:.3e} "
            f"(= {SAFETY:g} * (B_{dtype} + B_float64)) at scale {np.max(np.abs(expected)):.3e}\n"
            f"reproduce: {case!r}"
        )


# --------------------------------------------------------------------------- float64 vs numpy


@examples(30)
@given(program_cases())
def test_torch_float64_matches_numpy_reference_in_every_layout(torch: Any, case: ProgramCase) -> None:
    expected = case.program.numpy(case.inputs)
    assert np.all(np.isfinite(expected)), repr(case)
    for layout in LAYOUTS:
        assert_matches(run(case, "torch", layout=layout), expected, case, "float64", f"torch float64 {layout}")


@examples(25)
@given(program_cases())
def test_tensorflow_float64_matches_numpy_reference(tf: Any, case: ProgramCase) -> None:
    assert_matches(run(case, "tensorflow"), case.program.numpy(case.inputs), case, "float64", "tensorflow float64")


@pytest.mark.parametrize("name", list(OPS))
@examples(2)
@given(data=st.data())
def test_every_op_matches_numpy_reference_in_both_frameworks(torch: Any, tf: Any, name: str, data: st.DataObject) -> None:
    case = data.draw(program_cases(max_ops=2, ops=[name]), label="case")
    assume(name in {op.name for op in case.program.ops})
    expected = case.program.numpy(case.inputs)
    for framework in ("torch", "tensorflow"):
        assert_matches(run(case, framework), expected, case, "float64", f"{framework} float64 {name}")


@examples(10)
@given(program_cases())
def test_built_tensorflow_functions_trace_under_tf_function(tf: Any, case: ProgramCase) -> None:
    # Not bitwise: grappler rewrites graphs (log(x + 1) -> log1p, pow(x, .5) -> sqrt, AddN),
    # a rounding difference that the error bound allows. Equality is the execution suite's claim.
    f = case.program.build("tensorflow")
    inputs = [tf.constant(x) for x in case.inputs]
    traced = np.asarray(tf.function(f)(inputs).numpy(), dtype=np.float64)
    assert_matches(traced, run(case, "tensorflow"), case, "float64", "tf.function vs eager")


# --------------------------------------------------------------------------- float32 vs float64


@pytest.fixture(scope="module", params=["torch", "tensorflow"])
def framework(request: pytest.FixtureRequest) -> str:
    pytest.importorskip(request.param)
    return str(request.param)


@examples(15)
@given(case=program_cases())
def test_float32_runs_agree_with_float64_runs(framework: str, case: ProgramCase) -> None:
    assert_matches(run(case, framework, "float32"), run(case, framework), case, "float32", f"{framework} float32")


# --------------------------------------------------------------------------- the check can fail


def tanh_case() -> ProgramCase:
    program = Program(((2, 3),), (Op("tanh"),))
    return ProgramCase.from_recipe(program, InputRecipe(seed=1, regimes=("unit",)))


@contextmanager
def with_template(name: str, *, torch: str | None = None, tf: str | None = None) -> Iterator[None]:
    """Op ``name`` with another torch or TF template (a planted bug), for the with-block."""
    spec = OPS[name]
    spec = replace(spec, torch=torch) if torch else spec
    spec = replace(spec, tf=tf) if tf else spec
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(OPS, name, spec)
        yield


def test_a_torch_op_off_by_0_1_percent_fails_the_float64_check(torch: Any) -> None:
    case = tanh_case()
    with with_template("tanh", torch="torch.tanh({a}) * 1.001"):
        out = run(case, "torch")
    with pytest.raises(AssertionError, match=r"max\|out - expected\| = .* but should be <="):
        assert_matches(out, case.program.numpy(case.inputs), case, "float64", "torch float64")


@examples(10)
@given(program_cases(max_ops=1, ops=["sub"]))
def test_a_tensorflow_sign_error_fails_the_float64_check_on_generated_programs(tf: Any, case: ProgramCase) -> None:
    # One sub, then at most the connectors (add, mean): linear, so a - b -> a + b moves the
    # output by 2b, which must be caught wherever b is not all zeros.
    names = [op.name for op in case.program.ops]
    assume("sub" in names)
    b = case.program.trace(case.inputs)[case.program.arg_indices(names.index("sub"))[1]]
    assume(np.any(b))
    with with_template("sub", tf="tf.math.add({a}, {b})"):
        out = run(case, "tensorflow")
    with pytest.raises(AssertionError, match="but should be <="):
        assert_matches(out, case.program.numpy(case.inputs), case, "float64", "tensorflow float64")


def test_a_float32_op_computed_in_float16_fails_the_float32_check(torch: Any) -> None:
    case = tanh_case()
    expected = run(case, "torch")
    with with_template("tanh", torch="torch.tanh({a}.half()).to({a}.dtype)"):
        out = run(case, "torch", "float32")
    with pytest.raises(AssertionError, match="but should be <="):
        assert_matches(out, expected, case, "float32", "torch float32")


# --------------------------------------------------------------------------- the library itself


def test_to_source_is_the_code_that_build_runs(torch: Any, tf: Any) -> None:
    case = ProgramCase.from_recipe(
        Program(((3, 3), (3,)), (Op("solve_dd", params=(("s", 0.25),), args=(0,)),
                                 Op("linear", params=(("k", 2), ("bias", True), ("seed", 5))),
                                 Op("softplus", params=(("beta", 2.0), ("threshold", 5.0)), args=(1,)),
                                 Op("einsum2", params=(("equation", "ab,a->b"),), args=(3, 4)))),
        InputRecipe(seed=3, regimes=("unit", "large")),
    )
    for framework, layout in (("torch", "strided"), ("tensorflow", "contiguous")):
        namespace: dict[str, Any] = {}
        exec(case.program.to_source(framework, "float64", layout), namespace)
        built = run(case, framework, layout=layout)
        out = namespace["program"]([torch.from_numpy(x) if framework == "torch" else tf.constant(x) for x in case.inputs])
        out = out.numpy() if framework == "tensorflow" else out.detach().numpy()
        np.testing.assert_array_equal(out, built)


@examples(20)
@given(program_cases())
def test_a_case_repr_reproduces_the_case(case: ProgramCase) -> None:
    names = {"ProgramCase": ProgramCase, "Program": Program, "Op": Op, "InputRecipe": InputRecipe, "np": np}
    again = eval(repr(case), names)
    assert again.program == case.program
    for x, y in zip(again.inputs, case.inputs):
        np.testing.assert_array_equal(x, y)


@examples(20)
@given(program_cases())
def test_inputs_of_piecewise_ops_keep_away_from_their_kinks(case: ProgramCase) -> None:
    for i, kinks in case.program.kinks().items():
        for k in kinks:
            assert np.all(np.abs(case.inputs[i] - k) >= programs.KINK_MARGIN), (i, k, case)


def test_layouts_change_strides_keep_values_and_pass_gradients(torch: Any) -> None:
    x = torch.arange(24.0, dtype=torch.float64).reshape(1, 2, 3, 4).requires_grad_()
    views = {layout: to_layout(x, layout) for layout in LAYOUTS}
    assert views["contiguous"].is_contiguous()
    assert not views["transposed"].is_contiguous() and views["transposed"].stride()[0] == 1
    assert views["strided"].storage_offset() == 1 and views["strided"].stride()[-1] == 2
    assert views["channels_last"].is_contiguous(memory_format=torch.channels_last)
    assert not views["channels_last"].is_contiguous()
    for layout, v in views.items():
        assert torch.equal(v, x), layout
        (g,) = torch.autograd.grad((v * v).sum(), x)
        assert torch.equal(g, 2 * x), layout


def test_tensorflow_refuses_torch_layouts() -> None:
    with pytest.raises(ValueError, match="TensorFlow has no memory layouts"):
        tanh_case().program.build("tensorflow", layout="transposed")


@pytest.mark.parametrize(
    ("ops", "match"),
    [
        ((Op("nope"),), "unknown op"),
        ((Op("det_dd", params=(("s", 0.25),)),), "does not accept"),
        ((Op("tanh"), Op("relu")), "piecewise op may only read inputs"),
        ((Op("add", args=(0, 5)),), "needs 2 argument"),
    ],
)
def test_invalid_programs_are_refused_where_they_are_written(ops: Sequence[Op], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Program(((2, 3),), tuple(ops))
