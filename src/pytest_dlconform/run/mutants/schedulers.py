"""Mutants of learning-rate schedulers: torch.optim.lr_scheduler (claim modules.torch.lr-schedulers).

Each patches one scheduler the way a reported bug broke it; the suite's per-step float64
references must notice (suites/modules/test_torch_lr_schedulers.py).
"""

from __future__ import annotations

from typing import Any

from . import mutant
from ._patch import wrap

CLAIMS = "modules.torch.lr-schedulers"


@mutant("torch-one-cycle-last-step-off-by-one", areas="modules", claims=CLAIMS, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/91765",
        bug="OneCycleLR ends its last phase at step total_steps instead of total_steps - 1, so the last "
            "step stops short of min_lr (issue 91765: a wrong learning rate at the last step; PR 91853 "
            "'a count was divided by an index').")
def _torch_one_cycle_off_by_one() -> None:
    from torch.optim import lr_scheduler

    def make(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            self._schedule_phases[-1]["end_step"] = float(self.total_steps)
            with lr_scheduler._enable_get_lr_call(self):
                for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
                    group["lr"] = lr
            self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
        return __init__
    wrap(lr_scheduler.OneCycleLR, "__init__", make)


@mutant("torch-warm-restarts-t-mult-ignored", areas="modules", claims=CLAIMS, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/pull/23952",
        bug="CosineAnnealingWarmRestarts restarts every T_0 steps whatever T_mult (the restart schedule that "
            "issue 23480 / PR 23952 found at the wrong steps after the 1.1 step-order change).")
def _torch_warm_restarts_t_mult_ignored() -> None:
    from torch.optim import lr_scheduler

    def make(orig: Any) -> Any:
        def step(self: Any, epoch: Any = None) -> None:
            mult, self.T_mult = self.T_mult, 1
            try:
                orig(self, epoch)
            finally:
                self.T_mult = mult
        return step
    wrap(lr_scheduler.CosineAnnealingWarmRestarts, "step", make)


@mutant("torch-plateau-cooldown-ignored", areas="modules", claims=CLAIMS, target="torch", select="torch",
        cite="https://github.com/pytorch/pytorch/issues/2545",
        bug="ReduceLROnPlateau counts bad epochs during the cooldown after a reduction, as if cooldown were 0 "
            "(issue 2545: counter-intuitive patience and cooldown, the off-by-one in how they count).")
def _torch_plateau_cooldown_ignored() -> None:
    from torch.optim import lr_scheduler

    def make(orig: Any) -> Any:
        def step(self: Any, metrics: Any, epoch: Any = None) -> None:
            self.cooldown = 0
            orig(self, metrics, epoch)
        return step
    wrap(lr_scheduler.ReduceLROnPlateau, "step", make)
