"""Experiment driver (protected): unlearn TOFU's forget10 from the fine-tuned Llama-3.2-1B-Instruct, as FML-bench's
Unlearning_open_unlearning trains it with algorithm.py's loss and configuration.

    python train.py --split val  --out OUT   unlearn from data/model/, save model_checkpoint/model/ (the
                                             fine-tuned model's files with the new weights) and
                                             OUT/model.safetensors
    python train.py --split test --out OUT   publish the val run's checkpoint as OUT/model.safetensors (no
                                             training)

The loop is the original's: seed 42; every forget pair (data/forget10.json) paired with the retain pair of the
same position modulo retain90's length (data/retain90.json); shuffled batches of batch_size, the last partial
batch dropped; per batch algorithm.compute_unlearn_loss(model, forget_inputs, retain_inputs), divided by
gradient_accumulation_steps; every gradient_accumulation_steps batches the gradient norm is clipped to
max_grad_norm and AdamW (lr, weight_decay) steps, its learning rate ramped linearly over the first warmup_ratio
of the steps. The model is bfloat16 throughout. A pair is the chat template of its question and answer, ended
by the end-of-sequence token, truncated to 512 tokens, the loss counted on the answer only; batches are padded
with token 0. The evaluator scores the saved weights; nothing here sees the retain model's truth ratios.
--scale smoke runs one epoch, for checking the code path on fixture data.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from pytest_fmlbench.evalkit import harness_args

import algorithm  # the editable method, next to this file

DATA, CHECKPOINT = Path("data"), Path("model_checkpoint") / "model"
IGNORE_INDEX, MAX_LENGTH, SEED = -100, 512, 42
REQUIRED = ("epochs", "lr", "batch_size", "gradient_accumulation_steps", "max_grad_norm")
WEIGHTS = "model.safetensors"
# Llama 3.2's chat template writes "Today Date: <today>" into every prompt unless given date_string: a fixed day
# (the one open-unlearning's model configs pass) keeps the scores from depending on the day they are computed
CHAT_DATE = "10 Apr 2025"


def read_pairs(path: Path) -> list[dict]:
    """TOFU's file: one JSON object per line with question and answer."""
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def encode(tokenizer, question: str, answer: str) -> dict[str, torch.Tensor]:
    """The chat template of the pair; labels -100 over the prompt (the template with the generation prompt)."""
    ids = list(tokenizer.apply_chat_template([{"role": "user", "content": question},
                                              {"role": "assistant", "content": answer}],
                                             tokenize=True, add_generation_prompt=False, return_dict=False,
                                             date_string=CHAT_DATE))
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=True,
                                           add_generation_prompt=True, return_dict=False, date_string=CHAT_DATE)
    if ids[-1] != tokenizer.eos_token_id:
        ids.append(tokenizer.eos_token_id)
    ids = ids[:MAX_LENGTH]
    masked = min(len(prompt), len(ids))
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor([IGNORE_INDEX] * masked + ids[masked:]),
            "attention_mask": torch.ones(len(ids), dtype=torch.long)}


class PairedPairs(Dataset):
    """Forget pair i with retain pair i mod len(retain), encoded when drawn."""

    def __init__(self, tokenizer, forget: list[dict], retain: list[dict]):
        self.tokenizer, self.forget, self.retain = tokenizer, forget, retain

    def __len__(self) -> int:
        return len(self.forget)

    def __getitem__(self, i: int) -> dict:
        f, r = self.forget[i], self.retain[i % len(self.retain)]
        return {"forget": encode(self.tokenizer, f["question"], f["answer"]),
                "retain": encode(self.tokenizer, r["question"], r["answer"])}


def pad(items: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    width = max(item["input_ids"].size(0) for item in items)
    batch = {"input_ids": torch.zeros(len(items), width, dtype=torch.long),
             "labels": torch.full((len(items), width), IGNORE_INDEX, dtype=torch.long),
             "attention_mask": torch.zeros(len(items), width, dtype=torch.long)}
    for row, item in enumerate(items):
        for key, tensor in batch.items():
            tensor[row, : item[key].size(0)] = item[key]
    return batch


def collate(batch: list[dict]) -> dict:
    return {side: pad([b[side] for b in batch]) for side in ("forget", "retain")}


def unlearn(config: dict, scale: str, device: torch.device) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DATA / "model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    forget, retain = read_pairs(DATA / "forget10.json"), read_pairs(DATA / "retain90.json")
    model = AutoModelForCausalLM.from_pretrained(DATA / "model", dtype=torch.bfloat16).to(device)
    loader = DataLoader(PairedPairs(tokenizer, forget, retain), batch_size=int(config["batch_size"]), shuffle=True,
                        collate_fn=collate, drop_last=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config.get("weight_decay", 0.01))
    epochs = 1 if scale == "smoke" else int(config["epochs"])
    accumulation = int(config["gradient_accumulation_steps"])
    total_steps = epochs * len(loader) // accumulation
    warmup_steps = int(config.get("warmup_ratio", 0.1) * total_steps)
    print(f"unlearning: {len(forget)} forget pairs, {len(retain)} retain pairs, {epochs} epochs of {len(loader)} "
          f"batches, lr={config['lr']}, method={config.get('method')}", flush=True)
    model.train()
    step, start = 0, time.perf_counter()
    for epoch in range(epochs):
        losses = []
        for index, batch in enumerate(loader):
            forget_inputs = {k: v.to(device) for k, v in batch["forget"].items()}
            retain_inputs = {k: v.to(device) for k, v in batch["retain"].items()}
            loss = algorithm.compute_unlearn_loss(model, forget_inputs, retain_inputs) / accumulation
            loss.backward()
            if (index + 1) % accumulation == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config["max_grad_norm"])
                if step < warmup_steps:
                    for group in optimizer.param_groups:
                        group["lr"] = config["lr"] * (step + 1) / warmup_steps
                optimizer.step()
                optimizer.zero_grad()
                step += 1
            losses.append(loss.item() * accumulation)
        print(f"epoch {epoch + 1}/{epochs}: mean loss {np.mean(losses) if losses else float('nan'):.4f}, "
              f"{step} optimizer steps, {time.perf_counter() - start:.0f} s", flush=True)
    if CHECKPOINT.exists():
        shutil.rmtree(CHECKPOINT)
    # one file, as the fine-tuned model's own (the evaluator reads model.safetensors)
    model.save_pretrained(CHECKPOINT, max_shard_size="50GB")
    tokenizer.save_pretrained(CHECKPOINT)
    print(f"saved {CHECKPOINT}", flush=True)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        config = algorithm.get_unlearning_config()
        missing = [key for key in REQUIRED if key not in config]
        if missing:
            sys.exit(f"train.py: get_unlearning_config() lacks {missing}")
        torch.manual_seed(SEED)
        torch.cuda.manual_seed_all(SEED)
        np.random.seed(SEED)
        unlearn(config, args.scale, torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    elif not (CHECKPOINT / WEIGHTS).is_file():
        sys.exit(f"train.py: no {CHECKPOINT / WEIGHTS}: the test run publishes the val run's checkpoint")
    # a copy, not a link: the evaluator refuses links
    shutil.copyfile(CHECKPOINT / WEIGHTS, args.out / WEIGHTS)
    print(f"{args.split}: unlearned weights in {args.out / WEIGHTS} ({os.path.getsize(args.out / WEIGHTS)} bytes)",
          flush=True)


if __name__ == "__main__":
    main()
