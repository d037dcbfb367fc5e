"""How the shipped models were built, and a fingerprint that ties them to the code that made them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE_DIR = HERE / "reference"
# the GPT-2 (transformers' GPT2Config arguments) and how the shipped models were fine-tuned
MODEL_CONFIG = {"n_embd": 128, "n_layer": 2, "n_head": 4, "n_positions": 32,
                "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
# The seed (initialisation and batch order) is the harness's own: with a guessable initialisation, a
# model retrained from scratch on the retain set could start where the full model started and pass
# the evaluator's starts_from_full_model check.
TRAINING = {"epochs": 70, "lr": 0.002, "batch_size": 16, "seed": 90_210_17}
PAD, Q, A, EOS = 0, 1, 2, 3  # special token ids of the vocabulary (authors.vocabulary)
IGNORE = -100  # label of the tokens no loss is taken on (everything but the answer)


def model_config(vocab_size: int) -> dict:
    """transformers.GPT2Config arguments of the task's model."""
    return {"vocab_size": vocab_size, "bos_token_id": EOS, "eos_token_id": EOS, "pad_token_id": PAD, **MODEL_CONFIG}


def fingerprint() -> str:
    """sha256 of the population, model and training code and settings: a change means a rebuild."""
    digest = hashlib.sha256()
    for name in ("authors.py", "lm.py", "recipe.py"):
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()
