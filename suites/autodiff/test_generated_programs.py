"""Reverse mode on generated programs: against finite differences, forward mode, a float32
run, other memory layouts and the other framework.

Programs come from :mod:`pytest_dlconform.programs` (elementwise ops, activations with all
their parameters, reductions, linear algebra, contractions), inputs from its regimes
(unit, wide, saturating, tiny, mixed, dyadic). The oracles:

* :func:`checks.gradients.check_vjp`: central differences in float64 along the gradient's
  own directions and random ones (O(k) evaluations, scale-aware, catches 0.1% errors);
* :func:`checks.gradients.check_jvp_vjp_consistency`: v.(J u) == (J^T v).u;
* float64 results of another run (layout, framework) within a float64 round-off bound.

Every op is in every property. The ops of :data:`OWN_IDS` (each with a known divergence on
some stack, pinned in known_divergences.toml; their records' ``own_program_ids`` say which)
get test ids of their own, ``[...-with-OP]``,
where every program starts with that op and composes it with the others; the general ids
(``[...-general]``) draw programs of the other ops. A pin then names only that op's ids,
and a failure of any other op in the same property stays a failure. Both run on every stack.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import (
    HarnessError,
    InconclusiveCheck,
    assert_close,
    budget,
    check_jvp_vjp_consistency,
    check_vjp,
    evidence,
    tolerance,
)
from pytest_dlconform.api.programs import (
    LAYOUTS,
    OWN_ID_OPS,
    ProgramCase,
    gradient_error_bound,
    op_names,
    program_cases,
)
from pytest_dlconform.api.tracing import assert_within

#: Ops a known divergence (on some stack) makes fail wherever they appear: each gets ids of
#: its own in every property, so that a pin names only them (the op records'
#: ``own_program_ids``: torch hardsigmoid's float64 backward, torch logcumsumexp's JVP,
#: TensorFlow softsign's forward mode; docs/findings.md).
OWN_IDS = OWN_ID_OPS
GENERAL = "general"
GROUPS = [GENERAL, *(f"with-{op}" for op in OWN_IDS)]
OWN_ID_EXAMPLES = 5  # ci examples of an op's own ids: one op to explore, composed with the rest
_OTHERS = op_names(without=OWN_IDS, composed=True)
CASES = {group: program_cases(max_ops=4, n_inputs=(1, 2), max_side=5, ops=_OTHERS,
                              start=None if group == GENERAL else group.removeprefix("with-"))
         for group in GROUPS}


def _examples(group: str, general: int) -> int:
    return general if group == GENERAL else min(general, OWN_ID_EXAMPLES)


def _funcs(adapter, case: ProgramCase, device: str, dtype: str = "float64", layout: str = "contiguous"):
    fn = case.program.build(adapter.name, dtype, layout)
    f = lambda xs: adapter.call(fn, xs, dtype, device)
    vjp = lambda xs, w: adapter.vjp(fn, xs, w, dtype, device)
    jvp = lambda xs, us: adapter.jvp(fn, xs, us, dtype, device)
    return f, vjp, jvp


def _program_tolerance(case: ProgramCase, dtype: str, w: np.ndarray | None = None) -> object:
    """Relative part from the op count; with the cotangent ``w``, the absolute floor of two
    independently computed gradients: each entry of each errs by at most
    ``derivative_error_bound * ||w||_1`` (the rounding of the derivative's own computation,
    which stays when the gradient is zero or cancels)."""
    size = max(int(np.prod(s)) if s else 1 for s in case.program.shapes)
    tol = tolerance(dtype, ops=2 * len(case.program.ops) + 1, reduction=size)
    if w is None:
        return tol
    bound = case.program.derivative_error_bound(case.inputs, dtype)
    norm = float(np.sum(np.abs(w)))
    floor, why = 2 * bound * norm, f"2 runs x derivative_error_bound {bound:.3g} x ||w||_1"
    try:
        # The fuller model where it applies: it adds f' computed from the rounded output
        # (tanh's 1 - y**2 from a rounded y: explore seed 86829192 had two float64 gradients
        # 6.3e-18 apart against a 2.2e-20 floor) and reverse mode's accumulation.
        b, flush = gradient_error_bound(case.program, case.inputs, dtype)
    except ValueError:  # a non-linear op reads a computed register: not modelled there
        return tol.with_floor(floor, why)
    full = 2 * (b * norm + flush)
    return tol.with_floor(max(floor, full), why if floor >= full else f"2 runs x gradient_error_bound "
                          f"(B {b:.3g} x ||w||_1 + floor {flush:.3g})")


@pytest.mark.claim("autodiff.gradient.finite-differences")
@pytest.mark.parametrize("group", GROUPS)
def test_reverse_mode_matches_finite_differences(dl_framework, dl_device, group):
    # Every example checks the forward value against the float64 numpy reference (two
    # float64 implementations, each within Program.error_bound of the exact result); a point
    # where finite differences cannot judge (the derivative drowns in f's rounding, tanh deep
    # in saturation) is counted, and a test where most are inconclusive is a harness error.
    counts = {"checks": 0, "inconclusive": 0}

    @budget(_examples(group, 20))
    @given(data=st.data(), seed=st.integers(0, 2**16))
    def prop(data, seed):
        case = data.draw(CASES[group], label="case")
        f, vjp, _ = _funcs(dl_framework, case, dl_device)
        assert_within(f(case.inputs), case.program.numpy(case.inputs), 2 * case.program.error_bound(case.inputs),
                      what="forward value vs float64 reference")
        counts["checks"] += 1
        try:
            # f's own float64 rounding error can be absolute rather than relative to |f|
            # (logdet near the identity), and so can the gradient's (a cancellation of larger
            # terms): the program's error bounds tell the oracle.
            result = check_vjp(f, case.inputs, vjp, seed=seed, f_error=case.program.error_bound(case.inputs),
                               derivative_error=case.program.derivative_error_bound(case.inputs))
        except InconclusiveCheck:
            counts["inconclusive"] += 1
            return
        evidence.check("reverse mode vs finite differences", observed=result.max_error_ratio, tolerance=1.0,
                       directions=result.directions, evaluations=result.evaluations)

    prop()
    evidence.note(fd_checks=counts["checks"], fd_inconclusive=counts["inconclusive"])
    if counts["checks"] == 0 or 2 * counts["inconclusive"] > counts["checks"]:
        raise HarnessError(f"finite differences were inconclusive in {counts['inconclusive']} of {counts['checks']} "
                           "examples: the generated inputs do not let them judge (a harness problem, not a pass)")


@pytest.mark.claim("autodiff.gradient.finite-differences")
@pytest.mark.parametrize("group", GROUPS)
def test_torch_gradients_do_not_depend_on_memory_layout(torch, dl_device, group):
    @budget(_examples(group, 10))
    @given(case=CASES[group], layout=st.sampled_from(LAYOUTS[1:]), seed=st.integers(0, 2**16))
    def prop(case, layout, seed):
        _layout_property(dl_device, case, layout, seed)

    prop()


def _layout_property(dl_device, case: ProgramCase, layout: str, seed: int) -> None:
    from pytest_dlconform.api import adapter

    w = np.random.default_rng(seed).standard_normal(case.program.output_shape)
    _, vjp, _ = _funcs(adapter("torch"), case, dl_device)
    _, vjp_layout, _ = _funcs(adapter("torch"), case, dl_device, layout=layout)
    tol = _program_tolerance(case, "float64", w)
    for i, (a, b) in enumerate(zip(vjp_layout(case.inputs, w), vjp(case.inputs, w))):
        assert_close(a, b, tol, what=f"gradient of input {i} with layout {layout!r} vs contiguous")


@pytest.mark.claim("autodiff.gradient.forward-reverse")
@pytest.mark.parametrize("group", GROUPS)
def test_forward_and_reverse_mode_agree(dl_framework, dl_device, group):
    @budget(_examples(group, 20))
    @given(case=CASES[group], seed=st.integers(0, 2**16))
    def prop(case, seed):
        _forward_reverse_property(dl_framework, dl_device, case, seed)

    prop()


def _forward_reverse_property(dl_framework, dl_device, case: ProgramCase, seed: int) -> None:
    _, vjp, jvp = _funcs(dl_framework, case, dl_device)
    # The floor from the derivative's own rounding: J u may be exactly zero (softmax summed
    # over its axis) while forward mode returns 1e-17 from terms of size 1.
    floor = case.program.derivative_error_bound(case.inputs)
    result = check_jvp_vjp_consistency(jvp, vjp, case.inputs, case.program.output_shape, seed=seed,
                                       derivative_error=floor)
    evidence.check("v.(Ju) vs (J^T v).u", observed=result.max_error_ratio, tolerance=1.0,
                   derivative_error_bound=floor, rounding_floor=result.worst.get("rounding_floor", 0.0))


@pytest.mark.claim("autodiff.cross-framework")
@pytest.mark.parametrize("group", GROUPS)
def test_tensorflow_and_torch_give_the_same_gradient(tf, torch, dl_device, group):
    @budget(_examples(group, 20))
    @given(case=CASES[group], seed=st.integers(0, 2**16))
    def prop(case, seed):
        _cross_framework_property(dl_device, case, seed)

    prop()


def _cross_framework_property(dl_device, case: ProgramCase, seed: int) -> None:
    from pytest_dlconform.api import adapter

    w = np.random.default_rng(seed).standard_normal(case.program.output_shape)
    grads = {}
    for name in ("tensorflow", "torch"):
        _, vjp, _ = _funcs(adapter(name), case, dl_device)
        grads[name] = vjp(case.inputs, w)
    tol = _program_tolerance(case, "float64", w)
    for i, (g_tf, g_torch) in enumerate(zip(grads["tensorflow"], grads["torch"])):
        assert_close(g_tf, g_torch, tol, what=f"TensorFlow vs torch gradient of input {i} (float64)")
