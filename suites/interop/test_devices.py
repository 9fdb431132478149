"""interop.devices: on a GPU, each oracle's result matches the CPU result of the same case."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence, not_applicable
from pytest_dlconform.api import crossframework as cf


def no_gpu_reason(tf, torch, dl_device: str, requested: str) -> str:
    """What each framework sees, in its own words, for the report."""
    gpus = tf.config.list_physical_devices("GPU")
    return (
        f"no GPU in this test instance: its device kind is {dl_device} (--dl-device={requested}); "
        f"torch {torch.__version__} sees {torch.cuda.device_count()} CUDA device(s) "
        f"(torch.version.cuda={torch.version.cuda}), tensorflow {tf.__version__} lists {len(gpus)} physical GPU(s) "
        f"(built with CUDA: {tf.test.is_built_with_cuda()}); run with --dl-device=gpu on a GPU machine"
    )

@pytest.mark.claim("interop.devices")
def test_gpu_results_match_cpu_results(tf, torch, keras_tf, dl_device, dl_settings):
    if dl_device == "cpu":
        not_applicable(no_gpu_reason(tf, torch, dl_device, dl_settings.device))
    _gpu_matches_cpu(tf, torch, keras_tf, dl_device)
    evidence.covers("device=gpu")

@budget(8)
@given(data=st.data())
def _gpu_matches_cpu(tf, torch, keras_tf, dl_device, data):
    dtype = data.draw(st.sampled_from(cf.DTYPES), label="dtype")
    case = data.draw(cf.cases(activations=cf.activations_for(dtype)), label="case")
    tf_gpu, torch_gpu = cf.framework_devices(dl_device)
    tf_cpu, torch_cpu = cf.framework_devices("cpu")
    cf.check_devices(cf.tf_run(tf, keras_tf, case, dtype, tf_gpu), cf.tf_run(tf, keras_tf, case, dtype, tf_cpu), case, dtype,
                     tf32=cf.tf32_in_use("tensorflow", tf, case, dl_device), label="tensorflow: ")
    cf.check_devices(cf.torch_run(torch, case, dtype, torch_gpu), cf.torch_run(torch, case, dtype, torch_cpu), case, dtype,
                     tf32=cf.tf32_in_use("torch", torch, case, dl_device), label="torch: ")
