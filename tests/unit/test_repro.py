"""repro.py and the shipped scripts' pass/fail logic, without running a framework.

Each shipped script is observed()/expected()/judge()/main(observe=...): fed the documented
behaviour it exits 0 (FIXED), fed the divergence it exits 1 (BUG PRESENT), so the scripts
can tell a fix from the bug. The frameworks themselves run in
tests/integration/test_findings_scripts.py.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import subprocess
import sys
from importlib import resources

import numpy as np
import pytest

from pytest_dlconform import cli
from pytest_dlconform.report import repro
from pytest_dlconform.report.document import Report

FINDINGS = resources.files("pytest_dlconform.report") / "findings"


@pytest.fixture(autouse=True)
def _environment_kept():
    """A script may set os.environ (TF_CPP_MIN_LOG_LEVEL) when loaded: not for later tests."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"finding_{name[:-3]}", str(FINDINGS / name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(module, observe, capsys) -> tuple[int, str]:
    code = module.main(observe)
    return code, capsys.readouterr().out.strip()


def _mish64(x):
    x = np.asarray(x, np.float64)
    return x * np.tanh(np.logaddexp(0.0, x))


def _float32(a):
    return np.asarray(a, np.float32).astype(np.float64)


# what each script sees when fixed (its documented value) and with the bug (as observed on the stack)
CASES = {
    "hardsigmoid_float64_backward.py": (lambda m: m.expected(), lambda m: _float32(m.expected())),
    "tf_forward_mode_softsign.py": (lambda m: m.expected(), lambda m: (_ for _ in ()).throw(
        LookupError("gradient registry has no entry for: SoftsignGrad"))),
    "logcumsumexp_forward_mode.py": (lambda m: m.expected(), lambda m: [w - np.array([1 - 1e-13, 0.0]) * (k == 1)
                                                                          for k, w in enumerate(m.expected())]),
    "tf_gelu_float64_constant.py": (lambda m: m.expected() * (1 + 1e-16), lambda m: m.expected() + 5e-9),
    "keras_torch_float64_dense.py": (lambda m: m.expected(), lambda m: (_float32(m.expected()[0]), "float64")),
    "keras_mirrored_uneven_first_batch.py": (lambda m: m.expected(), lambda m: (_ for _ in ()).throw(
        ValueError("Inputs to operation AddN of type AddN must have the same size and shape"))),
    "keras_multiworker_fit.py": (lambda m: m.expected(), lambda m: (_ for _ in ()).throw(
        RuntimeError("ValueError: Attempt to convert a value (PerReplica:{"))),
    "keras_early_stopping_baseline.py": (lambda m: m.expected(), lambda m: 11),
    "tf_function_reduce_retracing_varargs.py": (lambda m: m.expected(), lambda m: (_ for _ in ()).throw(
        IndexError("list index out of range"))),
    "keras_spectral_normalization_inference.py": (lambda m: m.expected(), lambda m: m.X @ m.KERNEL),
    # The Keras JAX backend's scripts (issue 14, the JAX part): float32 values where float64 is documented.
    "keras_jax_x64_float64_demoted.py": (lambda m: m.expected(), lambda m: {
        name: (_float32(values), dtype) for name, (values, dtype) in m.expected().items()}),
    "keras_jax_float64_without_x64.py": (lambda m: (*m.expected(), "compute_dtype float64"),
                                         lambda m: (_float32(m.expected()[0]), "float32", "compute_dtype float64")),
    # Issue 12's low-precision findings: a refused float16 kernel; a bfloat16 matmul returning garbage.
    "tf_linalg_float16_cpu_kernels.py": (lambda m: m.expected(), lambda m: {
        **m.expected(), "cholesky": "NotFoundError: Could not find device for node: {{node Cholesky}} = Cholesky[T=DT_HALF]"}),
    # Issue 12 part A: tf.math.cumprod drops the gradient of an exact zero entry (div_no_nan).
    "tf_linalg_float16_decompositions.py": (lambda m: m.expected(), lambda m: {
        **m.expected(), "svd": "NotFoundError: Could not find device for node: {{node Svd}} = Svd[T=DT_HALF]"}),
    "tf_xla_svd_eigh_float64_vectors.py": (lambda m: m.expected(), lambda m: {
        **m.expected(), "eigvalsh": m.expected()["eigvalsh"] + 2e-8, "eigh vectors": np.eye(2) * [0.0, 1.0]}),
    "tf_cumprod_gradient_at_zeros.py": (lambda m: m.expected(), lambda m: np.where(m.X == 0, 0.0, m.expected())),
    "tf_weighted_cross_entropy_gradient_at_zero.py": (lambda m: m.expected(), lambda m: m.expected() + m.Z),
    "tf_onednn_fused_mish_float32.py": (
        lambda m: (_float32(_mish64(m.X)),) * 2,
        lambda m: (_float32(_mish64(m.X)), np.where(m.X < -4, -0.0, _float32(_mish64(m.X))))),
    "tflite_keras_lstm_dynamic_batch.py": (
        lambda m: {None: "converted", 3: "converted"},
        lambda m: {None: "ConverterError: 'tf.TensorListReserve' op requires element_shape to be static", 3: "converted"}),
    "tf_bfloat16_batch_matmul_garbage.py": (lambda m: [m.expected()] * m.TRIALS,
                                            lambda m: [m.expected()] * (m.TRIALS - 1) + [m.expected() * np.nan]),
    "tf_erf_float64_nan.py": (lambda m: m.expected(), lambda m: np.where(np.abs(m.X) > 1e154, np.nan, m.expected())),
    "tf_reciprocal_float32_large.py": (lambda m: (m.expected(), m.expected()),
                                       lambda m: (m.expected() * (1 + 1e-4), m.expected())),
    "tf_forward_mode_decompositions_relaxed_shapes.py": (lambda m: m.expected(), lambda m: {
        **m.expected(), "qr": (33, (7, 4), "NotImplementedError: QrGrad not implemented with dynamic shapes.")}),
    "torch_erf_half_small_arguments.py": (
        lambda m: {n: (m.X, [math.erf(x) for x in m.X]) for n in m.DTYPES},
        lambda m: {n: (m.X, [math.erf(x) for x in m.X[:-1]] + [0.0]) for n in m.DTYPES}),
    "keras_distribution_loss_scale_float32.py": (lambda m: m.expected(), lambda m: (0.3333333432674408,) * 2),
    "torch_inductor_replication_pad_backward.py": (lambda m: ([[1.0, 2.0]], [[1.0, 2.0]]), lambda m: (
        [[1.0, 2.0]], AssertionError("expected size 2==2, stride 1==16 at dim=1"))),
    "torch_inductor_avg_pool_ceil_backward.py": (lambda m: (m.expected(), m.expected()),
                                                 lambda m: (m.expected(), [[0.25] * 3] * 3)),
    "torch_hardswish_neg_inf.py": (lambda m: [m.expected()] * 2,
                                   lambda m: [np.where(np.isneginf(m.X), np.nan, m.expected())] * 2),
    "torch_rprop_first_step_clamped.py": (lambda m: m.expected(), lambda m: {k: v * 5 for k, v in m.expected().items()}),
    "torch_crossmaplrn2d_backward.py": (
        lambda m: {"reverse": np.linspace(-1.5, 2.0, m.X.size), "forward_fd": np.linspace(-1.5, 2.0, m.X.size)},
        lambda m: {"reverse": np.linspace(-1.5, 2.0, m.X.size) * (1 + 7e-3),
                   "forward_fd": np.linspace(-1.5, 2.0, m.X.size)}),
    "torch_lazy_instancenorm_defaults.py": (
        lambda m: {n: {**m.DOCUMENTED, "train_vs_eval": 0.0} for n in m.CLASSES},
        lambda m: {n: {"affine": True, "track_running_stats": True, "train_vs_eval": 0.77} for n in m.CLASSES}),
    "torch_lazy_instancenorm_load_state_dict.py": (
        lambda m: {n: {"want": np.ones(3), "got": np.ones(3), "after_load": "InstanceNorm1d, num_features=3"}
                   for n, _, _ in m.CASES},
        lambda m: {n: {"want": np.ones(3), "after_load": "LazyInstanceNorm1d, num_features=0",
                       "raised": "ValueError: expected input's size at dim=1 to match num_features (0), but got: 3."}
                   for n, _, _ in m.CASES}),
    "keras_rmsprop_epsilon_inside_sqrt.py": (lambda m: {"theta": m.expected()}, lambda m: {"theta": m.inside()}),
    "keras_ftrl_l2_doubled.py": (lambda m: {"theta": m.expected()}, lambda m: {"theta": m._box(2 * m.L2)}),
    "keras_adafactor_relative_step_ignored.py": (
        lambda m: m.expected(),
        lambda m: {k: m.expected()["relative_step=True"] for k in ("relative_step=False", "relative_step=True")}),
    "keras_nadam_momentum_schedule.py": (lambda m: {"theta": m.expected()}, lambda m: {"theta": m.nadam(1.0)}),
    "keras_lamb_deserialize.py": (
        lambda m: {"type": "Lamb", "repr": "<Lamb>", "is_lamb": True, "same_config": True},
        lambda m: {"type": "str", "repr": "'Lamb'", "is_lamb": False, "same_config": None}),
    "keras_tversky_alpha_beta_swapped.py": (
        lambda m: {"tversky": m.expected(), "Tversky": m.expected()},
        lambda m: {k: np.array([1.0 - m._counts()[0] / (m._counts()[0] + m.ALPHA * m._counts()[2]
                                                         + m.BETA * m._counts()[1])]) for k in ("tversky", "Tversky")}),
    "keras_label_smoothing_axis.py": (lambda m: m.expected(), lambda m: m._losses(m.Y.shape[-1])),
    "keras_ctc_float64_in_float32.py": (
        lambda m: {"CTC": m.expected(), "ctc": m.expected()},
        lambda m: {"CTC": m.expected() * (1 + 1.5e-8), "ctc": m.expected() * (1 + 1.5e-8)}),
    "keras_log_cosh_float64_log2.py": (
        lambda m: {"log_cosh": m.expected(), "LogCosh": m.expected()},
        lambda m: {"log_cosh": m.expected() - 1.9e-9, "LogCosh": m.expected() - 1.9e-9}),
    "keras_randomcrop_inference.py": (
        lambda m: ((2, m.HEIGHT, m.WIDTH, 3), (2, m.HEIGHT, m.WIDTH, 3), (2, m.HEIGHT, m.WIDTH, 3), "float16"),
        lambda m: (m.X.shape, (2, m.HEIGHT, m.WIDTH, 3), (2, m.HEIGHT, m.WIDTH, 3), "float32")),
    "keras_equalization_inference.py": (
        lambda m: (0.0, False, False, "builds"),
        lambda m: (96.5, True, True, "ValueError: The tensor ... is part of a cycle")),
    "keras_rmsnorm_axis.py": (lambda m: m.expected(), lambda m: "InvalidArgumentError: Incompatible shapes: [2,4,3] vs. [4]"),
    "keras_3d_pooling_nchw_conv_cpu_kernels.py": (
        lambda m: {(p, c[0]): d for p, d in m.POLICIES.items() for c in m.CASES},
        lambda m: {(p, c[0]): ("NotFoundError" if p == "mixed_float16" else d) for p, d in m.POLICIES.items()
                   for c in m.CASES}),
    "keras_float64_image_resize_in_float32.py": (
        lambda m: dict.fromkeys(m.CASES, ("float64", 180, 0)),
        lambda m: {label: ("float64", 180, 0 if label.endswith("[control]") else 180) for label in m.CASES}),
    "keras_melspectrogram_float64.py": (
        lambda m: {"float64": "float64", "float32": "float32"},
        lambda m: {"float64": "InvalidArgumentError: cannot compute Sub", "float32": "float32"}),
    "keras_randomshear_config.py": (
        lambda m: ((0.0, m.X_FACTOR), "same config"),
        lambda m: ((-m.X_FACTOR, m.X_FACTOR), "ValueError: x_factor must be non-negative")),
    "keras_lookup_output_spec_dtype.py": (
        lambda m: dict.fromkeys(m.CASES, ("int64", "int64", "int64")),
        lambda m: dict.fromkeys(m.CASES, ("int64", "float32", "float32"))),
    "keras_gce_loss_serialize.py": (
        lambda m: m.expected(),
        lambda m: {**m.expected(), "deserialize(serialize(loss))": "str 'CategoricalGeneralizedCrossEntropy'"}),
    # ceil_mode's last window scaled by (kernel elements / elements present) before the root, as torch does
    "torch_lp_pool_ceil_mode_partial_window.py": (
        lambda m: m.expected(),
        lambda m: {k: np.concatenate([v[..., :-1], v[..., -1:] * 1.5], axis=-1) for k, v in m.expected().items()}),
    "torch_fractional_max_pool2d_output_ratio_number.py": (
        lambda m: m.expected(),
        lambda m: {**m.expected(), **dict.fromkeys(m.CALLS, "TypeError: object of type 'float' has no len()")}),
    # tf.math.approx_min_k (and approx_max_k along reduction_dimension != -1): no eager CPU kernel.
    "tf_approx_top_k_cpu.py": (lambda m: m.expected(), lambda m: {
        **m.expected(), "approx_min_k(x, 2)":
            "NotFoundError: Could not find device for node: {{node ApproxTopK}} (is_max_k=false, reduction_dimension=-1)"}),
    # tf.math.approx_max_k / approx_min_k: the op definition refuses float64 ("a floating number type").
    "tf_approx_top_k_float64.py": (lambda m: m.expected(), lambda m: {
        **m.expected(), "approx_max_k (jit_compile)": "TypeError: Value passed to parameter 'input' has DataType "
                                                      "float64 not in list of allowed values: float16, bfloat16, float32"}),
    "tf_safe_embedding_lookup_sparse_non_positive_weights.py": (
        lambda m: m.expected(),
        lambda m: {**m.expected(), "sum": np.stack([m.EMB[1] - m.EMB[2], 0.0 * m.EMB[0]])}),
    "tf_ctc_loss_float64.py": (
        lambda m: {"dense": (m.expected(), "float64"), "SparseTensor": (m.expected() * (1 + 1.6e-8), "float64")},
        lambda m: {"dense": "InvalidArgumentError: cannot compute Mul as input #1(zero-based) was expected to be a "
                            "double tensor but is a float tensor [Op:Mul]",
                   "SparseTensor": (m.expected() * (1 + 1.6e-8), "float64")}),
    "torch_nadam_float32_mu_product.py": (
        lambda m: {"uninterrupted": m.expected(), "resumed": m.expected(),
                   "mu_product": "torch.float64, after load_state_dict torch.float64"},
        lambda m: {"uninterrupted": m.expected() * (1 + 3.5e-9), "resumed": m.expected() * (1 + 3.5e-9) + 1.3e-9,
                   "mu_product": "torch.float32, after load_state_dict torch.float64"}),
    # The second-order suite's findings: tf.nn.moments' variance Hessian drops -(2/n^2) 1 1^T
    # (H v = 2/n v); F.mse_loss('mean') forward over reverse raises on a ZeroTensor.
    "tf_moments_second_derivative.py": (
        lambda m: {"nested GradientTape": m.expected(), "ForwardAccumulator over GradientTape": m.expected()},
        lambda m: {"nested GradientTape": 2.0 / m.X.size * m.V, "ForwardAccumulator over GradientTape": m.expected()}),
    "torch_mse_loss_forward_over_reverse.py": (
        lambda m: {"torch.func.jvp of torch.func.vjp": m.expected(), "forward_ad dual over autograd.grad": m.expected()},
        lambda m: {"torch.func.jvp of torch.func.vjp": RuntimeError("ZeroTensors are immutable."),
                   "forward_ad dual over autograd.grad": m.expected()}),
    "tf_data_save_checkpoint_args_load.py": (
        lambda m: m.expected(),
        lambda m: {**m.expected(), "range(6), checkpoint_interval=2": (
            "InternalError after [0, 1]: Expected 1 components but got 0. [Op:IteratorGetNext] name:")}),
    "tf_data_with_options_conflict.py": (
        lambda m: m.expected(), lambda m: dict.fromkeys(m.CASES, "no error; options() reports 3")),
    "keras_schedule_free_adamw_x_from_updated_z.py": (
        lambda m: m.expected(),
        lambda m: [y + np.array([5e-3, -5e-3, 5e-3]) * (t == 1) for t, y in enumerate(m.expected())]),
    "keras_muon_float64_rms_rate.py": (
        lambda m: m.expected(),
        lambda m: "InvalidArgumentError: cannot compute Mul as input #1(zero-based) was expected to be a double "
                  "tensor but is a float tensor"),
    "tf_mirrored_aggregation_none_no_error.py": (
        lambda m: {"error": "ValueError: You must specify an aggregation method to update a MirroredVariable in Replica "
                            "Context.", "aggregation": "VariableAggregation.NONE", "copies": [[0.0, 0.0], [0.0, 0.0]]},
        lambda m: {"error": None, "aggregation": "VariableAggregation.NONE", "copies": m.INCREMENTS.tolist()}),
    "tf_missing_second_order_gradients.py": (
        lambda m: m.expected(),
        lambda m: {**m.expected(), "tf.math.igamma": "LookupError: gradient registry has no entry for: IgammaGradA"}),
    "tf_softmax_xent_labels_second_derivative.py": (lambda m: m.expected(), lambda m: m.expected() * 0.0),
}


def test_every_shipped_script_has_a_case_here():
    shipped = {p.name for p in FINDINGS.iterdir() if p.name.endswith(".py") and p.name != "__init__.py"}
    assert not shipped - set(CASES), (f"no (documented, divergent) case for {sorted(shipped - set(CASES))}: add one to "
                                      "CASES in tests/unit/test_repro.py, so the script's judge is seen to fail")
    assert not set(CASES) - shipped, f"cases for scripts that are gone: {sorted(set(CASES) - shipped)}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_script_exits_0_on_the_documented_behaviour_and_1_on_the_divergence(name, capsys):
    module = load(name)
    fixed, bug = CASES[name]
    code, line = run_main(module, lambda: fixed(module), capsys)
    assert (code, line.split(":")[0]) == (0, "FIXED"), line
    code, line = run_main(module, lambda: bug(module), capsys)
    assert (code, line.split(":")[0]) == (1, "BUG PRESENT"), line


def test_a_script_that_cannot_import_its_framework_exits_2(capsys):
    module = load("hardsigmoid_float64_backward.py")

    def missing():
        raise ImportError("No module named 'torch'")

    assert run_main(module, missing, capsys) == (2, "CANNOT RUN: No module named 'torch'")


def test_the_multiworker_oracle_is_off_for_a_wrong_training(capsys):
    # A fit that averaged per worker without the 1/N (twice the step) must not pass.
    module = load("keras_multiworker_fit.py")
    saved = module.LR
    module.LR = 2 * saved
    doubled = module.expected()
    module.LR = saved
    code, line = run_main(module, lambda: doubled, capsys)
    assert code == 1 and "worst relative error" in line


# ------------------------------------------------------------------ repro.py


def _violated(nodeid: str, claim: str, framework: str, repro_text: str, **extra) -> dict:
    return {"nodeid": nodeid, "claim": claim, "verdict": "violated", "params": {"framework": framework, "device": "cpu"},
            "reason": "AssertionError: ...", "evidence": {}, "repro": repro_text, **extra}


def _doc(*tests: dict, divergences: list | None = None) -> dict:
    claims: dict = {}
    for t in tests:
        claims.setdefault(t["claim"],
                          {"verdict": "violated", "claim": {"statement": "S", "source": "D"}, "tests": []})["tests"].append(t)
    return {"claims": claims, "divergences": divergences or []}


HARDSIGMOID = "suites/autodiff/test_ops.py::test_torch_op_reverse_mode_vs_finite_differences[cpu-hardsigmoid]"


def test_a_matched_divergence_gives_its_shipped_script():
    test = _violated(HARDSIGMOID, "autodiff.gradient.finite-differences", "torch", "pytest ...", divergence="entry 1 (x)")
    doc = _doc(test, divergences=[{"key": "entry 1 (x)", "script": "hardsigmoid_float64_backward.py"}])
    kind, name, text = repro.script_for(test, doc)
    assert (kind, name) == ("shipped", "hardsigmoid_float64_backward.py") and "float32(1/6)" in text


def test_an_unmatched_report_finds_the_packaged_entry_by_pin_and_symptom():
    exc = {"types": ["GradientMismatch", "AssertionError"], "message": "... (relative error 2.98e-08, rtol ...)"}
    # The per-op suite's gradient against the bug's computation (the entry's bug reference): equal.
    bug = {"torch-hardsigmoid-vjp": {"observed": 0.0, "tolerance": 2.2e-16, "margin": 0.0}}
    test = _violated(HARDSIGMOID, "autodiff.gradient.finite-differences", "torch", "pytest ...",
                     evidence={"exception": exc, "references": bug})
    assert repro.script_for(test, _doc(test), repro.packaged_entries())[1] == "hardsigmoid_float64_backward.py"
    other = dict(test, evidence={"exception": dict(exc, message="relative error 0.5"), "references": bug})  # another symptom
    unreferenced = dict(test, evidence={"exception": exc})  # the gradient was not compared with the bug's
    for case in (other, unreferenced):
        with pytest.raises(repro.Missing, match="no shipped one, and the report holds no input it failed on"):
            repro.script_for(case, _doc(case), repro.packaged_entries())


PROGRAM = ("pytest ...\nFalsifying example: test_reverse_mode_matches_finite_differences(\n"
           "    case=ProgramCase(Program(input_shapes=((3,),), ops=(Op({op!r}),)), [np.array([0.5, -1.0, 2.0])]),\n"
           "    seed=7,\n)")


def test_a_generated_program_test_gets_a_generated_script_with_the_case_inline():
    test = _violated("suites/autodiff/test_generated_programs.py::test_reverse_mode_matches_finite_differences[torch-cpu]",
                     "autodiff.gradient.finite-differences", "torch", PROGRAM.format(op="tanh"))
    kind, _, text = repro.script_for(test, _doc(test), [])
    assert kind == "generated" and "np.array([0.5, -1.0, 2.0])" in text and "torch.tanh" in text
    assert "dlconform" not in text.split('"""', 2)[2] and "hypothesis" not in text  # standalone
    compile(text, "<generated>", "exec")


def test_a_generated_program_test_of_another_claim_has_no_script():
    test = _violated("suites/execution/test_compile.py::test_x[torch-cpu]", "execution.compile.same-values", "torch",
                     PROGRAM.format(op="tanh"))
    with pytest.raises(repro.Missing, match="a generated script checks value and gradient only"):
        repro.script_for(test, _doc(test), [])


def test_attach_gives_every_violated_test_a_script_field():
    shipped = _violated(HARDSIGMOID, "autodiff.gradient.finite-differences", "torch", "pytest ...", divergence="k")
    bare = _violated("suites/x/test_y.py::test_z[cpu]", "x.y", "tf", "pytest ...")
    held = dict(bare, nodeid="suites/x/test_y.py::test_ok[cpu]", verdict="holds")
    doc = Report.from_dict(_doc(shipped, bare, held, divergences=[{"key": "k", "script": "hardsigmoid_float64_backward.py"}]))
    after = {t.nodeid: t for t in repro.attach(doc, []).tests()}
    assert after[shipped["nodeid"]]["script"] == {"kind": "shipped", "name": "hardsigmoid_float64_backward.py"}
    assert after[bare["nodeid"]]["script"]["kind"] == "missing" and "no shipped one" in after[bare["nodeid"]]["script"]["why"]
    assert "script" not in after[held["nodeid"]]
    assert all("script" not in t for t in doc.tests())  # attach derives a new report


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(["repro", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_prints_a_pinned_shipped_script_without_a_report(capsys):
    code, out, _ = _cli([HARDSIGMOID], capsys)
    assert code == 0 and out == (FINDINGS / "hardsigmoid_float64_backward.py").read_text()


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    code, out, err = _cli(["suites/x/test_y.py::test_z"], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "pass --report" in err
    code, _, err = _cli(["x", "--report", str(tmp_path / "none.json")], capsys)
    assert code == 2 and err.strip() == f"dlconform repro: report {tmp_path / 'none.json'}: no such file"


def test_cli_generates_from_a_report_and_the_script_runs(tmp_path, capsys):
    pytest.importorskip("torch")
    from pytest_dlconform.report import results

    test = _violated("suites/autodiff/test_generated_programs.py::test_reverse_mode_matches_finite_differences[torch-cpu]",
                     "autodiff.gradient.finite-differences", "torch", PROGRAM.format(op="hardsigmoid"))
    collector = results.Collector()
    collector.tests[test["nodeid"]] = results.TestResult(test["nodeid"], test["claim"], test["params"],
                                                         verdict="violated", repro=test["repro"])
    doc = results.report_document(collector, {}, {})
    report = tmp_path / "r.json"
    report.write_text(doc.to_json())
    code, _, err = _cli([test["nodeid"], "--report", str(report), "--out", str(tmp_path / "s.py")], capsys)
    assert code == 0, err
    proc = subprocess.run([sys.executable, str(tmp_path / "s.py")], capture_output=True, text=True, timeout=300)
    # hardsigmoid's float64 backward is torch 2.13's known divergence: the generated script sees it too
    assert proc.returncode == 1 and proc.stdout.startswith("BUG PRESENT: "), proc.stdout + proc.stderr


def test_the_html_page_shows_the_script_or_why_there_is_none():
    from pytest_dlconform.report import html, results

    collector = results.Collector()
    for nodeid, claim in ((HARDSIGMOID, "autodiff.gradient.finite-differences"), ("suites/x/test_y.py::test_z[cpu]", "x.y")):
        collector.tests[nodeid] = results.TestResult(nodeid, claim, {"framework": "torch", "device": "cpu"},
                                                     verdict="violated", repro="pytest ...")
    doc = results.report_document(collector, {}, {})
    doc = doc.replace(divergences=[{"key": "k", "script": "hardsigmoid_float64_backward.py",
                                    "claim": "autodiff.gradient.finite-differences", "where": "entry 1", "status": "applied",
                                    "tests": [HARDSIGMOID], "reason": "float32(1/6)"}])
    doc = doc.map_tests(lambda t: dataclasses.replace(t, divergence="k") if t.nodeid == HARDSIGMOID else t)
    page = html.render(repro.attach(doc, []))
    assert "python -m pytest_dlconform.report.findings.hardsigmoid_float64_backward" in page
    assert "float32(1/6)" in page  # the script itself, in the collapsed block
    assert '<p class="script-missing">no standalone reproduction: no standalone script for suites/x/test_y.py' in page
