"""Meta-tests for the references and checks of the torch base-class protocol suites
(suites/data/test_torch_data_protocols.py, suites/modules/test_torch_optim_protocols.py): each
reference reproduces the documented values, and each check passes the real framework and
fails a deliberately wrong implementation (a wrong twin) with a message naming what is wrong:
a chunking that keeps a short last batch, a sharding that duplicates, an SGD reference fed a
wrong lr, an add_param_group that ignores defaults, a zero_grad that ignores set_to_none, step
hooks that run in the wrong place, state_dict hooks without prepend, a scheduler that skips an
epoch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from suites.data import test_torch_data_protocols as dp
from suites.modules import test_torch_optim_protocols as op

# ------------------------------------------------------------------ data references (no workers)


def test_chunk_and_loader_len_follow_the_documented_rules():
    assert dp.chunk([5, 6, 7, 8, 9], 2, False) == [[5, 6], [7, 8], [9]]
    assert dp.chunk([5, 6, 7, 8, 9], 2, True) == [[5, 6], [7, 8]]
    assert dp.chunk(["a", "b"], None, False) == [["a"], ["b"]]
    assert [dp.reference_loader_len(7, b, d) for b, d in [(None, False), (3, False), (3, True), (7, True)]] == [7, 3, 2, 1]


def test_example_shards_reproduce_the_docstring():
    # "Worker 0 fetched [3, 4]. Worker 1 fetched [5, 6]."; 12 workers: one element each for the first four
    assert dp.example_shards(3, 7, 2) == [[3, 4], [5, 6]]
    assert dp.example_shards(3, 7, 0) == [[3, 4, 5, 6]]
    assert [s for s in dp.example_shards(3, 7, 12) if s] == [[3], [4], [5], [6]]
    assert sorted(v for s in dp.example_shards(0, 11, 3) for v in s) == list(range(11))


def test_assert_each_exactly_fails_a_duplicating_and_a_dropping_loader():
    dp.assert_each_exactly([3, 5, 4, 6], [3, 4, 5, 6], 1, what="ok")
    dp.assert_each_exactly([3, 3, 4, 4, 5, 5, 6, 6], [3, 4, 5, 6], 2, what="ok")
    with pytest.raises(AssertionError, match=r"element 3 yielded 2 times, but should be 1"):
        dp.assert_each_exactly([3, 3, 4, 4, 5, 5, 6, 6], [3, 4, 5, 6], 1, what="unsharded")
    with pytest.raises(AssertionError, match=r"element 6 yielded 0 times, but should be 1"):
        dp.assert_each_exactly([3, 4, 5], [3, 4, 5, 6], 1, what="lost one")
    with pytest.raises(AssertionError, match=r"element 9 yielded 1 times, but should be 0"):
        dp.assert_each_exactly([3, 4, 5, 6, 9], [3, 4, 5, 6], 1, what="extra")


def test_check_order_fails_a_loader_that_keeps_the_short_batch():
    dp.check_order([[1, 2], [3]], dp.chunk([1, 2, 3], 2, False), what="ok")
    with pytest.raises(AssertionError, match=r"drop_last.*yielded \[\[1, 2\], \[3\]\], but the documented order is \[\[1, 2\]\]"):
        dp.check_order([[1, 2], [3]], dp.chunk([1, 2, 3], 2, True), what="drop_last")


def test_user_samplers_follow_the_docstring_examples():
    cls = dp._classes(torch)
    words = ["ccc", "a", "bb", "", "dd"]
    assert list(cls["AscendingLength"](words)) == [3, 1, 2, 4, 0]
    batches = cls["AscendingLengthBatches"](words, 2)
    assert len(batches) == 3 and list(batches) == [[3, 1], [2, 4], [0]]
    squares = cls["Squares"]
    assert [(squares(2) + squares(3, offset=10))[i] for i in range(5)] == [0, 1, 100, 121, 144]


# ------------------------------------------------------------------ the SGD reference and its comparison


def test_reference_sgd_step_follows_the_box():
    theta, g = np.array([1.0, -2.0]), np.array([0.5, 0.5])
    t1, b1 = op.reference_sgd_step(theta, None, g, lr=0.1, momentum=0.9, weight_decay=0.1)
    assert np.allclose(b1, [0.6, 0.3]) and np.allclose(t1, [0.94, -2.03])
    t2, b2 = op.reference_sgd_step(t1, b1, g, lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.1)
    assert np.allclose(b2, 0.9 * b1 + 0.5 * (g + 0.1 * t1)) and np.allclose(t2, t1 - 0.1 * b2)


def _torch_sgd_history(lr: float, steps: int = op.STEPS):
    data = op.problem()
    params = op.leaves(torch, data)
    return op.run(torch, torch.optim.SGD(params, lr=lr), params, data, 1, steps), data


def test_sgd_reference_agrees_with_torch_and_fails_a_wrong_lr():
    got, data = _torch_sgd_history(0.1)
    op.assert_matches_reference(got, op.reference_sgd(data, [{"lr": 0.1}] * 3, op.STEPS), what="SGD")
    with pytest.raises(AssertionError, match=r"wrong lr: parameter 0 \(3, 4\) after step 1"):
        op.assert_matches_reference(got, op.reference_sgd(data, [{"lr": 0.1001}] * 3, op.STEPS), what="wrong lr")
    with pytest.raises(AssertionError, match=r"3 steps recorded, but the reference ran 4"):
        op.assert_matches_reference(got[:3], op.reference_sgd(data, [{"lr": 0.1}] * 3, op.STEPS), what="short")


def test_step_tolerance_is_far_below_a_wrong_step():
    tol = op.step_tolerance(op.STEPS)
    assert tol.rtol < 1e-12  # a wrong lr or a skipped step is 1e-3 relative or more


# ------------------------------------------------------------------ wrong twins of the optimizer protocol


class NoDefaultsSGD(torch.optim.SGD):
    """add_param_group without the defaults: the added groups' silent options missing
    (issue 53712's Adagrad kept no state for added groups)."""

    def add_param_group(self, param_group):
        if not hasattr(self, "_built"):
            self._built = True
            return super().add_param_group(param_group)
        group = {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False, "maximize": False,
                 "foreach": None, "differentiable": False, "fused": None, "lr": 0.1, **param_group}
        self.param_groups.append(group)


def test_add_param_group_check_fails_a_group_without_defaults():
    op.check_add_param_group(torch, torch.optim.SGD)
    want = r"add_param_group\(\{'lr': 0.03\}\): option \(got, should be\).*'momentum': \(0.0, 0.9\)"
    with pytest.raises(AssertionError, match=want):
        op.check_add_param_group(torch, NoDefaultsSGD)


class AlwaysNoneSGD(torch.optim.SGD):
    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=True)


class AlwaysZeroSGD(torch.optim.SGD):
    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=False)


def test_zero_grad_check_fails_a_zero_grad_that_ignores_set_to_none():
    op.check_zero_grad(torch, torch.optim.SGD, True)
    op.check_zero_grad(torch, torch.optim.SGD, False)
    with pytest.raises(AssertionError, match=r"zero_grad\(set_to_none=False\): parameter 0's grad should be a tensor of zeros"):
        op.check_zero_grad(torch, AlwaysNoneSGD, False)
    with pytest.raises(AssertionError, match=r"zero_grad\(set_to_none=True\): parameter 0's grad is"):
        op.check_zero_grad(torch, AlwaysZeroSGD, True)


class PostHookFirstSGD(torch.optim.SGD):
    """Runs the post-hooks before the step (issue 119300: the tests did not ascertain order)."""

    def register_step_post_hook(self, hook):
        return self.register_step_pre_hook(lambda o, a, k: hook(o, a, k))


class IgnoresPreHookResultSGD(torch.optim.SGD):
    def register_step_pre_hook(self, hook):
        return super().register_step_pre_hook(lambda o, a, k: (hook(o, a, k), None)[1])


def test_step_hook_check_fails_misplaced_hooks_and_ignored_results():
    op.check_step_hooks(torch, torch.optim.SGD)
    with pytest.raises(AssertionError, match=r"hooks ran as \['pre', 'post'\]|parameter 0 .*as the post-hook saw it"):
        op.check_step_hooks(torch, PostHookFirstSGD)
    with pytest.raises(AssertionError, match=r"step\(\) returned 1.0: the pre-hook's replaced closure"):
        op.check_step_hooks(torch, IgnoresPreHookResultSGD)


class NoPrependSGD(torch.optim.SGD):
    def register_state_dict_pre_hook(self, hook, prepend: bool = False):
        return super().register_state_dict_pre_hook(hook, prepend=False)

    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False):
        return super().register_load_state_dict_pre_hook(hook, prepend=False)


class IgnoresLoadPreHookResultSGD(torch.optim.SGD):
    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False):
        return super().register_load_state_dict_pre_hook(lambda o, d: (hook(o, d), None)[1], prepend=prepend)


def test_state_dict_hook_checks_fail_without_prepend_or_returned_dicts():
    op.check_state_dict_hooks(torch, torch.optim.SGD)
    op.check_load_state_dict_hooks(torch, torch.optim.SGD)
    with pytest.raises(AssertionError, match=r"state_dict pre-hooks fired as \['a', 'b', 'c'\], should be \['c', 'a', 'b'\]"):
        op.check_state_dict_hooks(torch, NoPrependSGD)
    with pytest.raises(AssertionError, match=r"load_state_dict pre-hooks fired as \['a', 'b', 'c'\]"):
        op.check_load_state_dict_hooks(torch, NoPrependSGD)
    with pytest.raises(AssertionError, match=r"lr 0.1: the pre-hook's returned dict \(lr 0.05\) should load"):
        op.check_load_state_dict_hooks(torch, IgnoresLoadPreHookResultSGD)


class ForgetsLrSGD(torch.optim.SGD):
    """load_state_dict that keeps the live options and loads only the state."""

    def load_state_dict(self, state_dict):
        lrs = [g["lr"] for g in self.param_groups]
        super().load_state_dict(state_dict)
        for g, lr in zip(self.param_groups, lrs):
            g["lr"] = lr


def test_state_dict_check_fails_a_load_that_keeps_the_live_options():
    op.check_state_dict_round_trip(torch, torch.optim.SGD, True)
    with pytest.raises(AssertionError, match=r"loaded lr 0.2, should be the saved 0.05"):
        op.check_state_dict_round_trip(torch, ForgetsLrSGD, False)


# ------------------------------------------------------------------ wrong twins of the scheduler protocol


def test_scheduler_references_and_check_fail_a_scheduler_off_by_one_epoch():
    assert op.closed_form(0.1, 0) == 0.1 and op.closed_form(0.1, 3) == 0.1 / 4 * 0.7
    assert op.chainable(0.1, 2) == 0.1 * 0.7 * 0.7
    classes = op.user_schedulers(torch)
    for kind, cls in classes.items():
        op.check_scheduler(torch, cls, kind)

    class Late(classes["closed-form"]):
        def get_lr(self):
            return [op.closed_form(b, max(self.last_epoch - 1, 0)) for b in self.base_lrs]

    with pytest.raises(AssertionError, match=r"closed-form: the groups' lrs per epoch .* but the schedule gives"):
        op.check_scheduler(torch, Late, "closed-form")
