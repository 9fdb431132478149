"""Hypothesis strategies for the distributed payloads: reduction cases and small training cases.

(*Hypothesis* strategies: the *distribution* strategy is the ``dl_strategy`` fixture.)
A test draws a batch of cases at once and ships it to a cluster in one call; values come
from seeds so examples stay small in reports and shrink well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
from hypothesis import Phase, settings
from hypothesis import strategies as st

from ...frameworks.inputs import budget
from .payloads import ReduceCase, TrainCase

TF_DTYPES = ("float16", "float32", "float64", "int32", "int64")
TORCH_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")
TF_APIS = {"strategy.reduce": ("sum", "mean"), "ReplicaContext.all_reduce": ("sum", "mean"),
           "ReplicaContext.all_gather": ("",), "strategy.gather": ("",)}
TORCH_APIS = {"all_reduce": ("sum", "mean", "max", "min", "product"), "all_gather": ("",), "broadcast": ("",)}
OPTIMIZERS = ("sgd", "momentum", "adam")
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


def expensive(ci_examples: int) -> Callable[[Any], Any]:
    """``budget(n)`` without the shrink phase, for properties whose every example costs
    seconds (model.fit, several cluster calls): shrinking a failure would re-run it dozens
    of times, minutes on a shared CI machine. The failing example is still printed in full."""
    return settings(budget(ci_examples), phases=NO_SHRINK)
ACTIVATIONS = ("tanh", "sigmoid", "linear")


def _values(seed: int, shapes: Sequence[tuple[int, ...]], dtype: str, op: str) -> tuple[np.ndarray, ...]:
    """Per-replica values: integer-valued half of the time (exact results expected), else
    uniform floats; small enough that products and float16 sums stay in range."""
    rng = np.random.default_rng(seed)
    integral = dtype.startswith("int") or rng.random() < 0.5
    high = 3 if op == "product" else (8 if dtype in ("float16", "bfloat16") else 50)
    if integral:
        return tuple(rng.integers(-high, high + 1, size=s).astype(np.float64) for s in shapes)
    return tuple(rng.uniform(-high, high, size=s) for s in shapes)


@st.composite
def reduce_case(draw: st.DrawFn, apis: dict[str, tuple[str, ...]], dtypes: Sequence[str],
                replicas: st.SearchStrategy[int]) -> ReduceCase:
    api = draw(st.sampled_from(sorted(apis)), label="api")
    op = draw(st.sampled_from(apis[api]), label="op")
    dtype = draw(st.sampled_from(list(dtypes)), label="dtype")
    n = draw(replicas, label="replicas")
    gathers = "gather" in api
    with_axis = gathers or (api == "strategy.reduce" and draw(st.booleans(), label="with axis"))
    ndim = draw(st.integers(1 if with_axis else 0, 3), label="ndim")
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim), label="shape"))
    axis = draw(st.integers(0, ndim - 1), label="axis") if with_axis else None
    shapes = [shape] * n
    if axis is not None and api in ("strategy.reduce", "strategy.gather"):
        # Replicas may hold different numbers of rows along the reduced or gathered axis.
        sizes = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n), label="rows per replica")
        shapes = [(*shape[:axis], k, *shape[axis + 1:]) for k in sizes]
    seed = draw(st.integers(0, 2**32 - 1), label="values seed")
    src = draw(st.integers(0, n - 1), label="src")
    return ReduceCase(api, _values(seed, shapes, dtype, op), dtype, op=op, axis=axis, src=src)


def tf_reduce_grid(seed: int, counts: Sequence[int], dtypes: Sequence[str] = ("float32", "int64")) -> list[ReduceCase]:
    """Every documented tf.distribute reduction mode over each replica count, by construction:
    strategy.reduce(SUM|MEAN) with axis=None and axis=0 (replicas holding different numbers
    of rows: r + 1 for replica r), ReplicaContext.all_reduce(SUM|MEAN) in replica context,
    ReplicaContext.all_gather and strategy.gather along axis 0. Values from ``seed``: integer-valued
    or uniform floats (drawn per case), so exact and rounded paths both run."""
    rng = np.random.default_rng(seed)
    cases: list[ReduceCase] = []

    def values(op: str, dtype: str, shapes: Sequence[tuple[int, ...]]) -> tuple[np.ndarray, ...]:
        return _values(int(rng.integers(0, 2**32)), shapes, dtype, op)

    for n in counts:
        same = [(2, 3)] * n
        rows = [(r + 1, 3) for r in range(n)]
        for dtype in dtypes:
            for op in ("sum", "mean"):
                cases.append(ReduceCase("strategy.reduce", values(op, dtype, same), dtype, op=op, axis=None))
                cases.append(ReduceCase("strategy.reduce", values(op, dtype, rows), dtype, op=op, axis=0))
                cases.append(ReduceCase("ReplicaContext.all_reduce", values(op, dtype, same), dtype, op=op))
            cases.append(ReduceCase("ReplicaContext.all_gather", values("", dtype, same), dtype, axis=0))
            cases.append(ReduceCase("strategy.gather", values("", dtype, rows), dtype, axis=0))
    return cases


def tf_modes_of(case: ReduceCase) -> tuple[str, ...]:
    """The distributed.mirrored.reduce modes one checked case covers."""
    modes = [f"replicas={case.replicas}", case.api]
    if case.op:
        modes.append(f"ReduceOp.{case.op.upper()}")
    if case.api == "strategy.reduce":
        modes.append(f"axis={case.axis}")
    if case.axis is not None and len({v.shape for v in case.values}) > 1:
        modes.append("uneven-rows")
    return tuple(modes)


def reduce_batches(apis: dict[str, tuple[str, ...]], dtypes: Sequence[str], replicas: st.SearchStrategy[int],
                   size: int) -> st.SearchStrategy[list[ReduceCase]]:
    return st.lists(reduce_case(apis, dtypes, replicas), min_size=size, max_size=size)


@st.composite
def model_case(draw: st.DrawFn, *, dtypes: Sequence[str] = ("float32", "float64")) -> dict[str, object]:
    """The model, optimizer and dtype of a training case (the data is drawn by the caller)."""
    hidden = draw(st.lists(st.integers(1, 5), min_size=0, max_size=2), label="hidden widths")
    widths = (draw(st.integers(1, 4), label="inputs"), *hidden, draw(st.integers(1, 3), label="outputs"))
    seed = draw(st.integers(0, 2**32 - 1), label="weights seed")
    rng = np.random.default_rng(seed)
    weights: list[np.ndarray] = []
    for fan_in, fan_out in pairwise(widths):
        weights += [rng.normal(size=(fan_in, fan_out)) / np.sqrt(fan_in), rng.normal(size=fan_out) * 0.1]
    return {
        "widths": widths, "weights": tuple(weights),
        "activation": draw(st.sampled_from(ACTIVATIONS), label="activation"),
        "optimizer": draw(st.sampled_from(OPTIMIZERS), label="optimizer"),
        "lr": draw(st.sampled_from([0.05, 0.1]), label="lr"),
        "dtype": draw(st.sampled_from(list(dtypes)), label="dtype"),
        "data_seed": seed + 1,
    }


def _data(model: dict[str, object], rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(int(model["data_seed"]))  # type: ignore[call-overload]
    widths = model["widths"]
    return rng.uniform(-1, 1, (rows, widths[0])), rng.uniform(-1, 1, (rows, widths[-1]))  # type: ignore[index]


def _train_case(model: dict[str, object], rows: int, **extra: object) -> TrainCase:
    x, y = _data(model, rows)
    keys = ("widths", "weights", "activation", "optimizer", "lr", "dtype")
    return TrainCase(x=x, y=y, **{k: model[k] for k in keys}, **extra)  # type: ignore[arg-type]


@st.composite
def tf_loop_case(draw: st.DrawFn, replicas: int, *, scalings: Sequence[str] = ("global", "default"),
                 dtypes: Sequence[str] = ("float32", "float64"), uneven: bool | None = None,
                 partial: bool | None = False) -> TrainCase:
    """A custom-loop case: global batches of B rows, B divisible by N or not (``uneven``:
    True/False, None drawn; over one replica any B), then, with ``partial``, a last batch of
    fewer than B rows (None: drawn)."""
    model = draw(model_case(dtypes=dtypes))
    batches = st.integers(2 if partial else 1, 2 * replicas + 1)  # a partial batch needs B > 1
    if uneven is not None and replicas > 1:
        batches = batches.filter(lambda b: (b % replicas != 0) == uneven)
    batch = draw(batches, label="global batch")
    steps = draw(st.integers(1, 2 if partial else 3), label="full batches")
    with_partial = draw(st.booleans(), label="partial last batch") if partial is None else partial
    last = draw(st.integers(1, batch - 1), label="last batch") if with_partial and batch > 1 else 0
    scaling = draw(st.sampled_from(list(scalings)), label="loss scaling")
    return _train_case(model, batch * steps + last, batch=batch, loss_scaling=scaling)


@st.composite
def fit_case(draw: st.DrawFn, replicas: int, *, even: bool,
             dtypes: Sequence[str] = ("float32", "float64")) -> TrainCase:
    """A model.fit case. even=True: every global batch (also the last, partial one) splits
    evenly across the replicas; even=False: the first batch splits evenly, the partial last
    one does not."""
    model = draw(model_case(dtypes=dtypes))
    batch = replicas * draw(st.integers(1, 2), label="rows per replica")
    steps = draw(st.integers(1, 2), label="full batches")
    if even:
        last = replicas * draw(st.integers(0, batch // replicas - 1), label="last batch / N") if batch > replicas else 0
    else:
        last = draw(st.integers(1, batch - 1).filter(lambda r: r % replicas != 0), label="last batch")
    return _train_case(model, batch * steps + last, batch=batch)


@st.composite
def torch_case(draw: st.DrawFn, replicas: int, *, drop_last: bool | None = None, uneven: bool | None = None,
               join: str = "", ranks: int = 0) -> TrainCase:
    """A DDP/FSDP case: a dataset of M rows, per-rank batches of b. ``uneven``: M not
    divisible by N (True), divisible (False) or either (None); ``drop_last`` likewise drawn
    when None. ``join``: each rank trains on its contiguous share of M rows (shares differing
    by one row when uneven) under DDP.join (see TrainCase.join)."""
    model = draw(model_case())
    rank_batch = draw(st.integers(1, 3), label="per-rank batch")
    rows = st.integers(1, 3 * replicas)
    if uneven is not None:
        rows = rows.filter(lambda m: (m % replicas != 0) == uneven)
    m = draw(rows, label="dataset rows")
    dl = draw(st.booleans(), label="drop_last") if drop_last is None else drop_last
    return _train_case(model, m, rank_batch=rank_batch, drop_last=dl, join=join, ranks=ranks)
