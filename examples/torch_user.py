"""A torch model of a user's shape: a small residual MLP with a custom layer, batch norm and dropout.

`--dl-model examples.torch_user:tabular_model`
"""

from __future__ import annotations

import numpy as np

from pytest_dlconform.api.usermodels import UserModel

FEATURES, CLASSES, BATCH = 6, 3, 8


def tabular_model(device: str = "cpu", dtype: str = "float32") -> UserModel:
    import torch
    from torch import nn

    class ScaledResidual(nn.Module):
        """x + alpha * f(x), alpha a learnt scalar; a running scale kept as a buffer."""

        def __init__(self, width: int) -> None:
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Dropout(0.2))
            self.alpha = nn.Parameter(torch.full((1,), 0.5))  # 1-element, not scalar: FSDP shards no scalars
            self.register_buffer("scale", torch.ones(width))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.alpha * self.inner(x) * self.scale

    class Tabular(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(FEATURES, 16)
            self.norm = nn.BatchNorm1d(16)
            self.block = ScaledResidual(16)
            self.head = nn.Linear(16, CLASSES)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.block(torch.tanh(self.norm(self.inp(x)))))

    model = Tabular()
    with torch.no_grad():  # running statistics away from their initial values, as after training
        model.norm.running_mean.uniform_(-0.5, 0.5)
        model.norm.running_var.uniform_(0.5, 2.0)
        model.block.scale.uniform_(0.5, 1.5)
    model = model.to(device=device, dtype=getattr(torch, dtype))

    def make_inputs(seed: int) -> np.ndarray:
        return np.random.default_rng(seed).normal(size=(BATCH, FEATURES)).astype(np.float32)

    def make_targets(seed: int) -> np.ndarray:
        return np.random.default_rng(seed + 1).normal(size=(BATCH, CLASSES)).astype(np.float32)

    return UserModel(model, make_inputs, make_targets)
