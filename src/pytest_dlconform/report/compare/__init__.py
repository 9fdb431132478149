"""Upgrade checks: what changed between two JSON reports (``dlconform compare OLD NEW``).

Reports are compared on what they share. Tests are matched by claim, framework,
strategy, device and node id (the path up to ``suites/`` dropped, so an installed run and
a checkout run match). Only frameworks and device kinds that both runs covered are
compared; when the two runs share no device kind at all (a CPU report against a GPU
report) the same tests are compared across devices, and the output says so.

Per matched cell (claim x framework/device/strategy) the verdicts give:

- regressed: held, now violated (the exit status is 1 when there is one);
- held, now error: the new stack broke the harness where the old one held (exit status 1
  too: an upgrade check that cannot vouch for a claim that used to hold must not pass);
- fixed: violated, now holds;
- moved to / from "not applicable", with the reason;
- harness errors: error on one side, never shown as a conformance result;
- known regression: held, now violated with the symptom of a live known divergence. The
  framework regressed into a bug the known-divergences file already describes: named with
  its entry, and the exit status is 1 unless ``known_regressions="warn"``
  (``--known-regressions=warn``; a run's ``--dl-baseline`` the same, through
  :attr:`Comparison.failing`). A known divergence explains a failure; it does not make an
  upgrade into it a non-event.

Claims that ran on only one side within the shared scope appeared or disappeared.
Evidence drift: a check's margin (observed / tolerance) that grew towards the tolerance
by at least the threshold, a changed tolerance, and changed integer or text notes (trace
counts, graph counts). Float notes are timings and measured ratios: machine noise, never
compared.
"""

from .comparison import (
    DEFAULT_DRIFT,
    EXIT_OK,
    EXIT_REGRESSED,
    EXIT_UNUSABLE,
    FAIL,
    KNOWN_REGRESSION_POLICIES,
    WARN,
    Change,
    ClaimRow,
    Comparison,
    compare,
    evidence_drift,
    names,
    run,
)
from .loading import UnusableReport, last_two, load, parse
from .matching import Cell, Scope, normalized_nodeid, scope_of, suite_warnings
from .rendering import (
    FAILING_SECTIONS,
    JSON_SCHEMA,
    JSON_SCHEMA_VERSION,
    SECTIONS,
    SHORT,
    divergence_lines,
    to_dict,
    to_json,
    to_markdown,
    to_text,
)

__all__ = [
    "DEFAULT_DRIFT",
    "EXIT_OK",
    "EXIT_REGRESSED",
    "EXIT_UNUSABLE",
    "FAIL",
    "FAILING_SECTIONS",
    "JSON_SCHEMA",
    "JSON_SCHEMA_VERSION",
    "KNOWN_REGRESSION_POLICIES",
    "SECTIONS",
    "SHORT",
    "WARN",
    "Cell",
    "Change",
    "ClaimRow",
    "Comparison",
    "Scope",
    "UnusableReport",
    "compare",
    "divergence_lines",
    "evidence_drift",
    "last_two",
    "load",
    "names",
    "normalized_nodeid",
    "parse",
    "run",
    "scope_of",
    "suite_warnings",
    "to_dict",
    "to_json",
    "to_markdown",
    "to_text",
]
