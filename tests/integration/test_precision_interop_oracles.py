"""The precision and interop oracles fail on deliberately wrong implementations.

Each oracle of checks/crossframework.py and suites/precision/reference.py is fed a
planted mistake (a port with the wrong kernel layout, epsilon, flatten order or momentum,
a gradient off by a little, float32 accuracy passed off as float64, an autocast op list
that is wrong, a loss scaler with the wrong growth interval) and must fail with a message
that names it; the correct implementations pass.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.checks import crossframework as cf
from pytest_dlconform.checks import precision as ref
from pytest_dlconform.checks.numerics import ToleranceExceeded
from pytest_dlconform.core import evidence
from pytest_dlconform.suites.interop import _speed

L, A = cf.Layer, cf.Architecture


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def keras(tf: Any) -> Any:
    return cf.keras_in_process("tensorflow")


CONV = cf.Case(A((5, 6, 2), (L("conv", units=3, kernel=3, activation="tanh"), L("layernorm", epsilon=1e-3),
                             L("flatten"), L("dense", units=4))), batch=3, training=False, seed=7)
BN = cf.Case(A((4,), (L("dense", units=5, activation="relu", use_bias=False), L("batchnorm", epsilon=1e-3, momentum=0.9),
                      L("dense", units=3))), batch=6, training=True, seed=11)
SMOOTH = cf.Case(A((4,), (L("dense", units=3),), cf.Loss("categorical", label_smoothing=0.2)), batch=5, training=False, seed=3)


# --------------------------------------------------------------------------- float64 reference, by hand


def test_reference_loss_by_hand():
    logits = np.array([[0.0, np.log(3.0)], [5.0, 5.0]])
    labels = np.array([1, 0])
    assert cf.reference_loss(logits, labels, cf.Loss()) == pytest.approx((-np.log(0.75) - np.log(0.5)) / 2)
    # ignore_class drops the example from the mean; smoothing mixes in s / classes.
    assert cf.reference_loss(logits, labels, cf.Loss(ignore_class=0)) == pytest.approx(-np.log(0.75))
    smooth = 0.2 * 0.5 * -np.log(0.25) + (0.8 + 0.1) * -np.log(0.75)
    assert cf.reference_loss(logits[:1], labels[:1], cf.Loss("categorical", label_smoothing=0.2)) == pytest.approx(smooth)


def test_reference_conv_by_hand():
    x = np.arange(16.0).reshape(1, 4, 4, 1)
    kernel = np.ones((2, 2, 1, 1))
    valid = cf._conv(x, kernel, L("conv", units=1, kernel=2))
    assert valid[0, :, :, 0].tolist() == [[10.0, 14.0, 18.0], [26.0, 30.0, 34.0], [42.0, 46.0, 50.0]]
    same = cf._conv(x, kernel, L("conv", units=1, kernel=2, padding="same"))
    assert same.shape == (1, 4, 4, 1) and same[0, 3, 3, 0] == 15.0  # the odd padding goes at the end
    strided = cf._conv(x, kernel, L("conv", units=1, kernel=2, stride=2))
    assert strided[0, :, :, 0].tolist() == [[10.0, 18.0], [42.0, 50.0]]


# --------------------------------------------------------------------------- interop.same-model


def test_same_model_passes_the_frameworks_own_ports(tf, keras, torch):
    for case in (CONV, BN, SMOOTH):
        for dtype in ("float32", "float64"):
            cf.check_same_model(cf.tf_run(tf, keras, case, dtype), cf.torch_run(torch, case, dtype), case, dtype)


def test_same_model_fails_a_port_with_the_wrong_kernel_layout(tf, keras, torch):
    weights = CONV.weights()
    weights["0.kernel"] = weights["0.kernel"].transpose(1, 0, 2, 3)  # kh and kw swapped in the port
    with pytest.raises(cf.ModelMismatch, match=r"torch vs float64 reference: logits"):
        cf.check_same_model(cf.tf_run(tf, keras, CONV, "float64"), cf.torch_run(torch, CONV, "float64", weights=weights),
                            CONV, "float64")


def test_same_model_fails_a_port_with_another_epsilon(tf, keras, torch):
    ported = dataclasses.replace(CONV, arch=A(CONV.arch.input_shape, (CONV.arch.layers[0], L("layernorm", epsilon=1e-5),
                                                                       *CONV.arch.layers[2:])))
    with pytest.raises(cf.ModelMismatch, match=r"torch vs float64 reference: logits: max\|actual - expected\|"):
        cf.check_same_model(cf.tf_run(tf, keras, CONV, "float64"), cf.torch_run(torch, ported, "float64"), CONV, "float64")


def test_same_model_fails_a_port_that_flattens_channels_first(tf, keras, torch, monkeypatch):
    tf_result = cf.tf_run(tf, keras, CONV, "float64")
    real_class = cf._module_class(torch)

    class ChannelsFirstFlatten(real_class):  # type: ignore[misc, valid-type]
        def forward(self, x: Any) -> Any:
            h = x.permute(0, 3, 1, 2)
            for layer, module in zip(self.arch.layers, self.blocks):
                if layer.kind == "flatten":
                    h = h.flatten(1)  # C, H, W order: what a naive port does
                elif layer.kind == "layernorm" and h.dim() == 4:
                    h = module(h.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
                else:
                    h = module(h)
                h = torch.tanh(h) if layer.kind == "conv" else h
            return h

    monkeypatch.setitem(cf._MODULE_CLASS, id(torch), ChannelsFirstFlatten)
    with pytest.raises(cf.ModelMismatch, match=r"torch vs float64 reference: logits"):
        cf.check_same_model(tf_result, cf.torch_run(torch, CONV, "float64"), CONV, "float64")


def test_same_model_fails_an_unconverted_batchnorm_momentum(tf, keras, torch):
    # A port that copies Keras's momentum 0.9 into torch (where it means 1 - 0.9).
    layers = (BN.arch.layers[0], L("batchnorm", epsilon=1e-3, momentum=0.1), BN.arch.layers[2])
    unconverted = dataclasses.replace(BN, arch=A(BN.arch.input_shape, layers))
    with pytest.raises(cf.ModelMismatch, match=r"torch vs float64 reference: state/1.moving_mean"):
        cf.check_same_model(cf.tf_run(tf, keras, BN, "float64"), cf.torch_run(torch, unconverted, "float64"), BN, "float64")


def test_same_model_fails_a_gradient_off_by_one_part_in_a_million(tf, keras, torch):
    tf_result, torch_result = cf.tf_run(tf, keras, SMOOTH, "float64"), cf.torch_run(torch, SMOOTH, "float64")
    torch_result["grad/0.bias"] = torch_result["grad/0.bias"] * (1 + 1e-6)
    with pytest.raises(cf.ModelMismatch, match=r"tensorflow vs torch: gradients: .* worst in grad/0.bias"):
        cf.check_same_model(tf_result, torch_result, SMOOTH, "float64")


def test_same_model_fails_float32_accuracy_passed_off_as_float64(tf, keras, torch):
    # What Keras's torch backend does to float64 matmuls: float32 products cast back.
    as_float64 = {k: v.astype(np.float64) for k, v in cf.torch_run(torch, SMOOTH, "float32").items()}
    weights32 = cf.rounded(SMOOTH.weights(), "float32")
    with pytest.raises(cf.ModelMismatch, match=r"should be <= .*u\(float64\)"):
        cf.check_same_model(cf.tf_run(tf, keras, SMOOTH, "float64", weights=weights32), as_float64, SMOOTH, "float64")


def test_ill_conditioned_comparisons_are_counted_and_still_judged():
    loose = cf.Tolerance(2 * cf.UNJUDGED_RTOL, "too loose to judge")
    with evidence.recording() as recorder, pytest.raises(cf.ModelMismatch, match="x: logits"):
        cf.compare({"logits": np.ones(3)}, {"logits": np.zeros(3)}, loose, loose, what="x")
    assert recorder.notes[cf.LOOSE_NOTE] == 1
    assert recorder.checks


# --------------------------------------------------------------------------- activations, backends, devices


def test_activation_oracle_fails_a_float32_constant_in_float64_gelu(torch):
    import math

    x = np.linspace(-6, 6, 101)
    right = torch.nn.functional.gelu(torch.tensor(x)).numpy()
    cf.check_activation(right, x, "gelu", "float64", what="torch gelu")
    c32 = float(np.float32(1 / math.sqrt(2)))  # tf.nn.gelu's constant in TensorFlow 2.21
    wrong = 0.5 * x * torch.special.erfc(torch.tensor(-x * c32)).numpy()
    with pytest.raises(ToleranceExceeded, match=r"wrong gelu: .* should be <="):
        cf.check_activation(wrong, x, "gelu", "float64", what="wrong gelu")
    tanh_gelu = torch.nn.functional.gelu(torch.tensor(x), approximate="tanh").numpy()
    with pytest.raises(ToleranceExceeded, match="approximate passed off as exact"):
        cf.check_activation(tanh_gelu, x, "gelu", "float32", what="approximate passed off as exact")


def test_backend_oracle_fails_a_backend_that_is_off(tf, keras):
    batch = [(case, "float32") for case in cf.coverage_batch(5)[:3]]
    results = [cf.tf_run(tf, keras, case, dtype) for case, dtype in batch]
    for (case, dtype), result in zip(batch, results):
        forward = {k: v for k, v in result.items() if not k.startswith("grad/")}
        cf.check_backends({"tensorflow": forward, "torch": forward}, case, dtype)
    case, dtype = batch[0]
    off = {k: v for k, v in results[0].items() if not k.startswith("grad/")}
    off = {**off, "logits": off["logits"] * (1 + 1e-3)}
    with pytest.raises(cf.ModelMismatch, match=r"keras\[torch\] vs float64 reference: logits"):
        cf.check_backends({"tensorflow": results[0], "torch": off}, case, dtype)


def test_keras_backend_worker_round_trip(tf, keras, tmp_path):
    # The fresh-interpreter worker, run in this process on the TensorFlow backend: the
    # batch file carries the cases, and its results are the in-process model's.
    batch = [(CONV, "float32"), (BN, "float64")]
    cf.write_batch(str(tmp_path / "in.npz"), batch)
    info = cf.keras_backend_worker(str(tmp_path / "in.npz"), str(tmp_path / "out.npz"))
    assert info == {"backend": "tensorflow", "keras": keras.__version__, "cases": 2}
    for (case, dtype), got in zip(batch, cf.read_results(str(tmp_path / "out.npz"), 2)):
        cf.check_backends({"worker": got}, case, dtype)


def test_device_oracle_fails_a_device_that_is_off(torch):
    cpu = cf.torch_run(torch, BN, "float32")
    cf.check_devices(dict(cpu), cpu, BN, "float32", tf32=True, label="same: ")
    off = {**cpu, "grad/x": cpu["grad/x"] + 1e-3 * np.abs(cpu["grad/x"]).max()}
    with pytest.raises(cf.ModelMismatch, match=r"torch: gpu vs cpu: gradients: .* worst in grad/x"):
        cf.check_devices(off, cpu, BN, "float32", tf32=False, label="torch: ")


def test_speed_steps_compute_the_same_step(tf, keras, torch):
    steps = _speed.speed_steps(tf, keras, torch, SMOOTH, "float32", "/CPU:0", "cpu")
    results = {name: step.result() for name, step in steps.items()}
    for name in ("tf eager", "tf.function"):
        cf.check_same_model(results[name], results["torch eager"], SMOOTH, "float32")
    assert _speed.time_per_call(steps["tf.function"].run, number=1, repeats=1, warmup=0) > 0


# --------------------------------------------------------------------------- precision: autocast


def test_autocast_oracle_passes_cpu_and_fails_wrong_lists(torch):
    rng = np.random.default_rng(0)
    problems, counts = ref.autocast_mismatches(torch, "cpu", "bfloat16", rng, 3)
    assert problems == [] and counts[ref.LOWER] == len(ref.AUTOCAST_LISTS["cpu"][ref.LOWER])
    wrong = {dev: dict(lists) for dev, lists in ref.AUTOCAST_LISTS.items()}
    wrong["cpu"][ref.FLOAT32] = wrong["cpu"][ref.FLOAT32] + ("softmax",)  # CUDA's list, not CPU's
    wrong["cpu"][ref.LOWER] = tuple(n for n in wrong["cpu"][ref.LOWER] if n != "mm")
    subset = {n: ref.OPS[n] for n in ("softmax", "mm")}
    problems, _ = ref.autocast_mismatches(torch, "cpu", "bfloat16", rng, 3, lists=wrong, ops=subset)
    assert any(p.startswith("softmax [float32 on cpu, autocast bfloat16] inputs bfloat16: result torch.bfloat16, "
                            "but should be torch.float32") for p in problems), problems
    assert any(p.startswith("mm [unlisted on cpu, autocast bfloat16] inputs float32/float32: result torch.bfloat16, "
                            "but should be torch.float32") for p in problems), problems


def test_autocast_oracle_fails_an_op_that_does_more_than_cast(torch):
    sneaky = ref.AutocastOp("mm_plus", lambda t, x: t.mm(*x) + (0.5 if t.is_autocast_enabled("cpu") else 0.0),
                            ref.OPS["mm"].inputs)
    lists = {dev: dict(v) for dev, v in ref.AUTOCAST_LISTS.items()}
    lists["cpu"][ref.LOWER] = ("mm_plus",)
    problems, _ = ref.autocast_mismatches(torch, "cpu", "float16", np.random.default_rng(1), 3, lists=lists,
                                          ops={"mm_plus": sneaky})
    assert any("result differs from mm_plus on inputs cast to float16" in p for p in problems), problems


def test_autocast_oracle_expects_cuda_binary_cross_entropy_to_raise(torch):
    lists = {dev: dict(v) for dev, v in ref.AUTOCAST_LISTS.items()}
    lists["cpu"][ref.ERROR] = ("binary_cross_entropy",)  # true on CUDA only: on CPU it runs in float32
    lists["cpu"][ref.FLOAT32] = ()
    problems, _ = ref.autocast_mismatches(torch, "cpu", "bfloat16", np.random.default_rng(2), 3, lists=lists,
                                          ops={"binary_cross_entropy": ref.OPS["binary_cross_entropy"]})
    assert problems == ["binary_cross_entropy [error on cpu]: ran under autocast (result torch.float32), "
                        "but the documentation says it raises"]


def test_registration_oracle_fails_a_wrong_table(torch):
    assert ref.registration_mismatches(torch._C._dispatch_dump) == []
    wrong = {dev: dict(v) for dev, v in ref.AUTOCAST_LISTS.items()}
    wrong["cuda"][ref.FLOAT32] = tuple(n for n in wrong["cuda"][ref.FLOAT32] if n != "softmax")
    problems = ref.registration_mismatches(torch._C._dispatch_dump, lists=wrong, ops={"softmax": ref.OPS["softmax"]})
    assert problems == ["softmax (aten::softmax.int) is documented unlisted on cuda, but AutocastCUDA has kernel for it"]


def test_expected_dtypes_follow_the_documented_rules():
    assert ref.expected_dtype(ref.LOWER, "bfloat16", ("float32", "float32")) == "bfloat16"
    assert ref.expected_dtype(ref.FLOAT32, "float16", ("float16",)) == "float32"
    assert ref.expected_dtype(ref.PROMOTE, "bfloat16", ("float32", "bfloat16")) == "float32"
    assert ref.expected_dtype(ref.UNLISTED, "bfloat16", ("bfloat16",)) == "bfloat16"
    assert ref.expected_dtype(ref.LOWER, "bfloat16", ("float64", "float64")) == "float64"  # not eligible


# --------------------------------------------------------------------------- precision: loss scaling


def test_scale_oracle_fails_a_grad_scaler_with_another_interval(torch):
    p = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0, growth_interval=3)  # the implementation
    claimed = ref.DynamicScale(4.0, 2.0, 0.5, growth_interval=2)  # what it is said to do
    with pytest.raises(ref.ScaleMismatch, match=r"step 1: scale 4.0, but should be 8.0"):
        for n in range(3):
            opt.zero_grad()
            scaler.scale(p.sum()).backward()
            scaler.step(opt)
            scaler.update()
            claimed.update(True)
            ref.check_scale(scaler.get_scale(), claimed, f"step {n}", tracker=scaler.state_dict()["_growth_tracker"])


def test_scale_oracle_fails_a_loss_scale_optimizer_that_never_backs_off(tf, keras):
    var = keras.Variable(np.ones(2, np.float32))
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=8.0, dynamic_growth_steps=2)
    claimed = ref.DynamicScale(8.0, 2.0, 0.25, growth_interval=2)  # a backoff of 1/4, not Keras's 1/2
    opt.apply([tf.constant([np.inf, 1.0], dtype=tf.float32)], [var])
    claimed.update(False)
    with pytest.raises(ref.ScaleMismatch, match=r"after inf: scale 4.0, but should be 2.0"):
        ref.check_scale(float(opt.dynamic_scale), claimed, "after inf")


def test_keras_policy_is_restored_after_an_error(keras):
    before = keras.config.dtype_policy().name
    with pytest.raises(ZeroDivisionError), ref.keras_policy(keras, "mixed_float16"):
        assert keras.config.dtype_policy().name == "mixed_float16"
        raise ZeroDivisionError("an error inside the policy block")
    assert keras.config.dtype_policy().name == before
