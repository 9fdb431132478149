"""Issue 28: known limits are version-pinned divergences; the throughput and spectral-norm
checks fail their wrong twins.

* A known divergence pinned to torch 2.13 / TensorFlow 2.21 turns the op's failure into an
  xfail on that version only: on another version (or with another symptom) it fails.
* data.torch.throughput compares every field of every batch with the dataset collated by a
  numpy reference: a loader that corrupts labels while keeping ids fails it.
* modules.spectral-norm's training-iteration check fails a spectral norm that skips the
  training-mode power iterations (registration's 15 still run).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dlconform.report import divergences

PACKAGED = divergences.load(divergences.__file__.rsplit("/", 1)[0] + "/known_divergences.toml")


def _report(nodeid: str, claim: str, framework: str, version: str, exc: dict[str, Any],
            checks: list[dict[str, Any]] | None = None,
            references: dict[str, Any] | None = None) -> dict[str, Any]:
    short = {"tensorflow": "tf"}.get(framework, framework)  # as the report's params name it
    test = {"nodeid": nodeid, "claim": claim, "verdict": "violated", "outcome": "failed",
            "params": {"framework": short, "device": "cpu"}, "reason": "AssertionError: ...",
            "evidence": {"exception": exc, **({"checks": checks} if checks else {}),
                         **({"references": references} if references else {})}}
    env = {"frameworks": {framework: version}, "settings": {"frameworks": [framework], "selected_devices": ["cpu"]}}
    return {"environment": env, "claims": {claim: {"verdict": "violated", "claim": {"statement": "S"}, "tests": [test]}}}


HARDSIGMOID = ("suites/autodiff/test_ops.py::test_torch_op_reverse_mode_vs_finite_differences[cpu-hardsigmoid]",
               "autodiff.gradient.finite-differences", "torch",
               {"types": ["GradientMismatch", "AssertionError"], "message": "... error 6.84e-10 is 1.89x the allowed "
                "3.63e-10 (relative error 2.98e-08, rtol 1.5e-08, ...)"})
# What the per-op suite records for hardsigmoid's gradient against the bug's computation.
BUG_GRADIENT = {"torch-hardsigmoid-vjp": {"observed": 0.0, "tolerance": 2.2e-16, "margin": 0.0}}
OTHER_GRADIENT = {"torch-hardsigmoid-vjp": {"observed": 3e-8, "tolerance": 2.2e-16, "margin": 1.4e8}}
SOFTSIGN = ("suites/autodiff/test_ops.py::test_tensorflow_op_forward_vs_reverse_mode[cpu-softsign]",
            "autodiff.gradient.forward-reverse", "tensorflow",
            {"types": ["LookupError"], "message": "gradient registry has no entry for: SoftsignGrad"})
LOGCUMSUMEXP = ("suites/autodiff/test_ops.py::test_torch_op_forward_vs_reverse_mode[cpu-logcumsumexp]",
                "autodiff.gradient.forward-reverse", "torch",
                {"types": ["GradientMismatch", "AssertionError"], "message": "v.(J u)=-4.57842224 from forward mode (jvp), "
                 "but should equal (J^T v).u=-7.34695406 from reverse mode (vjp) for random u, v (pair 0 of 1): ..."})


def _verdict(case: tuple, version: str, **changes: Any) -> str:
    nodeid, claim, framework, exc = case
    references = changes.get("references", BUG_GRADIENT if case is HARDSIGMOID else None)
    report = _report(changes.get("nodeid", nodeid), claim, framework, version, dict(exc, **changes.get("exc", {})),
                     references=references)
    [test] = list(divergences.apply(report, PACKAGED).tests())
    return "known" if test.divergence else test.verdict  # a matched violation: the entry that explains it


@pytest.mark.parametrize(("case", "pinned", "other"), [(HARDSIGMOID, "2.13.0+cpu", "2.14.0"),
                                                       (SOFTSIGN, "2.21.0", "2.22.0"),
                                                       (LOGCUMSUMEXP, "2.13.0+cpu", "2.14.0")],
                         ids=["hardsigmoid", "softsign", "logcumsumexp"])
def test_a_known_limit_is_an_xfail_on_its_pinned_version_only(case, pinned, other):
    assert _verdict(case, pinned) == "known"
    assert _verdict(case, other) == "violated"  # the op is checked like any other op there


def test_a_known_limit_pins_its_symptom_and_its_op():
    other_error = {"message": "... (relative error 4.1e-07, rtol 1.5e-08, ...)"}
    assert _verdict(HARDSIGMOID, "2.13.0+cpu", exc=other_error) == "violated"
    # Finite differences read a gradient scaled by 1 + 3.01e-08 alike; only the bug's own gradient matches.
    near = {"message": "... (relative error 3.01e-08, rtol 1.5e-08, ...)"}
    assert _verdict(HARDSIGMOID, "2.13.0+cpu", exc=near) == "known"
    assert _verdict(HARDSIGMOID, "2.13.0+cpu", exc=near, references=OTHER_GRADIENT) == "violated"
    assert _verdict(HARDSIGMOID, "2.13.0+cpu", exc=near, references={}) == "violated"  # the test did not compare
    other_op = HARDSIGMOID[0].replace("hardsigmoid", "hardswish")
    assert _verdict(HARDSIGMOID, "2.13.0+cpu", nodeid=other_op) == "violated"
    general = "suites/autodiff/test_generated_programs.py::test_reverse_mode_matches_finite_differences[torch-cpu-general]"
    assert _verdict(HARDSIGMOID, "2.13.0+cpu", nodeid=general) == "violated"


def test_no_op_is_left_out_of_an_oracle():
    from pytest_dlconform.programs import OPS
    from pytest_dlconform.programs.samples import MODES, ops_for

    for framework in ("tensorflow", "torch"):
        for mode in MODES:
            if mode != "layout" or framework == "torch":
                assert ops_for(framework, mode) == list(OPS), (framework, mode)


torch = pytest.importorskip("torch")


def test_throughput_check_fails_a_loader_that_corrupts_labels_but_keeps_ids():
    from torch.utils.data import DataLoader, default_collate

    from suites.data import test_torch_loader as loader_suite

    def shifted(batch):
        x, y, meta = default_collate(batch)
        return x, y + 1, meta  # the ids (all the old check compared) are right

    ds = loader_suite.Rows(40, 3, 5)
    loader_suite.check_throughput_settings(torch, DataLoader, ds, ((1, 0), (8, 0)))  # the right loader holds
    wrong = lambda *a, **k: DataLoader(*a, collate_fn=shifted, **k)
    with pytest.raises(AssertionError, match="labels"):
        loader_suite.check_throughput_settings(torch, wrong, ds, ((8, 0),))


def test_training_iteration_check_fails_a_spectral_norm_that_skips_training_iterations():
    from torch.nn.utils.parametrizations import spectral_norm

    from suites.modules import test_spectral_norm as sn_suite

    def no_training_iterations(module, **kwargs):
        layer = spectral_norm(module, **kwargs)  # registration's 15 iterations run
        layer.parametrizations.weight[0]._power_method = lambda weight_mat, n: None
        return layer

    least = sn_suite.check_torch_training_iterations(torch, spectral_norm, 8, 6, 1, 2, 3)
    assert least > 1.0  # one iteration moves v by more than the tolerance
    with pytest.raises(AssertionError, match="v vs 1 numpy power iterations"):
        sn_suite.check_torch_training_iterations(torch, no_training_iterations, 8, 6, 1, 2, 3)


def test_the_library_mutant_skips_only_training_iterations():
    from pytest_dlconform.run.mutants import registry

    assert "torch-spectral-norm-no-training-iteration" in registry()
