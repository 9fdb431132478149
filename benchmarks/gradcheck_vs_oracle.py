"""Cost and sensitivity: our gradient oracle against the checkers people use today.

Usage:
    PYTHONPATH=src python3 benchmarks/gradcheck_vs_oracle.py > benchmarks/RESULTS.md

One smooth float64 function, f(x) = tanh(W @ y) * (1 + mean(y**2)) with y = sin(x) *
exp(x / 10) and W a fixed (8, n) matrix (elementwise + reduction + matmul, 8 outputs),
checked at n = 10, 100, 1000 input elements by:

* check_vjp (this project), default 8 directions, with torch glue and with TF glue;
* torch.autograd.gradcheck, defaults (eps=1e-6, atol=1e-5, rtol=1e-3), fast_mode=False and True;
* tf.test.compute_gradient (delta=1/1024), judged two ways: max |theoretical - numerical|
  < 1e-3 (the usual ``assertLess(max_error, 1e-3)``), and ``assertAllClose`` with its
  float64 defaults (rtol = atol = 1e-6), as in the function's docstring example.

For each: the median wall time of checking the correct gradient, whether it passes the
correct gradient, and whether it catches a custom backward that is 0.1% too large
(the true vector-Jacobian product scaled by 1.001).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

from pytest_dlconform.checks.gradients import GradientMismatch, check_vjp  # noqa: E402

OUTPUTS = 8
FACTOR = 1.001
TF_MAX_ERROR = 1e-3


@dataclass
class Row:
    checker: str
    framework: str
    n: int
    median_ms: float
    median_cpu_ms: float
    evaluations: int
    passes_correct: bool
    catches_error: bool


class Counter:
    def __init__(self) -> None:
        self.calls = 0


# --------------------------------------------------------------------------- the function


def weights(n: int) -> np.ndarray:
    return np.random.default_rng(n).standard_normal((OUTPUTS, n)) / np.sqrt(n)


def torch_fn(n: int, counter: Counter, factor: float) -> Callable[[Any], Any]:
    w = torch.from_numpy(weights(n))

    def plain(x: Any) -> Any:
        y = torch.sin(x) * torch.exp(x / 10)
        return torch.tanh(w @ y) * (1 + torch.mean(y**2))

    class Planted(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return plain(x)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                xd = x.detach().requires_grad_()
                (g,) = torch.autograd.grad(plain(xd), xd, grad_outputs=grad)
            return factor * g

    def counted(x: Any) -> Any:
        counter.calls += 1
        return Planted.apply(x) if factor != 1.0 else plain(x)

    return counted


def tf_fn(n: int, counter: Counter, factor: float) -> Callable[[Any], Any]:
    w = tf.constant(weights(n))

    def plain(x: Any) -> Any:
        y = tf.sin(x) * tf.exp(x / 10)
        return tf.tanh(tf.linalg.matvec(w, y)) * (1 + tf.reduce_mean(y**2))

    @tf.custom_gradient
    def planted(x: Any) -> Any:
        def grad(g: Any) -> Any:
            with tf.GradientTape() as tape:
                tape.watch(x)
                out = plain(x)
            return factor * tape.gradient(out, x, output_gradients=g)

        return plain(x), grad

    def counted(x: Any) -> Any:
        counter.calls += 1
        return planted(x) if factor != 1.0 else plain(x)

    return counted


# --------------------------------------------------------------------------- the checkers
# Each takes (fn, x) and returns True when the gradient is accepted.


def oracle_torch(fn: Callable[[Any], Any], x: np.ndarray) -> bool:
    def f(xs: list[np.ndarray]) -> np.ndarray:
        return fn(torch.from_numpy(xs[0])).detach().numpy()

    def vjp(xs: list[np.ndarray], w: np.ndarray) -> list[np.ndarray]:
        t = torch.from_numpy(xs[0]).requires_grad_()
        (g,) = torch.autograd.grad(fn(t), t, grad_outputs=torch.from_numpy(w))
        return [g.numpy()]

    return _oracle(f, vjp, x)


def oracle_tf(fn: Callable[[Any], Any], x: np.ndarray) -> bool:
    def f(xs: list[np.ndarray]) -> np.ndarray:
        return fn(tf.constant(xs[0])).numpy()

    def vjp(xs: list[np.ndarray], w: np.ndarray) -> list[np.ndarray]:
        t = tf.constant(xs[0])
        with tf.GradientTape() as tape:
            tape.watch(t)
            out = fn(t)
        return [tape.gradient(out, t, output_gradients=tf.constant(w)).numpy()]

    return _oracle(f, vjp, x)


def _oracle(f: Callable[..., np.ndarray], vjp: Callable[..., list[np.ndarray]], x: np.ndarray) -> bool:
    try:
        check_vjp(f, [x], vjp)
    except GradientMismatch:
        return False
    return True


def gradcheck(fast: bool) -> Callable[[Callable[[Any], Any], np.ndarray], bool]:
    def run(fn: Callable[[Any], Any], x: np.ndarray) -> bool:
        t = torch.from_numpy(x.copy()).requires_grad_()
        return bool(torch.autograd.gradcheck(fn, (t,), fast_mode=fast, raise_exception=False))

    return run


def tf_jacobians(fn: Callable[[Any], Any], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    theoretical, numerical = tf.test.compute_gradient(fn, [tf.constant(x)])
    return theoretical[0], numerical[0]


def tf_max_error(fn: Callable[[Any], Any], x: np.ndarray) -> bool:
    theoretical, numerical = tf_jacobians(fn, x)
    return float(np.max(np.abs(theoretical - numerical))) < TF_MAX_ERROR


def tf_allclose(fn: Callable[[Any], Any], x: np.ndarray) -> bool:
    theoretical, numerical = tf_jacobians(fn, x)
    return bool(np.allclose(theoretical, numerical, rtol=1e-6, atol=1e-6))


CHECKERS: list[tuple[str, str, Callable[[Callable[[Any], Any], np.ndarray], bool]]] = [
    ("check_vjp (ours, 8 directions)", "torch", oracle_torch),
    ("torch gradcheck fast_mode=False", "torch", gradcheck(False)),
    ("torch gradcheck fast_mode=True", "torch", gradcheck(True)),
    ("check_vjp (ours, 8 directions)", "tf", oracle_tf),
    (f"tf.test.compute_gradient, max error < {TF_MAX_ERROR:g}", "tf", tf_max_error),
    ("tf.test.compute_gradient, assertAllClose (1e-6)", "tf", tf_allclose),
]


NOTES = f"""
Columns. *median time*: wall time of one full check of the correct gradient (after a
warm-up call), median over the repeats, the checkers taking turns; *CPU time*: the same
in process CPU time, which a busy machine disturbs less. *ratio vs ours*: against
check_vjp with the same framework's glue at the same n. *f evaluations*: calls of the
framework function during one check, including the forward pass a backward needs (ours:
4 per direction + 1 in the vjp): at equal cost per call the ratio at n = 1000 is 2002/33 ~ 61.
*caught 0.1% error*: the checker rejects a custom backward (torch.autograd.Function,
tf.custom_gradient) that returns {FACTOR} times the true vector-Jacobian product.

Thresholds. check_vjp: defaults (rtol = sqrt(eps) ~ 1.5e-8 of the directional scale plus
4x the estimated finite-difference error). torch gradcheck: its defaults, elementwise
|analytical - numerical| <= atol + rtol*|numerical| with atol=1e-5, rtol=1e-3; a 0.1%
error sits exactly inside rtol=1e-3, and fast_mode=True projects the same test onto random
vectors. tf.test.compute_gradient has no verdict of its own: the first TF row uses
max |theoretical - numerical| < {TF_MAX_ERROR:g} (absolute, so whether it sees a relative
error depends on the size of the Jacobian entries), the second np.allclose with
rtol = atol = 1e-6 (tf.test.TestCase.assertAllClose defaults for float64), which also
catches the error but at 2n evaluations and with no allowance for truncation error.
"""


# --------------------------------------------------------------------------- running


@dataclass
class Case:
    name: str
    framework: str
    check: Callable[..., bool]
    repeats: int
    fn: Callable[[Any], Any]
    x: np.ndarray
    evaluations: int = 0
    passes: bool = True
    times: list[float] | None = None
    cpu: list[float] | None = None


def prepare(name: str, framework: str, check: Callable[..., bool], n: int, repeats: int) -> Case:
    make = torch_fn if framework == "torch" else tf_fn
    counter = Counter()
    case = Case(name, framework, check, repeats, make(n, counter, 1.0), np.random.default_rng(100 + n).normal(0, 1, n))
    case.passes = check(case.fn, case.x)  # warm-up (tracing, caches); also counts evaluations
    case.evaluations, case.times, case.cpu = counter.calls, [], []
    return case


def measure_size(n: int, args: argparse.Namespace) -> list[Row]:
    """Round-robin over the checkers, so that a change in machine load hits them all alike."""
    cases = []
    for name, framework, check in CHECKERS:
        slow = n >= 1000 and ("fast_mode=False" in name or "compute_gradient" in name)
        cases.append(prepare(name, framework, check, n, args.slow_repeats if slow else args.repeats))
    for i in range(max(c.repeats for c in cases)):
        for c in (c for c in cases if i < c.repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            c.passes &= c.check(c.fn, c.x)
            c.times.append(time.perf_counter() - start)  # type: ignore[union-attr]
            c.cpu.append(time.process_time() - start_cpu)  # type: ignore[union-attr]
    rows = []
    for c in cases:
        make = torch_fn if c.framework == "torch" else tf_fn
        caught = not c.check(make(n, Counter(), FACTOR), c.x)
        wall, cpu = (1e3 * statistics.median(t or [math.nan]) for t in (c.times, c.cpu))
        rows.append(Row(c.name, c.framework, n, wall, cpu, c.evaluations, c.passes, caught))
    return rows


def table(rows: list[Row]) -> str:
    ours = {(r.framework, r.n): r for r in rows if r.checker.startswith("check_vjp")}
    lines = [
        "| checker | framework | n | median time (ms) | ratio vs ours | CPU time (ms) | CPU ratio vs ours "
        "| f evaluations | passes correct | caught 0.1% error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        base = ours[(r.framework, r.n)]
        lines.append(
            f"| {r.checker} | {r.framework} | {r.n} | {r.median_ms:.2f} | {r.median_ms / base.median_ms:.1f}x "
            f"| {r.median_cpu_ms:.2f} | {r.median_cpu_ms / base.median_cpu_ms:.1f}x | {r.evaluations} "
            f"| {'yes' if r.passes_correct else 'NO'} | {'yes' if r.catches_error else 'no'} |"
        )
    return "\n".join(lines)


def header(argv: list[str]) -> str:
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in ("numpy", "torch", "tensorflow-cpu"))
    return (
        f"# Gradient checkers: cost and sensitivity\n\n"
        f"Date: {datetime.date.today().isoformat()}  \n"
        f"Command: `PYTHONPATH=src python3 {' '.join(argv)} > benchmarks/RESULTS.md`  \n"
        f"Python {platform.python_version()}, {versions}; {os.cpu_count()} CPU cores, "
        f"torch threads {torch.get_num_threads()}; load average at start {os.getloadavg()[0]:.1f}.\n"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--slow-repeats", type=int, default=5, help="repeats for the full-Jacobian checkers at n >= 1000")
    args = parser.parse_args(argv[1:])
    rows = []
    for n in args.sizes:
        rows += measure_size(n, args)
        print(f"  done n={n}", file=sys.stderr)
    print(header(argv))
    print(table(rows))
    print(NOTES)


if __name__ == "__main__":
    main(sys.argv)
