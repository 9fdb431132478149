"""Known, documented framework limits of single ops, found by running them.

Each entry names a check an op cannot pass for a framework reason and what goes wrong;
suites leave those ops out of the general properties (:func:`~.op_names` with
``without=...``) and check each limit itself as a claim.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from ..core import OpSpec

#: Checks that some ops cannot pass for a framework reason, found by running them; each op
#: lists the reason in OpSpec.limits. Suites leave those ops out with op_names(without=...)
#: and check the limit itself as a claim, instead of failing at random.
TF_FORWARD_MODE: Final = "tf-forward-mode"  # tf.autodiff.ForwardAccumulator over the op
TORCH_FLOAT64_GRADIENT: Final = "torch-float64-gradient"  # torch's backward is float64-accurate
TORCH_FORWARD_MODE: Final = "torch-forward-mode"  # torch.func.jvp / forward AD over the op
KNOWN_LIMITS: Final[dict[str, dict[str, str]]] = {
    "softsign": {TF_FORWARD_MODE: "ForwardAccumulator raises LookupError: gradient registry has no entry for: "
                                  "SoftsignGrad (TF 2.21)"},
    "hardsigmoid": {TORCH_FLOAT64_GRADIENT: "F.hardsigmoid's backward returns float32(1/6) = 0.1666666716 in "
                                            "float64, a relative error of 3e-8 (torch 2.13)"},
    # Found by the soak (issue 17, seed 312022087): logcumsumexp_jvp normalises every prefix by
    # the global maximum, so a prefix far below it loses its tangent (pytorch/pytorch#196705).
    "logcumsumexp": {TORCH_FORWARD_MODE: "torch.logcumsumexp's JVP drops the tangent of a prefix far below "
                                         "the axis maximum: d y_0/d x_0 = 1e-13 instead of 1 at x = [-59.8, 0] "
                                         "(torch 2.13, pytorch#196705)"},
}


def _with_limits(specs: list[OpSpec]) -> list[OpSpec]:
    return [replace(s, limits=KNOWN_LIMITS.get(s.name, {})) for s in specs]
