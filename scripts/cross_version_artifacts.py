"""Cross-version artifacts: save every export format with the old stack, load it with the new one.

An upgrade check that runs the suites on each stack separately cannot see whether what the
old stack *wrote* still loads in the new one. This script splits a round trip across two
environments:

    OLD/bin/python scripts/cross_version_artifacts.py save DIR      # writes DIR/manifest.json
    NEW/bin/python scripts/cross_version_artifacts.py load DIR --markdown DIR/result.md

``save`` builds a few fixed models (float32 and float64; dense, batch norm, layer norm,
the shared specs of ``checks.roundtrip``), writes each format the old stack can write, and
stores with it what the old stack computed: the outputs on fixed inputs, every variable
and buffer (and the optimizer's state for the checkpoint formats), the signature.
``load`` opens each artifact with the new stack's own loader and checks three things:

- **loads**: the documented compatibility promise (TensorFlow's versions guide: SavedModels,
  graphs and checkpoints of an older release load in a newer one of the same major version;
  TFLite's op versioning: "new TensorFlow Lite implementation should handle an old model
  file"; torch's serialization notes: ``torch.save`` files, TorchScript archives and
  ``torch.export`` programs load in later releases, the last with a stated format version);
- **state bitwise**: stored numbers are data, so every variable, buffer and optimizer slot
  comes back with the same names, dtypes, shapes and bits;
- **outputs within the two-evaluation error bound**: no document promises *bitwise* outputs
  across releases (kernels change), so old and new outputs are compared with
  ``roundtrip.model_tolerance`` (the error model of two independent evaluations of the
  spec's forward pass, relative to its magnitude); whether they are bitwise equal is
  reported as a fact, not asserted: the new stack's outputs against what the old stack got
  back from the same artifact.

A format the old stack cannot write, or the new stack lacks a loader for, is "not
applicable" with the reason; nothing is skipped silently. Exit status of ``load``: 0 when
every check holds, 1 when one is violated, 2 on unusable input (one line, no traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from pytest_dlconform.checks import roundtrip as rt

L = rt.Layer
# Fixed specs: every layer kind with state (batch norm buffers, layer norm), both dtypes.
SPECS = (
    rt.ModelSpec(5, (L("dense", 7, "relu"), L("batchnorm"), L("dense", 3)), "float32", 11),
    rt.ModelSpec(6, (L("dense", 9, "tanh"), L("layernorm"), L("dense", 4, "sigmoid")), "float32", 29),
    rt.ModelSpec(4, (L("dense", 8, "elu"), L("batchnorm"), L("dense", 2, "tanh")), "float64", 47),
)
BATCHES = (1, 4, 7)
DOCS = {
    "tensorflow": "https://www.tensorflow.org/guide/versions (Compatibility of SavedModels, graphs and checkpoints)",
    "tflite": "https://ai.google.dev/edge/litert/models/ops_version (Backward compatibility)",
    "torch": "https://docs.pytorch.org/docs/stable/notes/serialization.html",
    "keras": "https://keras.io/guides/serialization_and_saving/ (no cross-version promise found: checked as the "
             "format's purpose implies)",
}
# format -> (framework whose version matters, claim id, documentation)
CLAIMS = {
    "savedmodel": ("tensorflow", "upgrade.artifact.savedmodel", DOCS["tensorflow"]),
    "keras-export": ("tensorflow", "upgrade.artifact.keras-export", DOCS["tensorflow"]),
    "tflite": ("tensorflow", "upgrade.artifact.tflite", DOCS["tflite"]),
    "tf-checkpoint": ("tensorflow", "upgrade.artifact.tf-checkpoint", DOCS["tensorflow"]),
    "keras": ("keras", "upgrade.artifact.keras-file", DOCS["keras"]),
    "torchscript": ("torch", "upgrade.artifact.torchscript", DOCS["torch"]),
    "torch-export": ("torch", "upgrade.artifact.torch-export", DOCS["torch"]),
    "state-dict": ("torch", "upgrade.artifact.state-dict", DOCS["torch"]),
    "torch-optimizer": ("torch", "upgrade.artifact.torch-optimizer-checkpoint", DOCS["torch"]),
}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name, dists in {"tensorflow": ("tensorflow", "tensorflow-cpu"), "keras": ("keras",), "torch": ("torch",),
                        "numpy": ("numpy",)}.items():
        out[name] = None
        for dist in dists:
            try:
                out[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def _key(name: str) -> str:
    return name.replace("/", "|")  # npz member names cannot hold "/"


def _unkey(name: str) -> str:
    return name.replace("|", "/")


def _jsonish(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, sort_keys=True))


# ----------------------------------------------------------------------------- save (old stack)


def _keras_writers(tf: Any, keras: Any, spec: rt.ModelSpec, inputs: list[np.ndarray]) -> dict[str, Any]:
    """Per TF/Keras format: (writer of the main file, expected outputs, state, signature)."""
    model = rt.build_keras(spec, keras)
    outs = [{"output_0": np.asarray(model(x, training=False))} for x in inputs]
    servable = rt.servable_module(tf, model, spec)
    sm_outs = [{"y": servable.serve(x)["y"].numpy()} for x in inputs]
    sm_state = {k: v.numpy() for k, v in servable.state.items()}
    sig = {"inputs": {"x": [spec.dtype, [None, spec.in_features]]}, "outputs": {"y": [spec.dtype, [None, spec.out_features]]}}
    writers: dict[str, Any] = {
        "savedmodel": (lambda p: tf.saved_model.save(servable, str(p), signatures={"serving_default": servable.serve}),
                       sm_outs, sm_state, {"serving_default": sig}),
        "keras-export": (lambda p: model.export(str(p), verbose=False), outs,
                         {v.path: v.numpy() for v in model.variables}, None),
    }
    trained = rt.build_keras(spec, keras)
    # Named: an optimizer's variable paths carry its name, auto-numbered per process otherwise.
    trained.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01, name="adam"), loss="mse")
    xs = rt.example_inputs(spec, [8], spec.seed + 5)[0]
    trained.train_on_batch(xs, np.zeros((8, spec.out_features), spec.dtype))  # optimizer state worth saving
    t_outs = [{"output_0": np.asarray(trained(x, training=False))} for x in inputs]
    writers["keras"] = (lambda p: trained.save(str(p)), t_outs, rt.keras_state(trained), rt.keras_signature(trained))
    ckpt = tf.train.Checkpoint(model=trained, optimizer=trained.optimizer)
    writers["tf-checkpoint"] = (lambda p: (p.mkdir(), ckpt.write(str(p / "ckpt"))), t_outs, rt.keras_state(trained), None)
    if spec.dtype == "float32" and hasattr(tf, "lite"):
        blob = tf.lite.TFLiteConverter.from_keras_model(model).convert()
        writers["tflite"] = (lambda p: p.write_bytes(blob), outs, None, None)
    return writers


def _torch_writers(torch: Any, spec: rt.ModelSpec, inputs: list[np.ndarray]) -> dict[str, Any]:
    module = rt.build_torch(spec, torch)
    outs = [{"output_0": rt.torch_call(module, x)} for x in inputs]
    state = rt.torch_state(module)
    scripted = torch.jit.script(module)
    example = torch.from_numpy(rt.example_inputs(spec, [3], spec.seed + 1)[0])
    program = torch.export.export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    writers: dict[str, Any] = {
        "torchscript": (lambda p: torch.jit.save(scripted, str(p)), outs, state, rt.torchscript_signature(scripted)),
        "torch-export": (lambda p: torch.export.save(program, str(p)), outs, state, rt.export_signature(program)),
        "state-dict": (lambda p: torch.save(module.state_dict(), str(p)), outs, state, {"keys": sorted(state)}),
    }
    trained = rt.build_torch(spec, torch).train()
    opt = torch.optim.Adam(trained.parameters(), lr=0.01)
    xs = torch.from_numpy(rt.example_inputs(spec, [8], spec.seed + 5)[0])
    trained(xs).square().mean().backward()
    opt.step()  # exp_avg, exp_avg_sq and step worth saving
    trained.eval()
    t_outs = [{"output_0": rt.torch_call(trained, x)} for x in inputs]
    t_state = {**rt.torch_state(trained), **_optimizer_state(opt.state_dict())}
    blob = {"model": trained.state_dict(), "optimizer": opt.state_dict()}
    writers["torch-optimizer"] = (lambda p: (p.mkdir(), torch.save(blob, str(p / "checkpoint.pt"))), t_outs, t_state,
                                  {"param_groups": _groups(opt.state_dict())})
    return writers


def _optimizer_state(sd: dict[str, Any]) -> dict[str, np.ndarray]:
    return {f"optimizer/{pid}/{k}": np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v)
            for pid, slots in sd["state"].items() for k, v in slots.items()}


def _groups(sd: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in g.items() if isinstance(v, (int, float, bool, str, type(None), list, tuple))}
            for g in sd["param_groups"]]


def _write(folder: Path, fmt: str, writer: Callable[[Path], Any]) -> Path:
    if fmt in rt.MAIN_FILE:
        return rt.export_artifact(folder, fmt, writer).path  # sealed: a corrupted copy is refused on load
    writer(folder)
    return folder


def save(out: Path, frameworks: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=False)
    (out / "artifacts").mkdir()
    entries: list[dict[str, Any]] = []
    for spec in SPECS:
        inputs = rt.example_inputs(spec, BATCHES, spec.seed + 2)
        for fmt, writer, outs, state, sig, na in _writers(frameworks, spec, inputs):
            entry = {"id": f"{len(entries):03d}-{fmt}", "format": fmt, "spec": spec.to_json(), "claim": CLAIMS[fmt][1]}
            if na:
                entries.append({**entry, "not_applicable": na})
                continue
            try:
                _write(out / "artifacts" / entry["id"], fmt, writer)
            except Exception as exc:  # the old stack could not write it: recorded, not hidden
                entries.append({**entry, "not_applicable": f"the old stack could not write it: {type(exc).__name__}: {exc}"})
                continue
            # What the old stack gets back from its own artifact: the new stack's outputs are
            # compared with these bitwise (a fact, not a claim) to show whether the numbers moved.
            run, _, _ = _load(out / "artifacts" / entry["id"], fmt, spec)
            again = [run(x) for x in inputs]
            np.savez(out / f"{entry['id']}.npz", **{f"input-{j}": x for j, x in enumerate(inputs)},
                     **{f"output-{j}-{k}": v for j, o in enumerate(outs) for k, v in o.items()},
                     **{f"again-{j}-{k}": v for j, o in enumerate(again) for k, v in o.items()},
                     **{f"state-{_key(k)}": v for k, v in (state or {}).items()})
            entries.append({**entry, "inputs": len(inputs), "has_state": state is not None,
                            "signature": _jsonish(sig) if sig is not None else None})
    doc = {"written_by": versions(), "python": sys.version.split()[0], "entries": entries}
    (out / "manifest.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    done = sum("not_applicable" not in e for e in entries)
    print(f"saved {done} artifact(s) of {len(entries)} to {out} with {_stack(doc['written_by'])}")
    return 0


def _writers(frameworks: list[str], spec: rt.ModelSpec, inputs: list[np.ndarray]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    if "tensorflow" in frameworks:
        import keras
        import tensorflow as tf

        for fmt, (w, o, s, g) in _keras_writers(tf, keras, spec, inputs).items():
            rows.append((fmt, w, o, s, g, None))
        if spec.dtype != "float32":
            rows.append(("tflite", None, None, None, None, ("the TFLite converter here is checked on float32 models "
                         "only (export.tflite.roundtrip: float64 has no TFLite kernels)")))
    if "torch" in frameworks:
        import torch

        for fmt, (w, o, s, g) in _torch_writers(torch, spec, inputs).items():
            rows.append((fmt, w, o, s, g, None))
    return rows


def _stack(v: dict[str, Any]) -> str:
    return ", ".join(f"{k} {x}" for k, x in v.items() if x)


# ----------------------------------------------------------------------------- load (new stack)


def _load(folder: Path, fmt: str, spec: rt.ModelSpec) -> tuple[list[Any], dict[str, np.ndarray], Any]:
    """(run function per input -> outputs, state, signature) from the new stack's loader."""
    if fmt == "tf-checkpoint":
        return _load_tf_checkpoint(folder, spec)
    if fmt == "torch-optimizer":
        return _load_torch_optimizer(folder, spec)
    loaded = rt.load(folder, fmt, spec)
    return loaded.run, loaded.state(), loaded.signature()


def _load_tf_checkpoint(folder: Path, spec: rt.ModelSpec) -> tuple[Any, dict[str, np.ndarray], Any]:
    import keras
    import tensorflow as tf

    model = rt.build_keras(spec, keras)  # the untrained weights: every restored value must come from the file
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01, name="adam"), loss="mse")
    model.optimizer.build(model.trainable_variables)
    status = tf.train.Checkpoint(model=model, optimizer=model.optimizer).read(str(folder / "ckpt"))
    status.assert_existing_objects_matched()
    return (lambda x: {"output_0": np.asarray(model(x, training=False))}), rt.keras_state(model), None


def _load_torch_optimizer(folder: Path, spec: rt.ModelSpec) -> tuple[Any, dict[str, np.ndarray], Any]:
    import torch

    blob = torch.load(str(folder / "checkpoint.pt"), weights_only=True)
    model = rt.build_torch(rt.ModelSpec(spec.in_features, spec.layers, spec.dtype, spec.seed + 1), torch)
    opt = torch.optim.Adam(model.parameters(), lr=0.5)  # another lr: the file's param_groups must win
    model.load_state_dict(blob["model"], strict=True)
    opt.load_state_dict(blob["optimizer"])
    sd = opt.state_dict()
    state = {**rt.torch_state(model), **_optimizer_state(sd)}
    return (lambda x: {"output_0": rt.torch_call(model.eval(), x)}), state, {"param_groups": _groups(sd)}


def _signature_kept(got: Any, want: Any, fmt: str) -> str | None:
    """None when the old signature came back. For optimizer param_groups, every old key must
    keep its value (a newer release may add keys with defaults: that is not a change)."""
    got = _jsonish(got)
    if fmt == "torch-optimizer":
        for i, (g, w) in enumerate(zip(got["param_groups"], want["param_groups"])):
            bad = {k: (w[k], g.get(k)) for k in w if g.get(k, object()) != w[k]}
            if bad:
                return f"param group {i}: {bad} (old, new)"
        return None
    return None if got == want else f"signature {json.dumps(got)[:300]} differs from the old {json.dumps(want)[:300]}"


def check_entry(root: Path, entry: dict[str, Any]) -> dict[str, Any]:
    spec = rt.ModelSpec.from_json(entry["spec"])
    res: dict[str, Any] = {"id": entry["id"], "claim": entry["claim"], "format": entry["format"], "spec": spec.describe()}
    if "not_applicable" in entry:
        return {**res, "verdict": "not applicable", "reason": entry["not_applicable"]}
    with np.load(root / f"{entry['id']}.npz") as z:
        saved = {k: z[k] for k in z.files}
    inputs = [saved[f"input-{j}"] for j in range(entry["inputs"])]
    try:
        run, state, sig = _load(root / "artifacts" / entry["id"], entry["format"], spec)
        outs = [run(x) for x in inputs]
    except Exception as exc:  # any failure to load or run an old artifact is the finding
        return {**res, "verdict": "violated", "check": "loads", "reason": f"does not load: {type(exc).__name__}: {exc}"}
    problems, facts = [], {}
    if entry["has_state"]:
        want = {_unkey(k[6:]): v for k, v in saved.items() if k.startswith("state-")}
        try:
            rt.assert_same_state(state, want, what="state")
        except AssertionError as exc:
            problems.append(("state bitwise", str(exc)))
    if entry["signature"] is not None and (msg := _signature_kept(sig, entry["signature"], entry["format"])):
        problems.append(("signature", msg))
    tol = rt.model_tolerance(spec)
    scales = rt.magnitudes(spec, inputs, "torch" if entry["format"] in ("torchscript", "torch-export", "state-dict",
                                                                         "torch-optimizer") else "keras")
    worst, bitwise = 0.0, True
    for j, (got, x, m) in enumerate(zip(outs, inputs, scales)):
        want = {k.split("-", 2)[2]: v for k, v in saved.items() if k.startswith(f"output-{j}-")}
        old = {k.split("-", 2)[2]: v for k, v in saved.items() if k.startswith(f"again-{j}-")}
        bitwise &= set(got) == set(old) and all(np.array_equal(np.asarray(got[k]), old[k]) for k in old)
        try:
            worst = max(worst, rt.assert_close_outputs(got, want, tol, what=f"batch {j} (shape {x.shape})", scale=m))
        except AssertionError as exc:
            problems.append(("outputs within the two-evaluation bound", str(exc)))
    facts.update(outputs_bitwise=bool(bitwise), worst_relative_error=worst, tolerance=tol.rtol, state_entries=len(state))
    if problems:
        return {**res, **facts, "verdict": "violated", "check": problems[0][0], "reason": "; ".join(p[1] for p in problems)}
    return {**res, **facts, "verdict": "holds"}


def load(root: Path, markdown: Path | None, json_out: Path | None) -> int:
    try:
        doc = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"error: {root / 'manifest.json'} is not a saved artifact set ({exc}); run `save {root}` with the old stack first",
              file=sys.stderr)
        return 2
    results = [check_entry(root, e) for e in doc["entries"]]
    now = versions()
    text = _markdown(doc["written_by"], now, results)
    print(text)
    if markdown:
        markdown.write_text(text, encoding="utf-8")
    if json_out:
        json_out.write_text(json.dumps({"written_by": doc["written_by"], "loaded_by": now, "results": results},
                                       indent=1, default=str), encoding="utf-8")
    return 1 if any(r["verdict"] == "violated" for r in results) else 0


def _markdown(old: dict[str, Any], new: dict[str, Any], results: list[dict[str, Any]]) -> str:
    counts = {v: sum(r["verdict"] == v for r in results) for v in ("holds", "violated", "not applicable")}
    lines = [f"**written by** {_stack(old)}; **loaded by** {_stack(new)}", "",
             (f"{len(results)} artifact(s): {counts['holds']} hold, {counts['violated']} violated, "
              f"{counts['not applicable']} not applicable"), "",
             ("| claim | model | verdict | state entries | outputs bitwise as the old stack loaded them "
              "| worst error / tolerance | reason |"),
             "|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = f"{r['worst_relative_error']:.2g} / {r['tolerance']:.2g}" if "tolerance" in r else "-"
        bit = {True: "yes", False: "no"}.get(r.get("outputs_bitwise"), "-")
        reason = r.get("reason", "").replace("|", "\\|")[:400]
        lines.append(f"| `{r['claim']}` | {r['spec']} | {r['verdict']} | {r.get('state_entries', '-')} | {bit} | {ratio} "
                     f"| {reason} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="with the old stack: write the artifacts and what the old stack computed")
    s.add_argument("dir", type=Path)
    s.add_argument("--frameworks", default="tensorflow,torch", help="comma-separated: tensorflow (with Keras), torch")
    ld = sub.add_parser("load", help="with the new stack: load, compare, report")
    ld.add_argument("dir", type=Path)
    ld.add_argument("--markdown", type=Path)
    ld.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if a.cmd == "save":
        frameworks = [f.strip() for f in a.frameworks.split(",") if f.strip()]
        bad = [f for f in frameworks if f not in ("tensorflow", "torch")]
        if bad or not frameworks:
            print(f"error: --frameworks {a.frameworks!r}: use tensorflow, torch or both", file=sys.stderr)
            return 2
        if a.dir.exists():
            print(f"error: {a.dir} exists; save refuses to overwrite: choose a new folder", file=sys.stderr)
            return 2
        return save(a.dir, frameworks)
    return load(a.dir, a.markdown, a.json)


if __name__ == "__main__":
    sys.exit(main())
