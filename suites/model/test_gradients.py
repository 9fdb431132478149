"""model.gradients.finite-differences: the user's model's reverse-mode gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.api import check_vjp, evidence, usermodels
from pytest_dlconform.api import usermodel as ops


@pytest.mark.claim("model.gradients.finite-differences")
def test_parameter_gradients_match_finite_differences(dl_model, dl_seed):
    fw = ops.adapter_for(dl_model.framework)
    um = dl_model.build("float64", seed=dl_seed)
    float64 = fw.dtype_of(um.model) == "float64" or (dl_model.framework == "torch" and fw.cast64(um.model))
    if not float64:  # the factory ignored dtype='float64' and the model cannot be cast
        um = dl_model.build("float32", seed=dl_seed)
    inputs = usermodels.example_inputs(um, dl_seed)
    names, xs, f, vjp = fw.grad_problem(um.model, inputs)
    rtol, f_error = None, 0.0
    if not float64:
        tol = ops.float32_gradient_rtol(um.model, inputs, dl_model.framework)
        rtol, f_error = tol.rtol, ops.f_error_float32(f(xs))
    evidence.note(dtype="float64" if float64 else "float32", inputs=len(xs), parameters=int(sum(np.size(x) for x in xs)))
    result = check_vjp(f, xs, vjp, seed=dl_seed, names=names, rtol=rtol, f_error=f_error)
    evidence.check("gradient error / allowed", observed=result.max_error_ratio, tolerance=1.0, **result.as_evidence())
