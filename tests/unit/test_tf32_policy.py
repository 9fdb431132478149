"""The TF32 tolerance policy: float32 matmuls on a GPU get TF32's unit round-off exactly
where the framework's own switch allows TF32, read from the real frameworks (TensorFlow's
tensor_float_32_execution, torch's fp32_precision API and, where it is missing, the legacy
allow_tf32 flags), never from the framework's name alone."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from pytest_dlconform.checks import tf32
from pytest_dlconform.checks.numerics import TF32_ROUNDOFF, UNIT_ROUNDOFF, rounding_terms, tolerance

F32 = UNIT_ROUNDOFF["float32"]


def u_of(tol) -> float:
    return tol.rtol / rounding_terms(8, 4)  # numerics' rounding count for ops=8, reduction=4


def tol(framework: str, device: str = "gpu", matmul: bool = True, dtype: str = "float32"):
    return tolerance(dtype, ops=8, reduction=4, device=device, framework=framework, matmul=matmul)


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    cuda, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    saved = (cuda.fp32_precision, conv.fp32_precision)
    yield torch
    cuda.fp32_precision, conv.fp32_precision = saved


def test_the_cpu_and_other_dtypes_never_get_tf32(torch):
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    assert u_of(tol("torch", device="cpu")) == pytest.approx(F32)
    assert u_of(tol("torch", matmul=False)) == pytest.approx(F32)
    assert u_of(tol("torch", dtype="float64")) == pytest.approx(UNIT_ROUNDOFF["float64"])


def test_torch_matmul_follows_its_fp32_precision_setting(torch):
    torch.backends.cuda.matmul.fp32_precision = "ieee"  # torch's default: no TF32 for matmuls
    assert u_of(tol("torch")) == pytest.approx(F32)
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # the old policy held this to float32 bounds
    loose = tol("torch")
    assert u_of(loose) == pytest.approx(TF32_ROUNDOFF) and "fp32_precision=tf32" in loose.why


def test_torch_set_float32_matmul_precision_high_means_tf32(torch):
    before = torch.backends.cuda.matmul.fp32_precision
    try:
        torch.set_float32_matmul_precision("high")
        assert tf32.torch_precision(torch, "matmul") == "tf32"
    finally:
        torch.backends.cuda.matmul.fp32_precision = before


def test_torch_convolutions_default_to_tf32_and_inherit_none(torch):
    conv = torch.backends.cudnn.conv
    conv.fp32_precision = "tf32"
    assert tf32.tf32_reason("torch", conv=True) is not None
    conv.fp32_precision = "ieee"
    assert tf32.torch_precision(torch, "conv") == "ieee"


def test_legacy_torch_without_fp32_precision_reads_allow_tf32():
    def legacy(matmul: bool, cudnn: bool):
        return SimpleNamespace(backends=SimpleNamespace(cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=matmul)),
                                                        cudnn=SimpleNamespace(allow_tf32=cudnn, conv=SimpleNamespace())))
    assert tf32.torch_precision(legacy(False, True), "matmul") == "ieee"
    assert tf32.torch_precision(legacy(False, True), "conv") == "tf32"
    assert tf32.torch_precision(legacy(True, False), "matmul") == "tf32"
    assert tf32.torch_precision(None, "matmul") == "ieee" and tf32.torch_precision(None, "conv") == "tf32"


def test_tensorflow_follows_tensor_float_32_execution():
    tf = pytest.importorskip("tensorflow")
    was = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        tf.config.experimental.enable_tensor_float_32_execution(True)
        assert u_of(tol("tensorflow")) == pytest.approx(TF32_ROUNDOFF)
        assert u_of(tol("keras")) == pytest.approx(TF32_ROUNDOFF)  # Keras on its TensorFlow backend
        tf.config.experimental.enable_tensor_float_32_execution(False)
        assert u_of(tol("tensorflow")) == pytest.approx(F32)  # the old policy widened regardless
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(was)


def test_keras_on_torch_follows_torch(torch, monkeypatch):
    keras = SimpleNamespace(backend=SimpleNamespace(backend=lambda: "torch"))
    monkeypatch.setitem(sys.modules, "keras", keras)  # which backend Keras runs on: only that is read
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    assert u_of(tol("keras")) == pytest.approx(F32)
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    assert u_of(tol("keras")) == pytest.approx(TF32_ROUNDOFF)
