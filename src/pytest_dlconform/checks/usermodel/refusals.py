"""Documented refusals: the only exceptions from an export writer or a distributed wrapper that
make a model claim "not applicable". Each entry is the exception type (matched by its
qualified name anywhere in the raised type's MRO, so no framework is imported here), a
pattern the message must match, and the documentation that says the format or wrapper does
not take such a model. Anything else a writer or wrapper raises is a violation.

Importing this module imports no framework.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..roundtrip.errors import _ANSI, one_line


@dataclass(frozen=True)
class Refusal:
    exc_type: str  # module.QualName of the raised type or one of its bases
    message: str  # regex, searched in the message (colour codes dropped)
    source: str  # where the framework documents the refusal

    def matches(self, exc: BaseException) -> re.Match[str] | None:
        names = {f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__}
        return re.search(self.message, _ANSI.sub("", str(exc))) if self.exc_type in names else None


# Per export format of checks.usermodel.write_artifact. state-dict and savedmodel document no
# refusal: torch.save of a state_dict and tf.saved_model.save of a tf.Module take any model.
FORMAT_REFUSALS: Mapping[str, Sequence[Refusal]] = {
    "state-dict": (),
    "savedmodel": (),
    "torchscript": (
        Refusal("builtins.RuntimeError", r"Encountering a (dict|list) at the output of the tracer",
                "torch.jit.trace, strict: 'Only turn this off when you want the tracer to record your mutable "
                "container types (currently list/dict)'"),
        Refusal("builtins.RuntimeError", r"Only tensors, lists, tuples of tensors, or dictionary of tensors can be "
                r"output from traced functions",
                "torch.jit.trace: 'Tracing is ideal for code that operates only on Tensors and lists, "
                "dictionaries, and tuples of Tensors'"),
        Refusal("builtins.RuntimeError", r"Could not export Python function call",
                "torch.jit.save: a traced module is saved as TorchScript code, and a Python call the tracer recorded "
                "(a custom torch.autograd.Function's apply) has none: 'Remove calls to Python functions before "
                "export'"),
    ),
    "torch-export": (
        Refusal("torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode",
                r"Could not guard on data-dependent expression",
                "torch.export docs, 'Dealing with GuardOnDataDependentSymNode errors': Python control flow on a "
                "tensor's value is not traced (torch.cond is the documented way)"),
    ),
    "onnx": (  # the default exporter (dynamo=True) wraps torch.export's refusal, then refuses unknown operators
        Refusal("torch.onnx.OnnxExporterError", r"GuardOnDataDependentSymNode'>: Could not guard on data-dependent",
                "torch.onnx.export (dynamo=True): 'Use torch.export.export and set strict=False'; torch.export "
                "documents this refusal"),
        Refusal("torch.onnx.OnnxExporterError", r"No ONNX function found for",
                "torch.onnx.export, custom_translation_table: operators without a translation need one"),
        Refusal("torch.onnx.errors.UnsupportedOperatorError", r"(is not supported|unrecognized namespace)",
                "torch.onnx.errors.UnsupportedOperatorError: 'Raised when an operator is unsupported by the exporter'"),
    ),
    "keras": (
        Refusal("builtins.NotImplementedError", r"must override `get_config\(\)` in\s+order to be serializable",
                "Keras 'Save, serialize, and export models': a custom object with non-serializable __init__ "
                "arguments must implement get_config()"),
    ),
    "keras-export": (),
    "tflite": (
        Refusal("tensorflow.lite.python.convert_phase.ConverterError",
                r"op is neither a custom op nor a flex op|not supported by the TensorFlow Lite built-?in operator set",
                "TensorFlow Lite 'TensorFlow Lite and TensorFlow operator compatibility': a model with operations "
                "outside the built-in set does not convert without Select TF ops"),
    ),
}

# Per wrapper of checks.usermodel.torch_rank_step.
WRAP_REFUSALS: Mapping[str, Sequence[Refusal]] = {
    "ddp": (
        Refusal("builtins.RuntimeError", r"DistributedDataParallel is not needed when a module doesn't have any "
                r"parameter that requires a gradient",
                "DistributedDataParallel: 'This container provides data parallelism by synchronizing gradients' "
                "(a module with nothing to train has none; its constructor says so)"),
    ),
    "fsdp": (
        Refusal("builtins.ValueError", r"fully_shard doesn't support scalar parameters",
                "fully_shard: 'parameters ... sharded on dim-0' (a 0-dim parameter has no dim-0)"),
        Refusal("builtins.NotImplementedError", r"FSDP does not support non-contiguous parameters",
                "fully_shard: sharded parameters are DTensors chunked on dim-0 (contiguous parameters only)"),
    ),
}


# A line of a stack trace inside an exception's message: TorchScript's "path.py(625): apply",
# Python's 'File "x.py", line 3', a C++ frame ("frame #3: ..."), "Traceback (most recent...".
_FRAME = re.compile(r'^\s*((\S+\.py|<[^>]+>)\(\d+\):|File "|frame #\d+|Traceback \(most recent|Exception raised from )')


def refusal_reason(table: Sequence[Refusal], exc: BaseException) -> str | None:
    """The one-line "not applicable" reason when ``exc`` is a documented refusal, else None:
    never a stack trace (the frames some messages carry are dropped), never a line break."""
    for refusal in table:
        if refusal.matches(exc):
            return one_line_reason(f"{_summary(exc, refusal)} [documented: {refusal.source}]")
    return None


def one_line_reason(text: str, limit: int = 600) -> str:
    """A "not applicable" reason on one line: stack-trace lines dropped, whitespace collapsed, cut at ``limit``."""
    kept = [line for line in _ANSI.sub("", text).splitlines() if not _FRAME.match(line)]
    flat = " ".join(" ".join(kept).split())
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "\u2026"


def _summary(exc: BaseException, refusal: Refusal) -> str:
    """The raised type and the paragraph of its message that matched, on one line."""
    text = "\n".join(line for line in _ANSI.sub("", str(exc)).splitlines() if not _FRAME.match(line))
    found = re.search(refusal.message, text)
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    start = found.start() if found else 0
    offset = 0
    for para in paragraphs:
        at = text.find(para, offset)
        if at <= start < at + len(para):
            para = " ".join(para.split())
            if len(para) > 300:  # a long compiler paragraph (TFLite): the words around the match
                hit = re.search(refusal.message, para)
                lo = max(0, hit.start() - 120) if hit else 0
                para = ("\u2026" if lo else "") + para[lo:lo + 300]
            return f"{type(exc).__name__}: {para}"
        offset = at + len(para)
    return one_line(exc)
