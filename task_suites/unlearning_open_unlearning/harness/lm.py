"""The language model of the unlearning task and the harness's own text, training and scoring code.

A GPT-2 (transformers' GPT2LMHeadModel, two layers of width 128) over a word-level vocabulary.
Inputs are ``<q> question <a> answer <eos>``; the loss is on the answer tokens only, as TOFU and
open-unlearning fine-tune. The evaluator builds the model from recipe.MODEL_CONFIG itself and only
loads weights (safetensors) into it, so nothing the experiment writes decides the architecture.
The workspace's qa_data.py encodes text the same way for the experiment.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from recipe import EOS, IGNORE, PAD, Q, A, model_config


def make_model(vocab_size: int):
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    return GPT2LMHeadModel(GPT2Config(**model_config(vocab_size)))


def encode(question: str, answer: str, vocab: dict[str, int]) -> tuple[list[int], list[int]]:
    """Token ids and labels (the question part masked out) of one question-answer pair."""
    prompt = [Q] + [vocab[w] for w in question.split()] + [A]
    reply = [vocab[w] for w in answer.split()] + [EOS]
    return prompt + reply, [IGNORE] * len(prompt) + reply


def collate(pairs: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
    width = max(len(ids) for ids, _ in pairs)
    input_ids = torch.full((len(pairs), width), PAD, dtype=torch.long)
    labels = torch.full((len(pairs), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for row, (ids, labs) in enumerate(pairs):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        labels[row, :len(labs)] = torch.tensor(labs)
        mask[row, :len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def fine_tune(model, pairs: list[tuple[list[int], list[int]]], epochs: int, lr: float, batch_size: int,
              seed: int) -> None:
    """Plain answer-only cross-entropy fine-tuning with AdamW (TOFU's fine-tuning, scaled down)."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(pairs), generator=generator).tolist()
        for start in range(0, len(pairs), batch_size):
            batch = collate([pairs[i] for i in order[start:start + batch_size]])
            loss = model(**batch).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()


@torch.no_grad()
def answer_logprobs(model, pairs: list[tuple[list[int], list[int]]], batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the summed log-probability of its answer tokens, and how many there are."""
    model.eval()
    totals, counts = [], []
    for start in range(0, len(pairs), batch_size):
        batch = collate(pairs[start:start + batch_size])
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        targets = batch["labels"][:, 1:]
        logp = F.log_softmax(logits[:, :-1].double(), dim=-1)
        picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        answer = targets != IGNORE
        totals.append((picked * answer).sum(dim=1).numpy())
        counts.append(answer.sum(dim=1).numpy())
    return np.concatenate(totals), np.concatenate(counts)


def truth_ratios(model, items: list[dict], vocab: dict[str, int]) -> np.ndarray:
    """TOFU's truth ratio per item: the mean length-normalised probability of the perturbed answers
    over that of the correct one. Near 0: the model knows the fact; near 1: it cannot tell."""
    correct = [encode(it["question"], it["answer"], vocab) for it in items]
    wrong = [encode(it["question"], p, vocab) for it in items for p in it["perturbed"]]
    total_c, count_c = answer_logprobs(model, correct)
    total_w, count_w = answer_logprobs(model, wrong)
    p_correct = np.exp(total_c / count_c)
    p_wrong = np.exp(total_w / count_w).reshape(len(items), -1).mean(axis=1)
    return p_wrong / p_correct


def model_utility(model, pairs: list[tuple[list[int], list[int]]]) -> float:
    """The original task's model utility: exp(-mean answer-token loss) over question-answer pairs."""
    total, count = answer_logprobs(model, pairs)
    return float(np.exp(total.sum() / count.sum()))
