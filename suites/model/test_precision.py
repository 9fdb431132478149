"""model.precision.*: the user's model under autocast / mixed_float16, and loss-scaled steps."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.api import HarnessError, assert_equal, usermodels
from pytest_dlconform.api import usermodel as ops


def _low(dl_model):
    return "bfloat16" if dl_model.device_kind == "cpu" else "float16"


def _torch_autocast(dl_model, dl_seed):
    import torch

    fw = ops.TorchOps()
    um = dl_model.build(seed=dl_seed)
    inputs = usermodels.example_inputs(um, dl_seed)
    ref_out = fw.forward(um.model, inputs, training=False)
    targets = usermodels.example_targets(um, dl_seed, next(iter(ref_out.values())))
    ref_grads = fw.grads(um.model, inputs, targets, training=False, loss=um.loss)
    device_type = torch.device(dl_model.device).type
    with torch.autocast(device_type, dtype=getattr(torch, _low(dl_model))):
        out = fw.forward(um.model, inputs, training=False)
        grads = fw.grads(um.model, inputs, targets, training=False, loss=um.loss)
    dtypes = {str(p.dtype) for p in um.model.parameters()}
    assert dtypes == {"torch.float32"}, f"parameters are {dtypes} after autocast, but should stay float32"
    return um, inputs, (ref_out, ref_grads), (out, grads), _low(dl_model)


def _keras_mixed(dl_model, dl_seed):
    fw = ops.KerasOps()
    ref = dl_model.build(seed=dl_seed)
    mixed = dl_model.build("mixed_float16", seed=dl_seed)
    _require_policy(mixed.model)
    fw.load_state(mixed.model, fw.state(ref.model))
    inputs = usermodels.example_inputs(ref, dl_seed)
    ref_out = fw.forward(ref.model, inputs, training=False)
    targets = usermodels.example_targets(ref, dl_seed, next(iter(ref_out.values())))
    out = fw.forward(mixed.model, inputs, training=False)
    grads = fw.grads(mixed.model, inputs, targets, training=False, loss=mixed.loss)
    variables = {str(v.dtype) for v in mixed.model.trainable_variables}
    assert variables == {"float32"}, f"variables are {variables} under mixed_float16, but should stay float32"
    return ref, inputs, (ref_out, fw.grads(ref.model, inputs, targets, training=False, loss=ref.loss)), (out, grads), "float16"


def _require_policy(model):
    computes = {getattr(layer, "compute_dtype", None) for layer in ops.keras_leaves(model) if layer.weights}
    if "float16" not in computes:
        raise HarnessError(f"the model built under the mixed_float16 policy computes in {sorted(map(str, computes))}: "
                           "let the factory's layers follow keras.config.dtype_policy() (pass no dtype to them)")


@pytest.mark.claim("model.precision.autocast")
def test_low_precision_run_within_its_bound(dl_model, dl_seed):
    run = _torch_autocast if dl_model.framework == "torch" else _keras_mixed
    um, inputs, ref, low, dtype = run(dl_model, dl_seed)
    tol = ops.forward_tolerance(um.model, inputs, dl_model.framework, dtype, backward=True, device=dl_model.device_kind)
    what = f"{dl_model.describe()} in {dtype} vs float32"
    with ops.hinting(lambda: ops.hints.untracked_state(um.model, dl_model.framework)):
        ops.assert_close_tree(low[0], ref[0], tol, what=f"{what}: outputs", name=f"outputs {dtype} vs float32")
        ops.assert_close_tree(low[1], ref[1], tol, what=f"{what}: parameter gradients",
                              name=f"gradients {dtype} vs float32")


@pytest.mark.claim("model.precision.loss-scaling")
def test_loss_scaled_step_equals_unscaled_step(dl_model, dl_seed):
    fw = ops.adapter_for(dl_model.framework)
    if dl_model.framework == "torch":
        import torch

        plain, scaled = dl_model.build(seed=dl_seed), dl_model.build(seed=dl_seed)
        scaled.model.load_state_dict(plain.model.state_dict())
        inputs = usermodels.example_inputs(plain, dl_seed)
        targets = usermodels.example_targets(plain, dl_seed, next(iter(fw.forward(plain.model, inputs, training=False).values())))
        low = _low(dl_model)
        before = fw.state(plain.model)
        want = fw.sgd_step(plain.model, inputs, targets, autocast=low, loss=plain.loss)
        scaler = torch.amp.GradScaler(torch.device(dl_model.device).type, init_scale=2.0**16)
        got = fw.sgd_step(scaled.model, inputs, targets, autocast=low, scaler=scaler, loss=scaled.loss)
        assert scaler.get_scale() == 2.0**16, (
            f"GradScaler's scale went from 2**16 to {scaler.get_scale()}: it found an overflow in a step whose "
            "unscaled gradients are finite")
        for name in sorted(want):
            assert_equal(got[name], want[name], what=f"{dl_model.describe()}: {name} after the GradScaler step "
                         "vs the unscaled step (scaling by 2**16 is exact)")
        assert any(not np.array_equal(want[k], before[k]) for k in want), "the step changed no weight"
        return
    import keras

    plain = dl_model.build("mixed_float16", seed=dl_seed)
    _require_policy(plain.model)
    scaled = dl_model.build("mixed_float16", seed=dl_seed)
    fw.load_state(scaled.model, fw.state(plain.model))
    inputs = usermodels.example_inputs(plain, dl_seed)
    targets = usermodels.example_targets(plain, dl_seed, next(iter(fw.forward(plain.model, inputs, training=False).values())))
    before = {k: np.asarray(v.numpy()) for k, v in fw.params(plain.model).items()}
    want = fw.sgd_step(plain.model, inputs, targets, optimizer=keras.optimizers.SGD(ops.LR), loss=plain.loss)
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(ops.LR))
    got = fw.sgd_step(scaled.model, inputs, targets, optimizer=opt, loss=scaled.loss)
    tol = ops.forward_tolerance(plain.model, inputs, "tensorflow", "float16", backward=True)
    ops.assert_close_tree({k: got[k] - before[k] for k in got}, {k: want[k] - before[k] for k in want}, tol,
                          what=f"{dl_model.describe()}: updates, LossScaleOptimizer vs unscaled step",
                          name="loss-scaled update vs unscaled")
