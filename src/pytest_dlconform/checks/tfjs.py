"""TensorFlow.js round trips: the real converter here, @tensorflow/tfjs in a Node.js child.

- **Where.** The converter (``tensorflowjs``) cannot be installed beside the main stack
  (see the claim's evidence); the ``tfjs`` tox env has it. ``@tensorflow/tfjs`` (pure
  JavaScript, CPU backend) lives in ``js/tfjs-runner`` (lockfile committed, ``npm ci``);
  :func:`unavailable` says exactly which half is missing and how to get it.
- **Converting.** :func:`convert` calls the converter's own command-line entry point
  in this process (an extra TensorFlow import per conversion would cost seconds). Ops the
  converter refuses come back as :class:`ConverterRefused` with the converter's message,
  for the suite to report per op as "not applicable"; any other converter exception is a
  result about the converter, not a harness error.
- **Running.** :func:`run_node` writes one job (every model and input of a test), runs
  ``node run.js`` as a child process in its own process group with a deadline, and reads
  one result. A crash, a timeout or an unreadable result is a :class:`HarnessError` with
  the child's stderr; what tfjs itself refuses while loading or predicting is reported
  per model (``error``) and judged by the suite.
- **Error model** (docs/tfjs-tfx.md states it once). Unquantised, TF.js evaluates the
  same float32 operations as TensorFlow in another order: two float32 evaluations of the
  spec's forward pass, :func:`roundtrip.model_tolerance`. Quantised weights: float16
  rounds each weight to nearest, ``|w16 - w| <= 2^-11 |w|`` (``2^-25`` absolute below
  float16's normal range, 2^-14); uint8 stores ``round((w - min) / scale)`` with
  ``scale = (max - min) / 255`` over the tensor and a range nudged by at most half a step
  so that 0 is a grid point (tensorflowjs/quantization.py, the TFLite rule), so
  ``|w8 - w| <= scale / 2`` plus float32 rounding of ``q * scale + min`` when tfjs
  dequantises. :func:`propagated_bound` carries those per-parameter bounds through the
  spec's layers exactly (interval arithmetic on the perturbation, no linearisation).
"""

from __future__ import annotations

import base64
import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core import evidence
from ..frameworks import HarnessError
from ..programs.errors import low_precision_error_bound
from . import roundtrip as rt
from .numerics import accepted_wrong_answers, difference
from .tracing.common import assert_within

TFJS_VERSION = "4.22.0"
ENV_HINT = "tox -e tfjs"
U32 = 2.0**-24
F16_REL, F16_ABS = 2.0**-11, 2.0**-25  # round to nearest in float16; absolute below its normal range


class ConverterRefused(Exception):
    """The converter declined a model because TF.js lacks an op: not applicable, per op."""

    def __init__(self, ops: list[str], message: str) -> None:
        self.ops, self.message = ops, message
        super().__init__(message)


class TfjsMismatch(AssertionError):
    """What TF.js loaded or predicted differs from TensorFlow beyond the stated bound."""


# ----------------------------------------------------------------------------- where


def runner_dir() -> Path:
    """js/tfjs-runner of this checkout, or $DLCONFORM_TFJS_RUNNER (an installed package has no js/)."""
    env = os.environ.get("DLCONFORM_TFJS_RUNNER")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "js" / "tfjs-runner"


def unavailable() -> str | None:
    """Why the round trip cannot run here (the exact missing half and the command), or None."""
    import importlib.util

    if importlib.util.find_spec("tensorflowjs") is None:
        return (f"the TensorFlow.js converter (tensorflowjs) is not installed in this environment "
                f"(importlib.util.find_spec('tensorflowjs') is None); run `{ENV_HINT}`, the environment "
                "with tensorflow 2.19 + tensorflowjs 4.22 (docs/tfjs-tfx.md)")
    node = shutil.which("node")
    if node is None:
        return f"Node.js is not on PATH (shutil.which('node') is None); the TF.js side runs `node {runner_dir()}/run.js`"
    pkg = runner_dir() / "node_modules" / "@tensorflow" / "tfjs" / "package.json"
    if not pkg.is_file():
        return (f"@tensorflow/tfjs is not installed: {pkg} does not exist; run "
                f"`npm ci --prefix {runner_dir()}` (the tfjs tox env does it) once, with the npm registry reachable, "
                "or set DLCONFORM_TFJS_RUNNER to a copy of js/tfjs-runner that has its node_modules")
    version = json.loads(pkg.read_text(encoding="utf-8")).get("version")
    if version != TFJS_VERSION:
        return f"{pkg} is @tensorflow/tfjs {version}, but the lockfile pins {TFJS_VERSION}; run `npm ci --prefix {runner_dir()}`"
    return None


# ----------------------------------------------------------------------------- converting


def convert(args: list[str]) -> float:
    """Run ``tensorflowjs_converter ARGS`` (its own entry point, in this process); returns seconds."""
    # tensorflowjs imports tensorflow_decision_forests, whose import prints a welcome message
    # and, when stdout is not a terminal or a plain file (pytest's capture), imports IPython,
    # which it does not declare: ModuleNotFoundError. Its own switch turns the message off.
    os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")
    from tensorflowjs.converters import converter

    t0 = time.perf_counter()
    try:
        converter.convert(list(args))
    except ValueError as exc:
        text = str(exc)
        if "Unsupported Ops" in text:
            ops = sorted({w for w in text.replace(",", " ").split() if w[:1].isupper() and w.isalnum()} - {"Unsupported", "Ops"})
            raise ConverterRefused(ops, text.strip()) from None
        raise
    return time.perf_counter() - t0


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The converter's weight entries by name (dtype, shape, quantization) from model.json."""
    doc = json.loads((Path(folder) / "model.json").read_text(encoding="utf-8"))
    return {w["name"]: w for group in doc["weightsManifest"] for w in group["weights"]}


# ----------------------------------------------------------------------------- running


@dataclass(frozen=True)
class NodeModel:
    id: str
    outputs: list[dict[str, np.ndarray]]  # one per input
    weights: dict[str, np.ndarray]
    error: str | None
    load_ms: float
    predict_ms: float


def _b64(x: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(x, dtype="<f4").tobytes()).decode("ascii")


class _NotATensor(ValueError):
    """What the runner returned for a tensor is not one (the model's error, not the harness's)."""


def _array(entry: Mapping[str, Any], kind: str) -> np.ndarray:
    """A float32 tensor from the runner's JSON; :class:`_NotATensor` for an axis without a
    size (JSON null: NaN or undefined in JavaScript) or data of another size than the shape's."""
    shape, name = entry.get("shape"), entry.get("name")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise _NotATensor(f"it returned {kind} {name!r} with shape {shape} (an axis without a size), not a tensor")
    data = base64.b64decode(entry.get("data", ""))
    if len(data) != 4 * math.prod(shape):
        raise _NotATensor(f"it returned {kind} {name!r} of shape {shape} with data of another size")
    return np.frombuffer(data, dtype="<f4").reshape(shape).astype(np.float32)


def run_node(models: Iterable[tuple[str, Path, str, str, list[np.ndarray]]], workdir: Path, *,
             timeout: float) -> tuple[dict[str, NodeModel], dict[str, Any]]:
    """Load and run every (id, folder, format, input name, inputs) in one Node.js child with a deadline."""
    job = {"models": [{"id": i, "dir": str(d), "format": f,
                       "inputs": [{"name": n, "shape": list(x.shape), "data": _b64(x)} for x in xs]}
                      for i, d, f, n, xs in models]}
    workdir.mkdir(parents=True, exist_ok=True)
    job_path, result_path = workdir / "tfjs-job.json", workdir / "tfjs-result.json"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    cmd = [shutil.which("node") or "node", str(runner_dir() / "run.js"), str(job_path), str(result_path)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        from ..frameworks.fresh import kill_group

        kill_group(proc)
        _, err = proc.communicate()
        raise HarnessError(f"the TF.js runner ({' '.join(cmd)}) did not finish within {timeout:g} s and was "
                           f"killed; stderr: {_tail(err)}") from None
    if proc.returncode != 0:
        raise HarnessError(f"the TF.js runner ({' '.join(cmd)}) exited with code {proc.returncode}; stderr: {_tail(err)}")
    try:
        doc = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"the TF.js runner exited 0 without a readable result {result_path} ({exc}); "
                           f"stderr: {_tail(err)}") from None
    out = {}
    for m in doc["models"]:
        error = m.get("error")
        try:
            outputs = [{o["name"]: _array(o, "output") for o in per_input} for per_input in m.get("outputs", [])]
            weights = {w["name"]: _array(w, "weight") for w in m.get("weights", [])}
        except _NotATensor as exc:
            error, outputs, weights = error or str(exc), [], {}
        out[m["id"]] = NodeModel(m["id"], outputs, weights, error, m.get("load_ms", 0), m.get("predict_ms", 0))
    info = {"tfjs": doc.get("tfjs"), "backend": doc.get("backend"), "node_s": round(time.perf_counter() - t0, 3)}
    return out, info


def _tail(err: str | None, lines: int = 12) -> str:
    kept = [line for line in (err or "").strip().splitlines() if line.strip() and not line.startswith("=====")
            and "looks like you are running TensorFlow.js in Node.js" not in line]
    return " | ".join(kept[-lines:]) or "(empty)"


# ----------------------------------------------------------------------------- weights


def keras2_names(spec: rt.ModelSpec) -> dict[str, np.ndarray]:
    """The spec's parameters under the names tf_keras (and so the layers format) gives them."""
    names = {}
    for i, (layer, p) in enumerate(zip(spec.layers, rt.parameters(spec))):
        keys = {"dense": {"kernel": "kernel", "bias": "bias"},
                "batchnorm": {"gamma": "gamma", "beta": "beta", "mean": "moving_mean", "var": "moving_variance"},
                "layernorm": {"gamma": "gamma", "beta": "beta"}}.get(layer.kind, {})
        for ours, theirs in keys.items():
            names[f"{layer.kind}_{i}/{theirs}"] = p[ours].astype(spec.dtype)
    return names


def _ratio(a: np.ndarray, e: np.ndarray, b: np.ndarray) -> float:
    """max |a - e| / b (with numerics.difference's non-finite rule: inf where it is broken)."""
    if not difference(a, e).nonfinite_match:
        return math.inf
    both = np.isfinite(e)
    err = np.abs(np.where(both, a, 0.0) - np.where(both, e, 0.0))
    return float(np.max(np.where(b > 0, err / np.where(b > 0, b, 1.0), np.where(err > 0, np.inf, 0.0)), initial=0.0))


def _within_bound(e: np.ndarray, b: np.ndarray) -> Callable[[np.ndarray], bool]:
    return lambda w: _ratio(w, e, b) <= 1.0


def weight_bound(w: np.ndarray, quantisation: str | None) -> np.ndarray:
    """Elementwise bound on |stored-and-loaded weight - w| for the converter's quantisation."""
    w = np.asarray(w, np.float64)
    if quantisation is None:
        return np.zeros_like(w)
    if quantisation == "float16":
        return np.maximum(F16_REL * np.abs(w), F16_ABS)
    if quantisation == "uint8":
        lo, hi = float(w.min()), float(w.max())
        scale = (hi - lo) / 255.0
        # tfjs dequantises q * scale + min in float32: one rounding of each term and of the sum.
        return np.full_like(w, scale / 2 + 3 * U32 * (abs(lo) + 255 * scale + abs(hi)))
    raise ValueError(f"unknown quantisation {quantisation!r}; use None, 'float16' or 'uint8'")


def assert_weights(loaded: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], *, what: str,
                   quantisation: str | None = None) -> float:
    """Every expected weight came back by name (same shape), within :func:`weight_bound`; returns the worst ratio."""
    __tracebackhide__ = True
    missing = sorted(set(expected) - set(loaded))
    if missing:
        evidence.check("weights missing by name", observed=len(missing), tolerance=0.0, example=what)
        raise TfjsMismatch(f"{what}: {len(missing)} weight(s) not loaded by TF.js under their names: {missing[:5]}; "
                           f"TF.js has {sorted(loaded)[:8]}")
    worst, bad, vacuous = 0.0, [], {}
    for name in sorted(expected):
        a, e = np.asarray(loaded[name], np.float64), np.asarray(expected[name], np.float64)
        if a.shape != e.shape:
            bad.append(f"{name}: shape {a.shape}, but should be {e.shape}")
            continue
        b, d = weight_bound(e, quantisation), difference(a, e)
        ratio = _ratio(a, e, b)
        worst = max(worst, ratio)
        if not d.nonfinite_match:
            bad.append(f"{name}: {d.describe()}")
        elif not ratio <= 1.0:
            bad.append(f"{name}: max |tfjs - original| = {d.error:.3e}, bound {float(b.max()):.3e}")
        elif quantisation:  # a bitwise comparison cannot be vacuous; a bound can
            accepted = accepted_wrong_answers(e, _within_bound(e, b), quantisation)
            if accepted:
                vacuous[name] = accepted
    label = f"weights by name ({quantisation or 'float32, bitwise'})"
    for name, accepted in sorted(vacuous.items()):
        evidence.inconclusive(label, reason=f"the bound accepts {', '.join(accepted)}", bound=1.0, weight=name,
                              example=what)
    if vacuous and not bad and len(vacuous) == len(expected):
        return worst
    evidence.check(label, observed=worst if quantisation else (0.0 if not bad else math.inf),
                   tolerance=1.0 if quantisation else 0.0, weights=len(expected), example=what)
    if bad:
        raise TfjsMismatch(f"{what}: {len(bad)} of {len(expected)} weights differ from the originals: " + "; ".join(bad[:4]))
    return worst


def assert_manifest_quantised(manifest: Mapping[str, Mapping[str, Any]], expected: Mapping[str, np.ndarray], *,
                              quantisation: str, what: str) -> None:
    """The converter stored each weight as documented: the dtype, and for uint8 scale = (max - min) / 255."""
    __tracebackhide__ = True
    for name, w in expected.items():
        q = manifest[name].get("quantization") or {}
        if q.get("dtype") != quantisation:
            raise TfjsMismatch(f"{what}: weight {name} is stored as {q.get('dtype') or manifest[name]['dtype']}, "
                               f"but --quantize_{quantisation} should store it as {quantisation}")
        if quantisation == "uint8":
            lo, hi = float(np.min(w)), float(np.max(w))
            want = (hi - lo) / 255.0 if hi > lo else 1.0
            if not math.isclose(float(q["scale"]), want, rel_tol=1e-6, abs_tol=1e-12):
                raise TfjsMismatch(f"{what}: weight {name} has uint8 scale {q['scale']!r}, but (max - min) / 255 = {want!r}")


# ----------------------------------------------------------------------------- propagated bound


def propagated_bound(spec: rt.ModelSpec, x: np.ndarray, dparams: list[dict[str, np.ndarray]], *,
                     rtol: float) -> np.ndarray:
    """Elementwise bound on |model with perturbed parameters - model| at input ``x``.

    ``dparams``: per layer, a bound on each parameter's perturbation (keys of
    :func:`roundtrip.parameters`). Carried exactly: dense ``|dy| <= e|W| + (|h| + e)|dW| + db``;
    an activation multiplies by its Lipschitz constant; batch normalisation (inference)
    ``y = (h - m) a + beta`` with ``a = gamma / sqrt(v + eps)`` and ``|da|`` from the extreme
    ``v``; layer normalisation through its 2-norm Lipschitz constant ``1 / sd_min`` (the
    centred, scaled map is 1-Lipschitz in the 2-norm up to ``1 / sd``; ``sd`` moves by at
    most ``||dh||_2 / sqrt(n)``). ``rtol`` times :func:`roundtrip.forward_magnitude` adds the
    float32 rounding of the two evaluations.
    """
    h = np.asarray(x, np.float64)
    e = np.zeros_like(h)
    for layer, p, d in zip(spec.layers, rt.parameters(spec), dparams):
        if layer.kind == "dense":
            w, b = p["kernel"], p["bias"]
            e = e @ np.abs(w) + (np.abs(h) + e) @ d["kernel"] + d["bias"]
            e = e * rt.ACTIVATIONS[layer.activation]
            h = rt._activation(layer.activation, h @ w + b)
        elif layer.kind == "batchnorm":
            v, dv = p["var"] + rt.KERAS_BN_EPS, d["var"]
            if np.any(v - dv <= 0):
                return np.full_like(h, np.inf)
            a = p["gamma"] / np.sqrt(v)
            da = d["gamma"] / np.sqrt(v - dv) + np.abs(p["gamma"]) * np.abs(1 / np.sqrt(v - dv) - 1 / np.sqrt(v))
            c = np.abs(h - p["mean"])
            e = np.abs(a) * (e + d["mean"]) + da * (c + e + d["mean"]) + d["beta"]
            h = (h - p["mean"]) * a + p["beta"]
        elif layer.kind == "layernorm":
            n = h.shape[-1]
            mu, sd = h.mean(-1, keepdims=True), np.sqrt(h.var(-1, keepdims=True) + rt.KERAS_LN_EPS)
            e2 = np.sqrt((e**2).sum(-1, keepdims=True))
            sd_min = np.maximum(math.sqrt(rt.KERAS_LN_EPS), sd - e2 / math.sqrt(n))
            z = (h - mu) / sd
            dz = np.broadcast_to(e2 / sd_min, h.shape)
            e = dz * (np.abs(p["gamma"]) + d["gamma"]) + np.abs(z) * d["gamma"] + d["beta"]
            h = z * p["gamma"] + p["beta"]
    return e + rtol * rt.forward_magnitude(spec, x, bn_eps=rt.KERAS_BN_EPS, ln_eps=rt.KERAS_LN_EPS)


def parameter_bounds(spec: rt.ModelSpec, quantisation: str) -> list[dict[str, np.ndarray]]:
    """:func:`weight_bound` of every parameter of the spec (float32 values, as the model holds them)."""
    out = []
    for p in rt.parameters(spec):
        out.append({k: weight_bound(v.astype(np.float32), quantisation) for k, v in p.items() if k != "count"})
    return out


# ------------------------------------------------------------------ one-op programs of the op library


def pack_inputs(inputs: Iterable[np.ndarray]) -> np.ndarray:
    """A program's inputs as the one float32 vector ``x`` of :func:`save_program`'s model."""
    return np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in inputs]).astype(np.float32)


def save_function(tf: Any, fn: Callable[[Any], Any], shape: list[int | None], folder: str | os.PathLike[str]) -> Any:
    """A SavedModel whose serving_default is ``{"y": fn(x)}`` on one float32 input ``x`` of
    ``shape`` (None: any size); returns the saved ``tf.Module``."""
    mod = tf.Module()
    mod.f = tf.function(lambda x: {"y": fn(x)}, input_signature=[tf.TensorSpec(shape, tf.float32, name="x")])
    tf.saved_model.save(mod, str(folder), signatures={"serving_default": mod.f})
    return mod


def save_program(tf: Any, program: Any, folder: str | os.PathLike[str]) -> Any:
    """:func:`save_function` of a program in float32, its inputs packed into one float32
    vector ``x`` (:func:`pack_inputs`) and split and reshaped inside (the TF.js runner feeds
    one named input per model)."""
    shapes = list(program.input_shapes)
    sizes = [int(np.prod(shape, dtype=int)) for shape in shapes]
    fn = program.build("tensorflow", "float32")

    def packed(x: Any) -> Any:
        parts = tf.split(x, sizes) if len(sizes) > 1 else [x]
        return fn([tf.reshape(part, shape) for part, shape in zip(parts, shapes)])

    return save_function(tf, packed, [sum(sizes)], folder)


def assert_program_output(outputs: Mapping[str, np.ndarray], program: Any, inputs: list[np.ndarray], *,
                          what: str) -> None:
    """TF.js's ``y`` for a one-op program against the float64 reference at the same inputs
    (values of float32), within the program's float32 error bound (one conforming float32
    evaluation: ``programs.errors.low_precision_error_bound``); a bound that accepts a
    canonical wrong answer is recorded as inconclusive."""
    __tracebackhide__ = True
    reference = program.numpy(inputs)
    if "y" not in outputs:
        raise TfjsMismatch(f"{what}: the model has no output 'y' (outputs: {sorted(outputs)})")
    got = np.asarray(outputs["y"], dtype=np.float64)
    if got.size != np.size(reference):
        raise TfjsMismatch(f"{what}: output of {got.size} values, but should have {np.size(reference)} "
                           f"(shape {np.shape(reference)})")
    bound = low_precision_error_bound(program, inputs, "float32")
    assert_within(got.reshape(np.shape(reference)), reference, bound, what=f"{what} vs float64 reference",
                  dtype="float32")
