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
from hypothesis import given
from hypothesis import strategies as st

from pytest_dlconform.api import assert_close, budget, evidence, not_applicable, tolerance

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


def _offline(monkeypatch) -> None:
    _require("transformers", "accelerate")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # fail instead of fetching, should anything try
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")


def _model(torch, seed: int):
    import transformers
    from transformers import BertConfig, BertForSequenceClassification

    transformers.logging.set_verbosity_error()
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=LENGTH * 2, num_labels=2)
    torch.manual_seed(seed)
    return BertForSequenceClassification(config)


def _args(tmp_path, seed: int, **kwargs):
    from transformers import TrainingArguments

    return TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, save_strategy="no",
                             logging_strategy="no", seed=seed, dataloader_num_workers=0, disable_tqdm=True, **kwargs)


def _cross_entropy(torch, model, data: TokenRule) -> float:
    """The held-out loss computed independently of the Trainer: float64 log-softmax of the
    model's logits, the mean negative log-likelihood of the labels."""
    with torch.no_grad():
        logits = model.eval()(input_ids=data.ids.to(model.device), attention_mask=data.mask.to(model.device)).logits
    z = logits.double().cpu().numpy()
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-np.mean(logp[np.arange(len(data)), data.labels.cpu().numpy()]))


@pytest.mark.claim(CLAIM)
@budget(1)
@given(seed=st.integers(0, 2**31 - 1))
def test_trainer_lowers_the_loss_of_a_tiny_bert(torch, tmp_path_factory, seed):
    """Fine-tuning lowers the held-out loss, and the Trainer's eval_loss is the model's cross-entropy
    (an independent float64 evaluation of its logits) before and after training."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _offline(monkeypatch)
        from transformers import Trainer

        model = _model(torch, seed)
        args = _args(tmp_path_factory.mktemp("bert"), seed, per_device_train_batch_size=BATCH,
                     per_device_eval_batch_size=EVAL, num_train_epochs=EPOCHS, learning_rate=3e-3)
        train, held_out = TokenRule(torch, TRAIN, seed), TokenRule(torch, EVAL, seed + 1)
        trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=held_out)
        before = trainer.evaluate()["eval_loss"]
        ce_before = _cross_entropy(torch, model, held_out)
        trainer.train()
        after = trainer.evaluate()["eval_loss"]
        ce_after = _cross_entropy(torch, model, held_out)
    # Both start from the same float32 logits; the Trainer's loss adds a float32 log-softmax of
    # 2 logits (max, subtract, exp, sum, log: about 6 roundings) and a mean over EVAL terms.
    tol = tolerance("float32", ops=8, reduction=EVAL, magnitude=max(1.0, before, after))
    assert_close(np.array([before, after]), np.array([ce_before, ce_after]), tol,
                 what="Trainer eval_loss (before, after) vs the float64 cross-entropy of the model's logits")
    steps = EPOCHS * math.ceil(TRAIN / BATCH)
    evidence.note(eval_loss_before=before, eval_loss_after=after, optimizer_steps=trainer.state.global_step)
    assert trainer.state.global_step == steps, (
        f"Trainer ran {trainer.state.global_step} optimizer steps, but {EPOCHS} epochs of {TRAIN} samples in "
        f"batches of {BATCH} are {steps}"
    )
    assert after < before, f"held-out loss {after:.4f} after fine-tuning, but should be below {before:.4f} before"
    evidence.covers("eval_loss", "loss-decreases")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("limit", ["epochs", "max_steps"])
@budget(1)
@given(batches=st.integers(1, 3), batch=st.sampled_from([4, 8]), partial=st.booleans(), epochs=st.integers(1, 2),
       accumulation=st.just(2), steps=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_trainer_honours_batch_size_epochs_accumulation_and_max_steps(torch, tmp_path_factory, limit, batches, batch,
                                                                      partial, epochs, accumulation, steps, seed):
    """TrainingArguments: per_device_train_batch_size batches per step, num_train_epochs passes,
    gradient_accumulation_steps batches per optimizer step (2 here: 1 is the loss test's), max_steps
    overriding the epochs.
    Batch counts per epoch are multiples of the accumulation (no partial accumulation window)."""
    max_steps = steps if limit == "max_steps" else None
    per_epoch = batches * accumulation
    n = per_epoch * batch - (batch // 2 if partial else 0)  # a last partial batch still counts as a batch
    with pytest.MonkeyPatch.context() as monkeypatch:
        _offline(monkeypatch)
        from transformers import Trainer

        extra = {} if max_steps is None else {"max_steps": max_steps}
        args = _args(tmp_path_factory.mktemp("bert"), seed, per_device_train_batch_size=batch, num_train_epochs=epochs,
                     gradient_accumulation_steps=accumulation, learning_rate=1e-3, **extra)
        trainer = Trainer(model=_model(torch, seed), args=args, train_dataset=TokenRule(torch, n, seed))
        trainer.train()
    want = max_steps if max_steps is not None else epochs * batches
    assert trainer.state.global_step == want, (
        f"Trainer ran {trainer.state.global_step} optimizer steps for n={n}, batch size {batch}, {epochs} epochs, "
        f"accumulation {accumulation}, max_steps={max_steps}; should be {want}")
    evidence.covers("per_device_train_batch_size", "num_train_epochs",
                    "max_steps" if max_steps is not None else "epochs-steps",
                    *(["gradient_accumulation_steps"] if accumulation > 1 else []))
