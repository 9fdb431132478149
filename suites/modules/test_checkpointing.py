"""modules.checkpointing: gradient checkpointing gives the plain gradients bitwise and keeps
fewer tensors for backward (torch.utils.checkpoint, tf.recompute_grad).

Memory in torch is measured as what autograd keeps: the distinct storages packed through
torch.autograd.graph.saved_tensors_hooks during the forward pass (process RSS would
measure the allocator, not checkpointing).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_equal, budget, deterministic_kernels, evidence, not_applicable

from ._host import host

CLAIM = "modules.checkpointing"


class SavedStorages:
    """Distinct storages autograd saves for backward, by data pointer."""

    def __init__(self) -> None:
        self.storages: dict[int, int] = {}

    def pack(self, t):
        storage = t.untyped_storage()
        self.storages[storage.data_ptr()] = storage.nbytes()
        return t

    @staticmethod
    def unpack(t):
        return t

    @property
    def nbytes(self) -> int:
        return sum(self.storages.values())


def _torch_block(torch, p: float):
    def block(h, w1, w2):
        h = torch.tanh(h @ w1)
        h = torch.nn.functional.dropout(h, p, training=p > 0)  # randomness inside the checkpointed region
        return torch.tanh(h @ w2)

    return block


def _torch_run(torch, case, checkpointed: bool):
    """Forward + backward of a chain of blocks; returns (gradients, saved storages, allowed ptrs)."""
    from torch.utils.checkpoint import checkpoint

    rng = np.random.default_rng(case["seed"])
    dtype = getattr(torch, case["dtype"])
    width = case["width"]
    x = torch.tensor(rng.normal(size=(case["batch"], width)), dtype=dtype, requires_grad=True)
    ws = [torch.tensor(rng.normal(size=(width, width)) / np.sqrt(width), dtype=dtype, requires_grad=True)
          for _ in range(2 * case["blocks"])]
    block = _torch_block(torch, case["p"])
    saved, allowed = SavedStorages(), {x.untyped_storage().data_ptr()}
    allowed |= {w.untyped_storage().data_ptr() for w in ws}
    torch.manual_seed(case["seed"] % 2**31)  # the same dropout masks in both runs
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
        h = x
        for i in range(case["blocks"]):
            if checkpointed:
                h = checkpoint(block, h, ws[2 * i], ws[2 * i + 1], use_reentrant=case["reentrant"])
            else:
                h = block(h, ws[2 * i], ws[2 * i + 1])
            allowed.add(h.untyped_storage().data_ptr())  # a block's output is the next one's input
        loss = (h * h).sum()
    loss.backward()  # the reentrant variant supports only backward(), not autograd.grad
    return [host(t.grad) for t in [x, *ws]], saved, allowed


@st.composite
def torch_cases(draw):
    return {
        "blocks": draw(st.integers(1, 4)), "width": draw(st.integers(2, 48)), "batch": draw(st.integers(1, 16)),
        "p": draw(st.sampled_from([0.0, 0.3, 0.6])), "reentrant": draw(st.booleans()),
        "dtype": draw(st.sampled_from(["float32", "float64"])), "seed": draw(st.integers(0, 2**32 - 1)),
    }


@pytest.mark.claim(CLAIM)
@budget(10)
@given(case=torch_cases())
def test_torch_checkpoint_identical_gradients_fewer_saved_bytes(torch, dl_device, case):
    with deterministic_kernels(dl_device):  # bitwise on a GPU needs deterministic kernels
        plain, saved_plain, _ = _torch_run(torch, case, checkpointed=False)
        ckpt, saved_ckpt, allowed = _torch_run(torch, case, checkpointed=True)
    names = ["x"] + [f"w{i}" for i in range(len(plain) - 1)]
    for name, a, b in zip(names, ckpt, plain):
        assert_equal(a, b, what=f"gradient of {name} with checkpoint (use_reentrant={case['reentrant']}, dropout p={case['p']})")
    # Only the blocks' inputs (and the loss's input, a block output) may be kept.
    extra = set(saved_ckpt.storages) - allowed
    assert not extra, (
        f"checkpointed blocks kept {len(extra)} intermediate storage(s) ({sum(saved_ckpt.storages[p] for p in extra)} bytes) "
        "for backward, but should keep only their inputs"
    )
    assert saved_ckpt.nbytes < saved_plain.nbytes, (
        f"checkpointing kept {saved_ckpt.nbytes} bytes for backward, but should keep fewer than without ({saved_plain.nbytes})"
    )
    evidence.note(saved_bytes_plain=saved_plain.nbytes, saved_bytes_checkpoint=saved_ckpt.nbytes,
                  saved_ratio=saved_ckpt.nbytes / saved_plain.nbytes)
    evidence.covers(f"use_reentrant={case['reentrant']}", "saves-only-inputs")
    if case["p"] > 0:
        evidence.covers("preserve_rng_state=True")


@pytest.mark.claim(CLAIM)
def test_torch_checkpoint_without_rng_preservation_is_recorded(torch, dl_seed):
    """preserve_rng_state=False redraws dropout masks in the recomputation: recorded, not asserted
    (the documentation only says the RNG state is then not stashed)."""
    from torch.utils.checkpoint import checkpoint

    block = _torch_block(torch, 0.5)
    x = torch.randn(64, 32, requires_grad=True)
    w1, w2 = (torch.randn(32, 32, requires_grad=True) for _ in range(2))
    torch.manual_seed(dl_seed)
    (plain,) = torch.autograd.grad(block(x, w1, w2).sum(), [w1])
    torch.manual_seed(dl_seed)
    out = checkpoint(block, x, w1, w2, use_reentrant=False, preserve_rng_state=False)
    (redrawn,) = torch.autograd.grad(out.sum(), [w1])
    torch.manual_seed(dl_seed)
    out = checkpoint(block, x, w1, w2, use_reentrant=False)
    (preserved,) = torch.autograd.grad(out.sum(), [w1])
    assert_equal(host(preserved), host(plain), what="gradient with preserve_rng_state=True (default)")
    evidence.covers("preserve_rng_state=True")
    evidence.note(preserve_rng_state_false_matches_plain=bool(torch.equal(redrawn, plain)))


def _tf_program(tf, case):
    rng = np.random.default_rng(case["seed"])
    width = case["width"]
    x = tf.constant(rng.normal(size=(case["batch"], width)), tf.float32)
    ws = [tf.Variable((rng.normal(size=(width, width)) / np.sqrt(width)).astype(np.float32))
          for _ in range(2 * case["blocks"])]
    runs = [0]

    def make_block(i):
        seed = tf.constant([case["seed"] % 2**31, i], tf.int64)  # stateless: the same mask when recomputed

        def block(h):
            runs[0] += 1
            h = tf.tanh(h @ ws[2 * i])
            if case["p"] > 0:
                h = tf.nn.experimental.stateless_dropout(h, case["p"], seed=seed)
            return tf.tanh(h @ ws[2 * i + 1])

        return block

    return x, ws, [make_block(i) for i in range(case["blocks"])], runs


def _note_stateful_randomness(tf, seed: int) -> None:
    """tf.recompute_grad does not restore a stateful RNG (tf.nn.dropout) for the recomputation:
    recorded as evidence, not asserted, since the documentation says nothing about it."""
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(16, 8)), tf.float32)
    w = tf.Variable(rng.normal(size=(8, 8)).astype(np.float32))

    def block(h):
        return tf.tanh(tf.nn.dropout(tf.tanh(h @ w), 0.5) @ w)

    grads = []
    for wrap in (lambda f: f, tf.recompute_grad):
        tf.random.set_seed(seed % 2**31)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(wrap(block)(x) ** 2)
        grads.append(tape.gradient(loss, w).numpy())
    evidence.note(stateful_dropout_recompute_matches_plain=bool(np.array_equal(*grads)))


def _tf_grads(tf, x, ws, blocks, wrap):
    with tf.GradientTape() as tape:
        tape.watch(x)
        h = x
        for block in blocks:
            h = wrap(block)(h)
        loss = tf.reduce_sum(h * h)
    return [g.numpy() for g in tape.gradient(loss, [x, *ws])]


@st.composite
def tf_cases(draw):
    return {
        "blocks": draw(st.integers(1, 3)), "width": draw(st.integers(2, 32)), "batch": draw(st.integers(1, 8)),
        "p": draw(st.sampled_from([0.0, 0.4])), "seed": draw(st.integers(0, 2**32 - 1)),
    }


@pytest.mark.claim(CLAIM)
@budget(8)
@given(case=tf_cases())
def test_tf_recompute_grad_identical_gradients_and_recomputes(tf, dl_device, case):
    x, ws, blocks, runs = _tf_program(tf, case)
    with deterministic_kernels(dl_device):  # BiasAddGrad and friends use atomics on a GPU
        plain = _tf_grads(tf, x, ws, blocks, lambda f: f)
        forward_runs = runs[0]
        recomputed = _tf_grads(tf, x, ws, blocks, tf.recompute_grad)
    for i, (a, b) in enumerate(zip(recomputed, plain)):
        assert_equal(a, b, what=f"gradient {i} with tf.recompute_grad (stateless dropout p={case['p']})")
    # The documented mechanism: only the call and its inputs are recorded, and the function
    # runs again during the gradient computation, once per block.
    assert runs[0] - forward_runs == 2 * len(blocks), (
        f"the checkpointed functions ran {runs[0] - forward_runs} times for forward + gradient, "
        f"but should run {2 * len(blocks)} (once more each while differentiating)"
    )
    evidence.covers("tf.function-recomputed")
    if case["p"] > 0:
        evidence.covers("tf.stateless-random")
    _note_stateful_randomness(tf, case["seed"])


@pytest.mark.claim(CLAIM)
def test_tf_recompute_grad_lowers_peak_memory_on_gpu(tf, dl_device):
    if dl_device == "cpu":
        not_applicable("TensorFlow reports memory use (tf.config.experimental.get_memory_info) only for GPU devices")
    device = "GPU:0"
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(4096, 256)), tf.float32)
    ws = [tf.Variable((rng.normal(size=(256, 256)) / 16).astype(np.float32)) for _ in range(16)]

    def block(h, i):
        for w in ws[4 * i: 4 * i + 4]:
            h = tf.tanh(h @ w)
        return h

    peaks = {}
    for name, wrap in (("plain", lambda f: f), ("recompute", tf.recompute_grad)):
        tf.config.experimental.reset_memory_stats(device)
        with tf.GradientTape() as tape:
            h = x
            for i in range(4):
                h = wrap(lambda t, i=i: block(t, i))(h)
            loss = tf.reduce_sum(h)
        grads = tape.gradient(loss, ws)
        del tape, h, loss, grads
        peaks[name] = tf.config.experimental.get_memory_info(device)["peak"]
    evidence.note(peak_bytes_plain=peaks["plain"], peak_bytes_recompute=peaks["recompute"])
    # 16 layers of 4096 x 256 float32 activations (4 MiB each) against 4 kept block inputs.
    assert peaks["recompute"] < peaks["plain"], (
        f"peak memory with recompute_grad {peaks['recompute']} B, but should be below {peaks['plain']} B")


# ----------------------------------------------------------------- every documented mode of torch's checkpoint
#
# The docstring of torch.utils.checkpoint.checkpoint distinguishes the two implementations
# (use_reentrant True/False) and, per implementation, which keyword arguments and input
# configurations are supported. Each mode below checks one of those statements as a
# property over generated widths, batches and weights; `check_torch_checkpoint_mode` is
# also fed wrong implementations in tests/integration/test_modes_modules_data.py.

TORCH_MODES = ("preserve_rng_state=False", "determinism_check=default", "determinism_check=none", "context_fn",
               "early_stop=False", "inputs-without-grad", "kwargs", "autograd.grad", "nested-inputs")


def _plain_and_leaves(torch, rng: np.random.Generator, batch: int, width: int):
    x = torch.tensor(rng.normal(size=(batch, width)), dtype=torch.float64, requires_grad=True)
    w1, w2 = (torch.tensor(rng.normal(size=(width, width)) / np.sqrt(width), dtype=torch.float64, requires_grad=True)
              for _ in range(2))
    return x, w1, w2


def _grads(torch, out, leaves):
    return [host(g) for g in torch.autograd.grad((out * out).sum(), leaves)]


def _assert_same_grads(got, want, what: str) -> None:
    __tracebackhide__ = True
    for i, (a, b) in enumerate(zip(got, want)):
        assert_equal(a, b, what=f"{what}: gradient {i}")


def check_torch_checkpoint_mode(torch, checkpoint, mode: str, reentrant: bool, seed: int, batch: int, width: int) -> None:
    """One documented mode of ``checkpoint`` (``torch.utils.checkpoint.checkpoint`` or a twin)."""
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    x, w1, w2 = _plain_and_leaves(torch, rng, batch, width)
    where = f"checkpoint(use_reentrant={reentrant}), {mode}"

    def block(h, a, b):
        return torch.tanh(torch.tanh(h @ a) @ b)

    if mode == "preserve_rng_state=False":
        # Documented: the RNG state is neither stashed nor restored, so the recomputation draws
        # from the RNG as it stands at backward time. Reseeded between forward and backward, the
        # gradient is the vjp of the block with the backward-time mask at the forward's output
        # cotangent (with the RNG preserved it would be the forward mask's).
        drop = _torch_block(torch, 0.5)
        torch.manual_seed(seed % 2**31)
        out = checkpoint(drop, x, w1, w2, use_reentrant=reentrant, preserve_rng_state=False)
        cotangent = 2 * out.detach()
        torch.manual_seed(seed % 2**31 + 1)
        want = [host(g) for g in torch.autograd.grad(drop(x, w1, w2), [x, w1, w2], grad_outputs=cotangent)]
        torch.manual_seed(seed % 2**31 + 1)
        for t in (x, w1, w2):
            t.grad = None
        (out * out).sum().backward()
        _assert_same_grads([host(t.grad) for t in (x, w1, w2)], want, where)
        return
    plain = _grads(torch, block(x, w1, w2), [x, w1, w2])
    if mode == "determinism_check=default":
        runs = [0]

        def shifting(h, a, b):  # the recomputation sees one row fewer: different saved metadata
            runs[0] += 1
            return block(h[: h.shape[0] - (runs[0] > 1)], a, b)

        out = checkpoint(shifting, x, w1, w2, use_reentrant=False)
        with pytest.raises(torch.utils.checkpoint.CheckpointError,
                           match="Recomputed values for the following tensors have different metadata"):
            (out * out).sum().backward()
        out = checkpoint(block, x, w1, w2, use_reentrant=False, determinism_check="default")
        _assert_same_grads(_grads(torch, out, [x, w1, w2]), plain, where)
        with pytest.raises(ValueError, match="determinism_check should be one of"):
            checkpoint(block, x, w1, w2, use_reentrant=False, determinism_check="sometimes")
    elif mode == "determinism_check=none":
        out = checkpoint(block, x, w1, w2, use_reentrant=False, determinism_check="none")
        _assert_same_grads(_grads(torch, out, [x, w1, w2]), plain, where)
    elif mode == "context_fn":
        phases: list[str] = []

        def ctx(name: str):
            import contextlib

            @contextlib.contextmanager
            def manager():
                phases.append(name)
                yield

            return manager()

        out = checkpoint(block, x, w1, w2, use_reentrant=False, context_fn=lambda: (ctx("forward"), ctx("recompute")))
        assert phases == ["forward"], (
            f"{where}: after the forward pass the contexts entered were {phases}, but should be ['forward']")
        _assert_same_grads(_grads(torch, out, [x, w1, w2]), plain, where)
        assert phases == ["forward", "recompute"], (
            f"{where}: contexts entered {phases}, but the recomputation should run under the second one")
        with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
            checkpoint(block, x, w1, w2, use_reentrant=True, context_fn=lambda: (ctx("a"), ctx("b")))
    elif mode == "early_stop=False":
        done = [0]

        def counted(h, a, b):
            y = block(h, a, b)
            done[0] += 1  # reached only when the function runs to its end
            return y

        out = checkpoint(counted, x, w1, w2, use_reentrant=False, early_stop=False)
        _assert_same_grads(_grads(torch, out, [x, w1, w2]), plain, where)
        assert done[0] == 2, f"{where}: the function ran to its end {done[0]} times, but should twice (no early stop)"
    elif mode == "inputs-without-grad":
        free = x.detach()  # the input does not require grad; the weights are closed over
        want = _grads(torch, block(free, w1, w2), [w1, w2])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = checkpoint(lambda h: block(h, w1, w2), free, use_reentrant=reentrant)
        if reentrant:  # documented: at least one input must require grad, or no gradients
            assert not out.requires_grad, f"{where}: the output requires grad, but the reentrant variant gives none"
            assert any("None of the inputs have requires_grad=True" in str(w.message) for w in caught), (
                f"{where}: no warning that the gradients will be None; warnings {[str(w.message) for w in caught]}")
        else:
            _assert_same_grads(_grads(torch, out, [w1, w2]), want, where)
    elif mode == "kwargs":
        def keyed(h, *, a, b):
            return block(h, a, b)

        if reentrant:
            with pytest.raises(ValueError, match="Unexpected keyword arguments: a"):
                checkpoint(keyed, x, a=w1, b=w2, use_reentrant=True)
        else:
            out = checkpoint(keyed, x, a=w1, b=w2, use_reentrant=False)
            _assert_same_grads(_grads(torch, out, [x, w1, w2]), plain, where)
    elif mode == "autograd.grad":
        out = checkpoint(block, x, w1, w2, use_reentrant=reentrant)
        if reentrant:
            with pytest.raises(RuntimeError, match=r"torch.utils.checkpoint is incompatible with \.grad\(\)"):
                torch.autograd.grad((out * out).sum(), [x, w1, w2])
        else:
            _assert_same_grads(_grads(torch, out, [x, w1, w2]), plain, where)
    elif mode == "nested-inputs":
        def listed(tensors):
            return block(*tensors)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = checkpoint(listed, [x, w1, w2], use_reentrant=reentrant)
        if reentrant:  # documented: tensors inside a list do not participate in autograd
            assert not out.requires_grad, f"{where}: the output of tensors passed inside a list requires grad"
            assert any("None of the inputs have requires_grad=True" in str(w.message) for w in caught), (
                f"{where}: no warning that the gradients will be None; warnings {[str(w.message) for w in caught]}")
        else:
            _assert_same_grads(_grads(torch, out, [x, w1, w2]), plain, where)
    else:
        raise ValueError(f"unknown checkpoint mode {mode!r}")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("mode", TORCH_MODES)
@budget(3)
@given(reentrant=st.booleans(), seed=st.integers(0, 2**32 - 1), batch=st.integers(2, 6), width=st.integers(1, 8))
def test_torch_checkpoint_documented_modes(torch, dl_device, mode, reentrant, seed, batch, width):
    from torch.utils.checkpoint import checkpoint

    if mode in ("determinism_check=default", "determinism_check=none", "context_fn", "early_stop=False"):
        reentrant = False  # documented: these arguments exist only for use_reentrant=False
    with deterministic_kernels(dl_device):  # bitwise on a GPU needs deterministic kernels
        check_torch_checkpoint_mode(torch, checkpoint, mode, reentrant, seed, batch, width)
    evidence.covers(mode, f"use_reentrant={reentrant}")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("how", ["keras-layer", "multiple-outputs", "inside-tf.function"])
@budget(2)
@given(seed=st.integers(0, 2**32 - 1), batch=st.integers(1, 6), width=st.integers(1, 8))
def test_tf_recompute_grad_documented_forms(tf, how, seed, batch, width):
    """The docstring's forms: f may be a Keras layer (its variables reached via __wrapped__),
    f may return a sequence of tensors, and the wrapped function may run inside tf.function."""
    import keras

    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(batch, width)), tf.float32)
    if how == "keras-layer":
        layer = keras.layers.Dense(width, activation="tanh")
        layer.build((None, width))
        wrapped = tf.recompute_grad(layer)
        assert wrapped.__wrapped__ is layer, "tf.recompute_grad(layer).__wrapped__ should be the layer"
        variables, f = layer.trainable_variables, layer
    else:
        w = tf.Variable((rng.normal(size=(width, width)) / np.sqrt(width)).astype(np.float32))
        variables = [w]

        def f(h):
            a = tf.tanh(h @ w)
            return (a, tf.sin(a)) if how == "multiple-outputs" else a

        wrapped = tf.recompute_grad(f)

    def grads(fn):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = fn(x)
            loss = sum(tf.reduce_sum(o * o) for o in (out if isinstance(out, tuple) else (out,)))
        return tape.gradient(loss, [x, *variables])

    run = tf.function(grads) if how == "inside-tf.function" else grads
    for i, (a, b) in enumerate(zip(run(wrapped), run(f))):
        assert_equal(a.numpy(), b.numpy(), what=f"tf.recompute_grad ({how}): gradient {i}")
    evidence.covers(f"tf.{how}")
