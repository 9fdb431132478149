"""One record per op: every fact the suites and oracles need about an op, in one place.

An :class:`OpRecord` pairs the op's :class:`~.core.OpSpec` (templates, float64 reference,
plan, kinks, bounds) with what the checks read about it: its parameter classes, its
analytic derivative and cancellation terms, and its documented edge cases. Each family
module of :mod:`.ops` builds its records; :data:`.ops.RECORDS` collects them. The samples,
edge cases, derivatives and cancellation tables are views over those records
(:mod:`.samples`, :mod:`.edges`, :mod:`.derivatives`), never separate tables.

The record also says what other suites read about the op's framework functions: the
dtypes each framework's documentation excludes (:class:`DtypeExclusion`, with the quoted
sentence; the low-precision suite's "not applicable"), the op's line in torch's Autocast Op
Reference (:class:`Autocast`; the autocast suite), its node names in a traced graph
(:class:`GraphNames`; the tracing suites), the parameter values a runtime documents as
unsupported (:class:`DocumentedLimit`; the TF.js suite) and why its composed programs get
test ids of their own (``own_program_ids``; the generated-programs suite).

Known framework bugs are not here: they are pinned per framework version and symptom in
known_divergences.toml, the one known-limits mechanism.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .autocast import AutocastCall
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
class DtypeExclusion:
    """Floating dtypes a framework's documentation of the op's function does not accept, and
    where it says so (the page and the quoted sentence)."""

    framework: str
    dtypes: tuple[str, ...]
    source: str


#: The classes of torch's Autocast Op Reference (docs/source/amp.rst): ops that autocast to
#: the lower precision, to float32, to the widest input dtype, and ops that raise in an
#: autocast-enabled region. An op the reference does not list runs in its inputs' dtype.
AUTOCAST_LOWER: Final = "lower"
AUTOCAST_FLOAT32: Final = "float32"
AUTOCAST_PROMOTE: Final = "promote"
AUTOCAST_ERROR: Final = "error"


@dataclass(frozen=True)
class Autocast:
    """The op's torch function in torch's Autocast Op Reference: how the autocast check calls
    it (``call``), per device type ("cpu", "cuda") its class where the reference lists it
    (None: unlisted there), the aten overload it dispatches to first (empty:
    ``aten::<op>``), and the device types where it is composite (no autocast kernel of its
    own: its parts carry the policy)."""

    call: AutocastCall = field(compare=False)
    cpu: str | None = None
    cuda: str | None = None
    aten: str = ""
    composite: tuple[str, ...] = ()

    def listed(self, device_type: str) -> str | None:
        return self.cpu if device_type == "cpu" else self.cuda if device_type == "cuda" else None


@dataclass(frozen=True)
class DocumentedLimit:
    """Parameter values a runtime's documentation of the op's function says it does not
    support (``applies(params)``), and where it says so (the page and the quoted sentence):
    a sample there is "not applicable" on that runtime, never a pass."""

    runtime: str
    applies: Callable[[Params], bool] = field(compare=False)
    source: str = ""


@dataclass(frozen=True)
class GraphNames:
    """The op's nodes in a traced graph, for 2-D operands: TensorFlow's op type in a
    GraphDef and the class of torch's autograd node for its backward."""

    tf_op: str
    autograd_node: str


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
    ``dtype_exclusions``: floating dtypes a framework's documentation excludes, quoted;
    ``autocast``: its line in torch's Autocast Op Reference (None: the autocast suite does
    not call it); ``graph``: its node names in traced graphs (None: no tracing suite counts it).
    ``own_program_ids``: why the generated-programs suite gives the programs that contain the
    op test ids of their own (a known divergence on some stack fails every program with it,
    and its pin must name only those ids); empty: the op is drawn with the others.
    ``documented_limits``: parameter values a runtime (TF.js) documents as unsupported, quoted.
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
    dtype_exclusions: tuple[DtypeExclusion, ...] = ()
    autocast: Autocast | None = None
    graph: GraphNames | None = None
    own_program_ids: str = ""
    documented_limits: tuple[DocumentedLimit, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    def magnitude_class(self, p: Params) -> str:
        return self.magnitude(p) if callable(self.magnitude) else self.magnitude

    def documented_limit(self, runtime: str, params: Params) -> str | None:
        """The quoted sentence of ``runtime``'s documentation that excludes ``params``, or None."""
        for limit in self.documented_limits:
            if limit.runtime == runtime and limit.applies(params):
                return limit.source
        return None

    def excluded_dtypes(self, framework: str) -> tuple[tuple[str, ...], str] | None:
        """(dtypes, source) the framework's documentation excludes for this op, or None."""
        for e in self.dtype_exclusions:
            if e.framework == framework:
                return e.dtypes, e.source
        return None


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
