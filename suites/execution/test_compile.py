"""torch.compile: equivalence with eager for every backend, and the documented recompile rules.

A compile test must show that it really compiled: after ``recompile_limit`` cache entries
dynamo runs unseen inputs eagerly without an error, so "the output equals eager" alone
proves nothing. Every backend here is wrapped in :class:`checks.tracing.CountingBackend`,
which counts compiles and the calls that executed a compiled graph.

Cost: a cold inductor compile takes 15-60 s on a loaded 2-core machine, so inductor gets
one fixed program compiled once per worker (shared through ``compiled_functions``) and
exercised over many generated inputs of its shape; the cheap backends get a new generated
program per example.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence, not_applicable
from pytest_dlconform.api.programs import LAYOUTS, Op, Program, ProgramCase, input_recipes, program_cases
from pytest_dlconform.api.tracing import (
    CountingBackend,
    assert_within,
    check_compile_counts,
    fresh_function,
    program_error_bound,
)

FLOATS = ("float32", "float64")
# The backends torch.compile documents (torch.compiler.list_backends, debug ones included).
BACKENDS = ("eager", "aot_eager", "inductor", "cudagraphs", "openxla", "tvm")
CHEAP = ("eager", "aot_eager")
# Needs these packages at compile time (the backend imports them).
BACKEND_PACKAGES = {"openxla": "torch_xla", "tvm": "tvm"}
# One representative program for the expensive backends: a contraction, a saturating
# elementwise op, a reduction and another elementwise op.
FIXED_PROGRAM = Program(
    ((4, 5), (5, 3)),
    (Op("matmul", (("transpose_a", False), ("transpose_b", False)), (0, 1)), Op("tanh"),
     Op("logsumexp", (("dims", (1,)), ("keepdims", True))), Op("sin")),
)
# torch.compile's documented modes beside "default" that run on a CPU (reduce-overhead adds
# CUDA graphs only on CUDA); an elementwise program, so max-autotune has no GEMM to benchmark.
INDUCTOR_MODES = ("reduce-overhead", "max-autotune-no-cudagraphs")
MODE_PROGRAM = Program(((4, 3),), (Op("tanh"), Op("sin")))


def inductor_modes(profile: str, seed: int) -> tuple[str, ...]:
    """The modes besides the default that a run compiles: every one, except in the quick
    profile, which compiles one of them (each compile costs 10 to 30 s of CPU here), rotated
    by ``--dl-seed`` (successive seeds take each in turn; dlconform modes lists the other as
    left to the ci profile)."""
    return INDUCTOR_MODES if profile != "quick" else (INDUCTOR_MODES[seed % len(INDUCTOR_MODES)],)


def _require_backend(torch: Any, name: str, device: str) -> None:
    registered = torch._dynamo.list_backends(exclude_tags=())
    if name not in registered:
        not_applicable(
            f"torch {torch.__version__} registers no torch.compile backend {name!r} (it has {', '.join(registered)})"
        )
    if name == "cudagraphs" and device == "cpu":
        not_applicable("the cudagraphs backend records CUDA graphs and needs a CUDA device; this test runs on cpu")
    package = BACKEND_PACKAGES.get(name)
    if package and importlib.util.find_spec(package) is None:
        not_applicable(f"the {name} backend imports {package!r}, which is not installed: No module named {package!r}")


def _tensors(torch: Any, case: ProgramCase, dtype: str) -> list[Any]:
    return [torch.tensor(x, dtype=getattr(torch, dtype)) for x in case.inputs]


def _check_case(torch: Any, fn: Callable[..., Any], compiled: Callable[..., Any], backend: CountingBackend,
                case: ProgramCase, dtype: str, device: str, what: str) -> None:
    xs = _tensors(torch, case, dtype)
    runs = backend.runs
    out = compiled(xs)
    assert backend.runs > runs, f"{what}: the call ran no compiled graph (eager fallback)"
    bound = program_error_bound(case, dtype, device=device, framework="torch")
    got = out.detach().cpu().numpy()
    assert_within(got, case.program.numpy(case.inputs), bound, what=f"{what} vs float64 reference ({dtype})")
    assert_within(got, fn(xs).detach().cpu().numpy(), 2 * bound, what=f"{what} vs eager ({dtype})")


def _generated_programs(torch: Any, name: str, device: str) -> Callable[[], None]:
    @budget(8)
    @given(case=program_cases(max_ops=4, n_inputs=(1, 2), max_side=4), dtype=st.sampled_from(FLOATS),
           layout=st.sampled_from(LAYOUTS))
    def prop(case: ProgramCase, dtype: str, layout: str) -> None:
        torch._dynamo.reset()  # each example starts from empty caches: its compiles are its own
        fn = case.program.build("torch", dtype, layout)
        backend = CountingBackend(torch, name)
        compiled = torch.compile(fn, backend=backend)
        what = f"torch.compile(backend={name!r}, layout={layout!r})"
        _check_case(torch, fn, compiled, backend, case, dtype, device, what)
        first = backend.compiles  # a graph break gives more than one graph
        assert first >= 1, f"{what}: no graph was compiled"
        _check_case(torch, fn, compiled, backend, case, dtype, device, what + ", second call")
        assert backend.compiles == first, f"{what}: recompiled for the same inputs ({first} -> {backend.compiles})"

    return prop


def _inductor_mode(torch: Any, mode: str) -> CountingBackend:
    """Inductor with the configuration torch.compile(mode=...) applies (the documented
    torch._inductor.list_mode_options(mode)), wrapped so that its compiled runs are counted."""
    inductor = torch._dynamo.lookup_backend("inductor")
    patches = torch._inductor.list_mode_options(mode)

    def inner(gm: Any, example_inputs: Any) -> Any:
        return inductor(gm, example_inputs, config_patches=patches)

    inner.__name__ = f"inductor_{mode}"
    return CountingBackend(torch, inner)


def _fixed_program(torch: Any, name: str, device: str, shared: dict[Any, Any], program: Program = FIXED_PROGRAM,
                   mode: str | None = None, examples: int = 20) -> Callable[[], None]:
    dtype = "float32"
    key = ("compile-equivalence", name, program, dtype, device, mode)
    if key not in shared:
        fn = program.build("torch", dtype)
        backend = CountingBackend(torch, name) if mode is None else _inductor_mode(torch, mode)
        shared[key] = (fn, torch.compile(fn, backend=backend), backend)
    fn, compiled, backend = shared[key]
    label = f"torch.compile(backend={name!r}" + ("" if mode is None else f", mode={mode!r}") + ")"

    @budget(examples)
    @given(recipe=input_recipes(program.n_inputs))
    def prop(recipe: Any) -> None:
        _check_case(torch, fn, compiled, backend, ProgramCase.from_recipe(program, recipe), dtype, device, label)

    def run() -> None:
        prop()
        compiles = backend.compiles
        prop()  # the same examples again: nothing may recompile
        assert backend.compiles == compiles, f"{name}: recompiled for inputs of an already compiled shape"
        evidence.note(compiles=backend.compiles, compiled_runs=backend.runs)

    return run


@pytest.mark.claim("execution.compile.equivalence")
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_equals_eager_and_really_compiled(torch, dl_device, dl_settings, compiled_functions, backend):
    _require_backend(torch, backend, dl_device)
    if backend in CHEAP:
        _generated_programs(torch, backend, dl_device)()
    else:
        _fixed_program(torch, backend, dl_device, compiled_functions)()
    evidence.covers(f"backend={backend}")
    if backend == "inductor":  # the modes compile with inductor: after its first (cold) compile
        evidence.covers("mode=default")
        for mode in inductor_modes(dl_settings.profile, dl_settings.seed):
            _fixed_program(torch, backend, dl_device, compiled_functions, MODE_PROGRAM, mode, examples=3)()
            evidence.covers(f"mode={mode}")


def _branching(torch: Any) -> Callable[[Any], Any]:
    """A data-dependent Python branch: dynamo breaks the graph there (two graphs and a resume)."""
    return fresh_function({"torch": torch}, "y = torch.sin(x)\nif y.sum() > 0:\n    return y * 2.0\nreturn y - 1.0")


@pytest.mark.claim("execution.compile.equivalence")
@budget(3)
@given(recipe=input_recipes(FIXED_PROGRAM.n_inputs))
def test_fullgraph_gives_one_graph_and_refuses_a_graph_break(torch, dl_device, recipe):
    torch._dynamo.reset()
    fn = FIXED_PROGRAM.build("torch", "float32")
    backend = CountingBackend(torch, "eager")
    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    _check_case(torch, fn, compiled, backend, ProgramCase.from_recipe(FIXED_PROGRAM, recipe), "float32", dl_device,
                "torch.compile(fullgraph=True)")
    assert backend.compiles == 1, f"fullgraph=True compiled {backend.compiles} graphs for a program without breaks"
    branching = _branching(torch)
    x = torch.tensor(ProgramCase.from_recipe(FIXED_PROGRAM, recipe).inputs[0], dtype=torch.float32)
    broken = CountingBackend(torch, "eager")
    out = torch.compile(branching, backend=broken)(x)  # fullgraph=False (the default): a graph break
    assert torch.equal(out, branching(x)), "torch.compile(fullgraph=False) with a graph break differs from eager"
    assert broken.compiles >= 2 and broken.runs >= 2, (
        f"a data-dependent branch should split the function into graphs; compiled {broken.compiles}, ran {broken.runs}")
    evidence.covers("fullgraph=False")
    # Documented: with fullgraph=True "if there are graph breaks, then this will raise an error".
    with pytest.raises(torch._dynamo.exc.Unsupported, match="Data-dependent branching"):
        torch.compile(_branching(torch), backend=CountingBackend(torch, "eager"), fullgraph=True)(x)
    evidence.covers("fullgraph=True")


def _shape_sequences() -> st.SearchStrategy[list[tuple[str, tuple[int, ...]]]]:
    call = lambda rank: st.tuples(st.sampled_from(FLOATS), st.tuples(*[st.integers(0, 5)] * rank))
    return st.integers(0, 2).flatmap(lambda rank: st.lists(call(rank), min_size=1, max_size=7))


@pytest.mark.claim("execution.compile.recompile-on-shape")
@budget(12)
@given(calls=_shape_sequences(), dynamic=st.sampled_from([None, True, False]))
@example(calls=[("float32", (b, 3)) for b in (2, 3, 4, 5, 6)], dynamic=None)  # trial run: 2 graphs for 5 batch sizes
@example(calls=[("float32", (2, 3)), ("float32", (3, 3)), ("float32", (3, 4))], dynamic=True)
@example(calls=[("float32", (2, 3)), ("float32", (3, 3)), ("float64", (3, 3))], dynamic=False)
def test_recompiles_follow_the_documented_rules(torch, calls, dynamic):
    torch._dynamo.reset()  # and a fresh code object: counts never depend on what ran before
    fn = fresh_function({"torch": torch}, "return torch.sin(x) * 2.0 + 1.0")
    check_compile_counts(torch, fn, calls, dynamic=dynamic)
    evidence.covers(f"dynamic={dynamic}")


@pytest.mark.claim("execution.compile.recompile-on-shape")
def test_past_the_recompile_limit_unseen_shapes_run_eagerly(torch):
    torch._dynamo.reset()
    limit = int(torch._dynamo.config.recompile_limit)
    calls = [("float32", (n,)) for n in range(2, limit + 4)] + [("float32", (2,))]
    fn = fresh_function({"torch": torch}, "return torch.cos(x) - x")
    steps = check_compile_counts(torch, fn, calls, dynamic=False)
    # The model predicted it; spelled out: `limit` compiles, then two unseen shapes run
    # eagerly without an error, and a shape compiled before still runs its compiled graph.
    assert [s.compiles for s in steps[-3:]] == [limit] * 3 and [s.runs for s in steps[-3:]] == [0, 0, 1]
    evidence.note(recompile_limit=limit)
    evidence.covers("recompile_limit")
