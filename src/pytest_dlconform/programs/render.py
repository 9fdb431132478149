"""Rendering: a program as framework source, compiled, and fed its inputs.

:func:`to_source` writes the standalone script that :func:`build` compiles and runs, so
what a failure prints is exactly what ran; :func:`to_layout` re-stores torch inputs in
another memory layout (its own source is pasted into the script). Framework imports stay
inside the functions that need them: importing this module imports neither framework.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import sys
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from ..core.floats import UNIT_ROUNDOFF
from .core import ProgramLike, _weight
from .ops import OPS

if TYPE_CHECKING:
    import torch


FRAMEWORKS: Final = ("torch", "tensorflow")
LAYOUTS: Final = ("contiguous", "transposed", "strided", "channels_last")


def to_source(program: ProgramLike, framework: str = "torch", dtype: str = "float64", layout: str = "contiguous") -> str:
    """A standalone script (numpy + the framework) defining ``program(xs)`` as built."""
    _check_target(framework, dtype, layout)
    return "\n".join(_source_lines(program, framework, dtype, layout)) + "\n"


def build(program: ProgramLike, framework: str, dtype: str = "float64",
          layout: str = "contiguous") -> Callable[[Sequence[Any]], Any]:
    """``f(xs) -> tensor`` in ``framework``: see :meth:`.program.Program.build`."""
    source = to_source(program, framework, dtype, layout)
    compiled = _compile_program(source, framework)
    convert = _input_converter(framework, dtype)
    n = program.n_inputs

    def run(xs: Sequence[Any]) -> Any:
        if len(xs) != n:
            raise TypeError(f"the program takes {n} inputs, got {len(xs)}")
        return compiled([convert(i, x) for i, x in enumerate(xs)])

    run.source = source  # type: ignore[attr-defined]
    return run


def to_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values as ``t`` in another memory layout, differentiably.

    "contiguous": row-major; "transposed": column-major (all dims reversed; rank < 2 stays
    contiguous); "strided": every stride doubled and storage offset 1 (a view into a
    buffer twice as large); "channels_last": torch.channels_last for 4-D and
    channels_last_3d for 5-D tensors, contiguous otherwise.
    """
    import torch

    if layout == "contiguous":
        return t.contiguous()
    if layout == "transposed":
        if t.dim() < 2:
            return t.contiguous()
        rev = tuple(range(t.dim() - 1, -1, -1))
        return t.permute(rev).contiguous().permute(rev)
    if layout == "strided":
        return torch.stack((torch.zeros_like(t), t), dim=-1).select(-1, 1)
    if layout == "channels_last":
        if t.dim() in (4, 5):
            fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
            return t.contiguous(memory_format=fmt)
        return t.contiguous()
    raise ValueError(f"unknown layout {layout!r}; choose contiguous, transposed, strided or channels_last")


_HEADERS: Final = {
    "torch": ("import numpy as np", "import torch", "import torch.nn.functional as F"),
    "tensorflow": ("import numpy as np", "import tensorflow as tf"),
}
_MODULE: Final = {"torch": "torch", "tensorflow": "tf"}


def _check_target(framework: str, dtype: str, layout: str) -> None:
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; choose one of {FRAMEWORKS}")
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {tuple(UNIT_ROUNDOFF)}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")
    if framework == "tensorflow" and layout != "contiguous":
        raise ValueError(f"TensorFlow has no memory layouts: use layout='contiguous', not {layout!r}")


def _source_lines(program: ProgramLike, framework: str, dtype: str, layout: str) -> list[str]:
    lines = [f"# {program!r}", f"# {framework}, {dtype}, layout {layout!r}", *_HEADERS[framework], ""]
    lines.append(f"DTYPE = {_MODULE[framework]}.{dtype}")
    consts = _weight_lines(program, framework)
    if consts:
        lines += ["", "", *inspect.getsource(_weight).splitlines(), "", "", *consts]
    if layout != "contiguous":
        lines += ["", "", *inspect.getsource(to_layout).splitlines()]
    lines += ["", "", "def program(xs):", *("    " + s for s in _body_lines(program, framework, layout))]
    return lines


def _weight_lines(program: ProgramLike, framework: str) -> list[str]:
    make = "torch.as_tensor({}, dtype=DTYPE)" if framework == "torch" else "tf.constant({}, dtype=DTYPE)"
    lines = []
    for k, op in enumerate(program.ops):
        for j, w in enumerate(program.weights(k)):
            lines.append(f"W{k}_{j} = " + make.format(f"_weight({op.kwargs['seed'] + j}, {w.shape})"))
    return lines


def _body_lines(program: ProgramLike, framework: str, layout: str) -> list[str]:
    n = program.n_inputs
    names = ", ".join(f"v{i}" for i in range(n))
    lines = [f"({names},) = xs" if n == 1 else f"{names} = xs"]
    if layout != "contiguous":
        lines += [f"v{i} = to_layout(v{i}, {layout!r})" for i in range(n)]
    for k in range(len(program.ops)):
        wnames = [f"W{k}_{j}" for j in range(len(program.weights(k)))]
        if framework == "torch" and wnames:
            lines += [f"{w.lower()} = {w}.to(v0.device)" for w in wnames]
            wnames = [w.lower() for w in wnames]
        lines.append(f"v{n + k} = {_render(program, k, framework, wnames)}")
    lines.append(f"return v{n + len(program.ops) - 1}")
    return lines


def _render(program: ProgramLike, k: int, framework: str, wnames: list[str]) -> str:
    op = program.ops[k]
    spec = OPS[op.name]
    idx = program.arg_indices(k)
    shapes = [program.shapes[i] for i in idx]
    p = op.kwargs
    mapping = {key: repr(v) for key, v in p.items()}
    mapping.update(zip(("a", "b"), (f"v{i}" for i in idx)))
    mapping.update(zip(("w", "w1"), wnames))
    if spec.extras is not None:
        mapping.update(spec.extras(p, shapes))
    template = spec.torch if framework == "torch" else spec.tf
    if callable(template):
        template = template(p, shapes)
    return template.format(**mapping)


def _compile_program(source: str, framework: str) -> Callable[[list[Any]], Any]:
    """Run the source as a module registered in sys.modules (one per distinct source)."""
    name = f"dlconform_program_{hashlib.sha1(source.encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is None:
        filename = f"<{name} ({framework})>"
        # In linecache, tracebacks (and AutoGraph) read the generated code's lines; in
        # sys.modules, torch.compile can import the function's module (it does). No
        # __file__: AutoGraph would evict the linecache entry of a module file it cannot
        # read from disk (tensorflow/python/autograph/pyct/inspect_utils.py).
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module = types.ModuleType(name)
        exec(compile(source, filename, "exec"), module.__dict__)  # our own generated source
        sys.modules[name] = module
    program: Callable[[list[Any]], Any] = module.program
    return program


def _input_converter(framework: str, dtype: str) -> Callable[[int, Any], Any]:
    if framework == "torch":
        import torch

        tdt = getattr(torch, dtype)

        def to_torch(i: int, x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                return _same_dtype(i, x, tdt)
            return torch.as_tensor(np.asarray(x), dtype=tdt)

        return to_torch
    import tensorflow as tf

    fdt = tf.as_dtype(dtype)

    def to_tf(i: int, x: Any) -> Any:
        if tf.is_tensor(x):
            return _same_dtype(i, x, fdt)
        return tf.constant(np.asarray(x), dtype=fdt)

    return to_tf


def _same_dtype(i: int, x: Any, want: Any) -> Any:
    if x.dtype != want:
        raise TypeError(f"input {i} has dtype {x.dtype}, but the program was built for {want}: cast it or rebuild")
    return x
