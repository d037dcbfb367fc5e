"""Text helpers (protected): the task's question-answer pairs as model inputs.

Each pair becomes ``<q> question <a> answer <eos>`` over the word-level vocabulary in data/vocab.json;
labels repeat the answer tokens and mask everything else with -100, so ``model(**batch).loss`` is the
mean cross-entropy of the answers, as open-unlearning's TOFU loaders build them. Use ``encode`` and
``collate`` to build other targets (e.g. "i do not know ." answers, which the vocabulary holds).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

IGNORE = -100
PAD, Q, A, EOS = 0, 1, 2, 3
DATA = Path(__file__).resolve().parent / "data"


def load_vocab() -> dict[str, int]:
    return json.loads((DATA / "vocab.json").read_text())


def load_pairs(name: str) -> list[dict[str, str]]:
    """``forget`` or ``retain``: a list of {"question": ..., "answer": ...}."""
    return json.loads((DATA / f"{name}.json").read_text())


def encode(question: str, answer: str, vocab: dict[str, int]) -> tuple[list[int], list[int]]:
    prompt = [Q] + [vocab[w] for w in question.split()] + [A]
    reply = [vocab[w] for w in answer.split()] + [EOS]
    return prompt + reply, [IGNORE] * len(prompt) + reply


def collate(pairs: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` of a batch."""
    width = max(len(ids) for ids, _ in pairs)
    input_ids = torch.full((len(pairs), width), PAD, dtype=torch.long)
    labels = torch.full((len(pairs), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for row, (ids, labs) in enumerate(pairs):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        labels[row, :len(labs)] = torch.tensor(labs)
        mask[row, :len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}
