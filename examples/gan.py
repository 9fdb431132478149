"""The seed's GAN generator as a user model: `--dl-model examples.gan:generator`."""

from __future__ import annotations

import numpy as np

from pytest_dlconform.api.usermodels import UserModel

LATENT = 100


def generator(device: str = "cpu", dtype: str = "float32") -> UserModel:
    import torch
    from torch import nn

    class Generator(nn.Module):  # the seed's code, verbatim
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

    model = Generator(LATENT).to(device=device, dtype=getattr(torch, dtype))
    # Latents of unit scale: the tanh output stays away from saturation, where finite
    # differences could not judge a gradient.
    return UserModel(model, lambda seed: np.random.default_rng(seed).normal(size=(4, LATENT)).astype(np.float32))
