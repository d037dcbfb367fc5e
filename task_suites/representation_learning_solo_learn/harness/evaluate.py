"""Score one pre-training run by linear evaluation, entirely inside the harness.

Reads from the experiment only OUT/backbone.pt (weights, loaded with torch.load(weights_only=True),
which cannot run code) and the workspace's backbone.json and split_config.json (validated JSON).
Builds the backbone from the harness's own encoder.py, checks its size against the budget, loads
the weights, extracts features of images it regenerates itself, fits the probe on labels only it has,
and scores it, as the original does: fitted on the train part of the visible pool and scored on its
val part (--split val), or fitted on the whole visible pool and scored on the hidden test set
(--split test).
"""

from __future__ import annotations

import io
import math
import os
import stat
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import encoder  # noqa: E402
import probe  # noqa: E402
from data import N_CLASSES, load_pool  # noqa: E402

from pytest_fmlbench.evalkit import (  # noqa: E402
    ConstraintOutcome,
    fail,
    harness_args,
    load_split_config,
    read_json,
    split_indices,
    write_result,
)

DATASET = "shapes20_ssl"
METRIC = "linear_eval_acc"
MAX_WEIGHTS_BYTES = 64 * 2**20


def read_untrusted(path: Path, limit: int) -> bytes:
    """The bytes of a regular, unlinked-elsewhere file of at most ``limit`` bytes, read through one
    descriptor opened without following links (no swapping the file between the checks and the read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        fail(f"no weights: {path.name} is missing")
    except OSError as exc:
        fail(f"cannot open {path.name} (links are refused): {exc.strerror}")
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            fail(f"{path.name} must be a regular file with a single link")
        if info.st_size > limit:
            fail(f"{path.name} is {info.st_size} bytes, over the {limit}-byte limit")
        return handle.read(limit + 1)[:limit]


def load_weights(path: Path, backbone: torch.nn.Module) -> None:
    """Weights-only unpickling, then an exact match of names, shapes and dtypes, all finite."""
    try:
        state = torch.load(io.BytesIO(read_untrusted(path, MAX_WEIGHTS_BYTES)), map_location="cpu",
                           weights_only=True)
    except Exception as exc:  # weights_only refuses anything but tensors and plain containers
        fail(f"{path.name} is not a weights-only state dict: {str(exc).splitlines()[0][:300]}")
    expected = backbone.state_dict()
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        fail(f"{path.name} must hold a dict of tensors (a state_dict)")
    if set(state) != set(expected):
        missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
        fail(f"{path.name} does not match backbone.json's backbone: missing {missing[:5]}, unexpected {extra[:5]}")
    for name, tensor in state.items():
        want = expected[name]
        if tensor.shape != want.shape or tensor.dtype != want.dtype:
            fail(f"{path.name}: {name} is {tuple(tensor.shape)} {tensor.dtype}, expected {tuple(want.shape)} {want.dtype}")
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            fail(f"{path.name}: {name} holds NaN or infinite values")
    backbone.load_state_dict(state, strict=True)


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    torch.set_num_threads(1)
    try:
        split_config = load_split_config(args.workspace)
    except Exception as exc:
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    try:
        spec = encoder.BackboneSpec.model_validate(read_json(args.workspace / "backbone.json"))
    except Exception as exc:
        fail(f"backbone.json is invalid: {str(exc).splitlines()[0]}")

    params, macs = encoder.cost(spec)
    max_params, max_macs = encoder.budget()
    within = params <= max_params and macs <= max_macs
    budget = ConstraintOutcome(
        name="backbone_budget", ok=within, value=float(max(params / max_params, macs / max_macs)), limit=1.0,
        detail=f"{spec.name} width {spec.width}: {params} parameters (max {max_params}), "
               f"{macs} multiply-accumulates per image (max {max_macs})")
    info = {"split": args.split, "backbone": spec.model_dump(), "parameters": params, "macs": macs}
    if not within:  # not worth probing: the step fails on the constraint whatever the accuracy
        write_result(args.result, {DATASET: {METRIC: 0.0}}, constraints=[budget], info=info)
        return

    backbone = encoder.build(spec)
    load_weights(args.out / "backbone.pt", backbone)

    visible_X, visible_y, test_X, test_y = load_pool()
    train_idx, val_idx = split_indices(len(visible_X), split_config)
    if args.split == "val":
        probe_idx, eval_X, eval_y = train_idx, visible_X[val_idx], visible_y[val_idx]
    else:
        probe_idx, eval_X, eval_y = np.arange(len(visible_X)), test_X, test_y
    train_features = probe.extract(backbone, visible_X[probe_idx])
    eval_features = probe.extract(backbone, eval_X)
    if not (torch.isfinite(train_features).all() and torch.isfinite(eval_features).all()):
        fail("the backbone's features contain NaN or infinite values")
    accuracy, train_accuracy = probe.fit_and_score(train_features, visible_y[probe_idx], eval_features, eval_y,
                                                   N_CLASSES)
    write_result(
        args.result,
        {DATASET: {METRIC: accuracy}},
        stderrs={DATASET: {METRIC: math.sqrt(accuracy * (1 - accuracy) / len(eval_y))}},
        constraints=[budget],
        info={**info, "feature_dim": backbone.feature_dim, "n_probe_train": len(probe_idx), "n_eval": len(eval_y),
              "probe_train_acc": train_accuracy},
    )


if __name__ == "__main__":
    main()
