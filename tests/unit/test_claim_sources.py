"""Claim sources and the docs stand alone: each cites documentation a user can read.

Every claim's source names the framework documentation it comes from (a docstring, guide,
tutorial, README or page) or says plainly that it is a common belief the documentation does
not make; none points at the seed documents (outside the repository) by number or path.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_dlconform.core import claims

ROOT = Path(__file__).resolve().parents[2]
CITES = ("documentation", "docstring", "guide", "docs", "API", "README", "common belief", "tutorial", "notes")
FRAMEWORK_SITES = re.compile(r"(tensorflow\.org|pytorch\.org|keras\.io|huggingface\.co)")


@pytest.mark.parametrize("claim", claims.registry().values(), ids=lambda c: c.id)
def test_every_source_names_framework_documentation_or_says_it_is_a_common_belief(claim: claims.Claim) -> None:
    assert any(word in claim.source for word in CITES) or FRAMEWORK_SITES.search(claim.source), claim.source
    assert not re.search(r"\bseeds?\s*\d", claim.source, re.IGNORECASE), claim.source
    assert "shared/" not in claim.source


def test_a_source_citing_a_seed_document_or_a_path_outside_the_package_is_refused() -> None:
    entry = {"id": "autodiff.tape.example", "statement": "s", "frameworks": ["tensorflow"]}
    for source, found in (("seed 004: TF tf.data", "seed 004"), ("Seeds 000 and 004", "Seeds 000"),
                          ("see shared/seeds/000.txt", "shared/")):
        with pytest.raises(claims.RegistryError, match=f"source must cite framework documentation.*'{found}'"):
            claims._parse("autodiff", {**entry, "source": source})
    for fine in ("tf.random.set_seed docstring", "keras.layers.Dropout docstring (seed=0)", "src/shared_thing docs"):
        assert claims._parse("autodiff", {**entry, "source": fine}).source == fine


def test_readme_and_docs_do_not_send_readers_outside_the_repository() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    offending = [f"{p.name}:{n}" for p in pages
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if "shared/seeds" in line or re.search(r"\bseeds? 0\d\d\b", line)]
    assert offending == []
