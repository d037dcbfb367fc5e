"""Score one unlearning run: the original's forget quality and model utility, from OUT/model.safetensors.

The experiment's only input here is OUT/model.safetensors (safetensors runs no code), loaded into the
architecture the evaluator builds from the verified fine-tuned model's configuration (PRIVATE/architecture/);
weights with other names or shapes, or missing ones, are refused. With the fine-tuned model's tokenizer, as
the original scores (``taskkit.tofu``):

* forget_quality_mean (the metric): the two-sample Kolmogorov-Smirnov p-value between the unlearned model's
  truth ratios on the split's forget pairs and the retain model's on the same pairs (FML-bench's
  retain_reference_logs.json, kept in PRIVATE only);
* model_utility_mean: exp(-mean answer-token loss) on the split's retain pairs.

Writes the original's results layout: {"tofu_unlearning": {"means": {"forget_quality_mean",
"model_utility_mean"}, "stderrs": {... 0.0}}}.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, write_result
from pytest_fmlbench.taskkit import tofu

DATASET = "tofu_unlearning"
WEIGHTS = "model.safetensors"
# bfloat16 weights are 2 bytes a parameter; a file far larger than the architecture's is not this model
SIZE_SLACK = 1.5


def parameter_count(config) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())


def load_unlearned(path: Path, architecture: Path, device):
    """The unlearned weights in the verified architecture; a link, a non-file or a file that does not hold
    exactly its weights is the experiment's failure."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        fail(f"no model: {path.name} is missing")
    if not stat.S_ISREG(info.st_mode):
        fail(f"{path.name} is not a regular file")
    config = AutoConfig.from_pretrained(architecture)
    limit = int(SIZE_SLACK * 2 * parameter_count(config)) + (1 << 20)
    if info.st_size > limit:
        fail(f"{path.name} has {info.st_size} bytes, more than this model's weights can take ({limit})")
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_bytes((architecture / "config.json").read_bytes())
        os.symlink(path.resolve(), Path(folder) / WEIGHTS)
        try:
            model, loading = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, output_loading_info=True)
        except Exception as exc:  # a corrupt or foreign file: the experiment's failure
            fail(f"{path.name} does not hold this task's model: {str(exc).splitlines()[0][:300]}")
    wrong = {key: sorted(value)[:3] for key, value in loading.items() if value}
    if wrong:
        fail(f"{path.name} does not hold this task's model's weights: {wrong}")
    return model.to(device).eval()


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    scored_path = args.private / f"{args.split}_scored.json"
    if not scored_path.is_file():
        fail(f"{scored_path} is missing: run prepare.py first")
    scored = json.loads(scored_path.read_text())
    import torch
    from transformers import AutoTokenizer

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    architecture = args.private / "architecture"
    model = load_unlearned(args.out / WEIGHTS, architecture, device)
    tokenizer = AutoTokenizer.from_pretrained(architecture)
    ratios = tofu.truth_ratios(model, tokenizer, scored["forget"], device)
    if not np.all(np.isfinite(ratios)):
        fail("the unlearned model gives non-finite answer probabilities")
    quality = tofu.forget_quality(ratios, np.asarray(scored["reference_truth_ratios"]))
    utility = tofu.model_utility(model, tokenizer, scored["retain"], device)
    print(f"{args.split}: forget_quality {quality:.6g}, model_utility {utility:.6g}, "
          f"mean truth ratio {float(np.mean(ratios)):.4f}", flush=True)
    write_result(args.result,
                 {DATASET: {"forget_quality_mean": quality, "model_utility_mean": utility}},
                 stderrs={DATASET: {"forget_quality_stderr": 0.0, "model_utility_stderr": 0.0}},
                 info={"split": args.split, "n_forget_pairs": len(ratios), "n_retain_pairs": len(scored["retain"]),
                       "truth_ratio_mean": float(np.mean(ratios)),
                       "neg_log10_forget_quality": -math.log10(max(quality, 1e-300))})


if __name__ == "__main__":
    main()
