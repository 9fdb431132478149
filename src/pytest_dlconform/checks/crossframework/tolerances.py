"""Tolerances and the comparison of two results.

:func:`tolerances` gives the rounding bound of checks.numerics for the model's depth and
longest sum, times the case's conditioning that the reference measures layer by layer
(cancellation in products, division by a small spread in normalisations, saturated
softmax); :func:`compare` checks two results with them. A comparison whose tolerance
would exceed :data:`UNJUDGED_RTOL` is counted in the evidence, not judged: the case is too
ill-conditioned for the dtype, and no tolerance there could catch a bug.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import evidence
from ..numerics import CONDITION, TF32_ROUNDOFF, Tolerance, ToleranceExceeded, assert_close, tolerance
from .architectures import Case, shapes


class ModelMismatch(ToleranceExceeded):
    """Two runs of the same model disagree on a quantity they must share."""


def tolerances(case: Case, dtype: str, *, tf32: bool = False, condition: float = 1.0) -> tuple[Tolerance, Tolerance]:
    """(forward, backward) normwise tolerances of one framework's result against float64.

    ops: about four roundings per layer (product, bias, activation or normalisation
    steps) plus the loss's softmax; reduction: the longest sum in the forward pass (a
    fan-in, a batch-norm over N*H*W, the batch mean of the loss) and, backwards, the
    weight-gradient sums over batch and positions. ``tf32``: float32 products on a GPU
    in TensorFloat-32 (TensorFlow's default for matmul and conv, torch's for cuDNN conv).
    ``condition`` (from :func:`reference`) multiplies both: the backward pass goes through
    the same layers in reverse, dividing by the same normalisation spreads.
    """
    arch = case.arch
    depth = sum(layer.kind != "flatten" for layer in arch.layers)
    fwd_red, bwd_red = case.batch, case.batch
    for layer, s in zip(arch.layers, shapes(arch)):
        positions = int(np.prod(s[:-1])) if len(s) == 3 else 1
        if layer.kind == "dense":
            fwd_red = max(fwd_red, s[-1])
            bwd_red = max(bwd_red, layer.units, case.batch)
        elif layer.kind == "conv":
            fwd_red = max(fwd_red, layer.kernel**2 * s[-1])
            bwd_red = max(bwd_red, layer.kernel**2 * layer.units, case.batch * positions)
        elif layer.kind in ("layernorm", "batchnorm"):
            n = case.batch * positions if layer.kind == "batchnorm" else s[-1]
            fwd_red, bwd_red = max(fwd_red, n), max(bwd_red, n)
    ops = 4 * depth + 4
    return (_conditioned(_tol(dtype, ops, fwd_red, tf32), condition),
            _conditioned(_tol(dtype, 2 * ops, bwd_red, tf32), condition))


def _conditioned(tol: Tolerance, factor: float) -> Tolerance:
    return tol if factor <= 1.0 else Tolerance(tol.rtol * factor, f"{tol.why} * condition {factor:.3g}")


def _tol(dtype: str, ops: int, reduction: int, tf32: bool) -> Tolerance:
    if not (tf32 and dtype == "float32"):
        return tolerance(dtype, ops=ops, reduction=reduction)
    rtol = CONDITION * (ops + reduction) * TF32_ROUNDOFF
    return Tolerance(rtol, f"{CONDITION:g} * (ops {ops} + reduction {reduction}) * u(tf32)={TF32_ROUNDOFF:.3g} "
                           "(TensorFloat-32 products on the GPU)")


def tf32_in_use(framework: str, module: Any, case: Case, device_kind: str) -> bool:
    """Whether float32 products of ``case`` may run in TensorFloat-32 on this device: the
    frameworks' own switches (checks.tf32: TensorFlow on by default on Ampere+ GPUs; torch
    cuDNN convolutions on by default, matmul off by default, newer fp32_precision API first)."""
    if device_kind == "cpu":
        return False
    from ..tf32 import tf32_reason  # reads torch's fp32_precision settings, or the legacy allow_tf32 ones

    del module  # the switches are read from the loaded framework itself
    return tf32_reason(framework, conv=any(layer.kind == "conv" for layer in case.arch.layers)) is not None


# A port's structural mistakes (a transposed kernel, another flatten order, a missing term)
# change results by tens of percent: beyond 10% a comparison cannot tell them from rounding.
# Such a case is too ill-conditioned for the dtype; the comparison is counted, not judged.
UNJUDGED_RTOL = 0.1


def compare(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
            fwd: Tolerance, bwd: Tolerance, *, what: str, factors: Mapping[str, float] | None = None,
            label: str = "") -> None:
    """Every key of ``expected`` must be in ``actual`` and agree within its tolerance.

    Logits, loss and states are compared normwise each; the gradients as one vector
    (input and all weights), normwise against the largest expected gradient entry: a
    gradient is a sum over examples and positions, and where those terms cancel (a bias
    before saturated logits) its rounding error is relative to the terms, not to the sum,
    so a per-tensor relative comparison would judge noise. A failure names the tensor.
    ``factors`` multiplies the forward tolerance of single keys (:attr:`Reference.factors`).
    ``label`` names the case in failure messages (evidence is kept per ``what``).
    """
    __tracebackhide__ = True
    missing = sorted(set(expected) - set(actual))
    if missing:
        raise ModelMismatch(f"{label}{what}: no result for {missing}, but both runs must give them")
    for key in sorted(k for k in expected if not k.startswith("grad/")):
        tol = _conditioned(fwd, (factors or {}).get(key, 1.0))
        if _judged(tol, what):
            try:
                assert_close(actual[key], expected[key], tol, what=f"{label}{what}: {key}", name=f"{what}: {key.split('/')[0]}")
            except ToleranceExceeded as exc:
                raise ModelMismatch(str(exc)) from None
    grads = sorted(k for k in expected if k.startswith("grad/"))
    bwd = _conditioned(bwd, (factors or {}).get("grad", 1.0))
    if grads and _judged(bwd, what):
        _compare_gradients({k: actual[k] for k in grads}, {k: expected[k] for k in grads}, bwd, what, label)


def _judged(tol: Tolerance, what: str) -> bool:
    if tol.rtol <= UNJUDGED_RTOL:
        return True
    recorder = evidence.current()
    if recorder is not None:
        recorder.notes["unjudged comparisons (ill-conditioned case)"] = (
            int(recorder.notes.get("unjudged comparisons (ill-conditioned case)", 0)) + 1)
    return False


def _compare_gradients(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], tol: Tolerance,
                       what: str, label: str) -> None:
    __tracebackhide__ = True
    scale = max(float(np.max(np.abs(v), initial=0.0)) for v in expected.values())
    errors = {}
    for key, e in expected.items():
        a = np.asarray(actual[key], dtype=np.float64)
        if a.shape != e.shape:
            raise ModelMismatch(f"{label}{what}: {key} has shape {a.shape}, but should be {e.shape}")
        if not np.all(np.isfinite(a)):
            raise ModelMismatch(f"{label}{what}: {key} has non-finite entries, the other run's are finite")
        errors[key] = float(np.max(np.abs(a - e), initial=0.0))
    worst = max(errors, key=lambda k: errors[k])
    rel = errors[worst] / scale if scale > 0 else (0.0 if errors[worst] == 0 else float("inf"))
    evidence.check(f"{what}: gradients", observed=rel, tolerance=tol.rtol, basis=tol.why, worst=worst)
    if not rel <= tol.rtol:
        raise ModelMismatch(
            f"{label}{what}: gradients: max|actual - expected| / max|expected gradient| = {rel:.3e}, but should be <= "
            f"{tol.rtol:.3e} [{tol.why}]; worst in {worst}: max abs error {errors[worst]:.3e}, largest gradient "
            f"entry {scale:.3e}"
        )
