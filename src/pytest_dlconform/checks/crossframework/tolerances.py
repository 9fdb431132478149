"""Tolerances and the comparison of two results.

:func:`tolerances` gives the rounding bound of checks.numerics for the model's depth and
longest sum, times the case's conditioning that the reference measures layer by layer
(cancellation in products, division by a small spread in normalisations, saturated
softmax); :func:`compare` checks two results with them, gradients per named tensor against
the sum of their terms' magnitudes (:mod:`.magnitudes`). A comparison whose tolerance
exceeds :data:`UNJUDGED_RTOL` still runs (a gross error still fails) and is counted in the
evidence as ill-conditioned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...core import evidence
from ..numerics import (
    OP_ROUNDING,
    TF32_ROUNDOFF,
    Tolerance,
    ToleranceExceeded,
    accepted_wrong_answers,
    assert_close,
    difference,
    normwise_within,
    precision_of,
    rounding_terms,
    tolerance,
)
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
    return tol if factor <= 1.0 else Tolerance(tol.rtol * factor, f"{tol.why} * condition {factor:.3g}",
                                                  tol.atol * factor, tol.dtype)


def _tol(dtype: str, ops: int, reduction: int, tf32: bool) -> Tolerance:
    if not (tf32 and dtype == "float32"):
        return tolerance(dtype, ops=ops, reduction=reduction)
    # numerics.tolerance's model with TF32's unit round-off (products rounded to 10 bits).
    rtol = rounding_terms(ops, reduction) * TF32_ROUNDOFF
    return Tolerance(rtol, f"({OP_ROUNDING:g} * ops {ops} + reduction {reduction}) * u(tf32)={TF32_ROUNDOFF:.3g} "
                           "(TensorFloat-32 products on the GPU)", dtype="tf32")


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
# change results by tens of percent: beyond 10% a comparison cannot tell them from rounding
# alone. Such a comparison still runs (a gross error, a wrong sign, a lost tensor still fails)
# and is counted in the evidence as ill-conditioned.
UNJUDGED_RTOL = 0.1
LOOSE_NOTE = "comparisons with a tolerance above 0.1 (ill-conditioned case, still judged)"


def compare(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
            fwd: Tolerance, bwd: Tolerance, *, what: str, factors: Mapping[str, float] | None = None,
            label: str = "", grad_scales: Mapping[str, float] | None = None) -> None:
    """Every key of ``expected`` must be in ``actual`` and agree within its tolerance.

    Logits, loss and states are compared normwise each. Gradients are compared per named
    tensor: ``max|a_k - e_k| <= bwd * max(max|e_k|, S_k)``, where ``S_k`` (``grad_scales``,
    from :func:`magnitudes.gradient_magnitudes`) is the largest sum of absolute terms of
    tensor k's entries: a gradient is a sum over examples and positions, and where its
    terms cancel (a bias before saturated logits) its rounding error is relative to the
    terms, not to the sum. Without ``grad_scales`` the scale is the tensor's own largest
    entry. A failure names the tensor. ``factors`` multiplies the forward tolerance of
    single keys (:attr:`Reference.factors`; the saturated-softmax factor is in ``S_k``).
    No comparison is skipped for a large tolerance: it runs and is counted (:data:`LOOSE_NOTE`).
    ``label`` names the case in failure messages (evidence is kept per ``what``).
    """
    __tracebackhide__ = True
    missing = sorted(set(expected) - set(actual))
    if missing:
        raise ModelMismatch(f"{label}{what}: no result for {missing}, but both runs must give them")
    for key in sorted(k for k in expected if not k.startswith("grad/")):
        tol = _conditioned(fwd, (factors or {}).get(key, 1.0))
        _count_loose(tol)
        try:
            assert_close(actual[key], expected[key], tol, what=f"{label}{what}: {key}", name=f"{what}: {key.split('/')[0]}")
        except ToleranceExceeded as exc:
            raise ModelMismatch(str(exc)) from None
    grads = sorted(k for k in expected if k.startswith("grad/"))
    if grads:
        if grad_scales is None:  # no magnitudes: the softmax factor stands in for the terms' scale
            bwd = _conditioned(bwd, (factors or {}).get("grad", 1.0))
        _count_loose(bwd)
        _compare_gradients({k: actual[k] for k in grads}, {k: expected[k] for k in grads}, bwd, what, label,
                           grad_scales or {})


def _count_loose(tol: Tolerance) -> None:
    if tol.rtol <= UNJUDGED_RTOL:
        return
    recorder = evidence.current()
    if recorder is not None:
        recorder.notes[LOOSE_NOTE] = int(recorder.notes.get(LOOSE_NOTE, 0)) + 1


def _compare_gradients(actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], tol: Tolerance,
                       what: str, label: str, scales: Mapping[str, float]) -> None:
    """Per named gradient tensor, each against its own scale; the worst ratio is the evidence."""
    __tracebackhide__ = True
    ratios: dict[str, tuple[float, float, float]] = {}  # key -> (relative error, abs error, scale)
    vacuous: dict[str, list[str]] = {}  # key -> the canonical wrong answers its bound accepts
    for key, e in expected.items():
        a = np.asarray(actual[key])
        if a.shape != e.shape:
            raise ModelMismatch(f"{label}{what}: {key} has shape {a.shape}, but should be {e.shape}")
        d = difference(a, e)
        if not d.nonfinite_match:
            raise ModelMismatch(f"{label}{what}: {key}: {d.describe()}; non-finite values must match the other run's")
        scale = max(d.scale, float(scales.get(key, 0.0)))
        rel = d.relative(scale)
        ratios[key] = (rel, d.error, scale)
        if rel <= tol.rtol:
            accepted = accepted_wrong_answers(e, normwise_within(e, tol.rtol, scale),
                                              precision_of(a, tol.dtype))
            if accepted:
                vacuous[key] = accepted
    worst = max(ratios, key=lambda k: ratios[k][0])
    rel, err, scale = ratios[worst]
    if not rel <= tol.rtol:
        evidence.check(f"{what}: gradients", observed=rel, tolerance=tol.rtol, basis=tol.why, worst=worst,
                       tensors=len(ratios))
        bad = sorted(k for k, v in ratios.items() if not v[0] <= tol.rtol)
        raise ModelMismatch(
            f"{label}{what}: gradients: {worst}: max|actual - expected| / max(max|expected|, sum of |terms|) = "
            f"{rel:.3e}, but should be <= {tol.rtol:.3e} [{tol.why}]; worst in {worst}: max abs error {err:.3e}, "
            f"scale {scale:.3e}; tensors outside their bound: {bad}"
        )
    for key, accepted in sorted(vacuous.items()):  # these tensors' bounds could not fail
        evidence.inconclusive(f"{what}: gradients", reason=f"the bound accepts {', '.join(accepted)}",
                              bound=tol.rtol, scale=ratios[key][2], tensor=key)
    held = {k: v for k, v in ratios.items() if k not in vacuous}
    if held:
        worst = max(held, key=lambda k: held[k][0])
        evidence.check(f"{what}: gradients", observed=held[worst][0], tolerance=tol.rtol, basis=tol.why,
                       worst=worst, tensors=len(held))
