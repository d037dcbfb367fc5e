"""Build the task's shipped models: python build_reference.py  (about two minutes on one CPU core).

TOFU's full model is a chat model fine-tuned on every author; its forget-quality reference is a
model fine-tuned on the retain authors only, whose truth ratios open-unlearning ships as
"retain model logs". This script does the same at this task's scale, from fixed seeds:

* reference/full_model.safetensors: the GPT-2 fine-tuned on every fact (copied into the workspace,
  the model to unlearn from);
* reference/reference.json: the retain-only model's truth ratios on the val and hidden test items,
  the full model's, and the recipe fingerprint that prepare.py and evaluate.py check.

Training takes longer than a benchmark run can spend, which is why the results are built once and
shipped in harness/ (never visible to the experiment), as the original ships its retain logs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_model

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from authors import population  # noqa: E402
from lm import encode, fine_tune, make_model, model_utility, truth_ratios  # noqa: E402
from recipe import REFERENCE_DIR, TRAINING, fingerprint  # noqa: E402


def train(pairs: list, vocab_size: int, seed: int):
    torch.manual_seed(seed)
    model = make_model(vocab_size)
    fine_tune(model, pairs, TRAINING["epochs"], TRAINING["lr"], TRAINING["batch_size"], seed)
    return model


def main() -> None:
    torch.set_num_threads(1)
    pop = population()
    vocab = pop["vocab"]
    encoded = {name: [encode(p["question"], p["answer"], vocab) for p in pop[name]] for name in ("forget", "retain")}
    full = train(encoded["forget"] + encoded["retain"], len(vocab), TRAINING["seed"])
    retain = train(encoded["retain"], len(vocab), TRAINING["seed"])
    REFERENCE_DIR.mkdir(exist_ok=True)
    # save_model stores the tied input/output embedding once
    save_model(full, str(REFERENCE_DIR / "full_model.safetensors"))
    reference = {
        "fingerprint": fingerprint(),
        "retain_model": {split: truth_ratios(retain, pop[f"{split}_items"], vocab).tolist() for split in ("val", "test")},
        "full_model": {split: truth_ratios(full, pop[f"{split}_items"], vocab).tolist() for split in ("val", "test")},
        "full_model_utility": model_utility(full, encoded["retain"]),
        "retain_model_utility": model_utility(retain, encoded["retain"]),
        "full_model_forget_utility": model_utility(full, encoded["forget"]),
        "retain_model_forget_utility": model_utility(retain, encoded["forget"]),
    }
    (REFERENCE_DIR / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    print({k: v for k, v in reference.items() if "utility" in k})


if __name__ == "__main__":
    main()
