"""The model claims' verbs for a user's model, one class per framework.

:class:`TorchOps` (a ``torch.nn.Module``) and :class:`KerasOps` (a Keras model on
TensorFlow) give the suites in ``suites/model`` the same verbs: call the model on numpy
inputs, read and write its parameters by name, its full state by name, the gradient of
``<w, outputs>`` with respect to parameters and floating inputs, and one SGD step of the
training loss. The oracles are the project's own (``checks.gradients.check_vjp``,
``checks.roundtrip``, ``checks.reductions``, ``checks.numerics``); nothing here judges.

The training loss is the factory's ``loss(outputs, targets)`` (``UserModel.loss``: what the
model returned and the targets as a tensor, a scalar back) or, without one, ``mean over rows
of sum((first output - target)**2)``, as in the distributed suites; every verb that trains
takes it as ``loss=``. A training step here runs the model in inference mode (dropout off,
batch normalisation on its running statistics), so the step is a deterministic function
of the batch, which is what data parallelism and loss scaling promise to preserve.

:func:`dtype_scope` sets every global dtype knob a framework has for one precision while a
model is built and while it runs: a float64 check computes in float64 only if the model's
weights, its inputs and everything it creates on the way are float64.

Importing this module imports no framework.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ...frameworks import adapter
from ...frameworks import keras as keras_adapter

LR = 0.1  # SGD learning rate of the training claims: an update well above rounding


def adapter_for(framework: str) -> Any:
    return TorchOps() if framework == "torch" else KerasOps()


def _floating(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def _narrower(dtype: str, than: str) -> bool:
    """``dtype`` a floating dtype of fewer significand bits than ``than`` (False if either is not one numpy knows)."""
    try:
        return bool(np.finfo(dtype).eps > np.finfo(than).eps)
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- torch


class TorchOps:
    framework = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def seed(self, value: int) -> None:
        self.torch.manual_seed(value)

    def tensors(self, model: Any, inputs: Sequence[np.ndarray], dtype: str | None = None,
                requires_grad: bool = False) -> list[Any]:
        torch = self.torch
        device = _torch_device(model)
        want = getattr(torch, dtype) if dtype else _torch_float(model)
        out = []
        for a in inputs:
            if _floating(a):
                t = torch.tensor(a, dtype=want, device=device, requires_grad=requires_grad)
            else:
                t = torch.tensor(a, device=device)
            out.append(t)
        return out

    def outputs(self, out: Any) -> dict[str, Any]:
        """A tensor, a tuple/list or a mapping (e.g. a Hugging Face ModelOutput) -> floating outputs by name."""
        torch = self.torch
        if isinstance(out, torch.Tensor):
            items: list[tuple[str, Any]] = [("output_0", out)]
        elif hasattr(out, "items"):
            items = [(str(k), v) for k, v in out.items()]
        elif isinstance(out, (tuple, list)):
            items = [(f"output_{i}", v) for i, v in enumerate(out)]
        else:
            items = []
        return {k: v for k, v in items if isinstance(v, torch.Tensor) and v.is_floating_point()}

    def call(self, model: Any, args: Sequence[Any], *, training: bool) -> dict[str, Any]:
        model.train(training)
        return self.outputs(model(*args))

    def forward(self, model: Any, inputs: Sequence[np.ndarray], *, training: bool) -> dict[str, np.ndarray]:
        with self.torch.no_grad():
            outs = self.call(model, self.tensors(model, inputs), training=training)
        return {k: _np(v) for k, v in outs.items()}

    def params(self, model: Any) -> dict[str, Any]:
        return {n: p for n, p in model.named_parameters() if p.requires_grad}

    def state(self, model: Any) -> dict[str, np.ndarray]:
        from ..roundtrip import torch_state

        return torch_state(model)

    def load_state(self, model: Any, state: dict[str, np.ndarray]) -> None:
        torch = self.torch
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()}, strict=True)

    def cast64(self, model: Any) -> bool:
        model.double()
        return all(p.dtype == self.torch.float64 for p in model.parameters() if p.is_floating_point())

    def dtype_of(self, model: Any) -> str:
        return str(_torch_float(model)).removeprefix("torch.")

    def narrowed_inputs(self, model: Any, inputs: Sequence[np.ndarray]) -> list[str | None]:
        """A module declares no input dtypes: nothing to read (a forward that casts its inputs
        down, ``x.float()``, is invisible from outside), so None for every floating input."""
        return [None for a in inputs if _floating(a)]

    def grad_problem(self, model: Any, inputs: Sequence[np.ndarray]) -> tuple[list[str], list[np.ndarray], Any, Any]:
        """(names, xs, f, vjp) for check_vjp: parameters and floating inputs, inference mode."""
        torch = self.torch
        from torch.func import functional_call

        model.eval()
        params = self.params(model)
        names = [f"parameter {n}" for n in params] + [f"model input {i}" for i, a in enumerate(inputs) if _floating(a)]
        xs = [_np(p).astype(np.float64) for p in params.values()] + [a.astype(np.float64) for a in inputs if _floating(a)]
        dtype = _torch_float(model)
        device = _torch_device(model)
        keys = list(params)

        def run(ts: list[Any]) -> Any:
            it = iter(ts[len(keys):])
            args = [next(it) if _floating(a) else torch.tensor(a, device=device) for a in inputs]
            outs = self.outputs(functional_call(model, dict(zip(keys, ts[:len(keys)])), tuple(args)))
            return torch.cat([o.reshape(-1) for o in outs.values()])

        def f(values: list[np.ndarray]) -> np.ndarray:
            with torch.no_grad():
                return _np(run([torch.tensor(v, dtype=dtype, device=device) for v in values]))

        def vjp(values: list[np.ndarray], w: np.ndarray) -> list[np.ndarray]:
            ts = [torch.tensor(v, dtype=dtype, device=device, requires_grad=True) for v in values]
            out = run(ts)
            grads = torch.autograd.grad(out, ts, grad_outputs=torch.tensor(w, dtype=dtype, device=device),
                                        allow_unused=True, materialize_grads=True)
            return [_np(g) for g in grads]

        return names, xs, f, vjp

    def loss(self, model: Any, args: Sequence[Any], y: Any, *, loss: Any = None, training: bool = False) -> Any:
        """The training loss of one forward pass: ``loss(outputs, targets)`` if the factory gave
        one, else the mean over rows of the squared error of the first output. ``y``: the
        targets, a tensor or an array (floating targets take the first output's dtype)."""
        model.train(training)
        raw = model(*args)
        out = next(iter(self.outputs(raw).values()))
        y = self.target_tensor(y, out)
        if loss is not None:
            return loss(raw, y)
        return ((out - y) ** 2).reshape(out.shape[0], -1).sum(dim=1).mean()

    def target_tensor(self, y: Any, like: Any) -> Any:
        torch = self.torch
        t = y if isinstance(y, torch.Tensor) else torch.as_tensor(np.asarray(y))
        return t.to(device=like.device, dtype=like.dtype) if t.is_floating_point() else t.to(like.device)

    def loss_value(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, loss: Any = None) -> Any:
        """The training loss on ``inputs`` as a numpy value (the factory check: is it a scalar?)."""
        with self.torch.no_grad():
            return _np(self.loss(model, self.tensors(model, inputs), targets, loss=loss))

    def grads(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, *,
              training: bool, loss: Any = None) -> dict[str, np.ndarray]:
        """Parameter gradients of the training loss (in ``training`` mode) for the determinism claim."""
        model.zero_grad(set_to_none=True)
        self.loss(model, self.tensors(model, inputs), targets, loss=loss, training=training).backward()
        return {n: _np(p.grad) if p.grad is not None else np.zeros(p.shape) for n, p in self.params(model).items()}

    def sgd_step(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, *, scaler: Any = None,
                 autocast: str | None = None, loss: Any = None) -> dict[str, np.ndarray]:
        """One SGD step on the batch, optionally under autocast and with a GradScaler."""
        torch = self.torch
        opt = torch.optim.SGD(list(self.params(model).values()), lr=LR)
        opt.zero_grad()
        args = self.tensors(model, inputs)
        device_type = torch.device(_torch_device(model)).type
        with torch.autocast(device_type, dtype=getattr(torch, autocast or "bfloat16"), enabled=autocast is not None):
            value = self.loss(model, args, targets, loss=loss)
        if scaler is None:
            value.backward()
            opt.step()
        else:
            scaler.scale(value).backward()
            scaler.step(opt)
            scaler.update()
        return {n: _np(p) for n, p in self.params(model).items()}


def _torch_device(model: Any) -> str:
    for t in list(model.parameters()) + list(model.buffers()):
        return str(t.device)
    return "cpu"


def _torch_float(model: Any) -> Any:
    import torch

    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.get_default_dtype()


def _np(t: Any) -> np.ndarray:
    """A torch tensor as an array of its own (the torch adapter's conversion, then a copy)."""
    return adapter("torch").numpy(t).copy()


# ---------------------------------------------------------------- keras


class KerasOps:
    framework = "tensorflow"

    def __init__(self) -> None:
        import keras
        import tensorflow as tf

        self.tf, self.keras = tf, keras

    def seed(self, value: int) -> None:
        self.keras.utils.set_random_seed(value % 2**32)

    def tensors(self, model: Any, inputs: Sequence[np.ndarray], dtype: str | None = None) -> list[Any]:
        want = dtype or self.dtype_of(model)
        return [self.tf.constant(a.astype(want) if _floating(a) else a) for a in inputs]

    def outputs(self, out: Any) -> dict[str, Any]:
        tf = self.tf
        if isinstance(out, dict):
            items = [(str(k), v) for k, v in out.items()]
        elif isinstance(out, (list, tuple)):
            items = [(f"output_{i}", v) for i, v in enumerate(out)]
        else:
            items = [("output_0", out)]
        return {k: v for k, v in items if tf.is_tensor(v) and v.dtype.is_floating}

    def call(self, model: Any, args: Sequence[Any], *, training: bool) -> dict[str, Any]:
        # A functional model with several inputs takes them as one list.
        return self.outputs(model(list(args) if len(args) > 1 else args[0], training=training))

    def forward(self, model: Any, inputs: Sequence[np.ndarray], *, training: bool) -> dict[str, np.ndarray]:
        outs = self.call(model, self.tensors(model, inputs), training=training)
        return {k: keras_adapter.to_numpy(v) for k, v in outs.items()}

    @staticmethod
    def named(model: Any, trainable_only: bool = False) -> dict[str, Any]:
        """Variables by "position:LayerClass/variable": not by layer name or path, which Keras
        numbers from a process-wide counter (dense_3 in one build, dense_7 in the next)."""
        from ..roundtrip import SEED_STATE

        out = {}
        for i, layer in enumerate(model.layers):
            for v in (layer.trainable_variables if trainable_only else layer.variables):
                if v.name != SEED_STATE:
                    out[f"{i}:{type(layer).__name__}/{v.name}"] = v
        return out

    def params(self, model: Any) -> dict[str, Any]:
        return self.named(model, trainable_only=True)

    def state(self, model: Any) -> dict[str, np.ndarray]:
        return {k: keras_adapter.to_numpy(v) for k, v in self.named(model).items()}

    def load_state(self, model: Any, state: dict[str, np.ndarray]) -> None:
        mine = self.named(model)
        if set(mine) != set(state):
            raise ValueError(f"state keys differ: missing {sorted(set(mine) - set(state))}, "
                             f"unexpected {sorted(set(state) - set(mine))}")
        for k, v in mine.items():
            v.assign(state[k])

    def dtype_of(self, model: Any) -> str:
        for v in model.trainable_variables:
            return str(v.dtype)
        return "float32"

    def narrowed_inputs(self, model: Any, inputs: Sequence[np.ndarray]) -> list[str | None]:
        """For each floating example input, the narrower dtype the model's own ``Input`` rounds
        it to before any layer sees it (None where it keeps the variables' precision or the
        model declares no inputs). A functional model converts what it is called with to its
        ``Input`` layers' dtypes: ``keras.Input(shape, dtype="float32")`` in a float64 model
        rounds the inputs to float32, whatever :func:`dtype_scope` sets."""
        try:
            declared = list(model.inputs or ())
        except (AttributeError, ValueError):  # a subclassed model declares none
            declared = []
        own = self.dtype_of(model)
        out: list[str | None] = []
        for i, a in enumerate(inputs):
            if _floating(a):
                dtype = str(getattr(declared[i], "dtype", "")) if len(declared) == len(inputs) else ""
                out.append(dtype if _narrower(dtype, own) else None)
        return out

    def grad_problem(self, model: Any, inputs: Sequence[np.ndarray]) -> tuple[list[str], list[np.ndarray], Any, Any]:
        tf = self.tf
        named = self.params(model)
        variables = list(named.values())
        floats = [i for i, a in enumerate(inputs) if _floating(a)]
        names = [f"variable {k}" for k in named] + [f"model input {i}" for i in floats]
        xs = [keras_adapter.to_numpy(v).astype(np.float64) for v in variables] + [inputs[i].astype(np.float64) for i in floats]
        dtype = self.dtype_of(model)
        n = len(variables)

        def run(values: list[np.ndarray], tape: Any = None) -> tuple[Any, list[Any]]:
            for v, x in zip(variables, values[:n]):
                v.assign(x.astype(dtype))
            given = [tf.constant(x.astype(dtype)) for x in values[n:]]
            if tape is not None:
                for t in given:
                    tape.watch(t)
            it = iter(given)
            args = [next(it) if _floating(a) else tf.constant(a) for a in inputs]
            outs = self.call(model, args, training=False)
            return tf.concat([tf.reshape(o, [-1]) for o in outs.values()], 0), given

        def f(values: list[np.ndarray]) -> np.ndarray:
            return keras_adapter.to_numpy(run(values)[0])

        def vjp(values: list[np.ndarray], w: np.ndarray) -> list[np.ndarray]:
            with tf.GradientTape() as tape:
                out, given = run(values, tape)
            grads = tape.gradient(out, variables + given, output_gradients=tf.constant(w.astype(dtype)))
            # to_numpy densifies a tf.IndexedSlices (the gradient of a gather)
            return [np.zeros(x.shape) if g is None else keras_adapter.to_numpy(g) for g, x in zip(grads, values)]

        return names, xs, f, vjp

    def per_row_loss(self, model: Any, args: Sequence[Any], y: Any) -> Any:
        tf = self.tf
        out = next(iter(self.call(model, args, training=False).values()))
        wide = tf.float32 if out.dtype == tf.float16 else out.dtype
        diff = tf.cast(out, wide) - tf.cast(y, wide)
        return tf.reduce_sum(tf.reshape(tf.square(diff), [tf.shape(out)[0], -1]), axis=1)

    def loss(self, model: Any, args: Sequence[Any], y: Any, *, loss: Any = None, training: bool = False) -> Any:
        """The training loss of one forward pass (see :meth:`TorchOps.loss`): the factory's
        ``loss(outputs, targets)``, else the mean over rows of the squared error (float16
        outputs widened to float32)."""
        tf = self.tf
        if loss is None and not training:
            return tf.reduce_mean(self.per_row_loss(model, args, y))
        raw = model(list(args) if len(args) > 1 else args[0], training=training)
        out = next(iter(self.outputs(raw).values()))
        if loss is not None:
            return loss(raw, self.target_tensor(y, out))
        wide = tf.float32 if out.dtype == tf.float16 else out.dtype
        diff = tf.cast(out, wide) - tf.cast(y, wide)
        return tf.reduce_mean(tf.reduce_sum(tf.reshape(tf.square(diff), [tf.shape(out)[0], -1]), axis=1))

    def target_tensor(self, y: Any, like: Any) -> Any:
        tf = self.tf
        t = y if tf.is_tensor(y) else tf.constant(np.asarray(y))
        return tf.cast(t, like.dtype) if t.dtype.is_floating else t

    def loss_value(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, loss: Any = None) -> Any:
        return keras_adapter.to_numpy(self.loss(model, self.tensors(model, inputs), targets, loss=loss))

    def grads(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, *,
              training: bool, loss: Any = None) -> dict[str, np.ndarray]:
        tf = self.tf
        args = self.tensors(model, inputs)
        with tf.GradientTape() as tape:
            value = self.loss(model, args, targets, loss=loss, training=training)
        named = self.params(model)
        grads = tape.gradient(value, list(named.values()))
        return {k: np.zeros(v.shape) if g is None else keras_adapter.to_numpy(g)
                for (k, v), g in zip(named.items(), grads)}

    def sgd_step(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, *,
                 optimizer: Any = None, loss: Any = None) -> dict[str, np.ndarray]:
        tf = self.tf
        opt = optimizer or self.keras.optimizers.SGD(LR)
        args = self.tensors(model, inputs, dtype="float32" if self.dtype_of(model) == "float16" else None)
        with tf.GradientTape() as tape:
            value = self.loss(model, args, tf.constant(targets), loss=loss)
            scaled = opt.scale_loss(value) if hasattr(opt, "scale_loss") else value
        named = self.params(model)
        variables = list(named.values())
        opt.apply(tape.gradient(scaled, variables), variables)
        return {k: keras_adapter.to_numpy(v) for k, v in named.items()}


def keras_policy(name: str) -> Any:
    """Keras's global dtype policy set to ``name`` for the block, restored after."""
    return keras_adapter.dtype_policy(name)


# ---------------------------------------------------------------- global dtype knobs


@contextlib.contextmanager
def dtype_scope(framework: str, dtype: str) -> Iterator[None]:
    """Every global dtype knob of ``framework`` set for ``dtype`` during the block (a factory's
    build, the calls of the model), each restored after it, also when the block raises (the
    session guard checks that a test leaves global framework state as it found it).

    Keras (``dtype`` a policy name: ``float64``, ``float32``, ``mixed_float16``): the global
    dtype policy (the layers' variable and compute dtypes), ``keras.config.floatx`` set to
    the policy's variable dtype (``keras.Input`` and ``keras.ops`` creation functions take
    theirs from it: under the policy alone a functional model of float64 weights rounds its
    inputs to float32, and finite differences along an input then carry float32 noise that a
    float64 bound does not allow), and on the JAX backend ``jax_enable_x64`` for float64
    (without it JAX computes a float64 model in float32). torch (``float32``/``float64``;
    other names leave it alone): ``torch.set_default_dtype``, which the layers' parameters
    and tensors created without a dtype in ``forward`` follow."""
    with contextlib.ExitStack() as stack:
        if framework == "torch":
            if dtype in ("float32", "float64"):
                stack.enter_context(_torch_default_dtype(dtype))
        else:
            stack.enter_context(_keras_dtypes(dtype))
        yield


@contextlib.contextmanager
def _torch_default_dtype(dtype: str) -> Iterator[None]:
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@contextlib.contextmanager
def _keras_dtypes(name: str) -> Iterator[None]:
    import keras

    variable = str(keras.dtype_policies.get(name).variable_dtype)
    with keras_adapter.dtype_policy(name, keras):  # taken first: an unset policy follows the old floatx
        previous = keras.config.floatx()
        keras.config.set_floatx(variable)
        try:
            with _jax_x64(keras, variable == "float64"):
                yield
        finally:
            keras.config.set_floatx(previous)


@contextlib.contextmanager
def _jax_x64(keras: Any, on: bool) -> Iterator[None]:
    if not on or keras.backend.backend() != "jax":
        yield
        return
    import jax

    previous = bool(jax.config.read("jax_enable_x64"))
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)
