"""Every torch.distributed ReduceOp on every reducing collective, over 2 and 3 ranks, by construction.

``torch.distributed.ReduceOp`` documents SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR, AVG and
PREMUL_SUM; BAND/BOR/BXOR are "not available when using the NCCL backend", AVG "is only
available with the NCCL backend" and PREMUL_SUM "is available with the NCCL backend ...
and the XCCL backend" (its docstring in torch 2.13). :func:`grid` builds one
:class:`~.payloads.ReduceCase` per (replica count, collective, op, dtype, root) so each
combination is checked in every run, not when an example happens to draw it; hypothesis
only draws the values. :func:`check_outcome` judges one rank's outcome against numpy over
all ranks' inputs, and is applied to every rank that receives a result (``reduce``: only
``dst`` does, as documented; every rank is the ``dst`` of some case).

The values make the ops distinguishable: each rank's tensor starts with a fixed witness
block (:func:`witness`) on which the numpy results of any two ops differ for 2, 3 and 4
ranks (ties, negatives, distinct bits; ``tests/integration/test_distributed_modes.py``
checks it), so an implementation that applies one op for another fails on every rank it
does so, whatever hypothesis draws after the block (ties and negatives from [-4, 4]).
Imports no framework.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

import numpy as np

from ...checks import reductions
from ...core import evidence
from .handles import REPLICA_COUNTS
from .payloads import Outcome, ReduceCase

ARITHMETIC = ("sum", "product", "min", "max", "avg")
BITWISE = ("band", "bor", "bxor")
ALL_OPS = (*ARITHMETIC[:4], *BITWISE, "avg", "premul_sum")
REDUCING = ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor")
MOVING = ("all_gather", "broadcast")
PREMUL_FACTOR = 2.0  # a power of two: the premultiplication is exact, the sum keeps its bound
GLOO_PREMUL = "Cannot use ReduceOp.PREMUL_SUM with Gloo"
DOC_AVG = "AVG is only available with the NCCL backend, and only for NCCL versions 2.10 or later"
DOC_PREMUL = ("PREMUL_SUM is available with the NCCL backend (NCCL versions 2.11 or later) and the XCCL backend; "
              "it is used by calling ReduceOp.PREMUL_SUM(factor)")
DOC_BITWISE = "BAND, BOR, and BXOR reductions are not available when using the NCCL backend"
_NUMPY = {"band": np.bitwise_and.reduce, "bor": np.bitwise_or.reduce, "bxor": np.bitwise_xor.reduce}


def mode_of(op: str) -> str:
    return f"ReduceOp.{op.upper()}"


def witness(rank: int) -> np.ndarray:
    """Rank ``rank``'s witness block: any two ReduceOps give different results on it."""
    return np.array([rank + 5, -(rank + 1), 3, 1 << rank, 6 - 2 * rank, 12 - 4 * rank], dtype=np.int64)


def ops_for(dtype: str) -> tuple[str, ...]:
    """Bitwise ops on integer tensors only (on floats they have no meaning and torch refuses them)."""
    integral = dtype.startswith("int")
    return tuple(op for op in ALL_OPS if integral or op not in BITWISE)


def grid(seed: int, dtypes: Sequence[str] = ("float32", "int64"), counts: Sequence[int] = REPLICA_COUNTS,
         extra: int = 3) -> list[ReduceCase]:
    """One case per replica count x collective x applicable op x dtype x root (reduce's dst
    and broadcast's src range over every rank); ``extra`` drawn elements follow the witness."""
    rng = np.random.default_rng(seed)
    cases: list[ReduceCase] = []
    for n in counts:
        for dtype in dtypes:
            for api in (*REDUCING, *MOVING):
                ops: Iterable[str] = ops_for(dtype) if api in REDUCING else ("",)
                roots = range(n) if api in ("reduce", "broadcast") else (0,)
                for op in ops:
                    for root in roots:
                        cases.append(ReduceCase(api, _values(rng, n, api, dtype, extra), dtype, op=op, src=root))
    return cases


def _values(rng: np.random.Generator, n: int, api: str, dtype: str, extra: int) -> tuple[np.ndarray, ...]:
    """Per rank: witness + drawn integers in [-4, 4] (ties and negatives; products stay exact).
    Scatter APIs give each rank n chunks (rows), rank i receiving the reduction of row i."""
    chunks = n if api.startswith("reduce_scatter") else 1
    out = []
    for r in range(n):
        rows = [np.concatenate([witness(r), rng.integers(-4, 5, size=extra)]) for _ in range(chunks)]
        block = np.stack(rows) if chunks > 1 else rows[0]
        out.append(block.astype(np.float64) if not dtype.startswith("int") else block)
    return tuple(out)


def distinct_results(n: int) -> list[tuple[str, str]]:
    """Pairs of ops whose numpy results on the witness blocks of n ranks coincide (none expected)."""
    values = [witness(r) for r in range(n)]
    results = {op: _reference(op, values, "int64") for op in (*ARITHMETIC[:4], *BITWISE)}
    results["avg"] = reductions.reference("mean", values, "int64")
    return [(a, b) for a, b in combinations(results, 2) if np.array_equal(results[a], results[b])]


def _reference(op: str, values: Sequence[np.ndarray], dtype: str) -> np.ndarray:
    if op in _NUMPY:
        return np.asarray(_NUMPY[op](np.stack([np.asarray(v, np.int64) for v in values]), axis=0))
    return reductions.reference({"avg": "mean"}.get(op, op), values, dtype)


def receives(case: ReduceCase, rank: int) -> bool:
    """Whether ``rank`` gets a documented result: reduce gives one to ``dst`` only."""
    return rank < case.replicas and (case.api != "reduce" or rank == case.src)


def _inputs_for(case: ReduceCase, rank: int) -> list[np.ndarray]:
    """What rank ``rank``'s result reduces: every rank's tensor, or every rank's row ``rank``."""
    if case.api.startswith("reduce_scatter"):
        return [np.asarray(v)[rank] for v in case.values]
    return list(case.values)


def expected_refusal(case: ReduceCase, backend: str) -> str | None:
    """The documented refusal of this case on ``backend``, or None where a result is due."""
    integral = case.dtype.startswith("int")
    if backend == "gloo" and case.op == "premul_sum":
        return f"RuntimeError (the ReduceOp reference: {DOC_PREMUL}; gloo: '{GLOO_PREMUL}')"
    if backend == "gloo" and case.op == "avg" and integral:
        return "RuntimeError (AVG divides: the float quotient cannot be cast to the integer tensor)"
    if backend == "nccl" and case.op in BITWISE:
        return f"an error (the ReduceOp reference: {DOC_BITWISE})"
    return None


def check_outcome(case: ReduceCase, outcome: Outcome, rank: int, backend: str) -> None:
    """Rank ``rank``'s outcome of ``case`` against numpy over all ranks' inputs (or the
    documented refusal). Raises :class:`~pytest_dlconform.checks.reductions.ReductionMismatch`."""
    __tracebackhide__ = True
    where = f"{backend}, rank {rank} of {case.replicas}: {case.api}"
    label = f"{where}({mode_of(case.op) if case.op else ''}{_root(case)}) on {case.dtype}"
    refusal = expected_refusal(case, backend)
    if refusal is not None:
        if outcome.error is None or (refusal.startswith("RuntimeError") and not outcome.error.startswith("RuntimeError")):
            raise reductions.ReductionMismatch(f"{label} gave {outcome.results or outcome.error}, but should raise "
                                               f"{refusal}")
        return
    if outcome.error is not None:
        raise reductions.ReductionMismatch(f"{label} raised {outcome.error}, but is documented to work")
    reductions.check_dtype(outcome.info["dtype"], case.dtype, what=label)
    if case.api == "all_gather":
        reductions.check_gather_list(outcome.results, case.values, api=where, dtype=case.dtype)
        return
    if case.api == "broadcast":
        reductions.check_broadcast(outcome.results[0], case.values, src=case.src, api=where, dtype=case.dtype)
        return
    _check_reduced(case, np.asarray(outcome.results[0]), _inputs_for(case, rank), where)


def _check_reduced(case: ReduceCase, got: np.ndarray, inputs: list[np.ndarray], where: str) -> None:
    __tracebackhide__ = True
    api = f"{where}{_root(case)}"
    if case.op in BITWISE:
        expected = _reference(case.op, inputs, case.dtype)
        if got.shape != expected.shape or not np.array_equal(got.astype(np.int64), expected):
            bad = [i for i in range(min(got.size, expected.size)) if got.flat[i] != expected.flat[i]]
            raise reductions.ReductionMismatch(
                f"{api}({mode_of(case.op)}) over {case.replicas} ranks, {case.dtype}: got {got.tolist()}, but should "
                f"be {expected.tolist()} (numpy {case.op} over all ranks' inputs); elements {bad} differ")
        evidence.check(f"torch {case.api} {case.op}", observed=0.0, tolerance=0.0, basis="exact (bitwise)")
        return
    if case.op == "premul_sum":  # factor * x is exact (a power of two): a sum of the premultiplied inputs
        inputs = [np.asarray(v, np.float64) * PREMUL_FACTOR for v in inputs]
    op = {"avg": "mean", "premul_sum": "sum"}.get(case.op, case.op)
    try:
        reductions.check_reduction(got, inputs, op=op, dtype=case.dtype, api=api)
    except reductions.ReductionMismatch as exc:  # name the torch op, not the numpy one it is checked with
        raise reductions.ReductionMismatch(str(exc).replace(f"({op.upper()})", f"({mode_of(case.op)})", 1)) from None


def _root(case: ReduceCase) -> str:
    if case.api == "reduce":
        return f", dst={case.src}"
    if case.api == "broadcast":
        return f", src={case.src}"
    return ""


def modes_of(case: ReduceCase) -> tuple[str, ...]:
    """The claim's modes one checked case covers."""
    modes = [f"replicas={case.replicas}", case.api]
    if case.op:
        modes.append(mode_of(case.op))
    return tuple(modes)


__all__ = [
    "ALL_OPS", "BITWISE", "DOC_AVG", "DOC_PREMUL", "GLOO_PREMUL", "PREMUL_FACTOR", "REDUCING", "REPLICA_COUNTS",
    "check_outcome", "distinct_results", "expected_refusal", "grid", "mode_of", "modes_of", "ops_for", "receives",
    "witness",
]
