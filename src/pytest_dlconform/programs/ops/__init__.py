"""The op library: one :class:`~..records.OpRecord` per op, one module per family.

Families: :mod:`.elementwise` (smooth unary), :mod:`.binary`, :mod:`.reduction` (and ops
along an axis), :mod:`.shape` (data movement), :mod:`.contraction`, :mod:`.linalg`,
:mod:`.nn`, :mod:`.piecewise` (kinks: inputs only), :mod:`.pooling`, :mod:`.convolution`,
:mod:`.losses`, :mod:`.attention`, :mod:`.normalization`, :mod:`.indexing`,
:mod:`.ordering` and :mod:`.decompositions`. Shared helpers are in :mod:`.common`,
input-shape hints in :mod:`.hints`. Known framework bugs of single ops are not in the
records: every op is in every oracle, and a reproduced failure is pinned (to its tests, the
framework version and the symptom) in known_divergences.toml.

The order of :data:`RECORDS` is the order hypothesis shrinks towards and fixes which
programs a seed draws (and so the examples every suite runs): add a new op at the end of
its family, knowing that it changes the draws after it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from ..core import OpSpec
from ..records import OpRecord
from .attention import attention_records
from .binary import binary_records
from .contraction import contraction_records
from .convolution import convolution_records
from .decompositions import decomposition_records
from .elementwise import elementwise_records
from .hints import _with_hints
from .indexing import indexing_records
from .linalg import linalg_records
from .losses import loss_records
from .nn import nn_records
from .normalization import normalization_records
from .ordering import ordering_records
from .piecewise import piecewise_records
from .pooling import pooling_records
from .reduction import reduction_records
from .shape import shape_records

__all__ = ["OPS", "OWN_ID_OPS", "PIECEWISE_LINEAR", "RECORDS", "documented_limit", "excluded_dtypes", "op_names"]


def _hinted(records: list[OpRecord]) -> list[OpRecord]:
    """The records with the input-shape hints that make each op applicable to its first input."""
    return [replace(r, spec=s) for r, s in zip(records, _with_hints([r.spec for r in records]), strict=True)]


def op_names(*, without: Collection[str] = (), categories: Collection[str] | None = None,
             composed: bool = False) -> list[str]:
    """Names of the ops, less those named in ``without``, optionally only those in
    ``categories``, and with ``composed=True`` only those composed programs may draw
    (``OpSpec.composable``); pass the result as ``programs(ops=...)``."""
    return [name for name, s in OPS.items()
            if name not in without and (categories is None or s.category in categories)
            and (s.composable or not composed)]


#: Every op's record, in the order hypothesis shrinks towards (simplest first). The pooling,
#: convolution, loss, attention and normalisation families bring their own input hints.
RECORDS: dict[str, OpRecord] = {
    r.name: r
    for r in _hinted(
        elementwise_records() + binary_records() + reduction_records() + shape_records() + contraction_records()
        + linalg_records() + nn_records() + piecewise_records()
    ) + pooling_records() + convolution_records() + loss_records() + attention_records() + normalization_records()
    + _hinted(indexing_records() + ordering_records() + decomposition_records())
}
#: The ops that are linear between their kinks: their second derivative is zero away from them.
PIECEWISE_LINEAR: frozenset[str] = frozenset(name for name, r in RECORDS.items() if r.piecewise_linear)
#: The ops whose composed programs get test ids of their own (their records say why).
OWN_ID_OPS: tuple[str, ...] = tuple(name for name, r in RECORDS.items() if r.own_program_ids)
#: Every op's spec (how it is generated, rendered and referenced), by name.
OPS: dict[str, OpSpec] = {name: r.spec for name, r in RECORDS.items()}


def excluded_dtypes(framework: str, op: str) -> tuple[tuple[str, ...], str]:
    """The floating dtypes the framework's documentation excludes for the op's function and
    the quoted sentence (the record's ``dtype_exclusions``); ``((), "")`` where none."""
    return RECORDS[op].excluded_dtypes(framework) or ((), "")


def documented_limit(runtime: str, op: str, params: Mapping[str, Any]) -> str | None:
    """The quoted sentence of ``runtime``'s documentation that excludes the op at ``params``
    (the record's ``documented_limits``), or None where it documents no limit there."""
    return RECORDS[op].documented_limit(runtime, params)
