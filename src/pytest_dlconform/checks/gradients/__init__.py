"""Derivatives under test against finite differences, independent of any framework (numpy only).

- :func:`check_vjp` (``vjp.py``): a reverse-mode vector-Jacobian product against finite
  differences of f;
- :func:`check_jvp_vjp_consistency` (``consistency.py``): forward mode against reverse mode;
- :func:`check_hvp` (``hessian.py``): a Hessian-vector product against finite differences
  of the gradient.

They share ``steps.py`` (element units, directions, the step) and ``bounds.py`` (the
Richardson estimate, its error bound, the judgement of one direction).
"""

from __future__ import annotations

from ...core.exceptions import InconclusiveCheck
from .bounds import DEFAULT_RTOL as DEFAULT_RTOL
from .bounds import INCONCLUSIVE_FRACTION as INCONCLUSIVE_FRACTION
from .consistency import JVP as JVP
from .consistency import ConsistencyResult, check_jvp_vjp_consistency
from .hessian import GRADIENT_ULPS as GRADIENT_ULPS
from .hessian import HVP as HVP
from .hessian import HessianCheckResult, HessianMismatch, check_hvp
from .steps import EPS as EPS
from .steps import SCALE_FLOOR as SCALE_FLOOR
from .steps import STEP as STEP
from .steps import VJP as VJP
from .steps import Array as Array
from .steps import Function as Function
from .vjp import Evidence as Evidence
from .vjp import GradientCheckResult, GradientMismatch, check_vjp

__all__ = [
    "ConsistencyResult",
    "GradientCheckResult",
    "GradientMismatch",
    "HessianCheckResult",
    "HessianMismatch",
    "InconclusiveCheck",
    "check_hvp",
    "check_jvp_vjp_consistency",
    "check_vjp",
]
