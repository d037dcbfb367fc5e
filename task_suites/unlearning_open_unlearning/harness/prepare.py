"""Materialise the unlearning task's data for one split.

--split val : into WORKSPACE/data/: the word vocabulary, the model configuration, the full model
              (fine-tuned on every author; shipped in reference/, see build_reference.py), the forget
              and retain question-answer pairs, and the validation truth-ratio items.
--split test: nothing: the test run repeats the same unlearning, and the hidden test items live in
              the harness, where only the evaluator reads them.
Output is byte-for-byte deterministic. Imports numpy only: no model is trained or run here.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from authors import population  # noqa: E402
from recipe import REFERENCE_DIR, fingerprint, model_config  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")


def main() -> None:
    args = harness_args()
    if args.split == "test":
        return
    if args.workspace is None:
        sys.exit("prepare.py: --workspace is required for --split val")
    shipped = json.loads((REFERENCE_DIR / "reference.json").read_text())
    if shipped.get("fingerprint") != fingerprint():
        sys.exit("prepare.py: harness/reference/ was built from other code or settings: "
                 "run python harness/build_reference.py")
    pop = population()
    data = args.workspace / "data"
    data.mkdir(parents=True, exist_ok=True)
    write_json(data / "vocab.json", pop["vocab"])
    write_json(data / "model_config.json", model_config(len(pop["vocab"])))
    shutil.copyfile(REFERENCE_DIR / "full_model.safetensors", data / "full_model.safetensors")
    write_json(data / "forget.json", pop["forget"])
    write_json(data / "retain.json", pop["retain"])
    write_json(data / "val_eval.json", pop["val_items"])


if __name__ == "__main__":
    main()
