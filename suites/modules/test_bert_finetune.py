"""modules.bert.finetune: fine-tuning a sequence classifier with the Hugging Face Trainer lowers
the loss (seed 004, case one), offline.

The seed downloads bert-base-uncased; nothing can be downloaded here, so the model is a tiny
BertForSequenceClassification built from a BertConfig with random weights, and the data are
token-id sequences whose label follows a learnable rule (no tokenizer, no datasets hub).
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from pytest_dlconform.api import evidence, not_applicable

CLAIM = "modules.bert.finetune"
VOCAB, LENGTH, TRAIN, EVAL, BATCH, EPOCHS = 48, 8, 256, 128, 32, 3


def _require(*packages: str) -> None:
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    if missing:
        not_applicable(f"install {' and '.join(missing)} (pip install 'pytest-dlconform[transformers]')")


class TokenRule:
    """Sequences of token ids; label 1 when the first token is in the upper half of the vocabulary
    (the classifier reads the first position's pooled output, so the rule is learnt in a few steps)."""

    def __init__(self, torch, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.ids = torch.tensor(rng.integers(4, VOCAB, (n, LENGTH)), dtype=torch.long)
        self.labels = (self.ids[:, 0] >= (VOCAB + 4) // 2).long()
        self.mask = torch.ones_like(self.ids)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.labels[i]}


@pytest.mark.claim(CLAIM)
def test_trainer_lowers_the_loss_of_a_tiny_bert(torch, dl_seed, tmp_path, monkeypatch):
    _require("transformers", "accelerate")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # fail instead of fetching, should anything try
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    import transformers
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    transformers.logging.set_verbosity_error()
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=LENGTH * 2, num_labels=2)
    torch.manual_seed(dl_seed)
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=BATCH, per_device_eval_batch_size=EVAL,
        num_train_epochs=EPOCHS, learning_rate=3e-3, report_to=[], use_cpu=True, save_strategy="no",
        logging_strategy="no", seed=dl_seed % 2**31, dataloader_num_workers=0, disable_tqdm=True,
    )
    train, held_out = TokenRule(torch, TRAIN, dl_seed), TokenRule(torch, EVAL, dl_seed + 1)
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=held_out)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    with torch.no_grad():
        logits = model(input_ids=held_out.ids.to(model.device), attention_mask=held_out.mask.to(model.device)).logits
    accuracy = float((logits.argmax(-1).cpu() == held_out.labels).float().mean())
    steps = EPOCHS * math.ceil(TRAIN / BATCH)
    evidence.note(eval_loss_before=before, eval_loss_after=after, eval_accuracy=accuracy,
                  optimizer_steps=trainer.state.global_step)
    assert trainer.state.global_step == steps, (
        f"Trainer ran {trainer.state.global_step} optimizer steps, but {EPOCHS} epochs of {TRAIN} samples in "
        f"batches of {BATCH} are {steps}"
    )
    assert after < before, f"held-out loss {after:.4f} after fine-tuning, but should be below {before:.4f} before"
