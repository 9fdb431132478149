"""What a claim test's exception means: the roots of the one exception hierarchy.

A foundation module (it imports nothing of the package), so every layer can raise and
classify by ``isinstance``:

- :class:`HarnessError`: the harness failed (our processes, deadlines, clusters, fresh
  interpreters, an artifact we wrote); never a conformance result.
- :class:`InconclusiveCheck`: an oracle that cannot decide here (finite differences below
  their own noise, a bound that would accept a canonical wrong answer). A harness
  problem, not a violation: where a test does not handle it, the test is a harness error.
- :class:`Violation`: the framework did not do what its documentation says. Any other
  exception in a claim test's call phase is a violation too (an oracle's assertion, or the
  framework raising where its documentation says the call works); this class only names
  the ones our oracles raise.

Exceptions raised in another process (a rank of a cluster) arrive as names: their
classification by name is :data:`REMOTE_HARNESS_NAMES`.
"""

from __future__ import annotations


class HarnessError(RuntimeError):
    """The test harness could not set up or run what the test needs (not a conformance result)."""


class InconclusiveCheck(HarnessError):
    """The oracle cannot judge here: the check could not have failed (not a conformance result)."""


class Violation(AssertionError):
    """The framework's behaviour differs from its documentation."""


#: Exception class names that mean a harness problem when they arrive from another process.
REMOTE_HARNESS_NAMES = frozenset({
    "HarnessError", "InconclusiveCheck", "ClusterError", "TaskError", "ArtifactError", "ImportError",
    "ModuleNotFoundError", "NameError", "UnboundLocalError", "SyntaxError", "IndentationError",
    "KeyboardInterrupt", "SystemExit",
})
