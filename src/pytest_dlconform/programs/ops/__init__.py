"""The op table: every operation a generated program may use, one module per family.

Families: :mod:`.elementwise` (smooth unary), :mod:`.binary`, :mod:`.reduction` (and ops
along an axis), :mod:`.shape` (data movement), :mod:`.contraction`, :mod:`.linalg`,
:mod:`.nn` and :mod:`.piecewise` (kinks: inputs only). Shared helpers are in
:mod:`.common`, input-shape hints in :mod:`.hints`. Known framework bugs of single ops are
not in the table: every op is in every oracle, and a reproduced failure is pinned (to its
tests, the framework version and the symptom) in known_divergences.toml.

The order of :data:`OPS` is the order hypothesis shrinks towards and fixes which programs
a seed draws (and so the examples every suite runs): add a new op at the end of its
family, knowing that it changes the draws after it.
"""

from __future__ import annotations

from collections.abc import Collection

from ..core import OpSpec
from .binary import _binary_ops
from .contraction import _contraction_ops
from .elementwise import _smooth_ops
from .family_a import _family_a_ops
from .hints import _with_hints
from .linalg import _linalg_ops
from .nn import _nn_ops
from .normalization import _family_b_ops
from .piecewise import _piecewise_ops
from .reduction import _reduction_ops
from .shape import _shape_ops

__all__ = ["OPS", "op_names"]


def op_names(*, without: Collection[str] = (), categories: Collection[str] | None = None,
             composed: bool = False) -> list[str]:
    """Names of the ops, less those named in ``without``, optionally only those in
    ``categories``, and with ``composed=True`` only those composed programs may draw
    (``OpSpec.composable``); pass the result as ``programs(ops=...)``."""
    return [name for name, s in OPS.items()
            if name not in without and (categories is None or s.category in categories)
            and (s.composable or not composed)]


#: Every operation, in the order hypothesis shrinks towards (simplest first).
OPS: dict[str, OpSpec] = {
    s.name: s
    for s in _with_hints(
        _smooth_ops() + _binary_ops() + _reduction_ops() + _shape_ops() + _contraction_ops() + _linalg_ops()
        + _nn_ops() + _piecewise_ops()
    ) + _family_b_ops() + _with_hints(_family_a_ops())
}
