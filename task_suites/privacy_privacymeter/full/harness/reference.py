"""The harness's own models of the audit: the targets' pair and the reference pair, trained with privacy
meter's pristine trainer and network from the verified checkout in the data cache (never the workspace's
copies, which the agent edits), with the baseline's recipe and privacy meter's data pipeline.

RMIA compares the target with models trained like it on data that does or does not hold each point; the
auditor trains them itself, because reference models produced by the audited party could be made to look
exactly like the target and hide any leak.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from protocol import SEED, normalise

SIGNAL_BATCH = 5000  # the original's audit.batch_size


def _load(checkout: Path, relative: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, checkout / relative)
    if spec is None or spec.loader is None or not (checkout / relative).is_file():
        raise SystemExit(f"reference.py: the privacy meter checkout has no {relative} ({checkout})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def train_model(checkout: Path, images: np.ndarray, labels: np.ndarray, config: dict, seed: int) -> torch.nn.Module:
    """privacy meter's train(WideResNet 28-2, loader of 256 shuffled normalised images, config) on the given set."""
    trainer = _load(checkout, "trainers/default_trainer.py", "privacy_meter_default_trainer")
    networks = _load(checkout, "models/wide_resnet.py", "privacy_meter_wide_resnet")
    random.seed(SEED + seed)
    np.random.seed(SEED + seed)
    torch.manual_seed(SEED + seed)
    dataset = TensorDataset(torch.from_numpy(normalise(images)), torch.from_numpy(labels))
    loader = DataLoader(dataset, batch_size=config["batch_size"], shuffle=True)
    model = networks.WideResNet(nin=3, nclass=10, depth=28, width=2)
    return trainer.train(model, loader, dict(config), None)


def logits(forward, images: np.ndarray, device: torch.device, batch: int) -> torch.Tensor:
    """(n, classes) float32 logits on the CPU. ``forward`` maps a batch of exactly ``batch`` normalised images on
    ``device`` to logits; the last batch is padded with copies of its first image, the padding's outputs dropped."""
    out = []
    with torch.no_grad():
        for start in range(0, len(images), batch):
            chunk = torch.from_numpy(normalise(images[start:start + batch]))
            n = len(chunk)
            if n < batch:
                chunk = torch.cat([chunk, chunk[:1].expand(batch - n, -1, -1, -1)])
            out.append(forward(chunk.to(device))[:n].float().cpu())
    return torch.cat(out)


def true_label_probability(logits_: torch.Tensor, labels: np.ndarray) -> np.ndarray:
    """privacy meter's signal (get_softmax at temperature 1): the softmax probability of the true label, float32."""
    shifted = torch.exp(logits_ - logits_.max(dim=1, keepdim=True).values)
    true = shifted.gather(1, torch.from_numpy(labels).reshape(-1, 1))
    return (true / shifted.sum(dim=1, keepdim=True)).numpy().ravel()


def module_signals(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray, device: torch.device) -> np.ndarray:
    model = model.to(device).eval()
    try:
        return true_label_probability(logits(model, images, device, min(SIGNAL_BATCH, len(images))), labels)
    finally:
        model.to("cpu")
