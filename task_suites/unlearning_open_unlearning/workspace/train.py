"""Experiment driver (protected): unlearn the forget set from the full model, save the result.

    python train.py --split val|test --out OUT

Loads the GPT-2 fine-tuned on every author (data/full_model.safetensors), runs the unlearning loop
with algorithm.compute_unlearn_loss for config.json's epochs over the forget set, each forget batch
paired with as many pairs drawn from the train part of data/retain.json (split_config.json cuts it),
and saves the unlearned weights to OUT/model.safetensors. Both splits run the same loop, so the test
run reproduces the validated model; the evaluator loads the weights into its own copy of the
architecture and scores forget quality and model utility itself.
"""

from __future__ import annotations

import copy
import json
import math
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_model, save_model
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

import algorithm  # the editable method, next to this file
from qa_data import DATA, collate, encode, load_pairs, load_vocab

REQUIRED = ("epochs", "lr", "batch_size", "weight_decay", "warmup_ratio", "max_grad_norm")


def load_full_model() -> GPT2LMHeadModel:
    hf_logging.set_verbosity_error()
    model = GPT2LMHeadModel(GPT2Config(**json.loads((DATA / "model_config.json").read_text())))
    load_model(model, str(DATA / "full_model.safetensors"))
    return model


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # One intra-op thread: the model is small, and one thread keeps CPU runs bit-identical.
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    here = Path(__file__).resolve().parent
    config = json.loads((here / "config.json").read_text())
    missing = [key for key in REQUIRED if key not in config]
    if missing:
        sys.exit(f"train.py: config.json lacks {missing}")
    seed = int(config.get("seed", 0))
    epochs, batch_size = int(config["epochs"]), int(config["batch_size"])
    if epochs < 0 or batch_size < 1:
        sys.exit("train.py: epochs must be >= 0 and batch_size >= 1")

    vocab = load_vocab()
    forget = [encode(p["question"], p["answer"], vocab) for p in load_pairs("forget")]
    retain_all = [encode(p["question"], p["answer"], vocab) for p in load_pairs("retain")]
    train_idx, _ = split_indices(len(retain_all), load_split_config(here))
    retain = [retain_all[i] for i in train_idx]

    torch.manual_seed(seed)
    model = load_full_model().to(device)
    reference = copy.deepcopy(model).eval()
    for parameter in reference.parameters():
        parameter.requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config["weight_decay"])
    steps_per_epoch = math.ceil(len(forget) / batch_size)
    warmup = int(config["warmup_ratio"] * epochs * steps_per_epoch)
    generator = torch.Generator().manual_seed(seed)

    def on_device(batch: dict) -> dict:
        return {key: value.to(device) for key, value in batch.items()}

    start, step = time.perf_counter(), 0
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(forget), generator=generator).tolist()
        partners = torch.randint(len(retain), (len(forget),), generator=generator).tolist()
        losses = []
        for first in range(0, len(forget), batch_size):
            rows = order[first:first + batch_size]
            loss = algorithm.compute_unlearn_loss(
                model, on_device(collate([forget[i] for i in rows])),
                on_device(collate([retain[partners[i]] for i in rows])), reference, config)
            if not isinstance(loss, torch.Tensor) or loss.dim() != 0 or not torch.isfinite(loss):
                sys.exit(f"train.py: compute_unlearn_loss must return a finite scalar tensor, got {loss!r}")
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["max_grad_norm"])
            for group in optimizer.param_groups:  # linear warm-up, then the constant rate (the original's)
                group["lr"] = config["lr"] * min(1.0, (step + 1) / warmup) if warmup else config["lr"]
            optimizer.step()
            step += 1
            losses.append(loss.item())
        print(f"epoch {epoch + 1}/{epochs}: mean loss {sum(losses) / len(losses):.4f}")

    args.out.mkdir(parents=True, exist_ok=True)
    save_model(model.cpu(), str(args.out / "model.safetensors"))
    write_json(args.out / "run_info.json", {"split": args.split, "steps": step, "n_forget": len(forget),
                                            "n_retain_train": len(retain), "seconds": time.perf_counter() - start})
    print(f"[{args.split}] {step} unlearning steps on {len(forget)} forget pairs in {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    main()
