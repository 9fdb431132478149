"""The model claims' plumbing for a user's model: calls, parameters, gradients, one training step.

One small class per framework (:class:`TorchOps`, :class:`KerasOps`) gives the suites in
``suites/model`` the same verbs for a ``torch.nn.Module`` and a Keras model: call it on
numpy inputs, read and write its parameters by name, its full state by name, the gradient
of ``<w, outputs>`` with respect to parameters and floating inputs, and one SGD step of the
training loss. The oracles are the project's own (``checks.gradients.check_vjp``,
``checks.roundtrip``, ``checks.reductions``, ``checks.numerics``); nothing here judges.

Error model (:func:`error_terms`): a user's network is unknown code, so its forward error
is bounded like any chained computation (``numerics.tolerance``): one rounding per leaf
layer (three for a layer with parameters: product, bias, activation) and reductions over
the largest fan-in of any parameter or the widest input feature dimension.

The training loss is ``mean over rows of sum((first output - target)**2)``, as in the
distributed suites; a training step here runs the model in inference mode (dropout off,
batch normalisation on its running statistics), so the step is a deterministic function
of the batch, which is what data parallelism and loss scaling promise to preserve.

Importing this module imports no framework.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .numerics import Tolerance, tolerance

REFUSED = "__refused__"  # a rank's answer when DDP/FSDP refuses to wrap the model
LR = 0.1  # SGD learning rate of the training claims: an update well above rounding


def adapter_for(framework: str) -> Any:
    return TorchOps() if framework == "torch" else KerasOps()


def _floating(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


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
        from .roundtrip import torch_state

        return torch_state(model)

    def load_state(self, model: Any, state: dict[str, np.ndarray]) -> None:
        torch = self.torch
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()}, strict=True)

    def cast64(self, model: Any) -> bool:
        model.double()
        return all(p.dtype == self.torch.float64 for p in model.parameters() if p.is_floating_point())

    def dtype_of(self, model: Any) -> str:
        return str(_torch_float(model)).removeprefix("torch.")

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

    def loss(self, model: Any, args: Sequence[Any], y: Any) -> Any:
        out = next(iter(self.call(model, args, training=False).values()))
        return ((out - y.to(out.dtype)) ** 2).reshape(out.shape[0], -1).sum(dim=1).mean()

    def grads(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, *,
              training: bool) -> dict[str, np.ndarray]:
        """Parameter gradients of the training loss (in ``training`` mode) for the determinism claim."""
        model.zero_grad(set_to_none=True)
        args = self.tensors(model, inputs)
        out = next(iter(self.call(model, args, training=training).values()))
        y = self.torch.tensor(targets, dtype=out.dtype, device=out.device)
        ((out - y) ** 2).reshape(out.shape[0], -1).sum(dim=1).mean().backward()
        return {n: _np(p.grad) if p.grad is not None else np.zeros(p.shape) for n, p in self.params(model).items()}

    def sgd_step(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, *, scaler: Any = None,
                 autocast: str | None = None) -> dict[str, np.ndarray]:
        """One SGD step on the batch, optionally under autocast and with a GradScaler."""
        torch = self.torch
        opt = torch.optim.SGD(list(self.params(model).values()), lr=LR)
        opt.zero_grad()
        args = self.tensors(model, inputs)
        y = torch.tensor(targets, device=_torch_device(model))
        device_type = torch.device(_torch_device(model)).type
        with torch.autocast(device_type, dtype=getattr(torch, autocast or "bfloat16"), enabled=autocast is not None):
            loss = self.loss(model, args, y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
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
    t = t.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        t = t.float()
    return t.numpy().copy()


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
        return {k: np.asarray(v.numpy()) for k, v in self.call(model, self.tensors(model, inputs), training=training).items()}

    @staticmethod
    def named(model: Any, trainable_only: bool = False) -> dict[str, Any]:
        """Variables by "position:LayerClass/variable": not by layer name or path, which Keras
        numbers from a process-wide counter (dense_3 in one build, dense_7 in the next)."""
        from .roundtrip import SEED_STATE

        out = {}
        for i, layer in enumerate(model.layers):
            for v in (layer.trainable_variables if trainable_only else layer.variables):
                if v.name != SEED_STATE:
                    out[f"{i}:{type(layer).__name__}/{v.name}"] = v
        return out

    def params(self, model: Any) -> dict[str, Any]:
        return self.named(model, trainable_only=True)

    def state(self, model: Any) -> dict[str, np.ndarray]:
        return {k: np.asarray(v.numpy()) for k, v in self.named(model).items()}

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

    def grad_problem(self, model: Any, inputs: Sequence[np.ndarray]) -> tuple[list[str], list[np.ndarray], Any, Any]:
        tf = self.tf
        named = self.params(model)
        variables = list(named.values())
        floats = [i for i, a in enumerate(inputs) if _floating(a)]
        names = [f"variable {k}" for k in named] + [f"model input {i}" for i in floats]
        xs = [np.asarray(v.numpy(), np.float64) for v in variables] + [inputs[i].astype(np.float64) for i in floats]
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
            return np.asarray(run(values)[0].numpy())

        def vjp(values: list[np.ndarray], w: np.ndarray) -> list[np.ndarray]:
            with tf.GradientTape() as tape:
                out, given = run(values, tape)
            grads = tape.gradient(out, variables + given, output_gradients=tf.constant(w.astype(dtype)))
            return [np.zeros(x.shape) if g is None else np.asarray(tf.convert_to_tensor(g).numpy()) for g, x in zip(grads, values)]

        return names, xs, f, vjp

    def per_row_loss(self, model: Any, args: Sequence[Any], y: Any) -> Any:
        tf = self.tf
        out = next(iter(self.call(model, args, training=False).values()))
        diff = tf.cast(out, tf.float32 if out.dtype == tf.float16 else out.dtype) - tf.cast(y, tf.float32 if out.dtype == tf.float16 else out.dtype)
        return tf.reduce_sum(tf.reshape(tf.square(diff), [tf.shape(out)[0], -1]), axis=1)

    def grads(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, *,
              training: bool) -> dict[str, np.ndarray]:
        tf = self.tf
        args = self.tensors(model, inputs)
        with tf.GradientTape() as tape:
            out = next(iter(self.call(model, args, training=training).values()))
            loss = tf.reduce_mean(tf.reduce_sum(tf.reshape(tf.square(out - tf.cast(targets, out.dtype)),
                                                           [tf.shape(out)[0], -1]), axis=1))
        named = self.params(model)
        grads = tape.gradient(loss, list(named.values()))
        return {k: np.zeros(v.shape) if g is None else np.asarray(tf.convert_to_tensor(g).numpy())
                for (k, v), g in zip(named.items(), grads)}

    def sgd_step(self, model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray, *,
                 optimizer: Any = None) -> dict[str, np.ndarray]:
        tf = self.tf
        opt = optimizer or self.keras.optimizers.SGD(LR)
        args = self.tensors(model, inputs, dtype="float32" if self.dtype_of(model) == "float16" else None)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(self.per_row_loss(model, args, tf.constant(targets)))
            scaled = opt.scale_loss(loss) if hasattr(opt, "scale_loss") else loss
        named = self.params(model)
        variables = list(named.values())
        opt.apply(tape.gradient(scaled, variables), variables)
        return {k: np.asarray(v.numpy()) for k, v in named.items()}


# ---------------------------------------------------------------- error model


def error_terms(model: Any, inputs: Sequence[np.ndarray], framework: str) -> tuple[int, int]:
    """(ops, reduction) of a user model's forward pass for :func:`numerics.tolerance`."""
    widest = max((int(np.prod(a.shape[1:])) if a.ndim > 1 else 1 for a in inputs), default=1)
    if framework == "torch":
        leaves = [m for m in model.modules() if not list(m.children())]
        with_params = [m for m in leaves if list(m.parameters(recurse=False))]
        fans = [int(np.prod(p.shape[1:])) for p in model.parameters() if p.ndim >= 2]
    else:
        leaves = [layer for layer in _keras_leaves(model)]
        with_params = [layer for layer in leaves if layer.weights]
        fans = [int(np.prod(v.shape[:-1])) for v in model.trainable_variables if len(v.shape) >= 2]
    ops = 3 * len(with_params) + (len(leaves) - len(with_params))
    return max(1, ops), max([widest, *fans])


def _keras_leaves(model: Any) -> list[Any]:
    out = []
    for layer in getattr(model, "layers", []):
        inner = getattr(layer, "layers", None)
        out += _keras_leaves(layer) if inner else [layer]
    return out


def forward_tolerance(model: Any, inputs: Sequence[np.ndarray], framework: str, dtype: str, *,
                      backward: bool = False, device: str = "cpu") -> Tolerance:
    """Two independent evaluations (e.g. eager and compiled) of the forward pass (and the backward
    pass, which repeats every operation about twice more) compared with each other: errors add."""
    ops, reduction = error_terms(model, inputs, framework)
    one = tolerance(dtype, ops=ops * (3 if backward else 1), reduction=reduction, device=device,
                    framework=framework, matmul=True)
    return Tolerance(2 * one.rtol, f"2 x ({one.why}) [{'forward and backward' if backward else 'forward'}, "
                     f"{ops} roundings from the model's layers]")


def float32_gradient_rtol(model: Any, inputs: Sequence[np.ndarray], framework: str) -> Tolerance:
    """check_vjp's rtol when the model cannot be cast to float64: the float32 backward pass's
    normwise error (forward and backward roundings, see :func:`forward_tolerance`)."""
    return forward_tolerance(model, inputs, framework, "float32", backward=True)


def f_error_float32(f_value: np.ndarray) -> float:
    """Absolute per-element rounding of one float32 forward pass beyond eps64 * |f|, for
    check_vjp's f_error: CONDITION units of float32 round-off of the largest output (a
    well-conditioned forward pass rounds each output by a few ulps of the outputs' scale;
    the worst-case bound of forward_tolerance, which adds every rounding with one sign, would
    drown every finite difference taken at check_vjp's step). The finite differences'
    own gap still measures the noise that is actually there."""
    from .numerics import CONDITION, UNIT_ROUNDOFF

    top = float(np.max(np.abs(f_value))) if f_value.size else 0.0
    return CONDITION * UNIT_ROUNDOFF["float32"] * max(top, 1e-30)


class TreeMismatch(AssertionError):
    """Compiled / low-precision outputs or gradients outside the derived tolerance."""


def assert_close_tree(actual: dict[str, Any], expected: dict[str, Any], tol: Tolerance, *, what: str,
                      name: str) -> float:
    """Normwise over the whole collection: ``max|a - e|`` of each tensor against ``rtol * max|e|``
    over all tensors, the error model of a backward pass (its rounding errors scale with the
    whole gradient, so a tensor whose exact gradient is zero, e.g. an attention key bias under
    softmax's shift invariance, carries noise of that scale, not of its own); the tensor with
    the worst error is named. Returns the worst relative error."""
    __tracebackhide__ = True
    from .. import evidence

    if set(actual) != set(expected):
        raise TreeMismatch(f"{what}: tensors {sorted(actual)}, but should be {sorted(expected)}")
    scale = max((float(np.max(np.abs(np.asarray(e, np.float64)))) for e in expected.values() if np.size(e)), default=0.0)
    worst, worst_key, worst_err = 0.0, "", 0.0
    for key in sorted(expected):
        a, e = np.asarray(actual[key], np.float64), np.asarray(expected[key], np.float64)
        if a.shape != e.shape:
            raise TreeMismatch(f"{what}: {key} has shape {a.shape}, but should be {e.shape}")
        err = float(np.max(np.abs(a - e))) if e.size else 0.0
        err = err if np.all(np.isfinite(a)) else math.inf
        rel = err / scale if scale > 0 else (0.0 if err == 0 else math.inf)
        if rel >= worst:
            worst, worst_key, worst_err = rel, key, err
    evidence.check(name, observed=worst, tolerance=tol.rtol, basis=tol.why, tensor=worst_key)
    if not worst <= tol.rtol:
        raise TreeMismatch(f"{what}: {worst_key}: max|actual - expected| = {worst_err:.3e} is {worst:.3e} of the "
                           f"largest expected magnitude {scale:.3e} over all {len(expected)} tensors, but should be "
                           f"<= {tol.rtol:.3e} [{tol.why}]")
    return worst


def assert_same_step(actual: dict[str, Any], expected: dict[str, Any], before: dict[str, Any], tol: Tolerance, *,
                     what: str, dtype: str = "float32") -> float:
    """Weights after a step against the oracle's, per tensor within ``rtol * U + 2 u |w|``.

    ``U`` is the largest update of any tensor in the oracle's step: the gradients' rounding
    errors scale with the whole backward pass (a parameter whose exact gradient is zero, such as
    an attention key bias under softmax, moves by noise of that scale, not of its own), and the
    learning rate carries them into the weights; ``2 u |w|`` is the rounding of ``w - lr g``
    itself in each run. A step that differs (a gradient not averaged, a batch mixed otherwise)
    moves a tensor by a fraction of U and fails. Returns the worst error / bound."""
    __tracebackhide__ = True
    from .. import evidence
    from .numerics import UNIT_ROUNDOFF
    from .reductions import StepMismatch

    if set(actual) != set(expected):
        raise StepMismatch(f"{what}: parameters {sorted(actual)}, but the single-device run has {sorted(expected)}")
    u = UNIT_ROUNDOFF[dtype]
    update = max((float(np.max(np.abs(np.asarray(expected[k], np.float64) - np.asarray(before[k], np.float64))))
                  for k in expected if np.size(expected[k])), default=0.0)
    worst, worst_key, worst_err, worst_bound = 0.0, "", 0.0, 0.0
    for key in sorted(expected):
        a, e = np.asarray(actual[key], np.float64), np.asarray(expected[key], np.float64)
        if a.shape != e.shape:
            raise StepMismatch(f"{what}: {key} has shape {a.shape}, but should be {e.shape}")
        err = float(np.max(np.abs(a - e))) if e.size else 0.0
        err = err if np.all(np.isfinite(a)) else math.inf
        bound = tol.rtol * update + 2 * u * (float(np.max(np.abs(e))) if e.size else 0.0)
        ratio = err / bound if bound > 0 else (0.0 if err == 0 else math.inf)
        if ratio >= worst:
            worst, worst_key, worst_err, worst_bound = ratio, key, err, bound
    evidence.check(what, observed=worst, tolerance=1.0, basis=f"rtol {tol.rtol:.3g} x largest update {update:.3g} "
                   f"+ 2 u({dtype}) |w| [{tol.why}]", tensor=worst_key)
    if not worst <= 1.0:
        raise StepMismatch(f"{what}: {worst_key} max|distributed - single device| = {worst_err:.3e}, but should be <= "
                           f"{worst_bound:.3e} = {tol.rtol:.3e} x the largest update {update:.3e} + 2 u({dtype}) |w| "
                           f"[{tol.why}] ({worst:.3g}x the bound)")
    return worst


def normwise(actual: np.ndarray, expected: np.ndarray) -> float:
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    scale = float(np.max(np.abs(e))) if e.size else 0.0
    err = float(np.max(np.abs(a - e))) if e.size else 0.0
    if not np.all(np.isfinite(a)):
        return math.inf
    return err / scale if scale > 0 else (0.0 if err == 0 else math.inf)


def keras_policy(name: str) -> Any:
    """Keras's global dtype policy set to ``name`` for the block, restored after."""
    import contextlib

    import keras

    @contextlib.contextmanager
    def scope() -> Any:
        before = keras.config.dtype_policy()
        keras.config.set_dtype_policy(name)
        try:
            yield
        finally:
            keras.config.set_dtype_policy(before)

    return scope()


# ---------------------------------------------------------------- export formats

TORCH_FORMATS = ("state-dict", "torchscript", "torch-export", "onnx")
KERAS_FORMATS = ("keras", "savedmodel", "keras-export", "tflite")
BITWISE_FORMATS = ("state-dict", "keras")  # the same code and weights run again
NO_NAMED_STATE = ("onnx", "tflite", "keras-export")  # optimisers fold/rename constants: outputs only


def write_artifact(fmt: str, model: Any, inputs: Sequence[np.ndarray], path: Any) -> None:
    """Write ``model`` in ``fmt`` at ``path`` (the roundtrip MAIN_FILE inside the artifact folder)."""
    if fmt in TORCH_FORMATS:
        import torch

        ops = TorchOps()
        model.eval()
        args = tuple(ops.tensors(model, inputs))
        if fmt == "state-dict":
            torch.save(model.state_dict(), str(path))
        elif fmt == "torchscript":
            torch.jit.save(torch.jit.trace(model, args, check_trace=False), str(path))
        elif fmt == "torch-export":
            torch.export.save(torch.export.export(model, args), str(path))
        else:
            torch.onnx.export(model, args, str(path), verbose=False)
        return
    tf = KerasOps().tf
    if fmt == "keras":
        model.save(str(path))
    elif fmt == "keras-export":
        model.export(str(path), verbose=False)
    elif fmt == "savedmodel":
        tf.saved_model.save(servable(model, inputs), str(path))
    else:  # tflite, converted from model.export's SavedModel
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            model.export(tmp + "/sm", verbose=False)
            blob = tf.lite.TFLiteConverter.from_saved_model(tmp + "/sm").convert()
        path.write_bytes(blob)


def servable(model: Any, inputs: Sequence[np.ndarray]) -> Any:
    """A tf.Module for tf.saved_model.save: ``serve`` (inference, the serving signature) and
    every variable under ``state`` by its Keras layer/variable name."""
    import tensorflow as tf

    specs = [tf.TensorSpec([None, *a.shape[1:]], tf.as_dtype(a.dtype), name=n)
             for n, a in zip(input_names(model, len(inputs)), inputs)]
    ops = KerasOps()

    class Servable(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="servable")
            self.model = model
            self.state = KerasOps.named(model)

        @tf.function(input_signature=specs, autograph=False)
        def serve(self, *args: Any) -> Any:
            return ops.call(self.model, list(args), training=False)

    return Servable()


def input_names(model: Any, count: int) -> list[str]:
    """The names a Keras model's serving signatures give its inputs (its Input layers' names):
    signatures take inputs by name, and neither their order nor TFLite's tensor indices are
    the model's positional order."""
    names = [str(getattr(t, "name", "") or "") for t in getattr(model, "inputs", None) or []]
    if len(names) != count or len(set(names)) != count or not all(names):
        return [f"input_{i}" for i in range(count)]
    return names


def load_and_run(fmt: str, path: str, inputs: Sequence[np.ndarray], ref: str, seed: int,
                 device: str = "cpu", names: Sequence[str] | None = None
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    """Load an artifact with the format's own loader and run it: (outputs, named state or None).

    The same code runs here and in the fresh interpreter (:func:`fresh_main`). A state_dict
    needs the model's code: the factory builds a model with other random weights (``seed``),
    then every entry must come from the file (``strict=True``)."""
    if fmt == "state-dict":
        import torch

        from ..usermodels import call_factory, resolve

        torch.manual_seed(seed)
        model = call_factory(resolve(ref), device=device, dtype="float32").model
        model.load_state_dict(torch.load(path, weights_only=True, map_location=device), strict=True)
        ops = TorchOps()
        return ops.forward(model, inputs, training=False), ops.state(model)
    if fmt == "torchscript":
        import torch

        module = torch.jit.load(path, map_location=device)
        ops = TorchOps()
        return ops.forward(module, inputs, training=False), ops.state(module)
    if fmt == "torch-export":
        import torch

        program = torch.export.load(path)
        ops = TorchOps()
        with torch.no_grad():
            outs = ops.outputs(program.module()(*ops.tensors(program.module(), inputs)))
        state = {k: _np(v) for k, v in program.state_dict.items()}
        return {k: _np(v) for k, v in outs.items()}, state
    if fmt == "onnx":
        import onnxruntime

        sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: _onnx_feed(a, i.type) for i, a in zip(sess.get_inputs(), inputs)}
        names = [o.name for o in sess.get_outputs()]
        return {f"output_{j}": np.asarray(v) for j, v in enumerate(sess.run(names, feeds))}, None
    if fmt == "keras":
        import keras

        model = keras.models.load_model(path)
        ops = KerasOps()
        return ops.forward(model, inputs, training=False), ops.state(model)
    if fmt in ("savedmodel", "keras-export"):
        import tensorflow as tf

        obj = tf.saved_model.load(path)
        fn = obj.signatures["serving_default"]
        from .roundtrip import tf_signature

        sig = tf_signature(fn)["inputs"]
        names = list(names or sig)
        outs = fn(**{n: tf.constant(a, dtype=sig[n][0]) for n, a in zip(names, inputs)})
        outs = {k: np.asarray(v.numpy()) for k, v in sorted(outs.items())}
        state = None
        if fmt == "savedmodel":
            state = {str(k): np.asarray(v.numpy()) for k, v in obj.state.items()}
        return {f"output_{j}": v for j, v in enumerate(outs.values())}, state
    if fmt == "tflite":
        import tensorflow as tf

        interp = tf.lite.Interpreter(model_path=path)
        runner = interp.get_signature_runner("serving_default")
        details = runner.get_input_details()
        names = list(names or sorted(details))
        outs = runner(**{n: a.astype(details[n]["dtype"]) for n, a in zip(names, inputs)})
        return {f"output_{j}": np.asarray(v) for j, (_, v) in enumerate(sorted(outs.items()))}, None
    raise ValueError(f"unknown format {fmt!r}")


def _onnx_feed(a: np.ndarray, type_name: str) -> np.ndarray:
    want = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
            "tensor(int32)": np.int32}.get(type_name)
    return a.astype(want) if want is not None else a


def fresh_main(job_path: str) -> list[dict[str, Any]]:
    """Runs in the fresh interpreter: load every queued artifact, write what came back."""
    import json
    from pathlib import Path

    from .roundtrip import _key, open_artifact

    report = []
    for entry in json.loads(Path(job_path).read_text(encoding="utf-8")):
        art = open_artifact(entry["artifact"], entry["format"])  # the seal first: never load a half-written file
        # A serving process has the model's package imported: custom Keras layers register
        # themselves, custom pytree nodes (torch.export output types) too.
        from ..usermodels import resolve

        resolve(entry["ref"])
        inputs = [np.load(p) for p in entry["inputs"]]
        outs, state = load_and_run(entry["format"], str(art.main), inputs, entry["ref"], entry["seed"],
                                   names=entry.get("names"))
        np.savez(Path(entry["out"]) / "outputs.npz", **outs)
        np.savez(Path(entry["out"]) / "state.npz", **{_key(k): v for k, v in (state or {}).items()})
        report.append({"has_state": state is not None})
    return report


# ---------------------------------------------------------------- distributed programs (run in each rank)


def torch_rank_step(ctx: Any, payload: dict[str, Any]) -> dict[str, np.ndarray]:
    """DDP or FSDP2 (``payload["wrap"]``) over the group: this rank's contiguous share of the
    global batch, one SGD step; the full parameters by name come back."""
    import torch

    from ..usermodels import call_factory, resolve

    device = ctx.state["device"]
    model = call_factory(resolve(payload["ref"]), device=device, dtype="float32").model.to(device)
    TorchOps().load_state(model, payload["state"])
    try:
        if payload["wrap"] == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(model, device_ids=None if device == "cpu" else [device])
        else:
            from torch.distributed.fsdp import fully_shard

            fully_shard(model)
    except (ValueError, TypeError, NotImplementedError) as exc:  # the wrapper refuses this model, in every rank
        return {REFUSED: f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
    n, r = ctx.world_size, ctx.rank
    b = len(payload["targets"]) // n
    rows = slice(r * b, (r + 1) * b)
    ops = TorchOps()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=LR)
    opt.zero_grad()
    args = ops.tensors(model, [a[rows] for a in payload["inputs"]])
    y = torch.tensor(payload["targets"][rows], device=device)
    ctx.arrive(f"{payload['wrap']} forward and backward")
    ops.loss(model, args, y).backward()
    opt.step()
    ctx.arrive(f"{payload['wrap']} gather parameters")
    out = {}
    inner = getattr(model, "module", model)
    for name, p in inner.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name] = _np(full)
    return out


def torch_single_step(model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray) -> dict[str, np.ndarray]:
    """The oracle: one device, one SGD step on the whole global batch (its mean loss). DDP and
    FSDP average the ranks' mean losses over equal shares, the same number when rows are
    independent; a layer that mixes rows (batch statistics) makes the two differ."""
    return TorchOps().sgd_step(model, inputs, targets)


def keras_strategy_step(strategy: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """One SGD step of the custom training loop under ``strategy``: model and optimizer built in
    ``scope()``, replica k takes the k-th contiguous share of the global batch, per-row losses
    summed and divided by the global batch (tf.nn.compute_average_loss)."""
    import tensorflow as tf

    from ..usermodels import call_factory, resolve

    ops = KerasOps()
    with strategy.scope():
        model = call_factory(resolve(payload["ref"]), device="cpu", dtype="float32").model
        ops.load_state(model, payload["state"])
        opt = ops.keras.optimizers.SGD(LR)
    n = strategy.num_replicas_in_sync
    global_batch = len(payload["targets"])
    b = global_batch // n

    def shard(ctx: Any) -> Any:
        k = ctx.replica_id_in_sync_group
        return ([tf.constant(a[k * b:(k + 1) * b]) for a in payload["inputs"]],
                tf.constant(payload["targets"][k * b:(k + 1) * b]))

    values = strategy.experimental_distribute_values_from_function(shard)

    @tf.function(autograph=False)
    def step(batch: Any) -> None:
        def replica(data: Any) -> None:
            xs, y = data
            xs = [tf.cast(x, ops.dtype_of(model)) if x.dtype.is_floating else x for x in xs]
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(ops.per_row_loss(model, xs, y), global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))

        strategy.run(replica, args=(batch,))

    step(values)
    return {"weights": {k: [np.asarray(c.numpy()) for c in strategy.experimental_local_results(v.value)]
                        for k, v in ops.params(model).items()}, "replicas": n}


def tf_mw_step(ctx: Any, payload: dict[str, Any]) -> dict[str, Any]:
    return keras_strategy_step(ctx.state["strategy"], payload)


def keras_single_step(model: Any, inputs: Sequence[np.ndarray], targets: np.ndarray) -> dict[str, np.ndarray]:
    return KerasOps().sgd_step(model, inputs, targets)
