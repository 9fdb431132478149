"""precision.keras.*: the mixed_float16 policy, automatic loss scaling, skipped steps.

Every test that sets Keras's global dtype policy does it in ``keras_policy``, which
restores the previous policy (the plugin's guard fails a test that leaks it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, assert_equal, budget, devices, evidence, not_applicable, tolerance
from pytest_dlconform.api.precision import DynamicScale, check_scale, keras_policy

LOW = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
KINDS = ("dense", "conv", "layernorm", "batchnorm", "embedding", "softmax")
SHAPES = {"dense": (5,), "conv": (5, 5, 2), "layernorm": (6,), "batchnorm": (6,), "embedding": (3,), "softmax": (6,)}
FAN_IN = {"dense": 5, "conv": 8, "layernorm": 6, "batchnorm": 1, "embedding": 1, "softmax": 6}
#: The layer class per kind, as the modes name it.
CLASS = {"dense": "Dense", "conv": "Conv2D", "layernorm": "LayerNormalization", "batchnorm": "BatchNormalization",
         "embedding": "Embedding", "softmax": "Activation-softmax"}
VOCAB = 7


def make_layer(keras: Any, kind: str, **kw: Any) -> Any:
    L = keras.layers
    return {"dense": lambda: L.Dense(4, **kw), "conv": lambda: L.Conv2D(3, 2, **kw),
            "layernorm": lambda: L.LayerNormalization(**kw), "batchnorm": lambda: L.BatchNormalization(**kw),
            "embedding": lambda: L.Embedding(VOCAB, 4, **kw), "softmax": lambda: L.Activation("softmax", **kw)}[kind]()


def random_weights(layer: Any, rng: np.random.Generator) -> list[np.ndarray]:
    # Positive where a variance is stored (the last weight of BatchNormalization).
    shapes = [tuple(w.shape) for w in layer.weights]
    out = [rng.uniform(-1.0, 1.0, size=s).astype(np.float32) for s in shapes]
    if len(shapes) == 4:
        out[3] = rng.uniform(0.5, 2.0, size=shapes[3]).astype(np.float32)
    return out


def bf16_missing(tf: Any, device: str) -> str | None:
    """Why this test instance's GPU cannot compute in bfloat16 (None: it can, or the CPU)."""
    if device == "cpu":
        return None
    gpus = tf.config.list_physical_devices("GPU")
    cap = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability") if gpus else None
    return devices.bf16_support(f"{cap[0]}.{cap[1]}" if cap else "")


@pytest.mark.claim("precision.keras.mixed-float16")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("policy", sorted(LOW))
@budget(2)
@given(batch=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_layers_compute_in_low_precision_and_keep_float32_variables(tf, keras_tf, dl_device, policy, kind, batch, seed):
    keras, low = keras_tf, LOW[policy]
    if low == "bfloat16" and (why := bf16_missing(tf, dl_device)):
        not_applicable(f"mixed_bfloat16 on {dl_device}: {why}")
    rng = np.random.default_rng(seed)
    before = make_layer(keras, kind)  # created under the previous (float32) policy
    with keras_policy(keras, policy) as active:
        assert active.name == policy and keras.mixed_precision.global_policy().name == policy
        layer = make_layer(keras, kind)
        pinned = make_layer(keras, kind, dtype="float32")
    if kind == "embedding":
        x = rng.integers(0, VOCAB, size=(batch, *SHAPES[kind]))
    else:
        x = rng.normal(size=(batch, *SHAPES[kind])).astype(np.float32)
    for lay in (layer, pinned, before):
        lay.build(x.shape)
    weights = random_weights(layer, rng)
    for lay in (layer, pinned):
        lay.set_weights(weights)
    out = layer(x)
    assert (layer.dtype_policy.name, layer.compute_dtype, layer.variable_dtype) == (policy, low, "float32"), (
        f"{kind} created under {policy}: policy {layer.dtype_policy.name}, compute {layer.compute_dtype}, "
        f"variables {layer.variable_dtype}; should be {policy}, {low}, float32")
    variables = [w.dtype for w in layer.weights]
    assert set(variables) <= {"float32"}, f"{kind} variables {variables}, should be float32"
    assert out.dtype.name == low, f"{kind} under {policy} returned {out.dtype.name} for {x.dtype} input, should be {low}"
    assert pinned.compute_dtype == "float32" and pinned(x).dtype.name == "float32", "dtype='float32' should override the policy"
    assert before.dtype_policy.name == "float32", f"a layer created before the policy changed has {before.dtype_policy.name}"
    expected = pinned(x).numpy()
    if kind == "embedding":  # a lookup: the float32 rows, rounded once to the compute dtype
        assert_equal(np.asarray(out, dtype=np.float32), expected.astype(low).astype(np.float32),
                     what=f"Embedding under {policy}: the float32 rows rounded to {low}")
    else:
        # The low-precision run rounds inputs and weights to the low dtype, then computes. For
        # softmax the input rounding (u |x| each) moves every output by up to 2 u max|x|
        # relative (softmax's condition), on top of the exp, sum and divide roundings.
        ops = 4 + (2 * int(np.ceil(np.max(np.abs(x)))) if kind == "softmax" else 0)
        assert_close(np.asarray(out, dtype=np.float32), expected, tolerance(low, ops=ops, reduction=FAN_IN[kind]),
                     what=f"{kind} under {policy} vs the float32 layer with the same weights")
    evidence.covers(f"{policy}.{CLASS[kind]}", "dtype=float32-override", "created-before-policy")


@pytest.mark.claim("precision.keras.mixed-float16")
def test_compile_wraps_the_optimizer_only_for_mixed_float16(tf, keras_tf):
    keras = keras_tf
    cases = [("mixed_float16", True, True), ("mixed_float16", False, False), ("mixed_bfloat16", True, False),
             ("float32", True, False)]
    for policy, auto, wrapped in cases:
        with keras_policy(keras, policy):
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        sgd = keras.optimizers.SGD(0.1)
        model.compile(optimizer=sgd, loss="mse", auto_scale_loss=auto)
        is_wrapped = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        assert is_wrapped == wrapped, (
            f"policy {policy}, auto_scale_loss={auto}: LossScaleOptimizer {is_wrapped}, should be {wrapped}")
        if wrapped:
            opt = model.optimizer
            assert opt.inner_optimizer is sgd, "the LossScaleOptimizer should wrap the optimizer passed to compile"
            assert (opt.initial_scale, opt.dynamic_growth_steps) == (2.0**15, 2000), (
                f"documented defaults 2**15 and 2000, got {opt.initial_scale} and {opt.dynamic_growth_steps}")
    with keras_policy(keras, "mixed_float16"):
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    already = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    model.compile(optimizer=already, loss="mse")
    assert model.optimizer is already, "an optimizer that is already a LossScaleOptimizer must not be wrapped again"
    evidence.covers("compile+auto_scale_loss=True", "compile+auto_scale_loss=False", "compile+mixed_bfloat16",
                    "compile+float32", "no-double-wrap")


def mixed_and_float32_models(keras: Any, rng: np.random.Generator, lr: float) -> tuple[Any, Any]:
    models = []
    for policy in ("mixed_float16", "float32"):
        with keras_policy(keras, policy):
            model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="tanh"), keras.layers.Dense(2)])
        models.append(model)
    weights = [rng.uniform(-0.5, 0.5, size=w.shape).astype(np.float32) for w in models[0].weights]
    for model in models:
        model.set_weights(weights)
        model.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
    return models[0], models[1]


@pytest.mark.claim("precision.keras.mixed-float16")
def test_train_step_skips_non_finite_gradients_and_otherwise_matches_float32(tf, keras_tf, dl_seed):
    keras = keras_tf
    rng = np.random.default_rng(dl_seed)
    mixed, full = mixed_and_float32_models(keras, rng, lr=0.05)
    opt = mixed.optimizer
    x = rng.normal(size=(8, 6)).astype(np.float32)
    y = rng.normal(size=(8, 2)).astype(np.float32)
    overflow = x.copy()
    overflow[0, 0] = 7e4  # above float16's largest finite value 65504: inf in the float16 forward pass
    start = [w.copy() for w in mixed.get_weights()]
    mixed.train_on_batch(overflow, y)
    for before, after in zip(start, mixed.get_weights()):
        assert_equal(after, before, what="weights after a step with non-finite gradients")
    assert int(opt.iterations) == 0, f"iterations {int(opt.iterations)} after a skipped step, should be 0"
    assert float(opt.dynamic_scale) == 2.0**14, f"loss scale {float(opt.dynamic_scale)} after a skipped step, should be 2**14"
    mixed.train_on_batch(x, y)
    full.train_on_batch(x, y)
    assert int(opt.iterations) == 1, f"iterations {int(opt.iterations)} after one finite step, should be 1"
    for i, (w0, wm, wf) in enumerate(zip(start, mixed.get_weights(), full.get_weights())):
        # The update is a gradient computed in float16: compare updates, not weights.
        assert_close(wm - w0, wf - w0, tolerance("float16", ops=8, reduction=8),
                     what=f"weight {i}: mixed_float16 step vs float32 step")
    evidence.note(scale_after_skip=float(opt.dynamic_scale))
    evidence.covers("train-step-skips-non-finite", "train-step-matches-float32")


@pytest.mark.claim("precision.keras.mixed-float16")
def test_loss_scaling_recovers_gradients_that_underflow_in_float16(tf, keras_tf, dl_seed):
    keras = keras_tf
    rng = np.random.default_rng(dl_seed)
    # 2**-27 * |c| < 2**-25, half of float16's smallest subnormal: the upstream gradient
    # rounds to exactly 0 when it is cast to float16 at the layer's output.
    tiny = 2.0**-27
    with keras_policy(keras, "mixed_float16"):
        layer = keras.layers.Dense(4)
    full = keras.layers.Dense(4, dtype="float32")
    x = rng.normal(size=(8, 5)).astype(np.float32)
    c = tf.constant(rng.uniform(-1.0, 1.0, size=(8, 4)).astype(np.float32))
    for lay in (layer, full):
        lay.build(x.shape)
    full.set_weights(layer.get_weights())

    def gradient(lay: Any, scale: Any = None) -> np.ndarray:
        with tf.GradientTape() as tape:
            loss = tiny * tf.reduce_sum(tf.cast(lay(x), tf.float32) * c)
            if scale is not None:
                loss = scale.scale_loss(loss)
        return tape.gradient(loss, lay.kernel).numpy()

    g32 = gradient(full)
    assert np.max(np.abs(g32)) > 0, "the float32 gradient should not vanish"
    assert_equal(gradient(layer), np.zeros_like(g32), what="unscaled float16 gradient (underflows to 0)")
    scaler = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    unscaled = gradient(layer, scaler) / scaler.initial_scale
    assert_close(unscaled, g32, tolerance("float16", ops=4, reduction=8),
                 what="loss-scaled float16 gradient, unscaled, vs the float32 gradient")
    evidence.covers("loss-scaling-recovers-underflow")


@pytest.mark.claim("precision.keras.loss-scale-optimizer")
@budget(10)
@given(initial=st.sampled_from([1.0, 2.0**4, 2.0**15, 2.0**24]) | st.floats(1.0, 1e6),
       growth_steps=st.integers(1, 4), lr=st.sampled_from([0.1, 1.0]),
       steps=st.lists(st.sampled_from(["finite", "inf", "nan"]), min_size=1, max_size=8),
       seed=st.integers(0, 2**32 - 1))
def test_loss_scale_optimizer_follows_dynamic_loss_scaling(tf, keras_tf, initial, growth_steps, lr, steps, seed):
    keras = keras_tf
    rng = np.random.default_rng(seed)
    var = keras.Variable(rng.normal(size=3).astype(np.float32))
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(lr), initial_scale=initial,
                                              dynamic_growth_steps=growth_steps)
    ref = DynamicScale(initial, 2.0, 0.5, growth_steps)
    for n, kind in enumerate(steps):
        check_scale(float(opt.scale_loss(1.0)), ref, f"step {n}: scale_loss(1.0)")
        g = (rng.normal(size=3) * ref.scale).astype(np.float32)  # a scaled gradient, as the tape gives it
        if kind != "finite":
            g[rng.integers(3)] = np.inf if kind == "inf" else np.nan
        before = var.numpy().copy()
        opt.apply([tf.constant(g)], [var])
        if kind == "finite":
            step = np.float32(lr) * (g / np.float32(ref.scale))
            # before - step can cancel: the step's rounding is relative to |step|, not to the result.
            assert_close(var.numpy(), before - step,
                         tolerance("float32", ops=3, magnitude=float(np.max(np.abs(before) + np.abs(step)))),
                         what=f"step {n}: variable after a finite step")
        else:
            assert_equal(var.numpy(), before, what=f"step {n}: variable after a step with {kind} gradients")
        grew = ref.scale
        ref.update(kind == "finite")
        check_scale(float(opt.dynamic_scale), ref, f"step {n} ({kind})", tracker=int(opt.step_counter))
        assert int(opt.iterations) == ref.applied, f"step {n}: iterations {int(opt.iterations)}, should be {ref.applied}"
        evidence.covers("scale_loss", "initial_scale", f"skip-{kind}" if kind != "finite" else "finite-apply",
                        *(["growth"] if kind == "finite" and ref.scale != grew else []))
