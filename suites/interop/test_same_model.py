"""interop.same-model: one model, one set of weights, TensorFlow (Keras) and torch agree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence
from pytest_dlconform.api import crossframework as cf


@pytest.mark.claim("interop.same-model")
@budget(12)
@given(data=st.data())
def test_same_weights_give_same_outputs_and_gradients(tf, torch, keras_tf, dl_device, data):
    dtype = data.draw(st.sampled_from(cf.DTYPES), label="dtype")
    case = data.draw(cf.cases(activations=cf.activations_for(dtype)), label="case")
    tf_dev, torch_dev = cf.framework_devices(dl_device)
    tf32 = (cf.tf32_in_use("tensorflow", tf, case, dl_device), cf.tf32_in_use("torch", torch, case, dl_device))
    cf.check_same_model(cf.tf_run(tf, keras_tf, case, dtype, tf_dev), cf.torch_run(torch, case, dtype, torch_dev),
                        case, dtype, tf32=tf32)


@pytest.mark.claim("interop.same-model")
def test_every_feature_in_both_dtypes(tf, torch, keras_tf, dl_device, dl_seed):
    # The hypothesis test above explores; this one makes sure each run covers, by
    # construction, every mode of the claim (cf.coverage_batch forces them) in both dtypes.
    tf_dev, torch_dev = cf.framework_devices(dl_device)
    for k, dtype in enumerate(cf.DTYPES):
        for j, case in enumerate(cf.coverage_batch(dl_seed + k, cf.activations_for(dtype))):
            tf32 = (cf.tf32_in_use("tensorflow", tf, case, dl_device), cf.tf32_in_use("torch", torch, case, dl_device))
            cf.check_same_model(cf.tf_run(tf, keras_tf, case, dtype, tf_dev), cf.torch_run(torch, case, dtype, torch_dev),
                                case, dtype, tf32=tf32, label=f"coverage model {j} ({dtype}): ")
            evidence.covers(*cf.case_modes(case, dtype))


@pytest.mark.claim("interop.same-model.activations")
def test_activation_computes_its_formula(dl_framework, dl_device):
    if dl_framework.name == "tensorflow":
        import keras  # noqa: F401  (imported outside hypothesis: it changes the recursion limit)
    _activations_compute_their_formulas(dl_framework, dl_device)


@budget(5)
@given(spread=st.sampled_from([1.0, 4.0, 12.0]), seed=st.integers(0, 2**32 - 1))
def _activations_compute_their_formulas(dl_framework, dl_device, spread, seed):
    x = np.random.default_rng(seed).uniform(-spread, spread, size=257)
    for name in cf.ACTIVATION_FORMULAS:  # every activation in every dtype, each example: cheap
        fn = cf.framework_activation(dl_framework.name, dl_framework.module, name)
        for dtype in cf.DTYPES:
            actual = dl_framework.call(lambda ts, fn=fn: fn(ts[0]), [x], dtype, dl_device)
            cf.check_activation(actual, x, name, dtype,
                                what=f"{dl_framework.name} {name} on [-{spread:g}, {spread:g}] ({dtype})")
            evidence.covers(f"act={name}", f"dtype={dtype}")
