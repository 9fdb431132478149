"""Oracles for cross-replica reductions and for synchronous data-parallel training steps.

Reductions are compared with numpy on the per-replica inputs, element by element, with
the classic error bound of floating-point summation (Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., eq. 4.4): whatever the order or tree of the additions, a
computed sum of n terms satisfies |fl(s) - s| <= gamma_{n-1} * sum|x_i|, with
gamma_k = k*u / (1 - k*u) and u the unit round-off of the dtype. A mean adds one
rounding for the division (or for the prescaling that torch's AVG does); a product of
n factors has |fl(p) - p| <= gamma_{n-1} |p| (Higham, 3.1). The numpy reference is
computed in float64 and carries the same bound in float64 round-off; the two add. MAX,
MIN, gathers and broadcasts move values without arithmetic: bitwise equality.

Where exactness is expected it is asserted: integer dtypes, and float inputs that hold
integers small enough that every partial sum (or product) is representable; a mean is
exact then only if the replica count is a power of two.

Training: a distributed run is compared with a single-device run of the same model,
normwise per weight tensor, with a tolerance from the dtype and the depth of the
computation (:func:`pytest_dlconform.checks.numerics.tolerance`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core import evidence
from .numerics import (
    UNIT_ROUNDOFF,
    Tolerance,
    accepted_wrong_answers,
    difference,
    gamma,
    normwise_within,
    precision_of,
    tolerance,
)

OPS = ("sum", "mean", "max", "min", "product")
MANTISSA_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


class ReductionMismatch(AssertionError):
    """A reduction, gather or broadcast differs from numpy on the per-replica inputs."""


class ReplicaMismatch(AssertionError):
    """Replicas that must hold the same values do not."""


class StepMismatch(AssertionError):
    """A distributed training run ended with weights other than the single-device run's."""


class SplitMismatch(AssertionError):
    """A framework split a batch or a dataset across replicas other than it documents."""


def _is_int(dtype: str) -> bool:
    return np.dtype(dtype).kind in "iu" if dtype not in MANTISSA_BITS else False


def _as_f64(values: Sequence[np.ndarray], dtype: str) -> list[np.ndarray]:
    """The inputs as the framework saw them (rounded to ``dtype``), in float64."""
    if dtype == "bfloat16":
        # numpy has no bfloat16: round to 8 significant bits, ties to even, like the cast.
        return [_round_bits(np.asarray(v, np.float64), 8) for v in values]
    return [np.asarray(v).astype(dtype).astype(np.float64) for v in values]


def _as_dtype(values: Sequence[np.ndarray], dtype: str) -> list[np.ndarray]:
    """The inputs as the framework holds them: rounded to a float dtype, or exact integers."""
    if _is_int(dtype):
        return [np.asarray(v, dtype=np.int64) for v in values]
    return _as_f64(values, dtype)


def _round_bits(x: np.ndarray, bits: int) -> np.ndarray:
    mant, exp = np.frexp(x)
    return np.ldexp(np.round(mant * 2.0**bits) / 2.0**bits, exp)


def _terms(values: Sequence[np.ndarray], axis: int | None) -> tuple[np.ndarray, int]:
    """Per output element: the sum of the magnitudes of its terms, and how many there are."""
    data = np.stack(values) if axis is None else np.concatenate(values, axis=axis)
    red = 0 if axis is None else axis
    return np.abs(data).sum(red), data.shape[red]


# numpy's reduction for each op; typed as plain callables because numpy's overloaded stubs do not unify into one type
_NUMPY_REDUCTION: dict[str, Callable[..., Any]] = {"sum": np.sum, "max": np.max, "min": np.min, "product": np.prod}


def reference(op: str, values: Sequence[np.ndarray], dtype: str, axis: int | None = None) -> np.ndarray:
    """numpy's reduction of the per-replica values across replicas (and along ``axis``
    within each replica, as tf.distribute.Strategy.reduce does: a MEAN along an axis is
    the mean over all rows of all replicas). Integers exactly; floats in float64."""
    if _is_int(dtype):
        ints = [np.asarray(v, dtype=np.int64) for v in values]
        data = np.stack(ints) if axis is None else np.concatenate(ints, axis=axis)
        red = 0 if axis is None else axis
        if op == "mean":
            return data.sum(red).astype(np.float64) / data.shape[red]
        return _NUMPY_REDUCTION[op](data, axis=red)
    floats = _as_f64(values, dtype)
    data = np.stack(floats) if axis is None else np.concatenate(floats, axis=axis)
    red = 0 if axis is None else axis
    if op == "mean":
        return data.sum(red) / data.shape[red]
    return _NUMPY_REDUCTION[op](data, axis=red)


def error_bound(op: str, values: Sequence[np.ndarray], dtype: str, axis: int | None = None) -> tuple[np.ndarray, str]:
    """Elementwise bound on |computed - reference|; zeros where the result must be exact."""
    ref = reference(op, values, dtype, axis)
    if op in ("max", "min") or (_is_int(dtype) and op != "mean"):
        return np.zeros_like(ref, dtype=np.float64), "exact (no rounding)"
    if _is_int(dtype):  # an integer mean: exact integer sum, then one float64 division
        if _power_of_two(_count(values, axis)):
            return np.zeros_like(ref, dtype=np.float64), "exact (integer sum / power of two)"
        u64 = UNIT_ROUNDOFF["float64"]
        return 2 * u64 * np.abs(ref), "one float64 division (2u|mean|)"
    floats = _as_f64(values, dtype)
    magnitude, n = _terms(floats, axis)
    u, u64 = UNIT_ROUNDOFF[dtype], UNIT_ROUNDOFF["float64"]
    if _exact(op, floats, dtype, axis, n):
        return np.zeros_like(ref, dtype=np.float64), "exact (integer-valued inputs, representable partial results)"
    if op == "sum":
        return ((gamma(n - 1, u) + gamma(n - 1, u64)) * magnitude,
                f"(gamma_{n - 1}(u_{dtype}) + gamma_{n - 1}(u_f64)) * sum|x_i|")
    if op == "mean":
        bound = (gamma(n + 1, u) + gamma(n + 1, u64)) * magnitude / n
        return bound, f"(gamma_{n + 1}(u_{dtype}) + gamma_{n + 1}(u_f64)) * sum|x_i| / {n}"
    bound = (gamma(n - 1, u) + gamma(n - 1, u64)) * np.abs(ref)
    return bound, f"(gamma_{n - 1}(u_{dtype}) + gamma_{n - 1}(u_f64)) * |prod x_i|"


def _count(values: Sequence[np.ndarray], axis: int | None) -> int:
    return len(values) if axis is None else sum(np.asarray(v).shape[axis] for v in values)


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _exact(op: str, floats: Sequence[np.ndarray], dtype: str, axis: int | None, n: int) -> bool:
    data = np.stack(floats) if axis is None else np.concatenate(floats, axis=axis)
    if not np.all(data == np.round(data)):
        return False
    limit = 2.0 ** MANTISSA_BITS[dtype]
    red = 0 if axis is None else axis
    if op == "product":
        nonzero = np.where(data == 0, 1.0, np.abs(data))
        return bool(np.all(np.prod(nonzero, axis=red) <= limit))
    fits = bool(np.all(np.abs(data).sum(axis=red) <= limit))
    return fits if op == "sum" else fits and _power_of_two(n)


def check_reduction(actual: np.ndarray, values: Sequence[np.ndarray], *, op: str, dtype: str, api: str,
                    axis: int | None = None, expected_dtype: str | None = None) -> float:
    """``actual`` (one replica's result of ``api`` with ``op``) against numpy on ``values``.

    Returns the worst ratio |actual - reference| / bound (0 where exact and equal)."""
    __tracebackhide__ = True
    what = f"{api}({op.upper()}) over {len(values)} replica(s), {dtype}" + (f", axis={axis}" if axis is not None else "")
    ref = reference(op, values, dtype, axis)
    got = np.asarray(actual)
    if got.shape != ref.shape:
        raise ReductionMismatch(f"{what}: result shape {got.shape}, but should be {ref.shape} [numpy reduction of the inputs]")
    if expected_dtype is not None and str(got.dtype) != expected_dtype:
        raise ReductionMismatch(f"{what}: result dtype {got.dtype}, but should be {expected_dtype}")
    bound, basis = error_bound(op, values, dtype, axis)
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    bad = ~(diff <= bound)  # NaN differences count as failures
    exact = not np.any(bound)
    worst = float(np.max(np.where(bound > 0, diff / np.where(bound > 0, bound, 1.0),
                                  np.where(diff > 0, np.inf, 0.0)))) if diff.size else 0.0
    evidence.check(f"{api} {op}", observed=float(np.max(diff)) if exact and diff.size else worst,
                   tolerance=0.0 if exact else 1.0, basis=basis)
    if np.any(bad):
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ReductionMismatch(
            f"{what}: element {list(idx)} = {got[idx]!r}, but should be {ref[idx]!r} (numpy); "
            f"|difference| {diff[idx]:.3e} exceeds the bound {bound[idx]:.3e} [{basis}]; "
            f"{int(np.sum(bad))} of {bad.size} elements wrong"
        )
    return worst


def check_gather(actual: np.ndarray, values: Sequence[np.ndarray], *, axis: int, api: str, dtype: str) -> None:
    """A gather is the per-replica values concatenated along ``axis`` in replica order, bitwise."""
    __tracebackhide__ = True
    expected = np.concatenate(_as_dtype(values, dtype), axis=axis)
    _check_bitwise(np.asarray(actual), expected, f"{api}(axis={axis}) over {len(values)} replica(s), {dtype}")


def check_gather_list(actual: Sequence[np.ndarray], values: Sequence[np.ndarray], *, api: str, dtype: str) -> None:
    """A list-valued gather (torch.distributed.all_gather): entry i is rank i's value, bitwise."""
    __tracebackhide__ = True
    what = f"{api} over {len(values)} rank(s), {dtype}"
    if len(actual) != len(values):
        raise ReductionMismatch(f"{what}: {len(actual)} gathered tensors, but should be one per rank ({len(values)})")
    _check_bitwise(np.stack([np.asarray(a) for a in actual]), np.stack(_as_dtype(values, dtype)), what)


def check_broadcast(actual: np.ndarray, values: Sequence[np.ndarray], *, src: int, api: str, dtype: str) -> None:
    """A broadcast gives every rank the source rank's value, bitwise."""
    __tracebackhide__ = True
    _check_bitwise(np.asarray(actual), _as_dtype(values, dtype)[src], f"{api}(src={src}) over {len(values)} rank(s), {dtype}")


def _check_bitwise(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    __tracebackhide__ = True
    if got.shape != expected.shape:
        raise ReductionMismatch(f"{what}: result shape {got.shape}, but should be {expected.shape}")
    equal = got.astype(np.float64) == expected.astype(np.float64)
    both_nan = np.isnan(got.astype(np.float64)) & np.isnan(expected.astype(np.float64))
    bad = ~(equal | both_nan)
    diff = difference(got, expected).max_abs
    evidence.check(what.split("(")[0], observed=diff if np.any(bad) else 0.0, tolerance=0.0)
    if np.any(bad):
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ReductionMismatch(f"{what}: element {list(idx)} = {got[idx]!r}, but should be {expected[idx]!r} "
                                f"(values move without arithmetic: bitwise equality)")


def check_replicas_agree(copies: Sequence[Sequence[np.ndarray]], *, what: str, names: Sequence[str] | None = None) -> None:
    """Every replica (or rank) holds bitwise the same tensors as the first one."""
    __tracebackhide__ = True
    first = copies[0]
    for r, other in enumerate(copies[1:], start=1):
        if len(other) != len(first):
            raise ReplicaMismatch(f"{what}: replica {r} holds {len(other)} tensors, replica 0 holds {len(first)}")
        for i, (a, b) in enumerate(zip(first, other)):
            a, b = np.asarray(a), np.asarray(b)
            label = names[i] if names else f"tensor {i}"
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
                diff = difference(b, a).max_abs if a.shape == b.shape else math.inf
                raise ReplicaMismatch(f"{what}: replica {r}'s {label} differs from replica 0's "
                                      f"(shape {b.shape} vs {a.shape}, max |difference| {diff:.3e}); "
                                      "synchronous replicas must hold identical copies")
    evidence.note(**{f"{what} replicas": len(copies)})


def step_tolerance(dtype: str, *, layers: int, steps: int, batch: int, device: str = "cpu",
                   framework: str | None = None) -> Tolerance:
    """Tolerance for weights after ``steps`` synchronous steps of a ``layers``-deep dense
    network on global batches of at most ``batch`` rows, distributed vs one device.

    The two runs differ only in how the batch gradient is summed (per replica, then across
    replicas) and in where the loss is scaled: per step a gradient is a sum of ``batch``
    terms, each through forward and backward of every layer (matmul, bias, activation:
    three roundings each way), and the optimizer update adds at most six more (Adam's
    moments, square root and division); rounding errors of successive steps add up. The
    layers are matmuls: on a GPU, TensorFlow runs float32 ones in TF32 by default."""
    return tolerance(dtype, ops=steps * (6 * layers + 6), reduction=max(1, batch), device=device,
                     framework=framework, matmul=True)


def check_weights(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], tol: Tolerance, *, what: str,
                  names: Sequence[str] | None = None) -> float:
    """Normwise comparison per weight tensor: max|a - e| / max|e| <= tol.rtol; returns the worst."""
    __tracebackhide__ = True
    if len(actual) != len(expected):
        raise StepMismatch(f"{what}: {len(actual)} weight tensors, but the single-device run has {len(expected)}")
    worst, worst_name, held = 0.0, "", 0
    for i, (a, e) in enumerate(zip(actual, expected)):
        a, e = np.asarray(a), np.asarray(e, np.float64)
        label = names[i] if names else f"weight {i}"
        if a.shape != e.shape:
            raise StepMismatch(f"{what}: {label} has shape {a.shape}, but should be {e.shape}")
        d = difference(a, e)
        rel = d.relative()
        if not rel <= tol.rtol:
            evidence.check(what, observed=rel, tolerance=tol.rtol, basis=tol.why, tensor=label)
            if not d.nonfinite_match:
                raise StepMismatch(f"{what}: {label}: {d.describe()}; non-finite values must match the single-device "
                                   "run's")
            raise StepMismatch(
                f"{what}: {label} max|distributed - single device| / max|single device| = {rel:.3e}, "
                f"but should be <= {tol.rtol:.3e} [{tol.why}]; max abs difference {d.error:.3e} at scale "
                f"{d.scale:.3e} (largest at element {list(d.at or ())})"
            )
        accepted = accepted_wrong_answers(e, normwise_within(e, tol.rtol),
                                          precision_of(a, tol.dtype))
        if accepted:  # this tensor's bound could not fail: inconclusive, not part of what held
            evidence.inconclusive(what, reason=f"the bound accepts {', '.join(accepted)}", bound=tol.rtol,
                                  scale=d.scale, tensor=label)
            continue
        held += 1
        if rel >= worst:
            worst, worst_name = rel, label
    if held or not actual:
        evidence.check(what, observed=worst, tolerance=tol.rtol, basis=tol.why, tensor=worst_name)
    return worst


def split_sizes(batch: int, replicas: int) -> list[int]:
    """Rows per replica when tf.distribute splits a global batch: as even as possible, the
    first ``batch mod replicas`` replicas taking one row more (in row order)."""
    q, r = divmod(batch, replicas)
    return [q + 1] * r + [q] * (replicas - r)


def check_batch_split(sizes_per_step: Sequence[Sequence[int]], batches: Sequence[int], *, what: str) -> None:
    """tf.distribute's rebatching: each global batch is split into per-replica batches that
    add up to it, differ in size by at most one row, the first replicas taking the extra rows."""
    __tracebackhide__ = True
    for step, (sizes, batch) in enumerate(zip(sizes_per_step, batches)):
        if list(sizes) != split_sizes(batch, len(sizes)):
            raise SplitMismatch(f"{what}: step {step} split a global batch of {batch} rows into {list(sizes)} "
                                f"per replica, but should split it into {split_sizes(batch, len(sizes))} "
                                "(as even as possible, the first replicas taking the extra rows)")
    if len(sizes_per_step) != len(batches):
        raise SplitMismatch(f"{what}: {len(sizes_per_step)} steps, but the dataset has {len(batches)} global batches")


def check_sampler_shards(shards: Sequence[Sequence[int]], *, dataset_len: int, drop_last: bool, what: str) -> None:
    """DistributedSampler's documented contract: every rank gets the same number of indices;
    drop_last=False adds extra (repeated) indices so that every index appears, drop_last=True
    drops the tail so that no index appears twice."""
    __tracebackhide__ = True
    n = len(shards)
    per_rank = dataset_len // n if drop_last else -(-dataset_len // n)
    counts = [len(s) for s in shards]
    if any(c != per_rank for c in counts):
        raise SplitMismatch(f"{what}: ranks got {counts} indices of {dataset_len}, but each should get {per_rank} "
                            f"(drop_last={drop_last})")
    flat = [i for s in shards for i in s]
    if any(not 0 <= i < dataset_len for i in flat):
        raise SplitMismatch(f"{what}: index out of range 0..{dataset_len - 1} in {flat}")
    if drop_last and len(set(flat)) != len(flat):
        raise SplitMismatch(f"{what}: drop_last=True, but indices repeat: {sorted(flat)}")
    if not drop_last and set(flat) != set(range(dataset_len)):
        missing = sorted(set(range(dataset_len)) - set(flat))
        raise SplitMismatch(f"{what}: drop_last=False, but indices {missing} of the dataset were never used")


def check_dtype(got: str, expected: str, *, what: str) -> None:
    """The result keeps the documented dtype (the input's, unless the claim says otherwise)."""
    __tracebackhide__ = True
    if got != expected:
        raise ReductionMismatch(f"{what}: result dtype {got}, but should be {expected}")
