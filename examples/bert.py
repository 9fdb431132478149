"""A tiny BERT sequence classifier built from a config (no weights download): `--dl-model examples.bert:tiny_bert`."""

from __future__ import annotations

import numpy as np

from pytest_dlconform.api.usermodels import UserModel

VOCAB, LENGTH, BATCH = 48, 8, 4


def tiny_bert(device: str = "cpu", dtype: str = "float32") -> UserModel:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=LENGTH, num_labels=3,
                        return_dict=False, attn_implementation="eager")
    model = BertForSequenceClassification(config).to(device=device, dtype=getattr(torch, dtype))

    def make_inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        ids = rng.integers(4, VOCAB, (BATCH, LENGTH)).astype(np.int64)
        mask = np.ones((BATCH, LENGTH), np.int64)
        mask[0, LENGTH // 2:] = 0  # one padded sequence: the mask must matter
        return ids, mask

    return UserModel(model, make_inputs)
