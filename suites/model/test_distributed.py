"""model.distributed.step-equivalence: one training step of the user's model under DDP, FSDP,
Mirrored and MultiWorkerMirrored equals the single-device step on the same global batch."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.api import HarnessError, evidence, not_applicable, usermodels
from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import reductions as oracle
from pytest_dlconform.api import usermodel as ops


def _batch(dl_model, um, seed, n):
    fw = ops.adapter_for(dl_model.framework)
    inputs = usermodels.example_inputs(um, seed)
    rows = (len(inputs[0]) // n) * n
    if rows == 0:
        raise HarnessError(f"{dl_model.ref}: make_inputs gives {len(inputs[0])} rows, fewer than the {n} replicas; "
                           f"return a batch of at least {n} rows")
    inputs = [a[:rows] for a in inputs]
    first = next(iter(fw.forward(um.model, inputs, training=False).values()))
    targets = usermodels.example_targets(um, seed, first)
    if targets.dtype.kind == "f":
        targets = targets.astype("float32")  # integer targets (class labels for the factory's loss) stay integer
    return inputs, targets


@pytest.mark.claim("model.distributed.step-equivalence")
def test_one_step_equals_single_device(dl_model, dl_strategy, dl_groups, dl_seed, dl_settings):
    n = dl_strategy.world_size
    fw = ops.adapter_for(dl_model.framework)
    um = dl_model.build(seed=dl_seed)
    inputs, targets = _batch(dl_model, um, dl_seed, n)
    state = fw.state(um.model)
    before = {k: np.asarray(state[k]) for k in fw.params(um.model)}  # the parameters the step moves
    payload = {"ref": dl_model.ref, "state": state, "inputs": inputs, "targets": targets, "wrap": dl_strategy.name}
    what = f"{dl_strategy.name} over {n} replicas, {dl_model.describe()}, global batch {len(targets)}"
    if dl_model.framework == "torch":
        group = dist.group_for(dl_groups, dl_strategy, dl_settings.timeout)
        per_rank = group.run(ops.torch_rank_step, payload, what=f"{dl_strategy.name} step of {dl_model.ref}")
        replicas = [per_rank[r] for r in sorted(per_rank)]
        # Only a refusal the wrapper documents (ops.WRAP_REFUSALS) is not applicable; anything else it raised fails.
        refused = ops.wrap_verdict(replicas, dl_strategy.name, what)
        if refused:
            not_applicable(f"{dl_strategy.name} refuses this model: {refused}")
        expected = ops.torch_single_step(um.model, inputs, targets, um.loss)
    else:
        if dl_strategy.name == "mirrored":
            result = ops.keras_strategy_step(dist.inprocess_strategy(dl_groups, dl_strategy), payload)
            results = [result]
        else:
            group = dist.group_for(dl_groups, dl_strategy, dl_settings.timeout)
            per_rank = group.run(ops.tf_mw_step, payload, what=f"MultiWorkerMirrored step of {dl_model.ref}")
            results = [per_rank[r] for r in sorted(per_rank)]
        replicas = [{k: copies[i] for k, copies in res["weights"].items()} for res in results
                    for i in range(len(next(iter(res["weights"].values()))))]
        n = sum(res["replicas"] for res in results[:1])
        expected = ops.keras_single_step(um.model, inputs, targets, um.loss)
    names = sorted(expected)
    oracle.check_replicas_agree([[rep[k] for k in names] for rep in replicas], what=f"{what}: replicas", names=names)
    ops_count, _ = ops.error_terms(um.model, inputs, dl_model.framework)
    tol = oracle.step_tolerance("float32", layers=ops_count, steps=1, batch=len(targets), device=dl_strategy.device,
                                framework=dl_model.framework)
    # A step that differs has two common causes in the model's code: batch statistics in inference
    # mode (each replica normalises its own share) and state the replicas' rebuilt models lack.
    fresh = dl_model.build(seed=dl_seed)
    with ops.hinting(lambda: ops.hints.batch_dependence(fw, fresh.model, inputs),
                     lambda: ops.hints.untracked_state(um.model, dl_model.framework)):
        ops.assert_same_step(replicas[0], expected, before, tol, what=what)
    evidence.note(replicas=len(replicas), strategy=dl_strategy.name)
