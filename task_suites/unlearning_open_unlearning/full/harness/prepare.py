"""Materialise TOFU and the fine-tuned model for one split, from the verified checkouts in the data cache ({data}).

The original's protocol (FML-bench Unlearning_open_unlearning): unlearning trains on all of forget10 (400
pairs) and retain90 (3,600) from open-unlearning's fine-tuned Llama-3.2-1B-Instruct; scoring uses a fixed 30%
(val) / 70% (test) cut of each (RandomState(42), ``taskkit.tofu.split_indices``): the forget pairs' truth
ratios against the retain model's on the same pairs (FML-bench's retain_reference_logs.json), and model
utility on the retain pairs.

--split val : forget10.json, retain90.json and the model's files into WORKSPACE/data/; into PRIVATE, the
              split's scored pairs, the retain model's truth ratios on them and the model's configuration
              and tokenizer (the evaluator builds the architecture from them).
--split test: the same PRIVATE files for the test cut (the test run trains nothing and reads no data).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from pytest_fmlbench.evalkit import harness_args, write_json
from pytest_fmlbench.taskkit import tofu

TOFU, MODEL, FMLBENCH = "tofu", "tofu-llama-3.2-1b-instruct-full", "fml-bench"
REFERENCE = Path("ml_tasks", "Unlearning_open_unlearning", "retain_reference_logs.json")
# the repository's card and git files are not the model's
NOT_MODEL = {"README.md", ".gitattributes"}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def copy_model_files(checkout: Path, target: Path, weights: bool) -> None:
    """The model repository's top-level files (configuration, tokenizer, chat template) and, with ``weights``,
    its weights."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(checkout.iterdir()):
        if path.is_file() and not path.is_symlink() and path.name not in NOT_MODEL and \
                (weights or not path.name.endswith(WEIGHT_SUFFIXES)):
            shutil.copyfile(path, target / path.name)


def write_pairs(path: Path, pairs: list[dict]) -> None:
    """TOFU's format, one JSON object per line."""
    path.write_text("".join(json.dumps(pair, ensure_ascii=False) + "\n" for pair in pairs), encoding="utf-8")


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    tofu_dir, model_dir = args.data / TOFU / "src", args.data / MODEL / "src"
    forget = tofu.read_pairs(tofu_dir / "forget10.json")
    retain = tofu.read_pairs(tofu_dir / "retain90.json")
    reference = json.loads((args.data / FMLBENCH / "src" / REFERENCE).read_text())["truth_ratios"]
    if len(reference) != len(forget):
        sys.exit(f"prepare.py: {len(reference)} reference truth ratios for {len(forget)} forget pairs")
    forget_idx = dict(zip(("val", "test"), tofu.split_indices(len(forget))))[args.split]
    retain_idx = dict(zip(("val", "test"), tofu.split_indices(len(retain))))[args.split]
    args.private.mkdir(parents=True, exist_ok=True)
    write_json(args.private / f"{args.split}_scored.json",
               {"forget": [forget[i] for i in forget_idx], "retain": [retain[i] for i in retain_idx],
                "reference_truth_ratios": [float(reference[i]) for i in forget_idx],
                "forget_indices": forget_idx.tolist()})
    copy_model_files(model_dir, args.private / "architecture", weights=False)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        write_pairs(data / "forget10.json", forget)
        write_pairs(data / "retain90.json", retain)
        copy_model_files(model_dir, data / "model", weights=True)


if __name__ == "__main__":
    main()
