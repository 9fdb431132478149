"""Generated differentiable programs that run in torch, TensorFlow and numpy.

A :class:`Program` is a straight-line program over numbered registers: registers
``0 .. n-1`` hold the inputs, op ``k`` writes register ``n + k``, and the last register is
the output (one tensor, not necessarily a scalar). An :class:`Op` names its operation, its
parameters, and the registers it reads (``args=()`` means "the register just written").
Constant weights are stored as seeds, so a program is hashable and its ``repr`` is a
reproduction that hypothesis prints on failure.

Each operation has one record (:data:`.ops.RECORDS`, :class:`.records.OpRecord`) whose spec
(:data:`OPS`) holds a torch expression, a TensorFlow expression (both public API only,
written as source templates, so :meth:`Program.to_source` prints exactly what
:meth:`Program.build` runs) and an independent float64 numpy reference; the rest of the
record is what the checks read about the op (parameter classes, derivative, edge cases).

Smoothness. Every op is smooth on the domain the strategies generate, so finite
differences are valid. Ops with kinks (relu, elu, hardtanh, torch's softplus threshold,
...) only ever read input registers, and :func:`make_inputs` keeps those inputs at least
:data:`KINK_MARGIN` away from each kink point: a finite-difference step must stay below
``KINK_MARGIN / INPUT_MAX`` relative to the input (about 2e-3).

Range. Inputs lie in ``[-INPUT_MAX, INPUT_MAX]`` and the generator tracks an a-priori bound
on every register, refusing ops that could exceed :data:`MAX_BOUND`, so the same programs
stay finite in float32 (exp only appears as ``exp(k * tanh(x))``, matrices are built to be
diagonally dominant or positive definite, see the individual ops).

Accuracy. :meth:`Program.error_bound` gives a first-order forward-error bound for a
conforming implementation, from the reference values at the given inputs; see there.

Frameworks' differing defaults are noted next to the ops (leaky_relu's slope, var's
correction, layer norm's epsilon, softplus's threshold, pooling's stride). No op is left out of
an oracle for a known framework bug: its failing tests are pinned, per framework version and
symptom, in known_divergences.toml (:mod:`pytest_dlconform.report.divergences`).

Entry points: :func:`programs` and :func:`program_cases` (hypothesis search strategies),
:meth:`Program.build`, :meth:`Program.numpy`, :meth:`Program.error_bound`,
:meth:`Program.to_source`, and :func:`to_layout` for torch memory layouts.

Rooms: :mod:`.core` (OpSpec, Op, InputRecipe, the bounds), :mod:`.records` (OpRecord),
:mod:`.ops` (the records, one module per op family), :mod:`.program` (Program,
ProgramCase, validation), :mod:`.errors` (the error model), :mod:`.render` (source,
compilation, input conversion, torch layouts), :mod:`.inputs` (input values),
:mod:`.generate` (the strategies), and the views over the records: :mod:`.samples` and
:mod:`.edges`. Importing the package imports neither framework.
"""

from __future__ import annotations

from .core import INPUT_MAX, KINK_MARGIN, MAX_BOUND, InputRecipe, Op, OpSpec
from .errors import ULPS as ULPS  # an attribute of the former single module
from .generate import input_recipes, program_cases, programs
from .inputs import REGIMES, make_inputs
from .ops import OPS, op_names
from .program import Program, ProgramCase
from .render import FRAMEWORKS, LAYOUTS, to_layout

__all__ = [
    "FRAMEWORKS",
    "INPUT_MAX",
    "KINK_MARGIN",
    "LAYOUTS",
    "MAX_BOUND",
    "OPS",
    "REGIMES",
    "InputRecipe",
    "Op",
    "OpSpec",
    "Program",
    "ProgramCase",
    "input_recipes",
    "make_inputs",
    "op_names",
    "program_cases",
    "programs",
    "to_layout",
]
