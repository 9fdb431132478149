"""The public surface for conformance suites: what a claim test imports from dlconform.

The shipped suites import from ``pytest_dlconform`` only through this package (a test in
``tests/unit/test_import_direction.py`` enforces it), and a claim of your own uses the same
names (``docs/writing-suites.md``). Importing it imports no framework and none of the
plugin's run machinery.

Here, for every claim:

- verdicts and evidence: :func:`not_applicable`, :mod:`evidence` (``evidence.check``,
  ``evidence.note``), :class:`HarnessError` (the harness, not the framework, went wrong);
- budgets and inputs: :func:`budget`, :func:`scaled`, :func:`shapes`, :func:`float_arrays`,
  :func:`float_dtypes`;
- numeric oracles with their error model: :func:`tolerance`, :func:`combined`,
  :func:`assert_close`, :func:`assert_equal`, :data:`UNIT_ROUNDOFF`;
- gradient oracles: :func:`check_vjp`, :func:`check_jvp_vjp_consistency`, :func:`check_hvp`,
  :class:`InconclusiveCheck`;
- statistical oracles with a stated false-alarm rate: :data:`TEST_ALPHA`,
  :func:`assert_frequencies`, :func:`check_dropout`, :func:`dropout_elements`;
- frameworks: :func:`adapter` (the ``dl_framework`` fixture's type), :func:`deterministic_kernels`,
  :func:`run_python` (a fresh interpreter).

And one submodule per family of oracles, imported on use: :mod:`.roundtrip`,
:mod:`.crossframework`, :mod:`.tracing`, :mod:`.reductions`, :mod:`.pipelines`,
:mod:`.precision`, :mod:`.module_references`, :mod:`.usermodel`, :mod:`.programs`,
:mod:`.distribution`, :mod:`.harness`, :mod:`.serving`, :mod:`.tfjs`, :mod:`.tfx`,
:mod:`.usermodels`, :mod:`.devices`, :mod:`.fresh`, :mod:`.keras`.
"""

from __future__ import annotations

from .. import not_applicable
from ..checks.bug_references import bug_reference, op_vjp_reference, relative_deviation
from ..checks.gradients import InconclusiveCheck, check_hvp, check_jvp_vjp_consistency, check_vjp
from ..checks.numerics import (
    UNIT_ROUNDOFF,
    Tolerance,
    ToleranceExceeded,
    accepted_wrong_answers,
    assert_close,
    assert_equal,
    combined,
    difference,
    tolerance,
)
from ..checks.stats import TEST_ALPHA, assert_frequencies, check_dropout, dropout_elements
from ..core import evidence
from ..core.determinism import deterministic_kernels
from ..frameworks import Adapter, HarnessError, adapter
from ..frameworks.fresh import run_python
from ..frameworks.inputs import budget, float_arrays, float_dtypes, scaled, shapes
from ..run import quick_selection
from ..run.profiles import compiled_ops, of_run

__all__ = [
    "TEST_ALPHA",
    "UNIT_ROUNDOFF",
    "Adapter",
    "HarnessError",
    "InconclusiveCheck",
    "Tolerance",
    "ToleranceExceeded",
    "accepted_wrong_answers",
    "adapter",
    "assert_close",
    "assert_equal",
    "assert_frequencies",
    "budget",
    "bug_reference",
    "check_dropout",
    "check_hvp",
    "check_jvp_vjp_consistency",
    "check_vjp",
    "combined",
    "compiled_ops",
    "deterministic_kernels",
    "difference",
    "dropout_elements",
    "evidence",
    "float_arrays",
    "float_dtypes",
    "not_applicable",
    "of_run",
    "op_vjp_reference",
    "quick_selection",
    "relative_deviation",
    "run_python",
    "scaled",
    "shapes",
    "tolerance",
]
