"""Device discovery and selection, with inventories built by hand (no GPU needed)."""

from __future__ import annotations

import pytest

from pytest_dlconform.core import devices

NONE = devices.Inventory(2, (), (), "nvidia-smi not found")
TWO = devices.Inventory(16, ("H200", "H200"), ("0", "1"), "nvidia-smi")


def test_cpu_and_auto_on_a_cpu_machine():
    assert devices.select("cpu", NONE, "--dl-device") == ("cpu",)
    assert devices.select("auto", NONE, "--dl-device") == ("cpu",)
    assert devices.select("all", NONE, "--dl-device") == ("cpu",)


def test_gpu_kinds_when_gpus_exist():
    assert devices.select("auto", TWO, "x") == ("gpu",)
    assert devices.select("all", TWO, "x") == ("cpu", "gpu", "multi-gpu")
    assert devices.select("multi-gpu", TWO, "x") == ("multi-gpu",)


@pytest.mark.parametrize("kind", ["gpu", "multi-gpu"])
def test_missing_hardware_is_an_error_naming_what_was_found_and_the_fix(kind):
    with pytest.raises(devices.DeviceError) as err:
        devices.select(kind, NONE, "environment variable DLCONFORM_DEVICE")
    message = str(err.value)
    assert "found 0 GPUs (nvidia-smi not found)" in message
    assert "from environment variable DLCONFORM_DEVICE" in message
    assert "--dl-device=cpu" in message and "\n" not in message


def test_multi_gpu_needs_two():
    one = devices.Inventory(8, ("A100",), ("0",), "nvidia-smi")
    with pytest.raises(devices.DeviceError, match="needs at least 2 GPUs, but found 1 GPU "):
        devices.select("multi-gpu", one, "--dl-device")


def test_cuda_visible_devices_is_honoured_like_cuda_does():
    # more forms (UUIDs, prefixes, MIG, CUDA_DEVICE_ORDER) in test_devices_gpu.py
    gpus = [devices.PhysicalGpu(str(i), f"GPU-{c}", f"0000:{i:02x}:00.0", c) for i, c in enumerate("ABC")]
    assert devices.apply_visible(gpus, "2,0")[:2] == ([gpus[2], gpus[0]], ["2", "0"])
    assert devices.apply_visible(gpus, "")[:2] == ([], [])
    assert devices.apply_visible(gpus, "1,7,2")[:2] == ([gpus[1]], ["1"])  # CUDA stops at the first bad id


def test_workers_get_gpus_round_robin_home_first_on_multi_gpu():
    assert [devices.worker_gpus(i, 3, ("gpu",), TWO) for i in range(3)] == ["0", "1", "0"]
    assert devices.worker_gpus(0, 2, ("multi-gpu",), TWO) == "0,1"
    assert devices.worker_gpus(1, 2, ("multi-gpu",), TWO) == "1,0"  # its own GPU is its cuda:0
    assert devices.worker_gpus(0, 2, ("cpu",), TWO) == ""


def test_threads_per_worker_never_oversubscribe():
    assert devices.threads_per_worker(2, 2) == 1
    assert devices.threads_per_worker(1, 2) == 2
    assert devices.threads_per_worker(4, 2) == 1
    assert devices.threads_per_worker(2, 16) == 8


def test_the_cpu_is_described_by_model_and_the_vector_extensions_that_choose_kernels():
    """Two CI machines of one kind ran different kernels (finding 14 reproduced on one only): the
    header and the report name the CPU and its kernel-choosing flags."""
    from pytest_dlconform.core.devices import Inventory, cpu_description

    x86 = ("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16 ht\n"
           "processor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n")
    assert cpu_description(x86) == "AMD EPYC; flags avx2 fma avx512f avx512_bf16"
    assert cpu_description("model name : Old\nflags : fpu sse2\n") == "Old; flags none of avx2 fma avx512f"
    assert cpu_description("processor : 0\nFeatures : fp asimd sve bf16\n") == "CPU; flags asimd sve bf16"
    assert cpu_description("") == ""
    inv = Inventory(2, (), (), "nvidia-smi not found", (), "AMD EPYC; flags avx2")
    assert inv.describe() == "2 CPU cores (AMD EPYC; flags avx2); no GPU (nvidia-smi not found)"
    assert Inventory(2, (), (), "x").describe() == "2 CPU cores; no GPU (x)"
