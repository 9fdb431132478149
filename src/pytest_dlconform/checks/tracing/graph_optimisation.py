"""Graph optimisation: Grappler's constant folding, observed in the partition graphs that
a TF1 ``Session.run`` with ``RunMetadata`` returns (with and without optimisation).

Importing this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core import evidence


class OptimisationNotObserved(AssertionError):
    """The optimised graph shows no trace of the optimisation the rules promise."""


_SOURCE_OPS = {"Const", "Placeholder", "_Arg", "NoOp"}


def constant_subexpressions(nodes: Sequence[Any]) -> list[str]:
    """Names of nodes that compute something from constants only (data inputs all Const)."""
    op_of = {n.name: n.op for n in nodes}
    out = []
    for n in nodes:
        data = [i.split(":")[0] for i in n.input if not i.startswith("^")]
        if n.op not in _SOURCE_OPS and data and all(op_of.get(i) == "Const" for i in data):
            out.append(n.name)
    return out


def check_constant_folding(optimised: Sequence[Any], unoptimised: Sequence[Any], planted: str) -> dict[str, Any]:
    """Grappler's constant folding: the planted constant-only node ``planted`` is computed
    in the unoptimised graph and is a Const (or gone) in the optimised one, and the
    optimised graph has fewer nodes. Nodes are NodeDefs from RunMetadata.partition_graphs."""
    __tracebackhide__ = True
    before = {n.name: n.op for n in unoptimised}
    after = {n.name: n.op for n in optimised}
    facts = {"nodes_unoptimised": len(unoptimised), "nodes_optimised": len(optimised),
             "constant_subexpressions_unoptimised": len(constant_subexpressions(unoptimised)),
             "constant_subexpressions_optimised": len(constant_subexpressions(optimised)),
             "planted_op_unoptimised": before.get(planted), "planted_op_optimised": after.get(planted)}
    evidence.note(**facts)
    if before.get(planted) in (None, "Const"):
        raise OptimisationNotObserved(
            f"the planted constant expression {planted!r} is {before.get(planted)!r} in the graph run without "
            "optimisation: that run was optimised too, so nothing can be compared"
        )
    if after.get(planted) not in (None, "Const") or len(optimised) >= len(unoptimised):
        raise OptimisationNotObserved(
            f"constant folding not observed: {planted!r} is still a {after.get(planted)!r} node after optimisation, "
            f"and the optimised graph has {len(optimised)} nodes against {len(unoptimised)} without optimisation"
        )
    return facts
