"""The claims ledger: every registered claim, printed for people (``dlconform claims``)."""

from __future__ import annotations

import sys
import textwrap
from typing import Iterable, TextIO

from . import claims as registry


def print_ledger(globs: Iterable[str] = ("*",), out: TextIO | None = None) -> int:
    out = out or sys.stdout
    selected = registry.matching(globs)
    for claim in selected:
        out.write(f"{claim.id}  [{', '.join(claim.frameworks)}]\n")
        out.write(textwrap.indent(textwrap.fill(claim.statement, 96), "    ") + "\n")
        out.write(f"    source: {claim.source}\n")
        if claim.seed_accuracy != "accurate":
            out.write(f"    the seed's wording is {claim.seed_accuracy}: {claim.seed or '(see source)'}\n")
        if claim.evidence:
            out.write(f"    evidence: {claim.evidence}\n")
    out.write(f"{len(selected)} claims\n")
    return 0 if selected else 1
