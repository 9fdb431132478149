"""modules.gan.generator: the seed's GAN Generator maps (B, latent) to (B,1,28,28) in [-1, 1].

Oracle: the same network in float64 numpy (checks.module_references.generator_forward) with the module's
own weights; the float32 forward is two matrix products over at most 128 terms.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, assert_equal, budget, evidence, tolerance
from pytest_dlconform.api.module_references import generator_forward

from ._host import host

CLAIM = "modules.gan.generator"


def seed_generator(torch, latent_dim: int = 100):
    """The seed's code, verbatim apart from the factory around it."""
    nn = torch.nn

    class Generator(nn.Module):
        def __init__(self, latent_dim=100):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(latent_dim, 128),
                nn.ReLU(True),
                nn.Linear(128, 784),
                nn.Tanh()
            )

        def forward(self, z):
            return self.net(z).view(-1, 1, 28, 28)

    return Generator(latent_dim)


def _weights(gen) -> list[np.ndarray]:
    first, last = gen.net[0], gen.net[2]
    return [host(t).astype(np.float64) for t in (first.weight, first.bias, last.weight, last.bias)]


@pytest.mark.claim(CLAIM)
@budget(15)
@given(batch=st.integers(0, 64), latent=st.sampled_from([100, 1, 7, 64]), scale=st.sampled_from([1.0, 30.0, 1e4]),
       seed=st.integers(0, 2**31 - 1))
def test_generator_shape_range_and_values(torch, batch, latent, scale, seed):
    torch.manual_seed(seed)  # the weights belong to the example, so a failure replays
    gen = seed_generator(torch, latent)
    z = np.random.default_rng(seed).normal(size=(batch, latent)).astype(np.float32) * np.float32(scale)
    with torch.no_grad():
        out = host(gen(torch.tensor(z)))
    assert out.shape == (batch, 1, 28, 28), f"output shape {out.shape}, but should be {(batch, 1, 28, 28)}"
    # Large latent values saturate tanh to exactly +-1 in float32: the range is closed.
    assert out.size == 0 or (out.min() >= -1.0 and out.max() <= 1.0), (
        f"output range [{out.min()}, {out.max()}], but should be within [-1, 1]"
    )
    # Compare before the tanh, normwise: large latents make the pre-activations large, and
    # tanh (1-Lipschitz, saturating) is then checked elementwise on the module's own values.
    want = generator_forward(z.astype(np.float64), *_weights(gen), activation=False)
    with torch.no_grad():
        pre = host(gen.net[:3](torch.tensor(z))).reshape(want.shape)
    assert_close(pre, want, tolerance("float32", ops=4, reduction=max(latent, 128)), what="pre-tanh activations vs float64 numpy")
    assert_close(out, np.tanh(pre.astype(np.float64)), tolerance("float32", ops=2), what="output = tanh(pre-activations)")
    # No dropout or normalisation inside: eval() changes nothing (nn.Module.eval affects only such modules).
    with torch.no_grad():
        assert_equal(host(gen.eval()(torch.tensor(z))), out, what="generator output in eval() vs train()")
    evidence.covers("batch=0" if batch == 0 else "batch>0", "range", "float64-reference", "eval=train")
    if scale > 1:
        evidence.covers("saturation")


@pytest.mark.claim(CLAIM)
@budget(8)
@given(batch=st.integers(2, 32), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_each_image_depends_only_on_its_own_latent(torch, batch, seed, data):
    torch.manual_seed(seed)
    gen = seed_generator(torch)
    z = np.random.default_rng(seed).normal(size=(batch, 100)).astype(np.float32)
    order = data.draw(st.permutations(range(batch)), label="order")
    sub = data.draw(st.integers(1, batch), label="sub-batch size")
    with torch.no_grad():
        full = host(gen(torch.tensor(z)))
        permuted = host(gen(torch.tensor(z[order])))
        single = np.concatenate([host(gen(torch.tensor(z[i: i + sub]))) for i in range(0, batch, sub)])
    # No batch-coupled layer: a permuted or split batch must give the same images; matmul
    # blocking may differ with the batch size, so compare within float32 round-off.
    tol = tolerance("float32", ops=6, reduction=128)
    assert_close(permuted, full[order], tol, what="images of a permuted batch")
    assert_close(single, full, tol, what=f"images computed in sub-batches of {sub}")
    evidence.covers("batch-independence")


@pytest.mark.claim(CLAIM)
def test_batch_handling_flattens_leading_dims_and_checks_latent_size(torch):
    gen = seed_generator(torch)
    with torch.no_grad():
        z = torch.randn(2, 3, 100)
        out = gen(z)
        # view(-1, 1, 28, 28): a (2, 3, 100) input silently becomes 6 images.
        assert tuple(out.shape) == (6, 1, 28, 28), (
            f"shape {tuple(out.shape)} for a (2,3,100) input, but view(-1,...) gives (6,1,28,28)")
        assert_equal(host(out), host(gen(z.reshape(6, 100))), what="(2,3,100) input vs the same latents as (6,100)")
        with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x99 and 100x128\)"):
            gen(torch.randn(4, 99))
    evidence.covers("leading-dims-flattened", "wrong-latent-raises")
