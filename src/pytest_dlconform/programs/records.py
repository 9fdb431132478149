"""One record per op: every fact the suites and oracles need about an op, in one place.

An :class:`OpRecord` pairs the op's :class:`~.core.OpSpec` (templates, float64 reference,
plan, kinks, bounds) with what the checks read about it: its parameter classes, its
analytic derivative and cancellation terms, and its documented edge cases. Each family
module of :mod:`.ops` builds its records; :data:`.ops.RECORDS` collects them. The samples,
edge cases, derivatives and cancellation tables are views over those records
(:mod:`.samples`, :mod:`.edges`, :mod:`.derivatives`), never separate tables.

Known framework bugs are not here: they are pinned per framework version and symptom in
known_divergences.toml, the one known-limits mechanism.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .core import Array, OpSpec, Params, Shape

#: Where the edge cases' sentences of documentation come from.
BOTH: Final = ("tensorflow", "torch")
TF_API: Final = "https://www.tensorflow.org/api_docs/python/"
TORCH_API: Final = "https://pytorch.org/docs/stable/generated/"
IEEE_FORMULA: Final = "the documented formula evaluated in IEEE 754 arithmetic at +-inf (exp(-inf) = 0, 1/inf = 0, max/min)"
TF_EXAMPLE: Final = f"{TF_API}tf/math/{{op}}: the documented example tf.math.{{op}}([-inf, ..., inf])"

#: f'(x, params) in float64, accurate at extreme magnitudes (no spurious overflow).
DerivativeFn = Callable[[Array, Params], Array]
#: (inputs, params, gradient) -> the rounding the op's Lipschitz constant does not see, in u.
CancellationFn = Callable[[Sequence[Array], Params, bool], float]
#: params -> [(input, documented output, frameworks, source)] at +-inf.
NonfiniteFn = Callable[[Params], "list[tuple[float, float, tuple[str, ...], str]]"]


@dataclass(frozen=True)
class Pick:
    """A parameter value that depends on the argument shapes (e.g. "all dims")."""

    label: str
    value: Callable[[Sequence[Shape]], Any] = field(compare=False)

    def __repr__(self) -> str:
        return self.label


@dataclass(frozen=True)
class ParamClass:
    """Fixed parameter values (``operands`` is the binary ops' shape class)."""

    fixed: tuple[tuple[str, Any], ...] = ()
    operands: str | None = None

    @property
    def label(self) -> str:
        parts = [f"{k}={v!r}" for k, v in self.fixed] + ([f"operands={self.operands}"] if self.operands else [])
        return ",".join(parts) or "default"


def param_class(**fixed: Any) -> ParamClass:
    """One class of fixed values (``operands=`` names a binary op's shape class)."""
    operands = fixed.pop("operands", None)
    return ParamClass(tuple(fixed.items()), operands)


def each(**options: Sequence[Any]) -> tuple[ParamClass, ...]:
    """Every option of every parameter at least once (the others cycled alongside)."""
    n = max(len(v) for v in options.values())
    return tuple(param_class(**{k: v[i % len(v)] for k, v in options.items()}) for i in range(n))


@dataclass(frozen=True)
class StableRef:
    """The float64 reference of a log-sum-exp-family op on the last axis, for its extreme
    cases: the parameters it is checked with, value(x) and vjp(x, w)."""

    params: Mapping[str, Any]
    value: Callable[[Array], Array]
    vjp: Callable[[Array, Array], Array]


@dataclass(frozen=True)
class OpRecord:
    """Everything about one op.

    ``params``: the parameter classes (default first; none means the one class "default"),
    laid over the spec's plan by :mod:`.samples`. ``derivative``: the analytic f' of an
    elementwise op (the extreme-magnitude and non-finite edge cases compare gradients with
    it). ``tangent_terms``: sizes of the terms the op's tangent rule sums where the
    documented formula is a composition that cancels (softsign). ``cancellation``: rounding
    its Lipschitz constant does not see (normalisation, cross-entropy, attention).
    ``magnitude``: the extreme-magnitude class of the formula's intermediates ("linear",
    "square", "cube", "pow", or a function of the parameters); ``tiny_only``: only tiny
    magnitudes are documented (sin, cos: range reduction). ``extreme_source``: the sentence
    of documentation that speaks for the op at extreme magnitudes. ``nonfinite``: the
    documented outputs at +-inf, entry by entry; ``nonfinite_vectors``: (label, inputs,
    output) cases of ops that reduce along an axis. ``stable``: the op is documented as numerically stable
    log-sum-exp; ``stable_ref`` its reference for the vector cases, ``stable_source`` the
    sentence. ``kink_rule``: which of torch's documented rules for non-differentiable points
    (edges.TORCH_KINK_RULES) applies at a kink; ``one_sided``: the (left, right) derivatives
    there, from the documented formula. An op with both has its kinks checked exactly;
    ``kink_exact``: its value there is exact (the formula is piecewise linear at a dyadic kink).
    ``linear``: its Jacobian does not depend on the primal values (linear ops, data movement);
    ``piecewise_linear``: linear between its kinks (second derivative zero away from them).
    """

    spec: OpSpec
    params: tuple[ParamClass, ...] = ()
    derivative: DerivativeFn | None = None
    tangent_terms: Callable[[Array], Array] | None = None
    cancellation: CancellationFn | None = None
    magnitude: str | Callable[[Params], str] = "linear"
    tiny_only: bool = False
    extreme_source: str = ""
    nonfinite: NonfiniteFn | None = None
    stable: bool = False
    stable_ref: StableRef | None = None
    stable_source: str = ""
    nonfinite_vectors: tuple[tuple[str, tuple[tuple[float, ...], ...], tuple[float, ...]], ...] = ()
    kink_rule: Callable[[Params, float], int] | None = None
    one_sided: Callable[[Params, float], tuple[float, float]] | None = None
    kink_exact: bool = True
    linear: bool = False
    piecewise_linear: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    def magnitude_class(self, p: Params) -> str:
        return self.magnitude(p) if callable(self.magnitude) else self.magnitude


def records(specs: Sequence[OpSpec], facts: Mapping[str, Mapping[str, Any]]) -> list[OpRecord]:
    """The family's records in spec order: each spec with the facts named for it."""
    names = [s.name for s in specs]
    unknown = set(facts) - set(names)
    if unknown:
        raise ValueError(f"facts for ops the family does not define: {sorted(unknown)}")
    return [OpRecord(s, **facts.get(s.name, {})) for s in specs]


def with_classes(specs: Sequence[OpSpec], classes: Mapping[str, Sequence[Mapping[str, Any]]],
                 facts: Mapping[str, Mapping[str, Any]] | None = None) -> list[OpRecord]:
    """:func:`records` with parameter classes written as plain dicts (default first)."""
    merged: dict[str, dict[str, Any]] = {name: dict(f) for name, f in (facts or {}).items()}
    for name, cs in classes.items():
        merged.setdefault(name, {})["params"] = tuple(param_class(**c) for c in cs)
    return records(specs, merged)
