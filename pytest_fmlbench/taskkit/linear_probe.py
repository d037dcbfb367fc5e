"""The representation-learning tasks' scoring (small profile): a fixed linear probe on frozen features that
the evaluator extracts itself, with a backbone it builds from ``cifar_resnet`` and weights it loads as data.

Reads from the experiment only OUT/backbone.pt (weights, loaded with torch.load(weights_only=True),
which cannot run code) and the workspace's backbone.json and split_config.json (validated JSON).
Checks the backbone's size against the budget, loads the weights, extracts features of images the
harness regenerates itself, fits the probe on labels only it has, and scores it on the val part of the
visible pool (--split val) or on the hidden test set (--split test).

The original trains a linear layer with SGD for 100 epochs on frozen ResNet features. Here the
classifier is the same model, fitted to convergence: multinomial logistic regression with an L2
penalty (scikit-learn's objective at C = 1: sum of cross-entropies + ||W||^2 / 2), minimised by
full-batch L-BFGS in float64 on standardised features. It is deterministic, takes well under a
second on CPU, and is blind to the features' scale (an encoder cannot win by inflating activations).
"""

from __future__ import annotations

import io
import math
import os
import stat
from pathlib import Path
from typing import Callable, Literal

import numpy as np
import torch

from ..evalkit import ConstraintOutcome, fail, harness_args, load_split_config, read_json, split_indices, write_result
from . import cifar_resnet as encoder

C = 1.0
MAX_ITER = 500
CHUNK = 500
MAX_WEIGHTS_BYTES = 64 * 2**20


def extract(backbone: torch.nn.Module, images: np.ndarray) -> torch.Tensor:
    """Features (float64) of uint8 images (N, 16, 16, 3), with the backbone in eval mode."""
    backbone.eval()
    pixels = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255)
    with torch.no_grad():
        return torch.cat([backbone(encoder.normalise(chunk)) for chunk in pixels.split(CHUNK)]).double()


def fit_and_score(train_features: torch.Tensor, train_labels: np.ndarray, eval_features: torch.Tensor,
                  eval_labels: np.ndarray, n_classes: int) -> tuple[float, float]:
    """(accuracy on the eval images, accuracy on the probe's own training images)."""
    mean = train_features.mean(dim=0)
    std = train_features.std(dim=0, unbiased=False)
    std = torch.where(std > 1e-12, std, torch.ones_like(std))  # a constant feature stays 0
    x_train = (train_features - mean) / std
    x_eval = (eval_features - mean) / std
    y_train = torch.from_numpy(train_labels)

    weight = torch.zeros(x_train.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], lr=1, max_iter=MAX_ITER, tolerance_grad=1e-9,
                                  tolerance_change=1e-12, history_size=20, line_search_fn="strong_wolfe")

    def objective() -> torch.Tensor:
        optimizer.zero_grad()
        loss = C * torch.nn.functional.cross_entropy(x_train @ weight + bias, y_train, reduction="sum")
        loss = loss + 0.5 * (weight * weight).sum()
        loss.backward()
        return loss

    optimizer.step(objective)
    with torch.no_grad():
        eval_acc = ((x_eval @ weight + bias).argmax(dim=1).numpy() == eval_labels).mean()
        train_acc = ((x_train @ weight + bias).argmax(dim=1).numpy() == train_labels).mean()
    return float(eval_acc), float(train_acc)


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



def evaluate(load_pool: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], n_classes: int,
             dataset: str, metric: str, test_probe_fits: Literal["train_part", "visible_pool"]) -> None:
    """The evaluator's main: score one pre-training run and write the verdict.

    ``load_pool`` regenerates the task's images with every label: (visible_X, visible_y, test_X, test_y).
    The val probe is fitted on the train part of the visible pool; the test probe on that part again, or on
    the whole visible pool (``test_probe_fits``), as the task's original does.
    """
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
        write_result(args.result, {dataset: {metric: 0.0}}, constraints=[budget], info=info)
        return

    backbone = encoder.build(spec)
    load_weights(args.out / "backbone.pt", backbone)

    visible_X, visible_y, test_X, test_y = load_pool()
    train_idx, val_idx = split_indices(len(visible_X), split_config)
    if args.split == "val":
        probe_idx, eval_X, eval_y = train_idx, visible_X[val_idx], visible_y[val_idx]
    elif test_probe_fits == "train_part":
        probe_idx, eval_X, eval_y = train_idx, test_X, test_y
    else:
        probe_idx, eval_X, eval_y = np.arange(len(visible_X)), test_X, test_y
    train_features = extract(backbone, visible_X[probe_idx])
    eval_features = extract(backbone, eval_X)
    if not (torch.isfinite(train_features).all() and torch.isfinite(eval_features).all()):
        fail("the backbone's features contain NaN or infinite values")
    accuracy, train_accuracy = fit_and_score(train_features, visible_y[probe_idx], eval_features, eval_y, n_classes)
    write_result(
        args.result,
        {dataset: {metric: accuracy}},
        stderrs={dataset: {metric: math.sqrt(accuracy * (1 - accuracy) / len(eval_y))}},
        constraints=[budget],
        info={**info, "feature_dim": backbone.feature_dim, "n_probe_train": len(probe_idx), "n_eval": len(eval_y),
              "probe_train_acc": train_accuracy},
    )
