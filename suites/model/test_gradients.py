"""model.gradients.finite-differences: the user's model's reverse-mode gradients against finite differences.

The model is built and run in one ``dtype_scope``: every global dtype knob of its framework
(Keras's dtype policy and floatx, jax_enable_x64 on JAX, torch's default dtype) set for the
precision checked, so a float64 check computes in float64 from the inputs on. A Keras model
whose own ``Input`` layers are narrower than its weights (``keras.Input(dtype="float32")``)
still rounds its inputs; that rounding is counted in ``f_error`` (``input_rounding_f_error``).
A model whose inference-mode outputs change between two identical calls violates the claim's
premise and fails it outright (:func:`_a_function`), instead of by chance of the draws.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.api import check_vjp, evidence, usermodels
from pytest_dlconform.api import usermodel as ops


@pytest.mark.claim("model.gradients.finite-differences")
def test_parameter_gradients_match_finite_differences(dl_model, dl_seed):
    fw = ops.adapter_for(dl_model.framework)
    with ops.dtype_scope(dl_model.framework, "float64"):
        um = dl_model.build("float64", seed=dl_seed)
        float64 = fw.dtype_of(um.model) == "float64" or (dl_model.framework == "torch" and fw.cast64(um.model))
    if not float64:  # the factory ignored dtype='float64' and the model cannot be cast
        um = dl_model.build("float32", seed=dl_seed)
    untracked = ops.hinting(lambda: ops.hints.untracked_state(um.model, dl_model.framework))
    with ops.dtype_scope(dl_model.framework, "float64" if float64 else "float32"), untracked:
        inputs = usermodels.example_inputs(um, dl_seed)
        names, xs, f, vjp = fw.grad_problem(um.model, inputs)
        evidence.note(dtype="float64" if float64 else "float32", inputs=len(xs),
                      parameters=int(sum(np.size(x) for x in xs)))
        y = _a_function(f, xs, "float64" if float64 else "float32", dl_model.describe())
        rtol, f_error, w = None, 0.0, None
        narrowed = fw.narrowed_inputs(um.model, inputs) if float64 else []
        if not float64:
            tol = ops.float32_gradient_rtol(um.model, inputs, dl_model.framework)
            rtol, f_error = tol.rtol, ops.f_error_float32(y)
        elif any(narrowed):
            w = np.random.default_rng(dl_seed).standard_normal(np.shape(y))
            tail = len(xs) - len(narrowed)  # xs: the parameters, then the floating inputs
            f_error = ops.input_rounding_f_error(vjp(xs, w)[tail:], xs[tail:], w, narrowed)
            evidence.note(inputs_rounded_to=", ".join(f"{names[tail + i]}: {d}" for i, d in enumerate(narrowed) if d),
                          input_rounding_f_error=f_error)
        result = check_vjp(f, xs, vjp, seed=dl_seed, names=names, rtol=rtol, f_error=f_error, cotangent=w)
    evidence.check("gradient error / allowed", observed=result.max_error_ratio, tolerance=1.0, **result.as_evidence())


def _a_function(f, xs, dtype, what):
    """f(xs) twice; they must agree, since finite differences (and the claim) presume the
    inference-mode model is a function of its weights and inputs. A layer that draws random
    numbers in inference (dropout ignoring ``training``) breaks that: its outputs move by
    O(1) between two identical calls, and the finite differences are then noise, read as a
    mismatch or as "inconclusive" by chance of the draws. Two calls may differ by rounding
    (run-to-run reduction order on some devices: a few ulps times a reduction's length), so
    only a normwise difference above sqrt(eps) of ``dtype`` counts."""
    first, second = np.asarray(f(xs), np.float64), np.asarray(f(xs), np.float64)
    scale = float(np.linalg.norm(first))
    gap = float(np.linalg.norm(second - first))
    assert gap <= np.sqrt(np.finfo(dtype).eps) * scale, (
        f"{what} in inference mode gives other outputs on a second identical call (normwise relative difference "
        f"{gap / scale if scale else gap:.3g}): it is no function of its weights and inputs, so its gradients "
        "cannot agree with finite differences; a layer draws random numbers with training=False")
    return first
