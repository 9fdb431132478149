"""Mutants of the torch base-class protocols: torch.utils.data's IterableDataset sharding
(claim data.torch.protocols) and torch.optim's Optimizer and LRScheduler (claims
modules.torch.optimizer-base-class, modules.torch.lr-scheduler-base-class).

Each patches the protocol the way a reported bug or behaviour change broke it; the suites
suites/data/test_torch_data_protocols.py and suites/modules/test_torch_optim_protocols.py
must notice.
"""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

DATA = "data.torch.protocols"
OPT = "modules.torch.optimizer-base-class"
SCHED = "modules.torch.lr-scheduler-base-class"


@mutant("torch-worker-info-none-in-workers", areas="data", claims=DATA, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/pull/19228",
        bug="torch.utils.data.get_worker_info() returns None inside the loader's workers too, so an IterableDataset "
            "sharded by it reads everything in every worker: each element comes num_workers times (PR 19228 added "
            "get_worker_info for exactly this sharding; huggingface/datasets issue 3423 reports the duplication a "
            "streaming IterableDataset shows with num_workers > 1 when it is not sharded per worker).")
def _torch_worker_info_none() -> None:
    import torch.utils.data as data

    def make(orig: Any) -> Any:
        def get_worker_info() -> Any:
            return None
        return get_worker_info
    wrap(data, "get_worker_info", make)


@mutant("torch-optim-step-post-hook-runs-first", areas="modules", claims=OPT, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/119300",
        bug="Optimizer.register_step_post_hook registers the hook to run before the step, with the pre-hooks (issue "
            "119300: the step hook tests did not ascertain that hooks fire before/after the step).")
def _torch_step_post_hook_first() -> None:
    from torch.optim import Optimizer

    def make(orig: Any) -> Any:
        def register_step_post_hook(self: Any, hook: Any) -> Any:
            return self.register_step_pre_hook(lambda o, args, kwargs: hook(o, args, kwargs))
        return register_step_post_hook
    wrap(Optimizer, "register_step_post_hook", make)


@mutant("torch-optim-zero-grad-ignores-set-to-none", areas="modules", claims=OPT, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/pull/92731",
        bug="Optimizer.zero_grad sets the gradients to None whatever set_to_none says (PR 92731 flipped the default "
            "to True; a zero_grad that lost the argument would break set_to_none=False, whose zero gradients still "
            "step weight decay and momentum).")
def _torch_zero_grad_ignores_set_to_none() -> None:
    from torch.optim import Optimizer

    def make(orig: Any) -> Any:
        def zero_grad(self: Any, set_to_none: bool = True) -> None:
            orig(self, True)
        return zero_grad
    wrap(Optimizer, "zero_grad", make)


@mutant("torch-optim-add-param-group-no-defaults", areas="modules", claims=OPT, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/53712",
        bug="Optimizer.add_param_group appends a group after construction without filling in the optimizer's "
            "defaults for the options it does not give (issue 53712: 'Poor support of Optimizer.add_param_group', "
            "groups added later missing what the optimizer set up at construction).")
def _torch_add_param_group_no_defaults() -> None:
    import torch
    from torch.optim import Optimizer

    def make(orig: Any) -> Any:
        def add_param_group(self: Any, param_group: dict[str, Any]) -> None:
            if not self.param_groups:
                return orig(self, param_group)
            params = param_group["params"]
            group = dict(param_group)
            group["params"] = [params] if isinstance(params, torch.Tensor) else list(params)
            self.param_groups.append(group)
            return None
        return add_param_group
    wrap(Optimizer, "add_param_group", make)


@mutant("torch-lr-scheduler-last-lr-aliases-tensor-lr", areas="modules", claims=SCHED, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/163103",
        bug="LRScheduler keeps the groups' lr tensors themselves as _last_lr, so get_last_lr() aliases group['lr'] "
            "with tensor learning rates (issue 163103: schedulers 'incorrectly alias self._last_lr/get_last_lr(...) "
            "with group[\"lr\"] when using tensor lr').")
def _torch_last_lr_aliases() -> None:
    from torch.optim import lr_scheduler

    def make(orig: Any) -> Any:
        def _update_lr(self: Any, epoch: Any = None) -> None:
            orig(self, epoch)
            self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
        return _update_lr
    wrap(lr_scheduler.LRScheduler, "_update_lr", make)
