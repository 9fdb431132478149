"""The compiled-backward suite visits every registered sample of every op in every compiled
mode and dtype by construction: its chunks partition the library, each op's draw holds all of
its samples on one program per parameter class, and inductor's classes compiled apart plus
the rest are all of them. (A ci run's ledger is checked against the same registry by
``dlconform modes --check`` on the merged report in conformance.yml, a quick run's in .ci/run;
tests/integration/test_low_precision_compiled_mutants.py
runs the TorchScript mode end to end and checks its ledger.)"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_dlconform.programs import OPS
from pytest_dlconform.programs import samples as S
from pytest_dlconform.suites.execution import test_compiled_backward as suite


def test_each_mode_s_chunks_partition_the_library_in_order() -> None:
    for mode, chunks in suite.CHUNKS.items():
        assert [op for chunk in chunks for op in chunk] == list(OPS), mode
        assert all(chunks), mode


def test_the_chunks_are_balanced_by_parameter_classes() -> None:
    classes = {op: len(S.param_classes(op)) for op in OPS}
    for mode, chunks in suite.CHUNKS.items():
        weights = [sum(classes[op] for op in chunk) for chunk in chunks]
        assert max(weights) - min(weights) <= 2 * max(classes.values()), (mode, weights)


@settings(max_examples=1, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_an_op_s_draw_is_every_sample_on_one_program_per_class(data: st.DataObject) -> None:
    for op in OPS:
        pairs = data.draw(S.class_cases(op), label=op)
        assert [s for s, _ in pairs] == S.samples(op), op
        programs = {}
        for sample, case in pairs:
            program = programs.setdefault(sample.params, case.program)
            assert case.program == program, f"{op} {sample}: a class's samples must share its program"
        assert set(programs) == set(S.param_classes(op)), op
    cases, owners, where = suite._programs({"tanh": data.draw(S.class_cases("tanh")),
                                            "leaky_relu": data.draw(S.class_cases("leaky_relu"))})
    assert owners == ["tanh"] + ["leaky_relu"] * len(S.param_classes("leaky_relu"))
    assert sorted(where.values()) == list(range(len(cases)))


def test_inductor_s_apart_classes_and_the_rest_are_all_samples() -> None:
    apart = {key: [s for s in S.samples(op) if suite._apart(op, s) == key] for key, (op, _) in suite.INDUCTOR_APART.items()}
    assert all(len({s.params for s in found}) == 1 for found in apart.values()), apart  # one class each
    for op in OPS:
        rest = [s for s in S.samples(op) if suite._apart(op, s) is None]
        mine = [s for found in apart.values() for s in found if s.op == op]
        assert sorted(map(repr, rest + mine)) == sorted(map(repr, S.samples(op))), op


def test_the_registry_lists_every_sample_for_every_compiled_mode_and_dtype() -> None:
    keys = {tuple(sorted(k.items())) for k in S.registered()}
    for framework, modes in S.COMPILED_MODES.items():
        for mode, dtypes in modes.items():
            name = mode.removeprefix("compiled/")
            assert name in suite.MODE_NAMES and suite._dtypes(name) == dtypes, mode  # the suite reads its dtypes here
            for op in OPS:
                for sample in S.samples(op):
                    for dtype in dtypes:
                        key = tuple(sorted(S.coverage_key(framework, mode, sample, dtype=dtype).items()))
                        assert key in keys, key


def test_split_goes_per_op_then_per_class() -> None:
    a, b = S.samples("leaky_relu")[:2]
    t = S.samples("tanh")[0]
    draws = {"leaky_relu": [(a, "A"), (b, "B")], "tanh": [(t, "T")]}
    assert suite._split(draws) == [{"leaky_relu": [(a, "A"), (b, "B")]}, {"tanh": [(t, "T")]}]
    assert suite._split({"leaky_relu": [(a, "A"), (b, "B")]}) == [{"leaky_relu": [(a, "A")]}, {"leaky_relu": [(b, "B")]}]
    assert suite._split({"tanh": [(t, "T")]}) == []
