"""The end-of-run summary a person reads (issue 31): every line at most 120 columns, known
divergences that need no action counted on one line, n/a reasons grouped by cause, and a
failure block with a meaningful margin.

No pytest run: the summary is rendered by ``session.outcome.summary_lines`` (the function
the terminal summary calls) from report documents made by ``results.report_document``.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from pytest_dlconform.report import divergences, results
from pytest_dlconform.report.document import freeze
from pytest_dlconform.run.session import outcome

TF, TORCH = {"framework": "tf", "device": "cpu"}, {"framework": "torch", "device": "cpu"}
ENV = {"frameworks": {"tensorflow": "2.21.0", "torch": "2.13.0"}, "profile": "ci", "seed": 0,
       "settings": {"frameworks": ["tensorflow", "torch"], "selected_devices": ["cpu"]}}
LONG = ("the TensorFlow.js converter (tensorflowjs) is not installed in this environment (importlib.util.find_spec("
        "'tensorflowjs') is None); run `tox -e tfjs`, the environment with tensorflow 2.19 + tensorflowjs 4.22 "
        "(docs/tfjs-tfx.md) (this environment has tensorflow 2.21.0; tensorflowjs 4.22 needs tensorflow-decision-"
        "forests, whose newest release pins tensorflow==2.19.0)")
CAUSE = "linalg ops in bfloat16/float16 refused by their documentation"
LINALG = ("cholesky_spd", "det_dd", "eigh", "inv_dd", "logdet_dd", "qr", "solve_dd", "svd", "trisolve")


def doc_of(tests: list[dict[str, Any]]) -> Any:
    collector = results.Collector()
    for t in tests:
        collector.tests[t["nodeid"]] = results.TestResult(**t)
    return results.report_document(collector, ENV, {})


def case(nodeid: str, claim: str, verdict: str, params: dict[str, str] = TF, **extra: Any) -> dict[str, Any]:
    return {"nodeid": nodeid, "claim": claim, "params": dict(params), "verdict": verdict, **extra}


def low_precision_refusals() -> list[dict[str, Any]]:
    """What suites/autodiff/test_low_precision.py reports: one reason per op and dtype, each
    quoting the documentation and the framework's error, all with the same cause."""
    out = []
    for op in LINALG:
        for fw, dtype in (("tf", "bfloat16"), ("torch", "bfloat16"), ("torch", "float16")):
            reason = (f"{op} in {dtype} on cpu: {fw}.linalg.{op} documentation: 'Supports input of float, double, "
                      f"cfloat and cdouble dtypes'; {fw} says: NotImplementedError: \"{op}_cpu\" not implemented")
            notes = {"not_applicable_cause": CAUSE, "not_applicable_subject": op}
            out.append(case(f"suites/autodiff/test_low_precision.py::test_lp[{fw}-cpu-{op}-{dtype}]",
                            "autodiff.gradient.low-precision", results.NOT_APPLICABLE,
                            {"framework": fw, "device": "cpu"}, reason=reason, evidence={"checks": {}, "notes": notes}))
    return out


def failures() -> list[dict[str, Any]]:
    exc = {"types": ["LookupError", "Exception"], "message": "No gradient defined for operation 'SoftsignGrad'\nmore"}
    return [
        case("suites/a/test_a.py::test_raises[cpu]", "autodiff.gradient.forward-mode-coverage", results.VIOLATED,
             evidence={"checks": {"value": {"observed": 0.0, "tolerance": 1e-6, "margin": 0.0, "count": 3}},
                       "notes": {}, "exception": exc}),
        case("suites/a/test_b.py::test_bitwise[cpu]", "determinism.bitwise", results.VIOLATED,
             evidence={"checks": {"rerun equals first run": {"observed": 1e-7, "tolerance": 0.0, "margin": "inf"}},
                       "notes": {}}),
        case("suites/a/test_c.py::test_numeric[torch-cpu]", "autodiff.tape.output-gradients", results.VIOLATED,
             TORCH, evidence={"checks": {"w^T J of x*sin(x)": {"observed": 3e-3, "tolerance": 2e-6, "margin": 1500.0},
                                         "held": {"observed": 1e-9, "tolerance": 2e-6, "margin": 5e-4}}, "notes": {}}),
        case("suites/a/test_d.py::test_harness[cpu]", "autodiff.tape.watch", results.ERROR,
             reason="pytest_dlconform.core.exceptions.HarnessError: the worker died"),
    ]


def statuses() -> list[dict[str, Any]]:
    def entry(claim: str, status: str, n: int = 0, **extra: Any) -> dict[str, Any]:
        where = "/a/long/path/to/src/pytest_dlconform/report/known_divergences.toml, entry 7"
        return {"claim": claim, "where": where, "status": status, "tests": [f"t{i}" for i in range(n)],
                "reason": "Keras 3.15 on the torch backend computes float64 matmuls in float32 " * 3,
                "why": "none of its tests ran in this run", "expires": "2000-01-01", **extra}

    return ([entry(f"autodiff.c{i}", divergences.APPLIED, 1) for i in range(24)]
            + [entry(f"data.c{i}", divergences.NOT_SELECTED) for i in range(3)]
            + [entry(f"interop.c{i}", divergences.OTHER_STACK, why="tensorflow is 2.21.0, the entry is for 2.20.*")
               for i in range(2)]
            + [entry("autodiff.tape.multiple", divergences.EXPIRED, 1)])


def full_run() -> Any:
    """A full-scale run: every registered claim on both frameworks, some failing; the
    reasons, failures and divergences of a real run."""
    from pytest_dlconform.core import claims as registry

    tests = []
    for i, (cid, claim) in enumerate(sorted(registry.registry().items())):
        for fw in claim.frameworks:
            short = {"tensorflow": "tf", "torch": "torch"}[fw]
            verdict = results.NOT_APPLICABLE if i % 7 == 0 else results.HOLDS
            tests.append(case(f"suites/{cid}/test_x.py::test_{cid.replace('.', '_')}_with_a_long_name[{short}-cpu]",
                              cid, verdict, {"framework": short, "device": "cpu"}, reason=LONG * (verdict != "holds")))
    return doc_of(tests + low_precision_refusals() + failures())


def rendered(doc: Any, messages: list[str], verbose: bool = False, width: int = 200) -> list[str]:
    return [line for line, _ in outcome.summary_lines(doc, messages, width=width, verbose=verbose)]


def test_every_line_of_a_full_run_summary_fits_120_columns() -> None:
    doc = full_run()
    device = ("dlconform: tensorflow 2.21.0, torch 2.13.0+cpu; selected: cpu; devices found: 2 CPU cores (Intel(R) "
              "Xeon(R) Processor; flags avx2 fma avx512f avx512_vnni avx512_bf16 avx512_fp16 avx_vnni amx_bf16 "
              "amx_int8); no GPU (nvidia-smi not found)")
    recipe = ("dlconform: reproduce with: pytest --dl-device=auto --dl-framework=tensorflow,torch --dl-profile=ci "
              "--dl-seed=0 --dl-replicas=2 -k 'not slow and not (gpu or tpu)' --dl-claims=autodiff.*,data.*,"
              "distributed.*,execution.*")
    header = [*results.wrap_line(device), *results.wrap_command(recipe)]
    for verbose in (False, True):
        messages = [*divergences.status_lines(statuses(), verbose=verbose), "JSON report written to " + "/x" * 80]
        lines = [line for line, _ in outcome.summary_lines(doc, messages, width=300, verbose=verbose, header=header)]
        assert len(lines) > 40
        assert max(len(line) for line in lines) <= 120, max(lines, key=len)
    # the wrapped command still pastes as the same command
    assert shlex.split(" ".join(line.removesuffix(" \\") for line in results.wrap_command(recipe))) == shlex.split(recipe)
    assert all(line.endswith(" \\") for line in results.wrap_command(recipe)[:-1])


def test_divergences_that_need_no_action_are_one_count_line_and_listed_with_v() -> None:
    quiet = divergences.status_lines(statuses(), verbose=False)
    assert quiet[0].startswith("known divergence EXPIRED on 2000-01-01: autodiff.tape.multiple")  # needs action
    assert quiet[1:] == ["known divergences: 24 applied, 3 not selected (none of their tests ran), "
                         "2 for another stack; -v lists each entry"]
    loud = divergences.status_lines(statuses(), verbose=True)
    assert len(loud) == 30 and sum(line.startswith("known divergence not selected: data.c") for line in loud) == 3
    assert sum(line.startswith("known divergence for another stack: interop.c") for line in loud) == 2
    assert divergences.summary_counts(statuses()) == {"applied": 24, "not selected": 3, "other stack": 2, "expired": 1}
    assert divergences.summary_line([]) == "" and divergences.status_lines([], verbose=False) == []


def test_not_applicable_reasons_are_grouped_by_cause() -> None:
    doc = doc_of(low_precision_refusals() + [
        case(f"suites/x/test_x.py::test_tfjs[{i}]", "export.tfjs.roundtrip", results.NOT_APPLICABLE, reason=LONG)
        for i in range(2)])
    lines = outcome._reason_lines(doc)
    assert lines[0].startswith(f"n/a (27 tests): {CAUSE} (cholesky_spd, det_dd, ") and len(lines[0]) <= 120
    assert lines[0].endswith(")") and ("9 in all" in lines[0] or "trisolve" in lines[0])
    assert lines[1] == f"n/a (2 tests): {LONG}"
    assert len(lines) == 2  # 27 distinct reasons, one line
    verbose = outcome._reason_lines(doc, verbose=True)
    assert len(verbose) == 2 + 27 and verbose[1].startswith("    cholesky_spd in bfloat16 on cpu: tf.linalg")
    assert max(len(line) for line in rendered(doc, [])) <= 120


def test_failure_block_gives_claim_test_symptom_and_a_margin_that_means_something() -> None:
    doc = doc_of(failures())
    block = results.failure_lines(doc)
    assert block[0].startswith("failures (4, by claim; margin: ")
    assert block[1:] == [
        "  autodiff.gradient.forward-mode-coverage",
        "    FAIL       -  test_raises[cpu]: LookupError: No gradient defined for operation 'SoftsignGrad'",
        "  autodiff.tape.output-gradients",
        "    FAIL 1.5e+03  test_numeric[torch-cpu]: observed 0.003, allowed 2e-06: w^T J of x*sin(x)",
        "  autodiff.tape.watch",
        "    ERR        -  test_harness[cpu]: pytest_dlconform.core.exceptions.HarnessError: the worker died",
        "  determinism.bitwise",
        "    FAIL bitwise  test_bitwise[cpu]: observed 1e-07, allowed 0 (bitwise): rerun equals first run",
    ]
    margins = {line.split()[0]: line.split()[-1] for line in results.matrix_lines(doc)[1:5]}
    assert margins == {"autodiff.gradient.forward-mode-coverage": "-", "autodiff.tape.output-gradients": "1.5e+03",
                       "autodiff.tape.watch": "-", "determinism.bitwise": "bitwise"}  # never FAIL 0 nor inf
    legend = " ".join(results.matrix_lines(doc)[5:7])
    assert "bitwise: an exact check differed" in legend and "-: failed without a numeric check" in legend
    expected = doc.map_tests(lambda t: dataclasses.replace(t, expected="known") if t.verdict == results.VIOLATED else t)
    assert len(results.failure_lines(expected)) == 3  # known divergences are not failures: the harness error stays
    assert results.failure_lines(doc_of([case("a::b", "autodiff.tape.watch", results.HOLDS)])) == []
    assert [line for line in rendered(doc, []) if line.startswith("failures (")]


def test_many_failures_are_cut_at_40_unless_verbose() -> None:
    many = [case(f"suites/a/test_a.py::test_{i:03d}[cpu]", f"autodiff.c{i % 5}", results.VIOLATED,
                 evidence=freeze({"checks": {}, "notes": {}})) for i in range(45)]
    doc = doc_of(many)
    quiet = [line for line in rendered(doc, []) if line.startswith("    FAIL")]
    assert len(quiet) == 40 and any(line.startswith("  ... and 5 more") for line in rendered(doc, []))
    assert len([line for line in rendered(doc, [], verbose=True) if line.startswith("    FAIL")]) == 45
