"""Framework mutants: small, named patches of TensorFlow, Keras or PyTorch behaviour, each
modelled on a real bug or behaviour change from the frameworks' trackers (cited), used to
measure whether the suites catch real bugs (the mutation score, ``dlconform mutate``).

A mutant is applied in every process of a run by an import hook: ``DLCONFORM_MUTANT=name``
in the environment and a directory holding our ``sitecustomize.py`` first on
``PYTHONPATH`` (:mod:`.site`). Every Python process started with that environment (pytest,
its xdist workers, rank processes, ``fresh.run_python``/``fresh.call`` children) runs the
hook at start-up; when the mutant's target module (``torch``, ``tensorflow``, ``keras``)
finishes importing, the hook calls the mutant's ``apply`` (:mod:`.hook`). Without the
variable the hook does nothing, so a clean run is unaffected.

The library lives in one module per claim area (``autodiff.py``, ``modules.py``, ...);
each registers its mutants with :func:`mutant`. Importing this package imports no framework.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

ENV_VAR = "DLCONFORM_MUTANT"
LOG_VAR = "DLCONFORM_MUTANT_LOG"  # where each process records that it applied (or failed to apply) the mutant
AREAS = ("autodiff", "data", "distributed", "execution", "export", "interop", "model", "modules", "precision")
# The modules that hold the library, one per claim area (a mutant's first area is its module's).
LIBRARY = ("autodiff", "data", "distributed", "execution", "export", "interop", "model", "modules", "precision", "schedulers",
           "keras_optimizers", "losses", "nn_modules", "keras_layers", "tf_math", "tf_nn", "torch_functional",
           "torch_protocols", "tfdata_api", "distributed_state", "surface_derivatives", "compiled_second_order",
           "compiled_mutation")


@dataclass(frozen=True)
class Mutant:
    """One patch: what it breaks, where the real bug is recorded, and which claims should catch it.

    ``claims``: claim-id globs whose tests should kill it (passed as ``--dl-claims``).
    ``select``: an optional pytest ``-k`` expression naming the tests of the patched
    framework among those claims' tests (so a torch mutant does not pay TensorFlow's import).
    ``model``: for the model.* claims, the ``module:factory`` of a shipped example model
    (``examples/`` of the checkout), passed to the run as ``--dl-model``.
    ``target``: the module whose import triggers ``apply`` (``torch``, ``tensorflow``, ``keras``).
    """

    name: str
    areas: tuple[str, ...]
    claims: tuple[str, ...]
    target: str
    cite: str
    bug: str
    apply: Callable[[], None] = field(repr=False, compare=False)
    select: str = ""
    model: str = ""


_REGISTRY: dict[str, Mutant] = {}


def mutant(name: str, *, areas: tuple[str, ...] | str, claims: tuple[str, ...] | str, target: str, cite: str,
           bug: str, select: str = "", model: str = "") -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register the decorated function as the ``apply`` of mutant ``name``."""
    area_t = (areas,) if isinstance(areas, str) else tuple(areas)
    claim_t = (claims,) if isinstance(claims, str) else tuple(claims)
    unknown = [a for a in area_t if a not in AREAS]
    if unknown or not claim_t or not cite.startswith("https://"):
        raise ValueError(f"mutant {name}: areas {unknown} unknown, or no claims, or cite is not a URL")
    if any(c.startswith("model.") for c in claim_t) and ":" not in model:
        raise ValueError(f"mutant {name}: model.* claims need model='module:factory' (an example model)")

    def register(fn: Callable[[], None]) -> Callable[[], None]:
        if name in _REGISTRY:
            raise ValueError(f"mutant {name} registered twice")
        _REGISTRY[name] = Mutant(name, area_t, claim_t, target, cite, bug, fn, select, model)
        return fn

    return register


def registry() -> dict[str, Mutant]:
    """Every mutant of the library, by name (imports the library modules, never a framework)."""
    for module in LIBRARY:
        importlib.import_module(f"{__name__}.{module}")
    return dict(sorted(_REGISTRY.items()))


def get(name: str) -> Mutant:
    found = registry().get(name)
    if found is None:
        raise KeyError(name)
    return found
