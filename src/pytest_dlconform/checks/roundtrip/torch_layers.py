"""The torch modules the spec's channels-last layers need and torch.nn lacks: a permutation
around the layers that want channels first, and a recurrent layer that returns its output
sequence or last step (nn.LSTM/nn.GRU return a tuple). Scriptable, traceable, exportable.

Imported only by :func:`.builders.build_torch` (it imports torch).
"""

from __future__ import annotations

import torch
from torch import nn


class Permute(nn.Module):
    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(self.dims)


class LSTMOutput(nn.Module):
    """nn.LSTM (batch_first) giving its output sequence, or its last step."""

    def __init__(self, rnn: nn.LSTM, sequences: bool) -> None:
        super().__init__()
        self.rnn, self.sequences = rnn, sequences

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return out if self.sequences else out[:, -1]


class GRUOutput(nn.Module):
    """nn.GRU (batch_first) giving its output sequence, or its last step."""

    def __init__(self, rnn: nn.GRU, sequences: bool) -> None:
        super().__init__()
        self.rnn, self.sequences = rnn, sequences

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return out if self.sequences else out[:, -1]
