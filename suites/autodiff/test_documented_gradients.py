"""Documented gradient conventions where finite differences are not valid or not the rule.

The per-op suite (test_ops.py) checks the ordering, indexing and cumprod ops on inputs
where finite differences judge them (distinct values, off exact zeros). What the frameworks
document beyond that is checked here, against exact expectations computed in numpy:

* ties of max/min: torch.amax/amin "evenly distributes gradient between equal values",
  torch.max(dim) "propagates gradient only to a single index" (the returned one);
  TensorFlow's reduce_max/reduce_min gradient is divided evenly between the selected
  elements (tensorflow/python/ops/math_grad.py ``_MinOrMaxGrad``: "If there are multiple
  minimum or maximum elements then the gradient will be divided between them");
* ties of sort and top-k: the gradient routes each output's cotangent to the input its
  returned index names (torch.sort with stable=True keeps equal elements in order;
  tf.math.top_k documents "If two elements are equal, the lower-index element appears
  first"); tf.sort's gradient routes through some sorting permutation (each tied group gets
  exactly its outputs' cotangents);
* F.embedding: the row at padding_idx gets a zero gradient ("the entries at padding_idx do
  not contribute to the gradient"), scale_grad_by_freq divides by the id's frequency in the
  batch, sparse=True gives the same gradient as a sparse tensor; a repeated id's row gets the
  sum of its positions' cotangents (TensorFlow's embedding_lookup and gather alike);
* cumprod at exact zeros (a polynomial: y_i = prod_{k<=i} x_k, derivative
  sum_{i>=j} w_i prod_{k<=i, k!=j} x_k), with one and two zeros per row;
* QR: torch documents mode='r' "never differentiable" and mode='complete' differentiable for
  m <= n only; TensorFlow's _QrGrad raises NotImplementedError for full_matrices with m > n.

Values are multiples of 1/8 (exact in float64), so sums are exact; a division by the tie
count (or frequency) rounds once: bound ``eps * |w|`` per entry.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import budget, evidence
from pytest_dlconform.api.tracing import assert_within

EPS = float(np.finfo(np.float64).eps)


def _dyadic(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-16, 17, size=shape) / 8.0


def _tied(rng: np.random.Generator, rows: int, n: int, ties: int, sign: float) -> np.ndarray:
    """Rows whose max (sign=1) or min (sign=-1) is shared by ``ties`` entries."""
    x = rng.integers(-16, 0, size=(rows, n)) / 8.0 * sign
    for r in range(rows):
        at = rng.choice(n, size=ties, replace=False)
        x[r, at] = sign * 2.5
    return x


def _torch_grad(torch: Any, f: Any, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    t = torch.tensor(x, requires_grad=True)
    y = f(t)
    (g,) = torch.autograd.grad(y, t, torch.tensor(w))
    return np.asarray(g.detach().cpu().numpy())


def _tf_grad(tf: Any, f: Any, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    t = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = f(t)
    return np.asarray(tf.convert_to_tensor(tape.gradient(y, t, output_gradients=tf.constant(w))).numpy())


# --------------------------------------------------------------------------- max / min ties


def _even_split(x: np.ndarray, w: np.ndarray, sign: float) -> np.ndarray:
    top = np.max(x * sign, axis=-1, keepdims=True)
    chosen = (x * sign == top).astype(np.float64)
    return chosen * w[:, None] / np.sum(chosen, axis=-1, keepdims=True)


TIE_CASES = [(name, sign, ties) for name, sign in (("max", 1.0), ("min", -1.0)) for ties in (1, 2, 3)]


@pytest.mark.claim("autodiff.gradient.documented-conventions")
@pytest.mark.parametrize("case", TIE_CASES, ids=[f"{n}-ties{t}" for n, _, t in TIE_CASES])
def test_max_and_min_split_the_gradient_evenly_between_ties(dl_framework, dl_device, case):
    name, sign, ties = case
    fw = dl_framework.name

    @budget(3)
    @given(seed=st.integers(0, 2**16), n=st.integers(3, 5))
    def prop(seed: int, n: int) -> None:
        rng = np.random.default_rng(seed)
        x, w = _tied(rng, 3, n, ties, sign), _dyadic(rng, (3,)) + 0.0625
        want = _even_split(x, w, sign)
        if fw == "torch":
            torch = dl_framework.module
            f = (lambda t: torch.amax(t, dim=-1)) if sign > 0 else (lambda t: torch.amin(t, dim=-1))
            got = _torch_grad(torch, f, x, w)
            # torch.max(dim) sends the whole cotangent to the one index it returns.
            pick = (torch.max if sign > 0 else torch.min)(torch.tensor(x), dim=-1).indices.cpu().numpy()
            single = np.zeros_like(x)
            single[np.arange(3), pick] = w
            reduce = (lambda t: torch.max(t, dim=-1).values) if sign > 0 else (lambda t: torch.min(t, dim=-1).values)
            assert_within(_torch_grad(torch, reduce, x, w), single, 0.0,
                          what=f"torch.{name}(dim) gradient with {ties} tied entries: all of it to the returned index")
        else:
            tf = dl_framework.module
            f = (lambda t: tf.math.reduce_max(t, axis=-1)) if sign > 0 else (lambda t: tf.math.reduce_min(t, axis=-1))
            got = _tf_grad(tf, f, x, w)
        assert_within(got, want, EPS * float(np.max(np.abs(w))),
                      what=f"{fw} a{name} gradient with {ties} tied entries: evenly split between them")
        evidence.note(ties=ties)

    prop()


# --------------------------------------------------------------------------- sort / top-k ties


def _routed(x: np.ndarray, idx: np.ndarray, w: np.ndarray) -> np.ndarray:
    g = np.zeros_like(x)
    np.put_along_axis(g, idx, w, axis=-1)
    return g


@pytest.mark.claim("autodiff.gradient.documented-conventions")
def test_sort_and_topk_gradients_route_through_the_returned_indices_at_ties(dl_framework, dl_device):
    fw = dl_framework.name

    @budget(3)
    @given(seed=st.integers(0, 2**16), k=st.integers(1, 4))
    def prop(seed: int, k: int) -> None:
        rng = np.random.default_rng(seed)
        x = rng.integers(0, 3, size=(4, 6)) / 2.0  # 6 entries from 3 values: ties in every row
        w = rng.permutation(24).reshape(4, 6) / 8.0 + 1.0  # distinct cotangents: routing is visible
        stable = np.argsort(x, axis=-1, kind="stable")
        if fw == "torch":
            torch = dl_framework.module
            r = torch.sort(torch.tensor(x), dim=-1, stable=True)
            assert np.array_equal(r.indices.numpy(), stable), "torch.sort(stable=True) reordered equal elements"
            got = _torch_grad(torch, lambda t: torch.sort(t, dim=-1, stable=True).values, x, w)
            assert_within(got, _routed(x, stable, w), 0.0, what="torch.sort gradient at ties: through its indices")
            top = torch.topk(torch.tensor(x), k, dim=-1)
            got = _torch_grad(torch, lambda t: torch.topk(t, k, dim=-1).values, x, w[:, :k])
            assert_within(got, _routed(x, top.indices.numpy(), w[:, :k]), 0.0,
                          what="torch.topk gradient at ties: through its returned indices")
            return
        tf = dl_framework.module
        top = tf.math.top_k(tf.constant(x), k=k)
        # Lower index first among equal elements: the stable descending order.
        lower_first = np.argsort(-x, axis=-1, kind="stable")[:, :k]
        assert np.array_equal(top.indices.numpy(), lower_first), "tf.math.top_k put a higher index first at a tie"
        got = _tf_grad(tf, lambda t: tf.math.top_k(t, k=k).values, x, w[:, :k])
        assert_within(got, _routed(x, lower_first, w[:, :k]), 0.0,
                      what="tf.math.top_k gradient at ties: through the lower-index-first indices")
        got = _tf_grad(tf, lambda t: tf.sort(t, axis=-1), x, w)
        ys = np.sort(x, axis=-1)
        for r in range(x.shape[0]):
            for v in np.unique(x[r]):
                assert sorted(got[r][x[r] == v]) == sorted(w[r][ys[r] == v]), (
                    f"tf.sort gradient at ties: row {r}, value {v}: the tied entries got {sorted(got[r][x[r] == v])}, "
                    f"but should get their outputs' cotangents {sorted(w[r][ys[r] == v])} (one each)")

    prop()


# --------------------------------------------------------------------------- embedding


def _embedding_grad(ids: np.ndarray, w: np.ndarray, vocab: int, padding: int | None, freq: bool) -> np.ndarray:
    g = np.zeros((vocab, w.shape[-1]))
    counts = np.bincount(ids.reshape(-1), minlength=vocab)
    for pos, v in np.ndenumerate(ids):
        g[v] += w[pos] / (counts[v] if freq else 1)
    if padding is not None:
        g[padding % vocab] = 0.0
    return g


EMBEDDING = [(None, False, False), (1, False, False), (-1, False, False), (None, True, False), (2, True, False),
             (None, False, True), (0, False, True)]


@pytest.mark.claim("autodiff.gradient.documented-conventions")
@pytest.mark.parametrize("padding_idx,scale_grad_by_freq,sparse", EMBEDDING)
def test_torch_embedding_gradient_padding_idx_frequency_and_sparse(torch, dl_device, padding_idx,
                                                                   scale_grad_by_freq, sparse):
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    vocab, dim = 5, 3
    ids = np.array([[0, 1, 1, 4], [4, 4, 2, 1]])
    table, w = _dyadic(rng, (vocab, dim)), _dyadic(rng, (*ids.shape, dim))
    t = torch.tensor(table, requires_grad=True)
    y = F.embedding(torch.tensor(ids), t, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq,
                    sparse=sparse)
    assert_within(y.detach().cpu().numpy(), table[ids], 0.0, what="F.embedding forward: the rows of the table")
    (g,) = torch.autograd.grad(y, t, torch.tensor(w))
    assert g.is_sparse == sparse, f"F.embedding(sparse={sparse}) returned a {'sparse' if g.is_sparse else 'dense'} gradient"
    got = g.to_dense().cpu().numpy() if sparse else g.detach().cpu().numpy()
    want = _embedding_grad(ids, w, vocab, padding_idx, scale_grad_by_freq)
    what = (f"F.embedding gradient (padding_idx={padding_idx}, scale_grad_by_freq={scale_grad_by_freq}, "
            f"sparse={sparse}): repeated ids summed")
    assert_within(got, want, EPS * float(np.max(np.abs(w))) * 4, what=what)


@pytest.mark.claim("autodiff.gradient.documented-conventions")
@pytest.mark.parametrize("api", ["embedding_lookup", "gather"])
def test_tensorflow_embedding_gradient_sums_repeated_ids(tf, dl_device, api):
    rng = np.random.default_rng(7)
    ids = np.array([[0, 1, 1, 4], [4, 4, 2, 1]])
    table, w = _dyadic(rng, (5, 3)), _dyadic(rng, (*ids.shape, 3))
    f = (lambda t: tf.nn.embedding_lookup(t, tf.constant(ids))) if api == "embedding_lookup" else (
        lambda t: tf.gather(t, tf.constant(ids)))
    got = _tf_grad(tf, f, table, w)
    assert_within(got, _embedding_grad(ids, w, 5, None, False), 0.0, what=f"tf {api} gradient: repeated ids summed")


# --------------------------------------------------------------------------- cumprod at zeros


def cumprod_grad(x: np.ndarray, w: np.ndarray, exclusive: bool, reverse: bool) -> np.ndarray:
    """d/dx_j sum_i w_i y_i for y = cumprod along the last axis, by the product rule (no division)."""
    xs, ws = (x[..., ::-1], w[..., ::-1]) if reverse else (x, w)
    n = x.shape[-1]
    g = np.zeros_like(xs)
    for i in range(n):
        terms = range(i) if exclusive else range(i + 1)  # y_i multiplies x_k for k in terms
        for j in terms:
            others = [k for k in terms if k != j]
            g[..., j] += ws[..., i] * np.prod(xs[..., others], axis=-1)
    return g[..., ::-1] if reverse else g


ZERO_ROWS = np.array([[0.0, 1.5, -2.0, 0.5], [1.5, 0.0, 2.0, -0.5], [1.5, -0.5, 2.0, 0.0],
                      [0.0, 0.0, 1.5, 2.0], [1.5, 0.0, -2.0, 0.0], [0.5, 1.5, -2.0, 1.0]])


@pytest.mark.claim("autodiff.gradient.documented-conventions")
@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_cumprod_gradient_at_exact_zeros(dl_framework, dl_device, exclusive, reverse):
    """One zero (first, middle, last entry) and two zeros per row; the last row has none."""
    w = np.random.default_rng(3).integers(1, 9, size=ZERO_ROWS.shape) / 8.0
    want = cumprod_grad(ZERO_ROWS, w, exclusive, reverse)
    if dl_framework.name == "torch":
        torch = dl_framework.module

        def f(t: Any) -> Any:
            # torch.cumprod has neither exclusive nor reverse: flips and (1, x_0, .., x_{n-2}).
            v = t.flip(-1) if reverse else t
            if exclusive:
                v = torch.cat([torch.ones_like(v[..., :1]), v[..., :-1]], dim=-1)
            c = torch.cumprod(v, dim=-1)
            return c.flip(-1) if reverse else c

        got = _torch_grad(torch, f, ZERO_ROWS, w)
    else:
        tf = dl_framework.module
        got = _tf_grad(tf, lambda t: tf.math.cumprod(t, axis=-1, exclusive=exclusive, reverse=reverse), ZERO_ROWS, w)
    zero = ZERO_ROWS == 0
    bound = 8 * EPS * float(np.max(np.abs(want)))
    assert_within(np.where(zero, 0.0, got), np.where(zero, 0.0, want), bound,
                  what=f"{dl_framework.name} cumprod gradient (exclusive={exclusive}, reverse={reverse}) at the "
                       "nonzero entries of inputs with zeros")
    assert_within(np.where(zero, got, 0.0), np.where(zero, want, 0.0), bound,
                  what=f"{dl_framework.name} cumprod gradient (exclusive={exclusive}, reverse={reverse}) at the "
                       "exact zeros of the input")


# --------------------------------------------------------------------------- BCE with logits at 0


@pytest.mark.claim("autodiff.gradient.documented-conventions")
@pytest.mark.parametrize("pos_weight", [1.0, 2.0, 0.5])
def test_bce_with_logits_gradient_at_zero_logits(dl_framework, dl_device, pos_weight):
    """The documented loss, l = -q z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)), is smooth:
    at x = 0 its derivative is -q z / 2 + (1 - z) / 2, whatever the implementation's pieces."""
    z = np.array([0.0, 0.25, 0.5, 1.0])
    x = np.zeros_like(z)
    w = np.ones_like(z)
    want = -pos_weight * z / 2 + (1 - z) / 2
    if dl_framework.name == "torch":
        torch = dl_framework.module
        f = lambda t: torch.nn.functional.binary_cross_entropy_with_logits(
            t, torch.tensor(z), pos_weight=torch.tensor(pos_weight, dtype=torch.float64), reduction="none")
        got = _torch_grad(torch, f, x, w)
    else:
        tf = dl_framework.module
        f = lambda t: tf.nn.weighted_cross_entropy_with_logits(labels=tf.constant(z), logits=t,
                                                               pos_weight=tf.constant(pos_weight, tf.float64))
        got = _tf_grad(tf, f, x, w)
    assert_within(got, want, 4 * EPS, what=f"{dl_framework.name} bce_with_logits gradient at logits 0 "
                                            f"(pos_weight={pos_weight}) vs the documented loss's derivative")


# --------------------------------------------------------------------------- QR's documented domain


@pytest.mark.claim("autodiff.gradient.documented-conventions")
@pytest.mark.parametrize("mode,shape", [("r", (3, 3)), ("complete", (4, 2))])
def test_torch_qr_backward_refuses_where_documented(torch, dl_device, mode, shape):
    a = torch.tensor(np.eye(*shape) * 2.0 + 0.125, requires_grad=True)
    q, r = torch.linalg.qr(a, mode=mode)
    with pytest.raises(RuntimeError):
        torch.autograd.grad((r.sum() + q.sum()) if q.numel() else r.sum(), a)


@pytest.mark.claim("autodiff.gradient.documented-conventions")
def test_tensorflow_qr_gradient_refuses_full_matrices_with_more_rows(tf, dl_device):
    a = tf.constant(np.eye(4, 2) * 2.0 + 0.125)
    with tf.GradientTape() as tape:
        tape.watch(a)
        q, r = tf.linalg.qr(a, full_matrices=True)
        y = tf.reduce_sum(q) + tf.reduce_sum(r)
    with pytest.raises(NotImplementedError, match="QrGrad not implemented when nrows > ncols"):
        tape.gradient(y, a)
