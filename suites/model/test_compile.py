"""model.compile.equivalence: torch.compile and tf.function (with and without XLA) against eager."""

from __future__ import annotations

import pytest

from pytest_dlconform.api import evidence, usermodels
from pytest_dlconform.api import usermodel as ops

MODES = ("torch-compile", "tf-function", "tf-function-xla")


def _torch(dl_model, dl_seed):
    import torch

    fw = ops.TorchOps()
    um = dl_model.build(seed=dl_seed)
    inputs = usermodels.example_inputs(um, dl_seed)
    eager_out = fw.forward(um.model, inputs, training=False)
    targets = usermodels.example_targets(um, dl_seed, next(iter(eager_out.values())))
    eager_grads = fw.grads(um.model, inputs, targets, training=False, loss=um.loss)
    torch._dynamo.reset()
    compiled = torch.compile(um.model)
    with torch.no_grad():
        out = {k: ops.to_numpy(v) for k, v in fw.call(compiled, fw.tensors(um.model, inputs), training=False).items()}
    um.model.zero_grad(set_to_none=True)
    fw.loss(compiled, fw.tensors(um.model, inputs), targets, loss=um.loss).backward()
    grads = {n: ops.to_numpy(p.grad) for n, p in fw.params(um.model).items()}
    torch._dynamo.reset()
    return um, inputs, (eager_out, eager_grads), (out, grads)


def _keras(dl_model, dl_seed, jit):
    import tensorflow as tf

    fw = ops.KerasOps()
    um = dl_model.build(seed=dl_seed)
    inputs = usermodels.example_inputs(um, dl_seed)
    eager_out = fw.forward(um.model, inputs, training=False)
    targets = usermodels.example_targets(um, dl_seed, next(iter(eager_out.values())))
    eager_grads = fw.grads(um.model, inputs, targets, training=False, loss=um.loss)
    named = fw.params(um.model)
    variables = list(named.values())

    @tf.function(jit_compile=jit, autograph=False)
    def both(args, y):
        with tf.GradientTape() as tape:
            raw = um.model(list(args) if len(args) > 1 else args[0], training=False)
            outs = fw.outputs(raw)
            first = next(iter(outs.values()))
            if um.loss is None:
                loss = tf.reduce_mean(tf.reduce_sum(tf.reshape(tf.square(first - tf.cast(y, first.dtype)),
                                                               [tf.shape(first)[0], -1]), axis=1))
            else:  # the factory's own training loss
                loss = um.loss(raw, fw.target_tensor(y, first))
        return outs, tape.gradient(loss, variables)

    outs, grads = both(fw.tensors(um.model, inputs), tf.constant(targets))
    compiled = ({k: v.numpy() for k, v in outs.items()}, {k: g.numpy() for k, g in zip(named, grads)})
    return um, inputs, (eager_out, eager_grads), compiled


@pytest.mark.claim("model.compile.equivalence")
@pytest.mark.dl_model_variants("mode", {"torch": ("torch-compile",), "tensorflow": ("tf-function", "tf-function-xla")})
@pytest.mark.parametrize("mode", MODES)
def test_compiled_model_matches_eager(dl_model, mode, dl_seed):
    if mode == "torch-compile":
        um, inputs, eager, compiled = _torch(dl_model, dl_seed)
    else:
        um, inputs, eager, compiled = _keras(dl_model, dl_seed, jit=mode.endswith("xla"))
    # The model's rounding count, or where larger its first-order worst case carried through
    # the layers (checks.usermodel.propagation): two faithful float32 evaluations may differ by that.
    out_tol, grad_tol = ops.propagated_tolerances(um.model, inputs, dl_model.framework, compiled[0], eager[0],
                                                  device=dl_model.device_kind)
    what = f"{mode} of {dl_model.describe()}"
    with ops.hinting(lambda: ops.hints.untracked_state(um.model, dl_model.framework)):
        ops.assert_close_tree(compiled[0], eager[0], out_tol, what=f"{what}: outputs compiled vs eager",
                              name="outputs compiled vs eager")
        ops.assert_close_tree(compiled[1], eager[1], grad_tol, what=f"{what}: parameter gradients compiled vs eager",
                              name="gradients compiled vs eager")
    evidence.note(mode=mode)
