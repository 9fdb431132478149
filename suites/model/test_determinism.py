"""model.determinism.*: same seed, same model, outputs and gradients; inference idempotent."""

from __future__ import annotations

import functools

import pytest

from pytest_dlconform.api import usermodel as ops
from pytest_dlconform.api import usermodels
from pytest_dlconform.api.roundtrip import assert_same_outputs, assert_same_state


@pytest.mark.claim("model.determinism.seeded")
def test_same_seed_same_model_outputs_and_gradients(dl_model, dl_seed):
    fw = ops.adapter_for(dl_model.framework)
    first, second = dl_model.build(seed=dl_seed), dl_model.build(seed=dl_seed)
    what = f"{dl_model.describe()} built twice with seed {dl_seed}"
    untracked = functools.partial(ops.hints.untracked_state, first.model, dl_model.framework)
    with ops.hinting(lambda: [ops.hints.UNSEEDED_BUILD], untracked):
        assert_same_state(fw.state(second.model), fw.state(first.model), what=what)
    inputs = usermodels.example_inputs(first, dl_seed)
    runs = []
    for um in (first, second):
        fw.seed(dl_seed + 1)
        outs = fw.forward(um.model, inputs, training=True)
        targets = usermodels.example_targets(um, dl_seed, next(iter(outs.values())))
        fw.seed(dl_seed + 2)
        runs.append((outs, fw.grads(um.model, inputs, targets, training=True, loss=um.loss)))
    with ops.hinting(lambda: [ops.hints.UNSEEDED_FORWARD], untracked):
        assert_same_outputs(runs[1][0], runs[0][0], what=f"{what}: training-mode outputs, framework seeded alike",
                            name="training-mode outputs bitwise")
        assert_same_outputs(runs[1][1], runs[0][1], what=f"{what}: training-mode parameter gradients, seeded alike",
                            name="parameter gradients bitwise")


@pytest.mark.claim("model.determinism.inference-idempotent")
def test_inference_is_idempotent_and_keeps_state(dl_model, dl_seed):
    fw = ops.adapter_for(dl_model.framework)
    um = dl_model.build(seed=dl_seed)
    inputs = usermodels.example_inputs(um, dl_seed)
    before = fw.state(um.model)
    fw.seed(dl_seed + 1)
    once = fw.forward(um.model, inputs, training=False)
    fw.seed(dl_seed + 2)  # a layer drawing random numbers in inference mode now draws others
    twice = fw.forward(um.model, inputs, training=False)
    what = f"{dl_model.describe()} in inference mode"
    assert_same_outputs(twice, once, what=f"{what}: second call vs first", name="inference outputs bitwise")
    assert_same_state(fw.state(um.model), before, what=f"{what}: state after two calls vs before")
