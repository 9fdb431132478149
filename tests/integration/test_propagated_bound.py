"""checks.usermodel.propagation: the first-order worst-case rounding bound carried through a
model's layers, against an analytic bound worked out by hand for a two-layer network, and the
compile tolerance built on it against wrong compiled outputs."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_dlconform.checks.numerics import OP_ROUNDING, gamma
from pytest_dlconform.checks.usermodel import TreeMismatch, assert_close_tree, propagated_tolerances
from pytest_dlconform.checks.usermodel.propagation import keras_entry_bounds, torch_entry_bounds

U = 2.0 ** -24


def _mlp(inplace: bool):
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(inplace), torch.nn.Linear(16, 6), torch.nn.Tanh()).eval()


def _analytic(model, z: np.ndarray) -> np.ndarray:
    """Linear(W1, b1) -> ReLU -> Linear(W2, b2) -> tanh, every entry, by hand in float64:
    gamma_n |W||x| for each product, OP_ROUNDING u |v| for each layer's output, carried by
    |W2| and tanh' to the output."""
    w1, b1, w2, b2 = (p.detach().double().numpy() for p in model.parameters())
    a1 = z @ w1.T + b1
    h = np.maximum(a1, 0)
    a2 = h @ w2.T + b2
    d = 1 - np.tanh(a2) ** 2
    relu = (a1 > 0).astype(float)
    # rounding at layer 1's output and its product, carried by relu' and |W2|; ReLU's own output
    e_h = relu * (gamma(10, U) * (np.abs(z) @ np.abs(w1).T) + OP_ROUNDING * U * np.abs(a1)) + OP_ROUNDING * U * h
    e_a2 = e_h @ np.abs(w2).T + gamma(16, U) * (h @ np.abs(w2).T) + OP_ROUNDING * U * np.abs(a2)
    return d * e_a2 + OP_ROUNDING * U * np.abs(np.tanh(a2))


@pytest.mark.parametrize("inplace", [False, True])
def test_torch_bound_matches_the_analytic_bound_of_a_two_layer_network(inplace):
    torch = pytest.importorskip("torch")
    model = _mlp(inplace)
    z = np.random.default_rng(0).normal(size=(3, 10)).astype(np.float32)
    entries = {"output_0": list(range(18))}
    got = torch_entry_bounds(model, [torch.tensor(z)], entries)["output_0"]
    want = _analytic(model, z.astype(np.float64)).ravel()
    np.testing.assert_allclose([got[i] for i in range(18)], want, rtol=1e-4)


def test_torch_bound_covers_the_float32_evaluations_real_error():
    torch = pytest.importorskip("torch")
    model = _mlp(False)
    z = np.random.default_rng(1).normal(size=(5, 10)).astype(np.float32)
    with torch.no_grad():
        y32 = model(torch.tensor(z)).double().numpy().ravel()
        y64 = model.double()(torch.tensor(z, dtype=torch.float64)).numpy().ravel()
    model.float()
    got = torch_entry_bounds(model, [torch.tensor(z)], {"output_0": list(range(30))})["output_0"]
    assert all(abs(y32[i] - y64[i]) <= got[i] for i in range(30))


def _compiled_case():
    torch = pytest.importorskip("torch")
    model = _mlp(False)
    z = np.random.default_rng(2).normal(size=(4, 10)).astype(np.float32)
    with torch.no_grad():
        eager = {"output_0": model(torch.tensor(z)).numpy()}
    return model, [z], eager


@pytest.mark.parametrize("wrong", ["zeros", "nan", "sign", "scaled"])
def test_compile_tolerance_rejects_wrong_compiled_outputs(wrong):
    model, inputs, eager = _compiled_case()
    e = eager["output_0"]
    bad = {"zeros": np.zeros_like(e), "sign": -e, "scaled": e * 1.01,
           "nan": np.where(np.arange(e.size).reshape(e.shape) == 5, np.nan, e)}[wrong]
    out_tol, _ = propagated_tolerances(model, inputs, "torch", {"output_0": bad}, eager)
    with pytest.raises(TreeMismatch, match=r"outputs: output_0: max\|actual - expected\|.*but should be <="):
        assert_close_tree({"output_0": bad}, eager, out_tol, what="outputs", name="outputs")


def test_compile_tolerance_accepts_a_faithful_float32_evaluation_in_another_order():
    torch = pytest.importorskip("torch")
    model, inputs, eager = _compiled_case()
    w1, b1, w2, b2 = (p.detach() for p in model.parameters())
    x = torch.tensor(inputs[0])
    # the same network summed in reverse order of the products: another faithful float32 evaluation
    a1 = torch.stack([sum(x[:, j] * w1[i, j] for j in reversed(range(10))) for i in range(16)], 1) + b1
    h = torch.relu(a1)
    a2 = torch.stack([sum(h[:, j] * w2[i, j] for j in reversed(range(16))) for i in range(6)], 1) + b2
    other = {"output_0": torch.tanh(a2).numpy()}
    out_tol, grad_tol = propagated_tolerances(model, inputs, "torch", other, eager)
    assert assert_close_tree(other, eager, out_tol, what="outputs", name="outputs") <= out_tol.rtol
    assert grad_tol.rtol >= out_tol.rtol / 2  # the carrying factor reaches the gradients' bound too


def test_keras_bound_has_the_products_term():
    keras = pytest.importorskip("keras")
    import tensorflow as tf

    keras.utils.set_random_seed(4)
    inp = keras.Input((10,))
    hidden = keras.layers.Dense(16, activation="relu")(inp)
    model = keras.Model(inp, keras.layers.Dense(6, activation="tanh")(hidden))
    z = np.random.default_rng(0).normal(size=(3, 10)).astype(np.float32)
    got = keras_entry_bounds(model, [tf.constant(z)], {"output_0": list(range(18))})["output_0"]
    w1, b1, w2, b2 = (np.asarray(v, np.float64) for v in model.weights)
    zz = z.astype(np.float64)
    a1 = zz @ w1 + b1
    h = np.maximum(a1, 0)
    a2 = h @ w2 + b2
    d = 1 - np.tanh(a2) ** 2
    want = d * (((a1 > 0) * (gamma(10, U) * (np.abs(zz) @ np.abs(w1)))) @ np.abs(w2) + gamma(16, U) * (h @ np.abs(w2)))
    np.testing.assert_allclose([got[i] for i in range(18)], want.ravel(), rtol=1e-4)


def test_an_embedding_table_is_a_lookup_not_a_product():
    torch = pytest.importorskip("torch")
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Embedding(1000, 4), torch.nn.Flatten(), torch.nn.Linear(12, 2)).eval()
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    got = torch_entry_bounds(model, [ids], {"output_0": [0, 1, 2, 3]})["output_0"]
    e, w, b = (p.detach().double().numpy() for p in model.parameters())
    x = e[ids.numpy()].reshape(2, 12)
    y = x @ w.T + b
    # the table's rows are read exactly (no gamma_1000 term); the embedding's output, Flatten's and the
    # product of fan-in 12 are rounded
    want = (gamma(12, U) * (np.abs(x) @ np.abs(w).T) + 2 * OP_ROUNDING * U * (np.abs(x) @ np.abs(w).T)
            + OP_ROUNDING * U * np.abs(y))
    np.testing.assert_allclose([got[i] for i in range(4)], want.ravel(), rtol=1e-4)
