"""``torch.compile``'s cache (TorchDynamo): a model of the documented rules and the counting
oracle.

:class:`DynamoCacheModel` predicts compiles, recompiles, automatic dynamic shapes, 0/1
specialisation and the silent eager fallback after ``recompile_limit``;
:func:`check_compile_counts` observes a counting backend (:class:`CountingBackend`:
compiles and runs of compiled graphs, public API) and dynamo's own graph counter.

The rules modelled (TorchDynamo's "Dynamic shapes" and "Recompilation" pages): Dynamo
compiles the first call with static shapes; on a guard failure it recompiles and marks every
dimension whose size changed since the last compile dynamic (``dynamic=None``, automatic
dynamic shapes); ``dynamic=True`` starts dynamic and shapes equal sizes as one symbol ("duck
sizing"), ``dynamic=False`` never goes dynamic; a dynamic dimension of size 0 or 1 is still
specialised; after ``recompile_limit`` cache entries for one code object a non-matching call
runs eagerly, without an error. (That duck sizing applies with ``dynamic=True`` only, not to
dimensions made dynamic automatically, is what torch 2.13 does; the docs describe duck
sizing without saying.)

Importing this module imports no framework.
"""

from __future__ import annotations

import linecache
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core import evidence
from ..numerics import difference
from .common import FRESH


class CompileCountMismatch(AssertionError):
    """Observed compiles or compiled runs differ from what the documented rules predict."""


@dataclass(frozen=True)
class _Entry:
    dtype: str
    dims: tuple[int | str, ...]  # a static size, or a symbol (dynamic, size >= 2)

    def matches(self, dtype: str, shape: tuple[int, ...]) -> bool:
        if dtype != self.dtype or len(shape) != len(self.dims):
            return False
        bound: dict[str, int] = {}
        for d, size in zip(self.dims, shape):
            if isinstance(d, int):
                if d != size:
                    return False
            elif size < 2 or bound.setdefault(d, size) != size:
                return False
        return True


@dataclass(frozen=True)
class CompilePrediction:
    compiles: int  # cumulative
    compiled_run: bool  # the call ran a compiled graph (False: eager fallback)
    dims: tuple[int | str, ...] | None  # the new entry's dims, when this call compiled


@dataclass
class DynamoCacheModel:
    """TorchDynamo's documented cache behaviour for one function of one tensor argument."""

    dynamic: bool | None
    recompile_limit: int
    entries: list[_Entry] = field(default_factory=list)
    recorded: list[int | None] | None = None  # automatic-dynamic frame state: size, or None once it changed

    def call(self, dtype: str, shape: tuple[int, ...]) -> CompilePrediction:
        if any(e.matches(dtype, shape) for e in self.entries):
            return CompilePrediction(len(self.entries), True, None)
        if len(self.entries) >= self.recompile_limit:
            return CompilePrediction(len(self.entries), False, None)
        entry = _Entry(dtype, self._dims(shape))
        self.entries.append(entry)
        return CompilePrediction(len(self.entries), True, entry.dims)

    def _dims(self, shape: tuple[int, ...]) -> tuple[int | str, ...]:
        dynamic = self._dynamic_dims(shape)
        dims: list[int | str] = []
        for d, size in enumerate(shape):
            if d not in dynamic or size < 2:  # 0/1 specialisation
                dims.append(size)
            elif self.dynamic is True:  # duck sizing: equal sizes share one symbol
                dims.append(f"s{size}")
            else:
                dims.append(f"d{d}")
        return tuple(dims)

    def _dynamic_dims(self, shape: tuple[int, ...]) -> set[int]:
        if self.dynamic is True:
            return set(range(len(shape)))
        if self.dynamic is False:
            return set()
        if self.recorded is None or len(self.recorded) != len(shape):
            self.recorded = list(shape)
            return set()
        for d, size in enumerate(shape):
            if self.recorded[d] != size:
                self.recorded[d] = None
        return {d for d, s in enumerate(self.recorded) if s is None}


class CountingBackend:
    """A torch.compile backend that counts compiles and runs of what it compiled.

    ``inner`` is a registered backend name ("eager", "aot_eager", "inductor", ...) or a
    backend callable; its compiled function is wrapped, so ``runs`` counts calls that really
    executed a compiled graph (an eager fallback does not).
    """

    def __init__(self, torch: Any, inner: str | Callable[..., Any] = "eager") -> None:
        self.name = inner if isinstance(inner, str) else getattr(inner, "__name__", "backend")
        self._inner = torch._dynamo.lookup_backend(inner) if isinstance(inner, str) else inner
        self.compiles = 0
        self.runs = 0
        self.__name__ = f"counting_{self.name}"

    def __call__(self, gm: Any, example_inputs: Any) -> Callable[..., Any]:
        self.compiles += 1
        compiled = self._inner(gm, example_inputs)

        def run(*args: Any) -> Any:  # dynamo calls a backend's result with the flat inputs
            self.runs += 1
            return compiled(*args)

        return run


def fresh_function(namespace: dict[str, Any], body: str, prefix: str = "dlconform_fn") -> Callable[..., Any]:
    """A new function (new code object, new name, new file name) from one-argument ``body`` source.

    Dynamo keys its caches and its automatic-dynamic state by code object and by
    (file, line, name); a fresh function starts from an empty cache, whatever ran before.
    """
    n = next(FRESH)
    name = f"{prefix}_{n}"
    source = f"def {name}(x):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    filename = f"<{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = dict(namespace, __name__=f"dlconform_generated_{n}")
    exec(compile(source, filename, "exec"), scope)
    return scope[name]


@dataclass(frozen=True)
class CompileStep:
    call: str
    predicted: CompilePrediction
    compiles: int
    runs: int
    graphs: int


def check_compile_counts(
    torch: Any,
    fn: Callable[[Any], Any],
    calls: Sequence[tuple[str, tuple[int, ...]]],
    *,
    dynamic: bool | None,
    wrapper: Callable[..., Any] | None = None,
    tolerance: Callable[[str], float] | None = None,
) -> list[CompileStep]:
    """Compile ``fn`` (one tensor argument; pass a :func:`fresh_function`) and call it with
    tensors of the given (dtype, shape); compare compiles and compiled runs with the model.

    Observed two ways: the counting backend (compiles, runs of compiled graphs) and dynamo's
    ``counters["stats"]["unique_graphs"]``. Every output is also compared with eager ``fn``
    (relative ``tolerance(dtype)``, default 0: the eager backend runs the same kernels).
    """
    __tracebackhide__ = True
    from torch._dynamo.utils import counters

    backend = CountingBackend(torch, "eager")
    model = DynamoCacheModel(dynamic, int(torch._dynamo.config.recompile_limit))
    compiled = (wrapper or torch.compile)(fn, backend=backend, dynamic=dynamic)
    graphs0 = counters["stats"]["unique_graphs"]
    steps: list[CompileStep] = []
    for i, (dtype, shape) in enumerate(calls):
        x = torch.arange(math.prod(shape), dtype=getattr(torch, dtype)).reshape(shape) * 0.25 - 1.0
        runs = backend.runs
        out = compiled(x)
        predicted = model.call(dtype, shape)
        step = CompileStep(f"f(tensor({dtype}, {list(shape)}))", predicted, backend.compiles,
                           backend.runs - runs, counters["stats"]["unique_graphs"] - graphs0)
        steps.append(step)
        _compare_compile_step(i, step, steps, dynamic, model.recompile_limit)
        _compare_output(torch, out, fn(x), (tolerance or (lambda d: 0.0))(dtype), step.call)
    evidence.note(compile_counts=[s.compiles for s in steps], compiled_runs=[s.runs for s in steps])
    return steps


def _compare_compile_step(i: int, step: CompileStep, steps: list[CompileStep], dynamic: bool | None, limit: int) -> None:
    __tracebackhide__ = True
    p = step.predicted
    problems = []
    if step.compiles != p.compiles or step.graphs != p.compiles:
        problems.append(
            f"{step.compiles} compiles so far by the counting backend and {step.graphs} graphs by dynamo's counter, "
            f"but the documented rules predict {p.compiles}"
        )
    ran = step.runs >= 1
    if ran != p.compiled_run:
        problems.append(
            "the call ran a compiled graph, but the rules predict an eager fallback (recompile limit reached)"
            if ran else "the call ran eagerly (no compiled graph executed), but the rules predict a compiled run"
        )
    if problems:
        history = "; ".join(f"{s.call}: {s.compiles}" for s in steps[:-1]) or "none"
        raise CompileCountMismatch(
            f"call {i + 1} {step.call}: " + "; ".join(problems)
            + f" [dynamic={dynamic!r}, recompile_limit={limit}; earlier calls (compiles): {history}]"
        )


def _compare_output(torch: Any, out: Any, ref: Any, rtol: float, what: str) -> None:
    __tracebackhide__ = True
    a, b = out.detach().double().cpu().numpy(), ref.detach().double().cpu().numpy()
    if a.shape != b.shape:
        raise CompileCountMismatch(f"{what}: the compiled output has shape {a.shape}, eager {b.shape}")
    d = difference(a, b)
    if not d.nonfinite_match:
        raise CompileCountMismatch(f"{what}: the compiled output's {d.describe()} (eager's value)")
    if not d.error <= rtol * d.scale:
        raise CompileCountMismatch(f"{what}: the compiled output differs from eager by {d.error:.3e} at "
                                   f"{list(d.at or ())}, scale {d.scale:.3e}")
