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
# the weights at 4 bytes a parameter (float32; the original saves bfloat16, 2) and a header: a larger file is
# not this model's
MAX_BYTES_PER_PARAMETER = 4.2


def expected_tensors(config) -> tuple[dict[str, tuple[int, ...]], list[set[str]]]:
    """The architecture's tensors (name -> shape) and its groups of tied names, of which a file holds at least one
    (save_pretrained writes a tied output layer once)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        state = AutoModelForCausalLM.from_config(config).state_dict(keep_vars=True)
    groups: dict[int, set[str]] = {}
    for name, tensor in state.items():
        groups.setdefault(id(tensor), set()).add(name)
    return {name: tuple(tensor.shape) for name, tensor in state.items()}, list(groups.values())


def weights_file(path: Path) -> os.stat_result:
    """OUT's weights file, a regular file; checked before torch and transformers load, which take seconds."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        fail(f"no model: {path.name} is missing")
    if not stat.S_ISREG(info.st_mode):
        fail(f"{path.name} is not a regular file")
    return info


def check_weights(path: Path, config) -> None:
    """OUT's file must be a safetensors file of exactly the architecture's tensors and shapes, and not much larger
    than they are."""
    from safetensors import safe_open

    info = weights_file(path)
    shapes, tied = expected_tensors(config)
    limit = int(MAX_BYTES_PER_PARAMETER * sum(int(np.prod(shape)) for shape in shapes.values())) + (1 << 20)
    if info.st_size > limit:
        fail(f"{path.name} has {info.st_size} bytes, more than this model's weights can take ({limit})")
    try:
        with safe_open(str(path), framework="pt") as handle:
            found = {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except Exception as exc:  # not a safetensors file: the experiment's failure
        fail(f"{path.name} is not a safetensors file: {str(exc).splitlines()[0][:200]}")
    problems = [f"unexpected {name}" for name in sorted(set(found) - set(shapes))]
    problems += [f"missing {sorted(group)[0]}" for group in tied if not group & set(found)]
    problems += [f"{name} has shape {list(found[name])}, expected {list(shape)}" for name, shape in shapes.items()
                 if name in found and found[name] != shape]
    if problems:
        fail(f"{path.name} does not hold this task's model: {'; '.join(problems[:3])}"
             + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""))


def load_unlearned(path: Path, architecture: Path, device):
    """The unlearned weights in the verified architecture (after check_weights, whatever is wrong with them is
    the experiment's failure)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(architecture)
    check_weights(path, config)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_bytes((architecture / "config.json").read_bytes())
        os.symlink(path.resolve(), Path(folder) / WEIGHTS)
        try:
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
        except Exception as exc:
            fail(f"{path.name} does not load into this task's model: {str(exc).splitlines()[0][:300]}")
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
    weights_file(args.out / WEIGHTS)
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    # one line per failure: no loading reports or progress bars on stderr
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
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
