"""float32, float16 and bfloat16: forward values and reverse-mode gradients of every op of the
library against float64, in both frameworks, one test id per op, dtype and framework.

Each example checks every registered sample of the op (``programs.samples``: each parameter
class at its default and non-default values, each input regime), each a one-op program
(``class_cases``: a class's first sample draws the shapes and free parameters, its other
samples reuse them on inputs of their own regime), and records them in the coverage ledger
(mode ``low-precision``, per dtype). The inputs and the cotangent are first
rounded to the dtype, and the float64 references run at those rounded values, so input
rounding is no part of the comparison and the bounds are the dtype's own computation:

* forward: ``max|y_dtype - y_numpy64| <= low_precision_error_bound(x, dtype)``;
* gradient: per entry ``|g_dtype - g_float64| <= (B_dtype + B_64) * ||w||_1 + floor`` with
  ``(B, floor) = gradient_error_bound`` (``docs/tolerances.md``, "Low-precision
  gradients"); the float64 gradient is the same framework's, which the float64 suites
  check against finite differences.

float16's largest finite value is 65504: its inputs are clipped to [-8, 8], where no
intermediate of any op of the library reaches it (cube 512, prod over 4 entries 4096,
the 4th power inside norm_c 4096, contraction sums 64 * 64). float32 and bfloat16 (the
range of float32) take the library's inputs as they are.

A sample whose forward bound would also accept a canonical wrong answer (all zeros, a NaN,
the sign flip: ``accepted_wrong_answers`` on the sample's own pass condition) proves nothing:
it is recorded inconclusive (evidence and the coverage row's ``inconclusive``), not checked;
its gradient is still compared. In bfloat16 this is where rounding legitimately drowns the
result: attention whose logits' rounding is O(1) (the bound is then V's spread), the
decompositions and normalisations at wide inputs (docs/tolerances.md, "Vacuous bounds").

Where a framework refuses an op in a dtype, that is "not applicable" only where its
documentation says the dtype is unsupported (the op record's ``dtype_exclusions``, quoted
with the framework's own error), sample by sample (ledger rows with ``not_applicable``); any
other refusal is a violation.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import (
    HarnessError,
    ToleranceExceeded,
    accepted_wrong_answers,
    budget,
    difference,
    evidence,
    not_applicable,
    quick_selection,
)
from pytest_dlconform.api.programs import (
    INPUT_MAX,
    LOW_PRECISION_DTYPES,
    LOW_PRECISION_MODE,
    NORM_OPS,
    ProgramCase,
    Sample,
    class_cases,
    coverage_key,
    excluded_dtypes,
    gradient_error_bound,
    low_precision_error_bound,
    min_variance,
    op_names,
)
from pytest_dlconform.api.tracing import assert_within

LOW = LOW_PRECISION_DTYPES
RANGE = {"float32": INPUT_MAX, "bfloat16": INPUT_MAX, "float16": 8.0}
OPS = op_names()


def rounded(fw: Any, x: np.ndarray, dtype: str, device: str) -> np.ndarray:
    """x rounded to dtype (round to nearest even, by the framework itself), as float64."""
    return np.asarray(fw.numpy(fw.tensor(np.asarray(x, dtype=np.float64), dtype, device)), dtype=np.float64)


class Refused(Exception):
    """The framework raised where its documentation accepts the dtype: a violation, whatever
    the values (reported once after the examples, so hypothesis does not shrink it)."""


class Unsupported(Exception):
    """The framework refused a dtype its documentation excludes for the op: that sample is
    "not applicable" (the reason quotes the documentation and the framework's error)."""


def _run(fw: Any, fn: Any, xs: list[np.ndarray], w: np.ndarray, dtype: str, device: str, op: str) -> tuple[Any, Any]:
    try:
        return fw.call(fn, xs, dtype, device), fw.vjp(fn, xs, w, dtype, device)
    except Exception as exc:  # the framework refused the op in this dtype
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        dtypes, doc = excluded_dtypes(fw.name, op)
        if dtype in dtypes:
            raise Unsupported(f"{op} in {dtype} on {device}: {doc}; {fw.name} says: {type(exc).__name__}: {first}") from exc
        raise Refused(f"{fw.name} refused {op} in {dtype} on {device}, a dtype its documentation accepts: "
                      f"{type(exc).__name__}: {first}") from exc


def _float16_range(case: ProgramCase, xs: list[np.ndarray]) -> bool:
    """layer_norm (and batch/group/instance norm) divides by var + eps: below 2**-14 its reciprocal (inside the backward)
    exceeds float16's 65504 (eps = 1e-5 is itself below float16's smallest normal), so
    overflow is float16's documented behaviour there, not a conformance question."""
    for op in case.program.ops:
        if op.name == "layer_norm":
            x, p = xs[0], op.kwargs
            axes = tuple(range(x.ndim - p["k"], x.ndim))
            if float(np.min(np.var(x, axis=axes))) + p["eps"] < 2.0**-14:
                return False
        if op.name in NORM_OPS and min_variance(op.name, xs[0], op.kwargs) < 2.0**-14:
            return False  # batch/group/instance norm: the same 1/(var + eps) (TensorFlow's composition)
    return True


def forward_vacuous(reference: np.ndarray, bound: float, dtype: str) -> list[str]:
    """The canonical wrong answers (all zeros, a NaN, the sign flip) that the forward check's
    own pass condition, ``max|w - reference| <= bound`` under the non-finite rule, accepts."""
    return accepted_wrong_answers(reference, lambda w: difference(w, reference).max_abs <= bound, dtype)


def check_low_precision(fw: Any, case: ProgramCase, dtype: str, device: str, seed: int, op: str) -> list[str]:
    """Forward value and gradient of ``case`` in ``dtype`` against float64 (module docstring);
    raises Refused or Unsupported when the framework refuses the dtype. Returns the wrong
    answers the forward bound would accept (:func:`forward_vacuous`; empty: it could fail)."""
    __tracebackhide__ = True
    limit = RANGE[dtype]
    xs = [rounded(fw, np.clip(x, -limit, limit), dtype, device) for x in case.inputs]
    w = rounded(fw, np.random.default_rng(seed).standard_normal(case.program.output_shape), dtype, device)
    program = case.program
    y, grads = _run(fw, program.build(fw.name, dtype), xs, w, dtype, device, op)
    grads64 = fw.vjp(program.build(fw.name, "float64"), xs, w, "float64", device)
    reference, bound = program.numpy(xs), low_precision_error_bound(program, xs, dtype)
    # assert_within records a bound that accepts a wrong answer as inconclusive evidence.
    assert_within(y, reference, bound, what=f"{fw.name} {op} forward in {dtype} vs float64 reference", dtype=dtype)
    vacuous = forward_vacuous(reference, bound, dtype)
    if dtype == "float16" and not _float16_range(case, xs):
        evidence.note(float16_gradient_outside_range=True)  # the forward value was checked
        return vacuous
    b, floor = gradient_error_bound(program, xs, dtype)
    b64, _ = gradient_error_bound(program, xs, "float64")
    w1 = float(np.sum(np.abs(w)))
    for i, (g, g64) in enumerate(zip(grads, grads64)):
        assert_within(g, g64, (b + b64) * w1 + floor,
                      what=f"{fw.name} {op} gradient of input {i} in {dtype} vs float64", dtype=dtype)
    evidence.note(**{f"checked_{dtype}": True})
    return vacuous


def _dtype_op(item: Any) -> tuple[str, str] | None:
    """(dtype, op) of a test of this module (its mode in the quick profile's sample)."""
    return quick_selection.callspec_pair(item, __name__, lambda i: i.callspec.params.get("dtype"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # The quick profile checks, per dtype, one op of every op family, rotated by --dl-seed
    # (profiles.quick_op_sample; both frameworks take the same ops); the ci profile every op.
    quick_selection.register_suite(metafunc, "low-precision", _dtype_op)


@pytest.mark.claim("autodiff.gradient.low-precision")
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("op", OPS)
def test_low_precision_forward_and_gradient_match_float64(dl_framework, dl_device, op, dtype):
    """Every registered sample of ``op`` (each parameter class, each input regime:
    ``class_cases``) in ``dtype`` per example; hypothesis draws the shapes, free parameters
    and values. The coverage rows (mode ``low-precision``) say which samples were checked and
    which are not applicable; failures are reported after the examples with the case to
    reproduce (no shrinking of a batch of samples)."""
    fw = dl_framework
    failures: list[str] = []
    refused: list[Refused] = []
    unsupported: list[str] = []
    visits: Counter[Sample] = Counter()
    skipped: Counter[Sample] = Counter()
    vacuous: Counter[Sample] = Counter()  # forward bound accepts a canonical wrong answer

    @budget(1)
    @given(data=st.data(), seed=st.integers(0, 2**16))
    def prop(data: Any, seed: int) -> None:
        for sample, case in data.draw(class_cases(op), label="samples"):
            where = f"class {sample.params.label}, regime {sample.regime}, cotangent seed {seed}"
            try:
                if check_low_precision(fw, case, dtype, dl_device, seed, op):
                    vacuous[sample] += 1  # inconclusive (recorded by assert_within), not checked
                    continue
            except Unsupported as exc:
                skipped[sample] += 1
                unsupported.append(str(exc))
                continue
            except Refused as exc:
                refused.append(exc)
            except AssertionError as exc:
                failures.append(f"{exc}\nReproduce: {case!r} ({dtype}, {where})")
            visits[sample] += 1

    prop()
    rows = [{**coverage_key(fw.name, LOW_PRECISION_MODE, s, dtype=dtype), "count": visits[s],
             **({"not_applicable": skipped[s]} if skipped[s] else {}),
             **({"inconclusive": vacuous[s]} if vacuous[s] else {})}
            for s in dict.fromkeys([*visits, *skipped, *vacuous])]
    evidence.note(coverage=rows, samples_checked=sum(visits.values()), samples_not_applicable=sum(skipped.values()),
                  samples_inconclusive=sum(vacuous.values()))
    if failures:
        __tracebackhide__ = True
        more = f"\n\n... and {len(failures) - 3} more failures" if len(failures) > 3 else ""
        raise ToleranceExceeded("\n\n".join(failures[:3]) + more)
    if refused:
        pytest.fail(str(refused[0]), pytrace=False)
    if unsupported and not visits:
        not_applicable(unsupported[0], cause="linalg ops in bfloat16/float16 refused by their documentation",
                       subject=op)
    if unsupported:
        evidence.note(not_applicable_samples=unsupported[0])
    if vacuous and sum(vacuous.values()) > sum(visits.values()):
        # The error model gives this op, in this dtype, no bound that a wrong answer could fail
        # for most of its samples (their forward bounds accept zeros or the sign flip): the
        # claim cannot be judged here. Said as such, counted in the report, never "holds"; the
        # samples that could be checked held (a failure above would have been raised).
        checked = sum(visits.values())
        not_applicable(f"{op} in {dtype}: {sum(vacuous.values())} of {checked + sum(vacuous.values())} samples have "
                       f"a forward bound that accepts a canonical wrong answer ({checked} checked, held), so the "
                       "error model cannot judge it", cause=f"the {dtype} error model cannot judge most samples",
                       subject=op)
    if not visits:
        raise HarnessError(f"no sample of {op} was checked in {dtype}")
