"""The claim registry: every documented behaviour the suites check, as data.

One TOML file per area lives beside this module (``modules.toml``), and an area may add parts
(``modules.<part>.toml``, read after the area's file in name order). Each ``[[claim]]`` has:

- ``id``: ``area.topic.name``; the area is one of :data:`AREAS`.
- ``statement``: the claim made precise enough to fail; this is what the test checks.
- ``source``: the framework documentation it comes from (the docstring, guide or page,
  with the documented sentence quoted where there is one), or, for a claim no
  documentation makes, the words "a common belief (not in the framework documentation)"
  and why it is checked. It must stand alone: no "seed NNN" document numbers and no
  paths outside the package (``shared/``), which a user does not have.
- ``frameworks``: which frameworks it concerns.
- ``seed``: optional, the seed's own wording where it differs from ``statement``.
- ``seed_accuracy``: ``accurate`` (default), ``imprecise`` (narrower or vaguer than the
  truth) or ``wrong``; the statement then records the precise truth side by side.
- ``evidence``: optional note on how the claim can be observed (e.g. only through a
  private API), shown in the ledger and the report.
- ``modes``: optional list of the documented modes the statement enumerates (a parameter
  value, a train/eval combination, an implementation); each test records the modes it
  checked with ``evidence.covers(...)``, and the run's modes ledger
  (:mod:`pytest_dlconform.report.modes`) lists, per claim, which were checked and which not.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

AREAS = ("execution", "autodiff", "distributed", "export", "data", "modules", "precision", "interop", "model")
ACCURACY = ("accurate", "imprecise", "wrong")
FRAMEWORKS = ("tensorflow", "torch")
_ID = re.compile(r"^[a-z]+(\.[a-z0-9][a-z0-9-]*){1,3}$")
_MODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+:/,<>*-]*$")
# A source a user cannot follow: a numbered seed document ("seed 004") or a path outside
# the package ("shared/seeds/...").
_PART = re.compile(r"^[a-z]+\.[a-z0-9_-]+\.toml$")  # an area's part: modules.layers.toml
_PRIVATE_SOURCE = re.compile(r"\bseeds?\s*\d+|(?<![\w.-])shared/", re.IGNORECASE)


class RegistryError(ValueError):
    pass


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    source: str
    frameworks: tuple[str, ...]
    seed: str | None = None
    seed_accuracy: str = "accurate"
    evidence: str | None = None
    modes: tuple[str, ...] = ()

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id, "area": self.area, "statement": self.statement, "source": self.source,
            "frameworks": list(self.frameworks), "seed": self.seed,
            "seed_accuracy": self.seed_accuracy, "evidence": self.evidence, "modes": list(self.modes),
        }


def _parse(area: str, entry: dict[str, object], file: str = "") -> Claim:
    cid = str(entry.get("id", ""))
    where = f"claims/{file or area + '.toml'}, claim {cid or '<no id>'}"
    if not _ID.match(cid) or cid.split(".", 1)[0] != area:
        raise RegistryError(f"{where}: id must look like '{area}.topic.name' (lower case, 2-4 dotted parts)")
    listed = entry.get("frameworks", ())
    frameworks = tuple(str(f) for f in listed) if isinstance(listed, (list, tuple)) else ()
    if not frameworks or any(fw not in FRAMEWORKS for fw in frameworks):
        raise RegistryError(f"{where}: frameworks must be a non-empty subset of {FRAMEWORKS}")
    accuracy = str(entry.get("seed_accuracy", "accurate"))
    if accuracy not in ACCURACY:
        raise RegistryError(f"{where}: seed_accuracy must be one of {ACCURACY}")
    for key in ("statement", "source"):
        if not str(entry.get(key, "")).strip():
            raise RegistryError(f"{where}: '{key}' is required")
    private = _PRIVATE_SOURCE.search(str(entry["source"]))
    if private:
        raise RegistryError(f"{where}: source must cite framework documentation a user can read, not {private.group(0)!r}"
                            " (a seed document number or a path outside the package)")
    unknown = set(entry) - {"id", "statement", "source", "frameworks", "seed", "seed_accuracy", "evidence", "modes"}
    if unknown:
        raise RegistryError(f"{where}: unknown keys {sorted(unknown)}")
    return Claim(
        id=cid, statement=str(entry["statement"]).strip(), source=str(entry["source"]).strip(),
        frameworks=frameworks, seed=_opt(entry.get("seed")), seed_accuracy=accuracy,
        evidence=_opt(entry.get("evidence")), modes=_modes(where, entry.get("modes", [])),
    )


def _modes(where: str, listed: object) -> tuple[str, ...]:
    if not isinstance(listed, list) or not all(isinstance(m, str) and _MODE.match(m) for m in listed):
        raise RegistryError(f"{where}: modes must be a list of names without spaces (e.g. 'train', 'eval+frozen')")
    if len(set(listed)) != len(listed):
        dup = sorted({m for m in listed if listed.count(m) > 1})
        raise RegistryError(f"{where}: modes listed twice: {dup}")
    return tuple(listed)


def _opt(value: object) -> str | None:
    return None if value is None else str(value).strip()


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, Claim]:
    """All registered claims by id, in file order, areas in :data:`AREAS` order."""
    return load(resources.files(__name__))


def load(folder: Any) -> dict[str, Claim]:
    """The claims of the TOML files in ``folder`` (a path or a package resource): each area's
    file, then its parts (``modules.toml``, ``modules.layers.toml``, ...) in name order."""
    claims: dict[str, Claim] = {}
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".toml"))
    for area in AREAS:
        files = [n for n in names if n == f"{area}.toml"] + [n for n in names if _PART.match(n) and n.split(".")[0] == area]
        for name in files:
            for entry in tomllib.loads((folder / name).read_text(encoding="utf-8")).get("claim", []):
                claim = _parse(area, entry, name)
                if claim.id in claims:
                    raise RegistryError(f"claims/{name}: duplicate claim id {claim.id}")
                claims[claim.id] = claim
    return claims


def get(claim_id: str) -> Claim | None:
    return registry().get(claim_id)


def matching(globs: Iterable[str]) -> list[Claim]:
    patterns = list(globs)
    return [c for c in registry().values() if any(fnmatch.fnmatchcase(c.id, p) for p in patterns)]


# ------------------------------------------------------------------ selection: globs that match nothing

_WILDCARDS = "*?["


def unmatched(globs: Iterable[str], ids: Iterable[str] | None = None) -> list[str]:
    """The globs (in order) that match no claim id of ``ids`` (default: the registry's)."""
    known = list(registry() if ids is None else ids)
    return [p for p in globs if not any(fnmatch.fnmatchcase(cid, p) for cid in known)]


def closest(pattern: str, ids: Iterable[str] | None = None, n: int = 3) -> list[str]:
    """Claim ids (or, for a glob, an id glob) a pattern that matches nothing probably meant.

    :func:`difflib.get_close_matches` over the ids, and for a glob also the ids sharing the
    longest prefix with its literal part (``autodif.*`` -> ``autodiff.*`` when many share it)."""
    import difflib

    known = list(registry() if ids is None else ids)
    if pattern != pattern.lower() and not unmatched([pattern.lower()], known):
        return [pattern.lower()]  # claim ids are lower case
    pattern = pattern.lower()
    found = difflib.get_close_matches(pattern, known, n=n, cutoff=0.6)
    cut = min((pattern.index(c) for c in _WILDCARDS if c in pattern), default=None)
    if cut is not None:
        literal = pattern[:cut]
        stripped = "".join(ch for ch in pattern if ch not in _WILDCARDS)
        found += [c for c in difflib.get_close_matches(stripped, known, n=n, cutoff=0.75) if c not in found]
        shared = max((_common(literal, cid) for cid in known), default=0)
        if shared:
            group = [cid for cid in known if _common(literal, cid) == shared]
            if len(group) > n:
                prefix = _prefix_of(group)
                head = prefix[: prefix.rfind(".") + 1] if "." in prefix else prefix
                found.append(f"{head}*" if head else group[0])
            else:
                found += group
    return list(dict.fromkeys(found))[: n + 1]


def _common(a: str, b: str) -> int:
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return i


def _prefix_of(ids: list[str]) -> str:
    first = ids[0]
    return first[: min(_common(first, other) for other in ids)]


def no_match_hint(pattern: str, ids: Iterable[str] | None = None) -> str:
    """Why ``pattern`` selects nothing and what to try instead, in one line."""
    near = closest(pattern, ids)
    if near:
        return f"did you mean {', '.join(repr(x) for x in near)}? (`dlconform claims` lists every claim id)"
    areas = ", ".join(f"'{a}.*'" for a in AREAS)
    return f"a claim id starts with its area ({areas}); `dlconform claims` lists every claim id"
