"""Known divergences pinned to their symptom, and what an exception in a claim test means.

No framework and no pytest run: entries are parsed from real TOML, failures built from
real exceptions, statuses computed on report documents made by results.report_document.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_dlconform.checks import bug_references
from pytest_dlconform.report import divergences, outcomes, results
from pytest_dlconform.report.divergences import Failure
from pytest_dlconform.report.document import freeze

if sys.version_info < (3, 11):
    from exceptiongroup import ExceptionGroup  # pytest's dependency on 3.10

TF, TORCH = {"framework": "tf", "device": "cpu"}, {"framework": "torch", "device": "cpu"}
ENV = {"frameworks": {"tensorflow": "2.21.0", "torch": "2.13.0", "keras": "3.15.1"}, "profile": "ci", "seed": 0,
       "settings": {"frameworks": ["tensorflow", "torch"], "selected_devices": ["cpu"]}}
GELU = """
    [[divergence]]
    claim = "interop.same-model.activations"
    tests = ["interop/test_same_model.py::test_activation_computes_its_formula[tf-*]"]
    exception = "ToleranceExceeded"
    message = '^tensorflow gelu on .*\\(float64\\)'
    max_error = 1e-8
    reason = "float32 1/sqrt(2)"
    expires = 2999-06-30
    framework = "tensorflow"
    version = "2.21.*"
"""
NODE = "suites/interop/test_same_model.py::test_activation_computes_its_formula[tf-cpu]"


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def gelu_failure(message: str = "tensorflow gelu on [-1, 1] (float64): off", error: float = 5e-9) -> Failure:
    return Failure(("ToleranceExceeded", "AssertionError", "Exception"), message, (error,))


def case(nodeid: str = NODE, claim: str = "interop.same-model.activations", params: dict[str, str] = TF) -> dict:
    return {"nodeid": nodeid, "claim": claim, "params": params}


# ------------------------------------------------------------------ the file


def test_divergence_file_errors_are_one_line(tmp_path: Path) -> None:
    base = "[[divergence]]\nclaim = 'a.b'\nreason = 'r'\nexpires = 2030-01-01\n"
    pinned = base + "tests = ['a/test_x.py::*']\nexception = 'ValueError'\nmessage = 'bad'\nversions = { keras = '3.*' }\n"
    cases = {
        "[[divergence]]\nclaim = 'a.b'\nreason = 'r'\n": "'expires' is required",
        "[[divergence]]\nclaim = 'a.b'\nreason = 'r'\nexpires = 'soon'\n": "expires 'soon' is not a date",
        pinned + "frmework = 'tf'\n": "unknown keys",
        pinned + "version = '2.*'\n": "'version' needs 'framework'",
        pinned + "framework = 'jax'\n": "is not one of tensorflow",
        base + "exception = 'ValueError'\nversions = { keras = '3.*' }\n": "'tests' is required",
        base + "tests = ['a/*']\nversions = { keras = '3.*' }\n": "pin the symptom",
        base + "tests = ['a/*']\nmessage = 'x'\nversions = { keras = '3.*' }\n": "pin the symptom",
        base + "tests = ['a/*']\nmax_error = -1\nversions = { keras = '3.*' }\n": "max_error -1 must be a positive number",
        base + "tests = ['a/*']\nexception = 'E'\nmessage = '('\nversions = { keras = '3.*' }\n": "not a regular expression",
        base + "tests = ['a/*']\nexception = 'E'\nmessage = 'm'\n": "say which versions the entry is for",
        base + "tests = ['a/*']\nexception = 'E'\nversions = { keras = '3.*' }\n": "exception 'E' alone would match any",
        pinned + "reference = 'nope'\n": "reference 'nope' is not a registered bug reference; use one of",
        pinned + "occurs_with = { replicas = 3 }\n": "occurs_with replicas = 3 must be a list of int",
        pinned + "occurs_with = { device = ['cpu'] }\n": "occurs_with names 'device'; it can name profile, replicas",
        pinned + "occurs_with = { profile = ['exploer'] }\n": "occurs_with profile 'exploer' is not a profile",
        pinned + "occurs_with = []\n": "occurs_with must be a table of run settings",
        "claim = 1\n": "unknown tables",
        "[[divergence]\n": "not valid TOML",
    }
    for i, (text, message) in enumerate(cases.items()):
        path = write(tmp_path / f"d{i}.toml", text)
        with pytest.raises(divergences.DivergenceError, match=message) as info:
            divergences.load(path)
        assert "\n" not in str(info.value)
    with pytest.raises(divergences.DivergenceError, match="no such file"):
        divergences.load(str(tmp_path / "missing.toml"))


def test_the_shipped_file_pins_every_entry() -> None:
    from importlib import resources

    entries = divergences.load(str(resources.files("pytest_dlconform.report") / "known_divergences.toml"))
    assert entries and all(e.tests and (e.exception or e.max_error) and (e.version or e.versions) for e in entries)


# ------------------------------------------------------------------ the pin


def test_an_entry_matches_only_its_tests_its_symptom_and_its_stack(tmp_path: Path) -> None:
    [entry] = divergences.load(write(tmp_path / "k.toml", GELU))
    match = divergences.match_failure
    assert match([entry], case(), gelu_failure(), ENV) is entry
    # The installed suites' node ids match too (the path up to suites/ is dropped).
    assert match([entry], case("../site-packages/pytest_dlconform/suites/" + NODE.removeprefix("suites/")),
                 gelu_failure(), ENV) is entry
    # Another activation, another dtype, a larger error, another exception: plain violations.
    assert match([entry], case(), gelu_failure("tensorflow elu on [-1, 1] (float64): off"), ENV) is None
    assert match([entry], case(), gelu_failure("tensorflow gelu on [-1, 1] (float32): off"), ENV) is None
    assert match([entry], case(), gelu_failure(error=2e-8), ENV) is None
    assert match([entry], case(), Failure(("LookupError", "Exception"), "tensorflow gelu (float64)"), ENV) is None
    # Another test of the same claim, and the same test on torch.
    other = "suites/interop/test_same_model.py::test_activation_gradient[tf-cpu]"
    assert match([entry], case(other), gelu_failure(), ENV) is None
    torch_node = NODE.replace("[tf-cpu]", "[torch-cpu]")
    assert match([entry], case(torch_node, params=TORCH), gelu_failure(), ENV) is None
    # Another TensorFlow, or past its expiry.
    assert match([entry], case(), gelu_failure(), {**ENV, "frameworks": {"tensorflow": "2.22.0"}}) is None
    assert match([entry], case(), gelu_failure(), ENV, today=dt.date(3000, 1, 1)) is None


def test_brackets_in_node_id_globs_are_literal() -> None:
    entry = divergences.Divergence("a.b", "r", dt.date(2999, 1, 1), tests=("a/test_x.py::test_y[tf-*]",),
                                   exception="ValueError", versions=(("keras", "*"),))
    assert entry.selects({"nodeid": "suites/a/test_x.py::test_y[tf-cpu]", "claim": "a.b", "params": TF})
    assert not entry.selects({"nodeid": "suites/a/test_x.py::test_yt", "claim": "a.b", "params": TF})


def test_a_ceiling_pin_never_matches_a_crash() -> None:
    entry = divergences.Divergence("a.b", "r", dt.date(2999, 1, 1), tests=("*",), max_error=1e-6,
                                   versions=(("keras", "*"),))
    assert entry.shows(Failure(("ToleranceExceeded", "AssertionError"), "x", (1e-7,)))
    assert not entry.shows(Failure(("RuntimeError", "Exception"), "x", (1e-7,)))
    assert not entry.shows(Failure(("ToleranceExceeded", "AssertionError"), "x", ()))  # nothing observed


# ------------------------------------------------------------------ statuses after the run


def doc_of(rows: list[tuple[str, str, str, dict[str, str]]]) -> dict:
    collector = results.Collector()
    for nodeid, claim, verdict, params in rows:
        collector.tests[nodeid] = results.TestResult(nodeid, claim, params, verdict=verdict)
    return results.report_document(collector, ENV, {})


def test_statuses_applied_expired_unmatched_not_selected_other_stack(tmp_path: Path) -> None:
    doc = doc_of([
        (NODE, "interop.same-model.activations", results.VIOLATED, TF),
        ("suites/autodiff/test_t.py::test_watch[tf-cpu]", "autodiff.tape.watch", results.VIOLATED, TF),
        ("suites/autodiff/test_t.py::test_nested[tf-cpu]", "autodiff.tape.nested", results.HOLDS, TF),
    ])
    [gelu] = divergences.load(write(tmp_path / "g.toml", GELU))
    doc = doc.map_tests(lambda t: dataclasses.replace(t, divergence=gelu.key, expected=gelu.reason)
                        if t.claim == "interop.same-model.activations" else t)  # as the worker recorded it
    path = write(tmp_path / "k.toml", GELU + """
        [[divergence]]
        claim = "autodiff.tape.watch"
        tests = ["autodiff/test_t.py::test_watch*"]
        exception = "ValueError"
        message = "bad"
        versions = { keras = "3.15.*" }
        reason = "old bug"
        expires = 2020-01-01

        [[divergence]]
        claim = "autodiff.tape.nested"
        tests = ["autodiff/test_t.py::test_nested*"]
        exception = "ValueError"
        message = "bad"
        versions = { keras = "3.15.*" }
        reason = "fixed upstream"
        expires = 2999-01-01

        [[divergence]]
        claim = "data.*"
        tests = ["data/*"]
        exception = "ValueError"
        message = "bad"
        versions = { keras = "3.15.*" }
        reason = "not in this run"
        expires = 2999-01-01

        [[divergence]]
        claim = "autodiff.*"
        tests = ["autodiff/*"]
        exception = "ValueError"
        message = "bad"
        framework = "tensorflow"
        version = "2.20.*"
        reason = "only on 2.20"
        expires = 2999-01-01
    """)
    before = doc.to_dict()
    after = divergences.apply(doc, divergences.load(path), today=dt.date(2026, 1, 1))
    assert doc.to_dict() == before  # a pure function: the run's report is not edited
    statuses = list(after.divergences)
    assert [s["status"] for s in statuses] == ["applied", "expired", "unmatched", "not selected", "other stack"]
    assert after["counts"]["expected"] == {"tests": 1, "claims": 1}
    assert list(statuses[1]["tests"]) == ["suites/autodiff/test_t.py::test_watch[tf-cpu]"]
    lines = divergences.status_lines(statuses)
    assert lines[1].startswith("known divergence EXPIRED on 2020-01-01: autodiff.tape.watch")
    assert "still violated by 1 test(s)" in lines[1]
    assert lines[2].startswith("known divergence UNMATCHED: autodiff.tape.nested")
    assert "its 1 test(s) ran: holds, none with ValueError" in lines[2]
    assert lines[3].startswith("known divergence not selected: data.*")
    assert lines[4].endswith("tensorflow is 2.21.0, the entry is for 2.20.*")
    assert [s["claim"] for s in divergences.problems(statuses)] == ["autodiff.tape.watch", "autodiff.tape.nested"]


def test_expected_cells_show_as_exp_in_the_matrix(tmp_path: Path) -> None:
    doc = doc_of([(NODE, "interop.same-model.activations", results.VIOLATED, TF)])
    evidence = {"checks": {"gelu (float64)": {"observed": 5e-9, "tolerance": 1e-14, "margin": 5e5}},
                "exception": {"types": ["ToleranceExceeded", "AssertionError"],
                              "message": "tensorflow gelu on [-1, 1] (float64): off"}}
    doc = doc.map_tests(lambda t: dataclasses.replace(t, evidence=freeze(evidence)))
    doc = divergences.apply(doc, divergences.load(write(tmp_path / "k.toml", GELU)))  # matched from the evidence
    lines = results.matrix_lines(doc)
    assert lines[1].split() == ["interop.same-model.activations", "exp", "5e+05"]
    assert doc["claims"]["interop.same-model.activations"]["expected"] == "float32 1/sqrt(2)"


# ------------------------------------------------------------------ what an exception means


def TaskError(*errors: object) -> Exception:
    """Our cluster's TaskError: what the ranks raised arrives as class names and messages."""
    from pytest_dlconform.harness.groups import TaskError as Real

    return Real("rank program", list(errors))  # type: ignore[arg-type]


def Remote(type_: str, message: str = "") -> object:
    from pytest_dlconform.harness.rank import RemoteError

    return RemoteError(rank=0, type=type_, message=message, traceback="")


def test_framework_exceptions_in_the_call_are_violations_harness_failures_errors() -> None:
    from pytest_dlconform.frameworks import HarnessError

    V, E = results.VIOLATED, results.ERROR
    cases = [
        (AssertionError("off"), V),
        (TypeError("unsupported operand type(s) for *: 'NoneType' and 'float'"), V),  # a None gradient used
        (ValueError("Attempt to convert a value (PerReplica...)"), V),  # the framework raised
        (RuntimeError("Unable to load SavedModel"), V),
        (HarnessError("rank 1 did not arrive"), E),
        (ImportError("No module named 'onnxruntime'"), E),
        (ModuleNotFoundError("No module named 'x'"), E),
        (NameError("name 'np' is not defined"), E),  # a bug in the test's own text
        (KeyboardInterrupt(), E),
        (ExceptionGroup("two", [AssertionError("a"), ValueError("b")]), V),
        (ExceptionGroup("mixed", [AssertionError("a"), HarnessError("b")]), E),
        (TaskError(Remote("ValueError", "fit raised")), V),
        (TaskError(Remote("tensorflow.python.framework.errors_impl.InvalidArgumentError")), V),
        (TaskError(Remote("ValueError"), Remote("ClusterError")), E),
        (TaskError(), E),
    ]
    for exc, verdict in cases:
        assert outcomes.classify(exc) == verdict, exc
    with pytest.raises(pytest.fail.Exception) as info:
        pytest.fail("claim violated")
    assert outcomes.classify(info.value) == V


def test_hypothesis_refusing_a_test_is_a_harness_error() -> None:
    from hypothesis.errors import FailedHealthCheck, Unsatisfiable

    assert outcomes.classify(FailedHealthCheck("too slow")) == results.ERROR
    assert outcomes.classify(Unsatisfiable("no examples")) == results.ERROR


def test_a_failure_that_did_not_repeat_is_judged_by_what_failed() -> None:
    """The framework answered one example two ways: the wrong answer was given (a violation);
    a deadline that did not repeat is our timing (a harness error)."""
    from datetime import timedelta

    from hypothesis.errors import DeadlineExceeded, Flaky, FlakyFailure, FlakyStrategyDefinition

    wrong = FlakyFailure("Falsified on the first call but did not on a subsequent one",
                         [AssertionError("a second pipeline seeded the same way gave another order")])
    assert outcomes.classify(wrong) == results.VIOLATED
    assert outcomes.did_not_repeat(wrong) and not outcomes.did_not_repeat(AssertionError("x"))
    evidence = outcomes.exception_evidence(ExceptionGroup("two", [wrong]))
    assert "answered the same call two ways" in evidence["did_not_repeat"]
    assert "another order" in evidence["message"] and "AssertionError" in evidence["types"]
    assert "did_not_repeat" not in outcomes.exception_evidence(AssertionError("x"))
    slow = FlakyFailure("Unreliable test timings", [DeadlineExceeded(timedelta(seconds=2), timedelta(seconds=1))])
    assert outcomes.classify(slow) == results.ERROR
    assert outcomes.classify(FlakyFailure("mixed", [AssertionError("a"), ImportError("b")])) == results.ERROR
    assert outcomes.classify(Flaky("Inconsistent results from replaying")) == results.ERROR
    assert outcomes.classify(FlakyStrategyDefinition("a strategy drew differently")) == results.ERROR


def test_the_failure_of_a_remote_error_is_its_type_and_message() -> None:
    failure = outcomes.failure(TaskError(Remote("a.b.ValueError", "PerReplica")),
                               {"checks": {"x": {"observed": 2.0, "tolerance": 1.0, "margin": 2.0},
                                           "y": {"observed": 0.1, "tolerance": 1.0, "margin": 0.1}}})
    assert failure == Failure(("ValueError",), "PerReplica", (2.0,), ((("ValueError",), "PerReplica"),))
    evidence = outcomes.exception_evidence(ValueError("bad"))
    assert evidence["types"] == ["ValueError", "Exception"] and evidence["message"] == "bad"


def test_an_entry_for_run_settings_the_run_did_not_have_is_not_reached_never_unmatched(tmp_path: Path) -> None:
    """occurs_with (the symptom needs 3 replicas, or the explore profile): a run with other
    settings whose pinned tests held reports the entry as not reached, not as one to remove; a
    run with those settings and held tests reports it unmatched; matching is unchanged."""
    entry = GELU + "occurs_with = { replicas = [3] }\n"
    [gelu] = divergences.load(write(tmp_path / "k.toml", entry))
    held = doc_of([(NODE, "interop.same-model.activations", results.HOLDS, TF)])

    def status(doc, replicas):
        env = {**doc.environment, "settings": {**doc.environment["settings"], "replicas": replicas}}
        [s] = divergences.apply(doc.replace(environment=env), [gelu], today=dt.date(2026, 1, 1)).divergences
        return s

    two = status(held, 2)
    assert (two["status"], two["why"]) == ("not reached", "its tests held; the symptom occurs with --dl-replicas=3, and "
                                                         "this run had --dl-replicas=2")
    assert divergences.status_lines([two])[0].startswith("known divergence not reached: interop.same-model.activations")
    assert not divergences.problems([two]) and {k: list(v) for k, v in two["occurs_with"].items()} == {"replicas": [3]}
    assert status(held, 3)["status"] == "unmatched"
    # A pinned test violated with another symptom is never hidden behind "not reached".
    other = doc_of([(NODE, "interop.same-model.activations", results.VIOLATED, TF)])
    assert status(other, 2)["status"] == "unmatched"
    errored = doc_of([(NODE, "interop.same-model.activations", results.ERROR, TF)])  # an error never "held"
    assert status(errored, 2)["status"] == "unmatched"
    # Matching ignores occurs_with: the pin alone decides, in every run.
    assert divergences.match_failure([gelu], case(), gelu_failure(), ENV) is gelu


# ------------------------------------------------------------------ every failing part, the largest error, bug references


EDGE = """
    [[divergence]]
    claim = "autodiff.ops.edge-cases"
    tests = ["autodiff/test_op_edges.py::test_tensorflow_op_edge_cases[*-extreme-erf]"]
    exception = "EdgeMismatch"
    message = '^erf extreme \\[default, float64\\]: value at x=-?1e\\+300 is nan, documented -?1\\.0 '
    reason = "erf NaN"
    expires = 2999-06-30
    framework = "tensorflow"
    version = "2.21.*"
"""
EDGE_NODE = "suites/autodiff/test_op_edges.py::test_tensorflow_op_edge_cases[cpu-extreme-erf]"


def test_a_pin_matches_only_when_every_wrong_entry_shows_the_symptom(tmp_path: Path) -> None:
    from pytest_dlconform.programs.edges import EdgeMismatch

    [entry] = divergences.load(write(tmp_path / "k.toml", EDGE))
    test = case(EDGE_NODE, "autodiff.ops.edge-cases")
    pinned = "erf extreme [default, float64]: value at x=1e+300 is nan, documented 1.0 (allowed error 4e-16)"
    mirror = "erf extreme [default, float64]: value at x=-1e+300 is nan, documented -1.0 (allowed error 4e-16)"
    other = "erf extreme [default, float64]: gradient of input 0 at x=3.0 is 0.5, documented 1.3e-4 (allowed error 1e-16)"
    assert divergences.match_failure([entry], test, outcomes.failure(EdgeMismatch(pinned, mirror)), ENV) is entry
    # The first entry is the pinned one; a second, different wrong entry makes it a plain violation.
    both = EdgeMismatch.joined([EdgeMismatch(pinned), EdgeMismatch(other, errors=[1e12])])
    assert str(both).startswith(pinned)  # what the old matcher saw first
    assert divergences.match_failure([entry], test, outcomes.failure(both), ENV) is None
    # The report keeps every part, so a report judged elsewhere decides the same.
    record = {**test, "evidence": {"exception": outcomes.exception_evidence(both)}}
    assert divergences.match_failure([entry], test, divergences.failure_of(record), ENV) is None
    # The same holds for hypothesis' failing examples (an exception group): each must match.
    group = ExceptionGroup("two", [EdgeMismatch(pinned), EdgeMismatch(other)])
    assert divergences.match_failure([entry], test, outcomes.failure(group), ENV) is None


def test_the_ceiling_sees_the_largest_failing_error_not_the_worst_margin() -> None:
    from pytest_dlconform.core import evidence

    with evidence.recording() as rec:
        evidence.check("erf forward", observed=2e-16, tolerance=7e-18)  # margin 29: the worst margin
        evidence.check("erf forward", observed=1e-2, tolerance=1e-3)  # margin 10: a large error
        evidence.check("erf forward", observed=0.5, tolerance=1.0)  # passing: not a failure
    record = rec.as_dict()["checks"]["erf forward"]
    assert record["observed"] == 2e-16 and record["margin"] > 28 and record["max_error"] == 1e-2
    entry = divergences.Divergence("a.b", "r", dt.date(2999, 1, 1), tests=("*",), exception="ToleranceExceeded",
                                   message="erf", max_error=1.6e-7, versions=(("keras", "*"),))
    failure = outcomes.failure(AssertionError("erf forward off"), rec.as_dict())
    assert failure.errors == (1e-2,)
    assert not entry.shows(dataclasses.replace(failure, types=("ToleranceExceeded", "AssertionError"),
                                               parts=((("ToleranceExceeded", "AssertionError"), "erf"),)))
    # Only the small errors: matched.
    with evidence.recording() as small:
        evidence.check("erf forward", observed=2e-16, tolerance=7e-18)
    ok = Failure(("ToleranceExceeded", "AssertionError"), "erf", divergences.failing_errors(small.as_dict()))
    assert entry.shows(ok)


def test_a_reference_entry_matches_only_an_observation_equal_to_its_bug_reference() -> None:
    entry = divergences.Divergence("a.b", "r", dt.date(2999, 1, 1), tests=("*",), exception="StepMismatch",
                                   message="^mirrored", reference="keras-loss-scale-float32", versions=(("keras", "*"),))
    step = (("StepMismatch", "AssertionError"), "mirrored over 3 replica(s): off")
    assert entry.shows(Failure(*step, references=(("keras-loss-scale-float32", 0.3),)))
    assert not entry.shows(Failure(*step, references=(("keras-loss-scale-float32", 4e6),)))  # another computation
    assert not entry.shows(Failure(*step))  # the test did not compute the reference
    assert bug_references.keras_loss_scale_float32(3) == 3 * 0.3333333432674408
    assert bug_references.keras_loss_scale_float32(2) == 1.0 and bug_references.keras_loss_scale_float32(4) == 1.0



def test_an_entry_selects_a_test_by_its_identity_when_the_node_id_has_no_path() -> None:
    entry = divergences.Divergence("a.b", "r", dt.date(2999, 1, 1), tests=("autodiff/test_x.py::test_y[*]",),
                                   exception="E", versions=(("torch", "*"),))
    bare = {"nodeid": "::test_y[cpu]", "claim": "a.b", "params": {"framework": "torch"}}
    assert not entry.selects(bare)  # a node id from `pytest --pyargs pkg.module::test_y`
    assert entry.selects({**bare, "identity": "suites/autodiff/test_x.py::test_y[cpu]"})
    assert not entry.selects({**bare, "identity": "suites/autodiff/test_z.py::test_y[cpu]"})
