"""modules.keras.layer-contract: generic properties of every public keras.layers layer class, driven
by a table of constructor records (suites/modules/_keras_layer_records.py), after the idea of
Keras's own ``run_layer_test`` (keras/src/testing/test_case.py): one record per layer, one checker.

One test id per layer class; each test checks every variant of its record, property by property,
and fails with a message naming the layer, the variant and the property. Properties (the claim's
modes):

- ``output-shape``: the eager output has the documented shape (the record's, written from the
  docstring) and dtype kind; ``compute_output_shape`` returns that shape and
  ``compute_output_spec`` a spec of the real output's shape and dtype;
- ``weights-count``: the numbers of trainable and non-trainable weights after the first call;
- ``get_config-roundtrip``: ``from_config(get_config())`` given ``set_weights(get_weights())`` gives
  the same output bitwise, and its config equals the first (a second round trip changes nothing);
- ``keras-save-roundtrip``: one functional model per family holding every variant, saved to
  ``.keras`` and loaded with ``keras.saving.load_model``, gives bitwise the same outputs;
- ``training-flag``: a layer without randomness or batch statistics gives bitwise the same output
  with training=True and training=False; ``inference-identity``: a layer whose randomness applies
  "only during training" (dropout, noise, augmentation) is the identity with training=False;
  ``inference-repeatable``: two inference calls give the same output and leave every weight as it
  was (inference updates no state, batch-statistics layers included);
- ``masking``: a layer that says ``supports_masking`` and that the record says propagates the mask
  returns, for an input masked by an upstream ``keras.layers.Masking``, an output whose
  ``_keras_mask`` equals the input mask (the Keras masking guide's ``_keras_mask``; Layer's
  ``supports_masking``: "Whether this layer supports computing a mask using compute_mask").
  ``supports_masking`` itself is compared with the record's value (Keras 3.15.1's) as evidence
  only: most layers' documentation says nothing about it;
- ``mixed_float16``: built under the "mixed_float16" policy, the layer outputs float16 (its compute
  dtype) and keeps every variable in float32 (the mixed precision guide);
- ``float64``: built under the "float64" policy, output and variables are float64;
- ``gradient-fd``: in float64, the tape's vector-Jacobian product of the output w.r.t. the float
  inputs and the trainable weights agrees with central finite differences (``check_vjp``);
- ``hvp``: for the twice-differentiable layers (:data:`SECOND_ORDER`), the reverse-over-reverse
  Hessian-vector product (nested GradientTapes) w.r.t. the same variables agrees with central
  differences of the tape's gradient (``check_hvp``);
- ``table-complete``: the table names every public keras.layers layer class, aliases deduplicated,
  or lists it as out of scope with a reason.

Error model. Every property except ``gradient-fd`` is an exact equality (shapes, dtypes, counts,
bitwise outputs of the same computation on the same inputs and weights: the documented round trips
promise the same layer). ``gradient-fd``: ``check_vjp`` compares ``w . J u`` from the tape with
central differences at h = eps^(1/4) and h/2 (Richardson-extrapolated), its bound
``sqrt(eps) * ||g s|| ||u/s||`` plus the finite differences' own error. The forward pass is a
float64 evaluation of at most OPS = 64 chained operations (the deepest: an LSTM over 5 steps, 12
per step) and sums of at most REDUCTION = 64 terms, so each output element is off by at most
``(4 OPS + REDUCTION) u64`` times the largest output magnitude (docs/tolerances.md); that is
passed as ``f_error`` so the noise it implies widens the allowance (or makes the check
inconclusive, never a pass). Inputs are standard normal, so a piecewise-linear kink (ReLU, max
pooling, Maximum) lies within a step h ~ 1e-4 of an input with probability of order 1e-4 per
element, and the seeds are fixed (derandomized).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import assert_close, assert_equal, check_hvp, check_vjp, evidence, tolerance

from . import _keras_layer_records as rec

CLAIM = "modules.keras.layer-contract"
OPS, REDUCTION = 64, 64
FAMILY = "keras.layers"  # the combinations ledger's family of these records (one record per variant)
#: Layers with a second-order check (``hvp``): twice differentiable at every input, weights included
#: (affine maps, convolutions and their transposes are bilinear in input and kernel; tanh, sigmoid,
#: softplus, softmax, normalisations with their epsilon, attention, the gated recurrences). A
#: variant whose arguments name relu is left out; so are piecewise-linear layers (max pooling,
#: ReLU and its kin, Maximum/Minimum), whose Hessian is zero between kinks that a central difference
#: of the gradient may straddle, and layers whose output is linear in every float input with no
#: weights (pooling by averages, reshapes, padding: a zero Hessian, checked by nothing more than
#: that).
SECOND_ORDER = frozenset({
    "Dense", "EinsumDense", "Activation", "Softmax", "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose",
    "Conv2DTranspose", "Conv3DTranspose", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D",
    "SeparableConv2D", "BatchNormalization", "LayerNormalization", "GroupNormalization", "UnitNormalization",
    "RMSNormalization", "Attention", "AdditiveAttention", "MultiHeadAttention", "GroupQueryAttention", "SimpleRNN",
    "LSTM", "GRU", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "Multiply", "Dot"})


def gradient_checked(record: rec.Record, variant: rec.Variant) -> bool:
    """check_float64 checks this variant's gradient (float inputs or trainable weights)."""
    return bool(record.numeric and variant.out_dtype == "float" and variant.differentiable
                and (any(i.kind in ("float", "image", "positive") for i in variant.inputs) or variant.weights[0]))


def second_order_checked(record: rec.Record, variant: rec.Variant) -> bool:
    return (gradient_checked(record, variant) and record.name in SECOND_ORDER and not callable(variant.kwargs)
            and "relu" not in repr(variant.kwargs))


def registered(record: rec.Record, variant: rec.Variant) -> list[str]:
    return ["gradient-fd"] * gradient_checked(record, variant) + ["hvp"] * second_order_checked(record, variant)
NAMES = [r.name for r in rec.RECORDS]


class PropertyFailed(AssertionError):
    pass


@contextmanager
def prop(where: str, name: str) -> Iterator[None]:
    """Name the layer, variant and property in any failure raised inside (framework errors too)."""
    __tracebackhide__ = True
    try:
        yield
    except PropertyFailed:
        raise
    except Exception as exc:  # a framework call that raises where the docs say it works
        raise PropertyFailed(f"{where}: {name}: {type(exc).__name__}: {exc}") from exc


@contextmanager
def policy(keras: Any, name: str) -> Iterator[None]:
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


def call(layer: Any, xs: Sequence[Any], variant: rec.Variant, **kwargs: Any) -> Any:
    if variant.call == "list":
        return layer(list(xs), **kwargs)
    if variant.call == "args":
        return layer(*xs, **kwargs)
    return layer(xs[0], **kwargs)


def numpy(y: Any) -> np.ndarray:
    return np.asarray(y.numpy() if hasattr(y, "numpy") else y)


def build(keras: Any, record: rec.Record, variant: rec.Variant) -> Any:
    return rec.layer_class(keras, record)(**variant.build_kwargs(keras))


def dtype_name(x: Any) -> str:
    d = getattr(x, "dtype", x)
    return str(getattr(d, "name", d))


def is_float(variant: rec.Variant, k: int) -> bool:
    return variant.inputs[k].kind in ("float", "image", "positive")


# ------------------------------------------------------------------ the per-layer test


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", NAMES)
def test_layer_contract(keras: Any, name: str) -> None:
    record = rec.BY_NAME[name]
    for index, variant in enumerate(record.variants):
        evidence.registers(FAMILY, f"{name}[{index}]", registered(record, variant))
    failures = [f for index, variant in enumerate(record.variants) for f in check_all(keras, record, variant, index)]
    if failures:
        raise PropertyFailed("\n".join(failures))


def check_all(keras: Any, record: rec.Record, variant: rec.Variant, index: int) -> list[str]:
    """Every property of one variant, in four independent parts (a failure in one does not hide the
    others): the eager properties, masking, mixed_float16, float64 with gradient-fd. Returns the
    failure messages."""
    failures: list[str] = []
    layer, xs = None, []
    try:
        layer, xs = check_variant(keras, record, variant, index)
    except AssertionError as exc:
        failures.append(str(exc))
    parts = []
    if layer is not None:
        parts.append(lambda: check_masking(keras, record, variant, layer, xs, _where(record, variant, index)))
    if record.numeric and variant.out_dtype == "float":
        parts += [lambda: check_mixed(keras, record, variant, index, _where(record, variant, index)),
                  lambda: check_float64(keras, record, variant, index, _where(record, variant, index))]
    for part in parts:
        try:
            part()
        except AssertionError as exc:
            failures.append(str(exc))
    return failures


def _where(record: rec.Record, variant: rec.Variant, index: int) -> str:
    return f"{record.name} variant {index} {variant.kwargs if not callable(variant.kwargs) else '(nested layers)'}"


def check_variant(keras: Any, record: rec.Record, variant: rec.Variant, index: int) -> tuple[Any, list[Any]]:
    """The eager properties, in order (each needs the ones before); returns the layer and inputs."""
    __tracebackhide__ = True
    where = _where(record, variant, index)
    xs = rec.inputs_for(record, variant, index)

    def fail(name: str, message: str) -> None:
        raise PropertyFailed(f"{where}: {name}: {message}")

    with prop(where, "output-shape"):
        layer = build(keras, record, variant)
        y = call(layer, xs, variant, training=False)
        out = numpy(y)
        if tuple(out.shape) != variant.output:
            fail("output-shape", f"output shape {tuple(out.shape)}, documented {variant.output}")
        kind_ok = (dtype_name(y) == "float32") if variant.out_dtype == "float" else np.issubdtype(out.dtype, np.integer)
        if not kind_ok:
            fail("output-shape", f"output dtype {dtype_name(y)}, documented {variant.out_dtype}")
    evidence.covers("output-shape")

    shapes = [tuple(x.shape) for x in xs]
    if record.shape_method:
        with prop(where, "compute_output_shape"):
            if variant.call == "list":
                predicted = layer.compute_output_shape(shapes)
            elif variant.call == "args":
                predicted = layer.compute_output_shape(*shapes)
            else:
                predicted = layer.compute_output_shape(shapes[0])
            if tuple(predicted) != variant.output:
                fail("compute_output_shape", f"returned {tuple(predicted)}, the output has {variant.output}")
        evidence.covers("compute_output_shape")
    else:  # no compute_output_shape of its own to check: compute_output_spec below is
        evidence.note(compute_output_shape=f"{record.name}: none of its own (the base Layer's default raises)")

    with prop(where, "compute_output_spec"):
        specs = [keras.KerasTensor(x.shape, dtype="string" if x.dtype == object else x.dtype.name) for x in xs]
        spec = layer.compute_output_spec(specs) if variant.call == "list" else \
            layer.compute_output_spec(*specs) if variant.call == "args" else layer.compute_output_spec(specs[0])
        if tuple(spec.shape) != tuple(out.shape) or dtype_name(spec) != dtype_name(y):
            fail("compute_output_spec", f"spec {tuple(spec.shape)} {dtype_name(spec)}, output {tuple(out.shape)} "
                                        f"{dtype_name(y)}")
    evidence.covers("compute_output_spec")

    counts = (len(layer.trainable_weights), len(layer.non_trainable_weights))
    if counts != variant.weights:
        fail("weights-count", f"(trainable, non-trainable) weights {counts}, expected {variant.weights}: "
                              f"{[w.path for w in layer.weights]}")
    evidence.covers("weights-count")

    with prop(where, "get_config-roundtrip"):
        config = layer.get_config()
        twin = type(layer).from_config(layer.get_config())  # a fresh copy: from_config may consume its argument
        call(twin, xs, variant, training=False)
        twin.set_weights(layer.get_weights())
        assert_equal(numpy(call(twin, xs, variant, training=False)), out, what=f"{where}: get_config-roundtrip output")
        again = twin.get_config()
        if again != config:
            diff = {k: (config.get(k), again.get(k)) for k in set(config) | set(again) if config.get(k) != again.get(k)}
            fail("get_config-roundtrip", f"config changed by a round trip: {diff}")
    evidence.covers("get_config-roundtrip")

    with prop(where, "inference-repeatable"):
        before = [numpy(w).copy() for w in layer.weights]
        assert_equal(numpy(call(layer, xs, variant, training=False)), out,
                     what=f"{where}: inference-repeatable (training=False vs the first call)")
        for w, b in zip(layer.weights, before):
            assert_equal(numpy(w), b, what=f"{where}: inference-repeatable: weight {w.path} unchanged by inference")
    evidence.covers("inference-repeatable")

    if record.kind in ("plain", "lookup"):
        with prop(where, "training-flag"):
            assert_equal(numpy(call(layer, xs, variant, training=True)), out,
                         what=f"{where}: training-flag (training=True vs training=False)")
        evidence.covers("training-flag")
    elif record.identity:
        with prop(where, "inference-identity"):
            assert_equal(out, xs[0], what=f"{where}: inference-identity (training=False returns the input)")
        evidence.covers("inference-identity")

    return layer, xs


def check_masking(keras: Any, record: rec.Record, variant: rec.Variant, layer: Any, xs: list[Any], where: str) -> None:
    __tracebackhide__ = True
    if bool(layer.supports_masking) != variant.mask:
        # Most layers' docs say nothing about masking: the record's value is what Keras 3.15.1 has,
        # so a change is evidence for an upgrade's comparison, not a violation.
        evidence.note(**{f"supports_masking_changed.{record.name}": f"{layer.supports_masking}, "
                                                                    f"recorded {variant.mask}"})
    if not (variant.propagates and layer.supports_masking):
        evidence.covers("masking")
        return
    with prop(where, "masking"):
        mask = np.ones(xs[0].shape[:-1], dtype=bool)
        mask[(0,) * (mask.ndim - 1) + (-1,)] = False  # the first sample's last step (or feature row) is masked
        masked = []
        for x in xs:
            z = x.copy()
            z[~mask] = 0.0
            masked.append(keras.layers.Masking(0.0)(z))
        y = call(layer, masked, variant)
        got = getattr(y, "_keras_mask", None)
        if got is None:
            raise PropertyFailed(f"{where}: masking: the output carries no mask, the input mask was {mask.tolist()}")
        assert_equal(numpy(got), mask, what=f"{where}: masking (output _keras_mask equals the input mask)")
    evidence.covers("masking")


def check_mixed(keras: Any, record: rec.Record, variant: rec.Variant, index: int, where: str) -> None:
    __tracebackhide__ = True
    xs32 = rec.inputs_for(record, variant, index)
    with prop(where, "mixed_float16"), policy(keras, "mixed_float16"):
        layer = build(keras, record, variant)
        y = call(layer, xs32, variant, training=False)
        bad = [f"{w.path}: {dtype_name(w)}" for w in layer.weights if dtype_name(w) != "float32"]
        if dtype_name(y) != "float16" or bad:
            raise PropertyFailed(f"{where}: mixed_float16: output {dtype_name(y)} (expected float16), "
                                 f"variables not float32: {bad}")
    evidence.covers("mixed_float16")


def check_float64(keras: Any, record: rec.Record, variant: rec.Variant, index: int, where: str) -> None:
    __tracebackhide__ = True
    xs64 = rec.inputs_for(record, variant, index, dtype="float64")
    with prop(where, "float64"), policy(keras, "float64"):
        layer = build(keras, record, variant)
        y = call(layer, xs64, variant, training=False)
        bad = [f"{w.path}: {dtype_name(w)}" for w in layer.weights if dtype_name(w) != "float64"]
        if dtype_name(y) != "float64" or bad:
            raise PropertyFailed(f"{where}: float64: output {dtype_name(y)}, variables not float64: {bad}")
        y64 = numpy(y)
        if y64.size and np.array_equal(y64.astype(np.float32).astype(np.float64), y64):
            raise PropertyFailed(f"{where}: float64: every output element is a float32 number, so the layer "
                                 "computed in float32 (float64 inputs and weights give float64 results almost "
                                 "never representable in float32)")
    evidence.covers("float64")

    floats = [k for k in range(len(xs64)) if is_float(variant, k)]
    if not variant.differentiable or not (floats or layer.trainable_weights):
        return
    with prop(where, "gradient-fd"):
        problem = check_gradient(keras, layer, variant, xs64, floats, where)
    evidence.covers("gradient-fd")
    evidence.visits(FAMILY, f"{record.name}[{index}]", "gradient-fd")
    if not second_order_checked(record, variant):
        return
    with prop(where, "hvp"):
        check_second_order(problem, where)
    evidence.covers("hvp")
    evidence.visits(FAMILY, f"{record.name}[{index}]", "hvp")


def check_gradient(keras: Any, layer: Any, variant: rec.Variant, xs64: list[Any], floats: list[int],
                   where: str) -> dict[str, Any]:
    """check_vjp of the float64 layer w.r.t. its float inputs and trainable weights (module docstring);
    returns the closures check_second_order needs."""
    __tracebackhide__ = True
    import tensorflow as tf

    weights = list(layer.trainable_weights)
    start = [xs64[k] for k in floats] + [numpy(w).copy() for w in weights]
    names = [f"input {k}" for k in floats] + [w.path for w in weights]

    def inputs(arrays: Sequence[np.ndarray]) -> list[Any]:
        full = list(xs64)
        for j, k in enumerate(floats):
            full[k] = tf.constant(arrays[j])
        for w, a in zip(weights, arrays[len(floats):]):
            w.assign(a)
        return full

    def f(arrays: list[np.ndarray]) -> np.ndarray:
        return numpy(call(layer, inputs(arrays), variant, training=False))

    def vjp(arrays: list[np.ndarray], cot: np.ndarray) -> list[Any]:
        full = inputs(arrays)
        with tf.GradientTape() as tape:
            for k in floats:
                tape.watch(full[k])
            y = call(layer, full, variant, training=False)
        grads = tape.gradient(y, [full[k] for k in floats] + [w.value for w in weights],
                              output_gradients=tf.constant(cot))
        return [None if g is None else numpy(tf.convert_to_tensor(g)) for g in grads]

    def hvp(arrays: list[np.ndarray], cot: np.ndarray, vs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Reverse over reverse: the gradient of <vjp(cot), v> (nested GradientTapes)."""
        full = inputs(arrays)
        targets = [full[k] for k in floats] + [w.value for w in weights]
        with tf.GradientTape() as outer:
            for k in floats:
                outer.watch(full[k])
            with tf.GradientTape() as inner:
                for k in floats:
                    inner.watch(full[k])
                y = call(layer, full, variant, training=False)
            gs = inner.gradient(y, targets, output_gradients=tf.constant(cot))
            dot = tf.add_n([tf.reduce_sum(tf.convert_to_tensor(g) * tf.constant(v)) for g, v in zip(gs, vs)
                            if g is not None] or [tf.constant(0.0, tf.float64)])
        hs = outer.gradient(dot, targets)
        return [np.zeros_like(a) if h is None else numpy(tf.convert_to_tensor(h)) for h, a in zip(hs, arrays)]

    def grad(arrays: list[np.ndarray], cot: np.ndarray) -> list[np.ndarray]:
        return [np.zeros_like(a) if g is None else g for g, a in zip(vjp(arrays, cot), arrays)]

    y0 = f(start)
    scale = float(np.max(np.abs(y0))) if start else 1.0
    f_error = tolerance("float64", ops=OPS, reduction=REDUCTION).rtol * max(1.0, scale)
    try:
        check_vjp(f, start, vjp, names=names, f_error=f_error, seed=len(where), directions=len(start) + 1)
    finally:
        for w, a in zip(weights, start[len(floats):]):
            w.assign(a)
    return {"grad": grad, "hvp": hvp, "start": start, "names": names, "out_shape": y0.shape,
            "restore": lambda: [w.assign(a) for w, a in zip(weights, start[len(floats):])]}


def check_second_order(problem: dict[str, Any], where: str) -> None:
    """check_hvp: the reverse-over-reverse Hessian-vector product against central differences of the
    tape's gradient (itself checked by gradient-fd). Error model: the gradient is a float64 reverse
    pass of the same OPS-deep, REDUCTION-wide computation, so each gradient element's rounding per
    unit of ||w||_1 is the forward's relative bound times max|J|, the largest Jacobian entry, which
    the largest element of J^T w for a standard normal w estimates (a column's norm, >= its largest
    entry): the ``derivative_error`` check_hvp adds to the finite differences' own error."""
    __tracebackhide__ = True
    start = problem["start"]
    rng = np.random.default_rng(len(where))
    w = rng.standard_normal(problem["out_shape"])
    g_scale = max((float(np.max(np.abs(g), initial=0.0)) for g in problem["grad"](start, w)), default=0.0)
    b = tolerance("float64", ops=OPS, reduction=REDUCTION).rtol * max(1.0, g_scale)
    try:
        res = check_hvp(problem["grad"], problem["hvp"], start, problem["out_shape"], seed=len(where),
                        names=problem["names"], derivative_error=b)
    finally:
        problem["restore"]()
    evidence.check("hvp vs finite differences of the gradient", observed=res.max_error_ratio, tolerance=1.0)


# ------------------------------------------------------------------ the functional merge forms


def _l2_normalize(x: np.ndarray, axis: int) -> np.ndarray:
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=axis, keepdims=True)), 1e-12)


#: keras.layers' functional interfaces ("Functional interface to the keras.layers.Add layer"): name ->
#: (number of inputs, keyword arguments, numpy reference in float64, exact). Each returns the layer's
#: output: elementwise sums, differences, products and means of float32 inputs are one rounding of
#: the exact value per operation (n - 1 of them), maxima, minima and concatenations are exact, a dot
#: product of 4 terms (normalised: 4 more per norm) rounds each term and each partial sum.
MERGE_FUNCTIONS: dict[str, tuple[int, dict[str, Any], Any, bool]] = {
    "add": (3, {}, lambda xs: xs[0] + xs[1] + xs[2], False),
    "subtract": (2, {}, lambda xs: xs[0] - xs[1], True),
    "multiply": (3, {}, lambda xs: xs[0] * xs[1] * xs[2], False),
    "average": (3, {}, lambda xs: (xs[0] + xs[1] + xs[2]) / 3, False),
    "maximum": (3, {}, lambda xs: np.maximum(np.maximum(xs[0], xs[1]), xs[2]), True),
    "minimum": (3, {}, lambda xs: np.minimum(np.minimum(xs[0], xs[1]), xs[2]), True),
    "concatenate": (2, {"axis": 1}, lambda xs: np.concatenate(xs, axis=1), True),
    "concatenate(axis=-1)": (2, {}, lambda xs: np.concatenate(xs, axis=-1), True),
    "dot": (2, {"axes": 1}, lambda xs: np.sum(xs[0] * xs[1], axis=1, keepdims=True), False),
    "dot(normalize=True)": (2, {"axes": 1, "normalize": True},
                            lambda xs: np.sum(_l2_normalize(xs[0], 1) * _l2_normalize(xs[1], 1), axis=1, keepdims=True),
                            False),
}


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("form", list(MERGE_FUNCTIONS))
def test_functional_merge_form_computes_its_layer(keras: Any, form: str) -> None:
    """keras.layers.add/subtract/multiply/average/maximum/minimum/concatenate/dot on eager float32
    inputs return what their layer computes (against a float64 numpy reference, within one float32
    rounding per operation; exact where no rounding occurs), in the layer's output shape."""
    n, kwargs, reference, exact = MERGE_FUNCTIONS[form]
    rng = np.random.default_rng(len(form))
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(n)]
    got = numpy(getattr(keras.layers, form.split("(")[0])(xs, **kwargs))
    want = reference([x.astype(np.float64) for x in xs])
    if exact:
        assert_equal(got, want.astype(np.float32), what=f"keras.layers.{form} of {n} inputs")
    else:
        terms = 12 if "normalize" in form else 4
        assert_close(got, want, tolerance("float32", ops=terms, reduction=4), what=f"keras.layers.{form} of {n} inputs")
    evidence.covers("functional-merge")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", ["Dense", "Conv1D", "LSTM", "Dot"])
def test_layers_serialize_and_deserialize_round_trip(keras: Any, name: str) -> None:
    """keras.layers.serialize returns the layer's configuration as a dict, deserialize rebuilds a layer
    of the same class and config (the docstrings' round trip), for one variant of a few families."""
    record = rec.BY_NAME[name]
    variant = record.variants[-1]
    layer = build(keras, record, variant)
    config = keras.layers.serialize(layer)
    assert isinstance(config, dict) and config.get("config") == layer.get_config(), (
        f"keras.layers.serialize({name}) gave {config!r}, whose 'config' should be the layer's get_config()")
    again = keras.layers.deserialize(config)
    assert type(again) is type(layer) and again.get_config() == layer.get_config(), (
        f"keras.layers.deserialize(serialize({name})) gave {type(again).__name__} with config {again.get_config()}, "
        f"expected {type(layer).__name__} with {layer.get_config()}")
    evidence.covers("serialize")


# ------------------------------------------------------------------ .keras round trip, one model per family


def _symbolic_model(keras: Any, records: Sequence[rec.Record]) -> tuple[Any, list[np.ndarray], list[str], list[str]]:
    """One functional model holding every variant of ``records`` (a variant whose eager call raises is
    left out and named in the last list: its own test reports it)."""
    inputs, outputs, arrays, labels, broken = [], [], [], [], []
    for record in records:
        for index, variant in enumerate(record.variants):
            label = f"{record.name} variant {index}"
            xs = rec.inputs_for(record, variant, index)
            try:
                layer = build(keras, record, variant)
                call(layer, xs, variant, training=False)  # build the weights eagerly, then wire the same layer
            except Exception as exc:
                broken.append(f"{label}: {type(exc).__name__} before saving")
                continue
            symbolic = [keras.Input(shape=x.shape[1:], batch_size=x.shape[0],
                                    dtype="string" if x.dtype == object else x.dtype.name) for x in xs]
            outputs.append(call(layer, symbolic, variant))
            inputs += symbolic
            arrays += xs
            labels.append(label)
    return keras.Model(inputs, outputs), arrays, labels, broken


def _save_load_compare(keras: Any, records: Sequence[rec.Record], path: Any) -> list[str]:
    """Save and load one model of ``records``; compare each output bitwise (raises on a difference)."""
    model, arrays, labels, broken = _symbolic_model(keras, records)
    want = [numpy(y) for y in model(arrays, training=False)]
    model.save(path)
    loaded = keras.saving.load_model(path)
    got = [numpy(y) for y in loaded(arrays, training=False)]
    for label, g, w in zip(labels, got, want):
        assert_equal(g, w, what=f"{label}: keras-save-roundtrip (loaded .keras model output)")
    return broken


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("family", list(rec.FAMILIES))
def test_keras_save_roundtrip(keras: Any, family: str, tmp_path: Any) -> None:
    """One saved model per family; if that save or load raises, one model per layer names the culprits
    and the other layers are still checked."""
    records = rec.FAMILIES[family]
    try:
        broken = _save_load_compare(keras, records, tmp_path / f"{family}.keras")
    except AssertionError:
        raise
    except Exception:
        broken = []
        for record in records:
            try:
                broken += _save_load_compare(keras, [record], tmp_path / f"{record.name}.keras")
            except AssertionError:
                raise
            except Exception as exc:
                broken.append(f"{record.name}: {type(exc).__name__} in save/load: {str(exc)[:300]}")
    assert not broken, "keras-save-roundtrip: these layers could not be saved and loaded:\n" + "\n".join(broken)
    evidence.covers("keras-save-roundtrip")


# ------------------------------------------------------------------ the table names every layer class


def public_layer_classes(keras: Any) -> dict[str, list[str]]:
    """Every public keras.layers class that subclasses keras.layers.Layer, by its first alias."""
    found: dict[Any, list[str]] = {}
    for name in sorted(dir(keras.layers)):
        obj = getattr(keras.layers, name)
        if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer):
            found.setdefault(obj, []).append(name)
    return {names[0]: names for names in found.values()}


def table_problems(public: dict[str, list[str]], recorded: Sequence[str], out_of_scope: Sequence[str]) -> list[str]:
    """What keeps the table from naming each public layer class exactly once (empty when complete)."""
    alias = {n: first for first, names in public.items() for n in names}
    covered: dict[str, str] = {}
    problems = []
    for name in [*recorded, *out_of_scope]:
        if name not in alias:
            problems.append(f"{name} is in the table but keras.layers has no such layer class")
        elif alias[name] in covered:
            problems.append(f"{name} is listed twice (as {covered[alias[name]]} too)")
        else:
            covered[alias[name]] = name
    problems += [f"{first} (aliases {names}) has no record and is not listed as out of scope"
                 for first, names in public.items() if first not in covered]
    return problems


@pytest.mark.claim(CLAIM)
def test_table_names_every_layer_class(keras: Any) -> None:
    public = public_layer_classes(keras)
    problems = table_problems(public, rec.BY_NAME, list(rec.OUT_OF_SCOPE))
    assert not problems, "the records table is incomplete:\n" + "\n".join(problems)
    evidence.note(public_classes=len(public), recorded=len(rec.RECORDS), out_of_scope=len(rec.OUT_OF_SCOPE),
                  variants=sum(len(r.variants) for r in rec.RECORDS))
    evidence.covers("table-complete")
