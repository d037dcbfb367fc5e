"""Score one unlearning run: TOFU's forget quality, model utility, and the two constraints.

The experiment's only input here is OUT/model.safetensors, loaded (safetensors cannot run code) into
the evaluator's own GPT-2 built from recipe.MODEL_CONFIG; a file with other tensor names or shapes is
refused. Then:

* forget_quality (the metric; TOFU's definition): the p-value of a two-sample Kolmogorov-Smirnov test
  between the unlearned model's truth ratios on the scored forget items and those of the model
  fine-tuned on the retain authors only (shipped in reference/, never visible to the experiment).
  val scores the items of data/val_eval.json; test the other forget facts, with their own wrong
  answers. 1 means indistinguishable from never having seen the forget authors.
* model_utility (the original's): exp(-mean answer-token loss) on retain pairs: the val part of
  data/retain.json (split_config.json) for val, all retain pairs for test. Constraint: >= a floor.
* weight_change: ||theta - theta_full|| / ||theta_full||. Constraint: unlearning must start from the
  full model and stay near it; a model retrained from scratch on the retain set (exact unlearning,
  the reference the metric compares with) lands far away and breaks it.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.stats import ks_2samp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from authors import population  # noqa: E402
from lm import encode, make_model, model_utility, truth_ratios  # noqa: E402
from recipe import REFERENCE_DIR, fingerprint  # noqa: E402

from pytest_fmlbench.evalkit import (  # noqa: E402
    ConstraintOutcome,
    fail,
    harness_args,
    load_split_config,
    split_indices,
    write_result,
)

DATASET = "tofu_like_forget10"
MAX_MODEL_BYTES = 64 << 20
# The full model's utility on the retain pairs is ~0.78. A model that knows the answers' wording but no
# fact scores ~0.22 (the retain-only model on the forget authors' pairs); the floor asks an unlearned model
# to keep clearly more than that about the retain authors. Version 1's 0.6 (of a full model at 0.90) cut
# off all but the mildest gradient ascent, so that random search's picks hinged on a rare sample.
UTILITY_FLOOR = 0.3
# Fine-tuning away from the full model moves its weights by a few tenths of their norm at most;
# two independent initialisations of this GPT-2 lie about 1.4 apart.
MAX_WEIGHT_CHANGE = 0.8


def load_unlearned(path: Path, vocab_size: int) -> torch.nn.Module:
    from safetensors.torch import load_model

    if path.is_symlink() or not path.is_file():
        fail(f"no model: {path.name} is missing or not a regular file")
    if path.stat().st_size > MAX_MODEL_BYTES:
        fail(f"{path.name} is larger than {MAX_MODEL_BYTES} bytes")
    model = make_model(vocab_size)
    try:
        load_model(model, str(path), strict=True)
    except Exception as exc:  # wrong names, shapes or a corrupt file: the experiment's failure
        fail(f"{path.name} does not hold this task's GPT-2: {str(exc).splitlines()[0][:300]}")
    return model.eval()


def relative_change(model: torch.nn.Module, full: torch.nn.Module) -> float:
    now = torch.cat([p.detach().flatten().double() for p in model.parameters()])
    start = torch.cat([p.detach().flatten().double() for p in full.parameters()])
    return float((now - start).norm() / start.norm())


def main() -> None:
    args = harness_args()
    for name in ("out", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    torch.set_num_threads(1)
    reference = json.loads((REFERENCE_DIR / "reference.json").read_text())
    if reference.get("fingerprint") != fingerprint():
        fail("harness/reference/ was built from other code or settings: run python harness/build_reference.py")
    pop = population()
    vocab = pop["vocab"]
    model = load_unlearned(args.out / "model.safetensors", len(vocab))
    full = load_unlearned(REFERENCE_DIR / "full_model.safetensors", len(vocab))

    ratios = truth_ratios(model, pop[f"{args.split}_items"], vocab)
    if not np.all(np.isfinite(ratios)):
        fail("the unlearned model gives non-finite answer probabilities")
    retain_ratios = np.asarray(reference["retain_model"][args.split])
    forget_quality = float(ks_2samp(ratios, retain_ratios).pvalue)

    retain = [encode(p["question"], p["answer"], vocab) for p in pop["retain"]]
    if args.split == "val":
        try:
            config = load_split_config(args.workspace)
        except Exception as exc:  # a broken editable split_config.json is the experiment's failure
            fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
        retain = [retain[i] for i in split_indices(len(retain), config)[1]]
    utility = model_utility(model, retain)
    change = relative_change(model, full)
    constraints = [
        ConstraintOutcome(name="model_utility", ok=utility >= UTILITY_FLOOR, value=utility, limit=UTILITY_FLOOR,
                          detail=f"model utility {utility:.4f} on retain pairs must be >= {UTILITY_FLOOR}"),
        ConstraintOutcome(name="starts_from_full_model", ok=change <= MAX_WEIGHT_CHANGE, value=change,
                          limit=MAX_WEIGHT_CHANGE,
                          detail=f"relative weight change from the full model {change:.4f} must be <= "
                                 f"{MAX_WEIGHT_CHANGE}"),
    ]
    write_result(
        args.result,
        {DATASET: {"forget_quality": forget_quality, "model_utility": utility,
                   "forget_truth_ratio": float(np.mean(ratios)), "weight_change": change}},
        constraints=constraints,
        info={"split": args.split, "n_forget_items": len(ratios), "n_retain_pairs": len(retain),
              "neg_log10_forget_quality": -math.log10(max(forget_quality, 1e-300))},
    )


if __name__ == "__main__":
    main()
