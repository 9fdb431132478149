"""The TensorFlow programs of the distributed suites, in-process or in every rank of a cluster.

Each function takes a strategy (in-process: Mirrored, default, OneDevice, TPU) or, as an
``mw_*``/``ps_*`` program, a rank's context whose setup built the strategy
(:mod:`pytest_dlconform.harness.distribution.ranks`); ranks import this module by name, so it
holds module-level functions only and imports no test module. Results are plain data
(:mod:`pytest_dlconform.harness.distribution.payloads`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_dlconform.api import HarnessError
from pytest_dlconform.api.distribution import (
    Outcome,
    ReduceCase,
    TrainCase,
    TrainResult,
    first_line,
    keras_model,
    keras_optimizer,
    tf_module,
)
from pytest_dlconform.api.harness import WorkerContext

# --------------------------------------------------------------------------- reductions


def tf_reduce_cases(strategy: Any, cases: Sequence[ReduceCase]) -> list[Outcome]:
    """Run each case under ``strategy``; replica i (global replica id, across workers too)
    contributes ``case.values[i]``; results are this process's local replicas'."""
    return [_tf_reduce_one(strategy, case) for case in cases]


def _tf_reduce_one(strategy: Any, case: ReduceCase) -> Outcome:
    tf = tf_module()
    if strategy.num_replicas_in_sync != case.replicas:
        raise HarnessError(f"case has {case.replicas} replicas, strategy {strategy.num_replicas_in_sync}")
    dtype = getattr(tf, case.dtype)
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(case.values[ctx.replica_id_in_sync_group], dtype=dtype))
    op = {"sum": tf.distribute.ReduceOp.SUM, "mean": tf.distribute.ReduceOp.MEAN}.get(case.op)
    try:
        if case.api == "strategy.reduce":
            out: Any = [strategy.reduce(op, per_replica, axis=case.axis)]
        elif case.api == "strategy.gather":
            out = [strategy.gather(per_replica, axis=case.axis)]
        elif case.api == "ReplicaContext.all_reduce":
            out = strategy.experimental_local_results(
                strategy.run(lambda v: tf.distribute.get_replica_context().all_reduce(op, v), args=(per_replica,)))
        elif case.api == "ReplicaContext.all_gather":
            out = strategy.experimental_local_results(
                strategy.run(lambda v: tf.distribute.get_replica_context().all_gather(v, axis=case.axis), args=(per_replica,)))
        else:
            raise HarnessError(f"unknown TensorFlow reduction API {case.api!r}")
    except (TypeError, ValueError, tf.errors.OpError) as exc:
        return Outcome(error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
    return Outcome(tuple(np.asarray(t.numpy()) for t in out), info={"dtype": out[0].dtype.name})


def mw_reduce(ctx: WorkerContext, cases: Sequence[ReduceCase]) -> list[Outcome]:
    return tf_reduce_cases(ctx.state["strategy"], cases)


# --------------------------------------------------------------------------- variables


def tf_variable_copies(strategy: Any, shapes: Sequence[tuple[int, ...]]) -> list[dict[str, Any]]:
    """Variables created inside and outside ``strategy.scope()``: per variable, whether the
    strategy owns it, its per-replica components (device, shape, value)."""
    tf = tf_module()
    found = []
    for i, shape in enumerate(shapes):
        init = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + i
        with strategy.scope():
            inside = tf.Variable(init)
        outside = tf.Variable(init)
        found.append({"inside": _copies(strategy, inside), "outside": _copies(strategy, outside), "init": init})
    return found


def _copies(strategy: Any, v: Any) -> dict[str, Any]:
    parts = strategy.experimental_local_results(v)
    return {
        "type": type(v).__name__,
        "in_scope": bool(strategy.extended.variable_created_in_scope(v)),
        "devices": [p.device for p in parts],
        "values": [np.asarray(p.numpy()) for p in parts],
    }


def mw_variable_copies(ctx: WorkerContext, shapes: Sequence[tuple[int, ...]]) -> list[dict[str, Any]]:
    return tf_variable_copies(ctx.state["strategy"], shapes)


# --------------------------------------------------------------------------- training


def tf_custom_loop(strategy: Any, case: TrainCase) -> TrainResult:
    """The custom training loop of TensorFlow's distributed-training tutorial: model and
    optimizer built in ``scope()``, the dataset batched by the global batch size and
    distributed with ``experimental_distribute_dataset``, each step under ``strategy.run``
    with the per-example loss averaged by ``tf.nn.compute_average_loss``."""
    tf = tf_module()
    with strategy.scope():
        model = keras_model(case)
        optimizer = keras_optimizer(case)
    dataset = tf.data.Dataset.from_tensor_slices((case.x.astype(case.dtype), case.y.astype(case.dtype))).batch(case.batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dist = strategy.experimental_distribute_dataset(dataset.with_options(options))
    global_batch = case.batch if case.loss_scaling == "global" else None

    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            per_example = tf.reduce_sum(tf.square(model(x, training=True) - y), axis=1)
            if case.loss_scaling == "local-mean":  # the classic mistake, for the meta-tests
                loss = tf.reduce_mean(per_example)
            else:
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return tf.shape(x)[0]

    seen = []
    for x, y in dist:
        rows = strategy.experimental_local_results(strategy.run(step, args=(x, y)))
        seen.append(tuple(int(r) for r in rows))
    return TrainResult(_weights_of(strategy, model), tuple(seen),
                       info={"replica_weights": tf_replica_weights(strategy, model)})


def _weights_of(strategy: Any, model: Any) -> tuple[np.ndarray, ...]:
    """The first local replica's copy of each weight (tf_replica_weights has all copies)."""
    return tuple(np.asarray(strategy.experimental_local_results(v.value)[0].numpy()) for v in model.weights)


def tf_replica_weights(strategy: Any, model: Any) -> list[list[np.ndarray]]:
    return [[np.asarray(c.numpy()) for c in strategy.experimental_local_results(v.value)] for v in model.weights]


def mw_custom_loop(ctx: WorkerContext, cases: Sequence[TrainCase]) -> list[TrainResult]:
    return [tf_custom_loop(ctx.state["strategy"], case) for case in cases]


def keras_fit(strategy: Any, case: TrainCase, sample_weight: np.ndarray | None = None,
              loss_scale: float = 1.0) -> TrainResult:
    """``model.fit`` exactly as the seed writes it: model and optimizer built inside
    ``strategy.scope()``, the rest unchanged; one epoch, no shuffling. ``loss_scale`` multiplies
    each batch's mean loss (in the case's dtype), for a known divergence's bug reference."""
    import keras

    class ScaledMeanSquaredError(keras.losses.MeanSquaredError):
        def call(self, y_true: Any, y_pred: Any) -> Any:
            return super().call(y_true, y_pred) * loss_scale

    loss = keras.losses.MeanSquaredError if loss_scale == 1.0 else ScaledMeanSquaredError
    with strategy.scope():
        model = keras_model(case)
        model.compile(optimizer=keras_optimizer(case), loss=loss(dtype=case.dtype))
    try:
        model.fit(case.x.astype(case.dtype), case.y.astype(case.dtype), batch_size=case.batch, epochs=1,
                  shuffle=False, verbose=0, sample_weight=sample_weight)
    except Exception as exc:  # broad on purpose: the suite decides whether this error is the documented outcome
        return TrainResult((), info={"error": f"{type(exc).__name__}: {first_line(exc)}"})
    return TrainResult(_weights_of(strategy, model), info={"replica_weights": tf_replica_weights(strategy, model)})


def mw_fit(ctx: WorkerContext, cases: Sequence[TrainCase]) -> list[TrainResult]:
    return [keras_fit(ctx.state["strategy"], case) for case in cases]


# --------------------------------------------------------------------------- what the strategy does


def default_all_reduce_ops(strategy: Any, shape: tuple[int, ...] = (3,)) -> dict[str, Any]:
    """The op types of a traced ReplicaContext.all_reduce under ``strategy`` (a public
    observation of the cross-device implementation), and the private class name as a note."""
    tf = tf_module()
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.fill(shape, tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)))

    @tf.function
    def traced(v: Any) -> Any:
        return strategy.run(lambda t: tf.distribute.get_replica_context().all_reduce("SUM", t), args=(v,))

    graph = traced.get_concrete_function(values).graph
    types = {op.type for op in graph.get_operations()}
    for fn in graph.as_graph_def().library.function:
        types.update(node.op for node in fn.node_def)
    out = strategy.experimental_local_results(traced(values))
    return {"op_types": sorted(types), "results": [np.asarray(t.numpy()) for t in out],
            "private_cross_device_ops": type(getattr(strategy.extended, "_cross_device_ops", None)).__name__}


def scope_observations(strategy: Any, case: TrainCase) -> dict[str, Any]:
    """What strategy.scope() is required for, and what runs where without strategy.run.

    - outside_fit: error of ``fit`` inside the scope for a model built outside it (or None);
    - bypass_in_scope: error of a custom step called directly (not through strategy.run)
      inside the scope; bypass: the same outside the scope, with the replica contexts its
      body saw (bypass_seen) and the mirrored copies of the first kernel afterwards;
    - run: the (replica id, rows) each replica's call of the same step saw under strategy.run;
    - fit_traces: (in cross-replica context, num_replicas_in_sync) seen by fit's train step."""
    import keras

    tf = tf_module()
    x, y = case.x[: case.batch].astype(case.dtype), case.y[: case.batch].astype(case.dtype)
    out: dict[str, Any] = {}
    outside = keras_model(case)
    outside.compile(optimizer=keras_optimizer(case), loss=keras.losses.MeanSquaredError(dtype=case.dtype))
    out["outside_fit"] = _error_of(lambda: _fit_in_scope(strategy, outside, x, y, case.batch))

    with strategy.scope():
        model, optimizer = keras_model(case), keras_optimizer(case)
    seen: list[tuple[Any, int]] = []

    def step(xb: Any, yb: Any) -> None:
        ctx = tf.distribute.get_replica_context()
        seen.append((None if ctx is None else tf.get_static_value(ctx.replica_id_in_sync_group), int(xb.shape[0])))
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.reduce_sum(tf.square(model(xb) - yb), axis=1))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    def bypass_in_scope() -> None:
        with strategy.scope():
            step(tf.constant(x), tf.constant(y))

    out["bypass_in_scope"] = _error_of(bypass_in_scope)
    seen.clear()
    before = [np.asarray(c.numpy()) for c in strategy.experimental_local_results(model.weights[0].value)]
    out["bypass"] = _error_of(lambda: step(tf.constant(x), tf.constant(y)))
    out["bypass_seen"] = list(seen)
    out["bypass_copies"] = [np.asarray(c.numpy()) for c in strategy.experimental_local_results(model.weights[0].value)]
    out["bypass_changed"] = any(not np.array_equal(a, b) for a, b in zip(before, out["bypass_copies"]))
    seen.clear()
    with strategy.scope():  # a failed first apply_gradients leaves an optimizer half built
        model, optimizer = keras_model(case), keras_optimizer(case)
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(case.batch))
    xb, yb = next(iter(dist))
    strategy.run(step, args=(xb, yb))
    out["run_seen"] = sorted(seen, key=lambda t: -1 if t[0] is None else int(t[0]))
    out["fit_traces"] = _fit_contexts(strategy, case, x, y)
    return out


def _fit_in_scope(strategy: Any, model: Any, x: np.ndarray, y: np.ndarray, batch: int) -> None:
    with strategy.scope():
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)


def _error_of(fn: Any) -> str | None:
    try:
        fn()
    except Exception as exc:  # broad on purpose: the error is the observation
        return f"{type(exc).__name__}: {first_line(exc)}"
    return None


def _fit_contexts(strategy: Any, case: TrainCase, x: np.ndarray, y: np.ndarray) -> list[tuple[bool, int]]:
    """Replica contexts seen while fit traces its train step (a probe layer records them)."""
    import keras

    tf = tf_module()
    traces: list[tuple[bool, int]] = []

    class Probe(keras.layers.Layer):  # type: ignore[misc]
        def call(self, t: Any) -> Any:
            ctx = tf.distribute.get_replica_context()
            traces.append((tf.distribute.in_cross_replica_context(), 0 if ctx is None else ctx.num_replicas_in_sync))
            return t

    with strategy.scope():
        model = keras.Sequential([keras.Input((case.widths[0],), dtype=case.dtype), Probe(dtype=case.dtype),
                                  keras.layers.Dense(case.widths[-1], dtype=case.dtype)])
        model.compile(optimizer=keras_optimizer(case), loss=keras.losses.MeanSquaredError(dtype=case.dtype))
    traces.clear()  # building the model called the probe outside any step
    model.fit(x, y, batch_size=case.batch, epochs=1, shuffle=False, verbose=0)
    return traces


# --------------------------------------------------------------------------- parameter server


def ps_observe(ctx: WorkerContext, cfg: dict[str, Any]) -> dict[str, Any]:
    """On the coordinator: where variables live, and what asynchronous workers did.

    - placement: ``cfg["variables"]`` variables created in ``strategy.scope()``, their devices;
    - exactly-once updates: ``cfg["increments"]`` scheduled functions each add 1 to a ps
      variable and return the value after their own add: with atomic, asynchronous updates
      the returned values are exactly 1..K in some order and the variable ends at K;
    - concurrency without timing: two scheduled functions wait for each other through ps
      variables (the first sets ``started`` and waits for ``flag``; the second waits for
      ``started``, then sets ``flag``). Both can finish only if two workers ran them at the
      same time; run one after the other they would wait until ``cfg["liveness_s"]`` of
      TensorFlow's clock and report the flag unseen.
    """
    tf = tf_module()
    strategy, coordinator = ctx.state["strategy"], ctx.state["coordinator"]
    with strategy.scope():
        created = [tf.Variable(tf.zeros([i + 1], tf.float32), name=f"v{i}") for i in range(cfg["variables"])]
        counter = tf.Variable(0, dtype=tf.int64, name="counter")
        started = tf.Variable(0, dtype=tf.int32, name="started")
        flag = tf.Variable(0, dtype=tf.int32, name="flag")

    @tf.function
    def increment() -> Any:
        return counter.assign_add(1)

    ctx.arrive("scheduled increments")
    remote = [coordinator.schedule(increment) for _ in range(cfg["increments"])]
    coordinator.join()
    returned = sorted(int(r.fetch()) for r in remote)

    limit = float(cfg["liveness_s"])

    def await_flag(var: Any) -> Any:
        # Re-read the ps variable until it is set or TensorFlow's clock passes the bound.
        start = tf.timestamp()
        seen, spins = tf.constant(0, tf.int32), tf.constant(0, tf.int64)
        while tf.logical_and(tf.equal(seen, 0), tf.timestamp() - start < limit):
            seen = var.read_value()
            spins += 1
        return tf.stack([tf.cast(seen, tf.int64), spins])

    @tf.function
    def first() -> Any:  # announces itself, then needs the second function's flag
        started.assign(1)
        return await_flag(flag)

    @tf.function
    def second() -> Any:  # needs the first function to be running, then sets the flag
        result = await_flag(started)
        with tf.control_dependencies([result]):
            flag.assign(1)
        return result

    ctx.arrive("scheduled two functions that wait for each other")
    a, b = coordinator.schedule(first), coordinator.schedule(second)
    coordinator.join()
    (a_saw, a_spins), (b_saw, b_spins) = ([int(v) for v in r.fetch()] for r in (a, b))
    return {
        "devices": [v.device for v in created],
        "counter_device": counter.device,
        "counter": int(counter.numpy()),
        "returned": returned,
        "first_saw_flag": a_saw, "first_spins": a_spins,
        "second_saw_started": b_saw, "second_spins": b_spins,
        "workers": len(ctx.state["cluster"]["worker"]),
        "ps": len(ctx.state["cluster"]["ps"]),
    }
