"""Run easyfsl's Prototypical Networks over one split's episodes, as easyfsl's benchmark_methods evaluates it.

python train.py --split val|test --out OUT

The model is PrototypicalNetworks(nn.Identity(), **config) with the "default" config of
scripts/methods_configs.json (the original's --config=default), on pre-extracted features. For each episode it
calls process_support_set(support, support_labels), then forward(query) under eval() and no_grad(), and takes
the argmax, as easyfsl.utils.evaluate_on_one_task does. Writes OUT/predictions.npy (one label per query, episode
by episode); the harness scores it.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import torch
from torch import nn

from easyfsl.methods import PrototypicalNetworks

METHOD = "prototypical_networks"
# the model's own randomness (none in the baseline); the episodes are drawn by the harness
MODEL_SEED = 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", choices=["val", "test"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    random.seed(MODEL_SEED)
    np.random.seed(MODEL_SEED)
    torch.manual_seed(MODEL_SEED)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = json.loads(Path("scripts/methods_configs.json").read_text())[METHOD]["default"]
    model = PrototypicalNetworks(nn.Identity(), **config).to(device)

    features = torch.from_numpy(np.load("data/features.npy")).to(device)
    source = Path("data/val_episodes.npz") if args.split == "val" else args.out / "test_episodes.npz"
    with np.load(source) as episodes:
        support, support_labels, query = (torch.from_numpy(episodes[key]).to(device)
                                          for key in ("support", "support_labels", "query"))

    predictions = []
    model.eval()
    with torch.no_grad():
        for index in range(len(support)):
            model.process_support_set(features[support[index]], support_labels[index])
            scores = model(features[query[index]]).detach().data
            predictions.append(torch.max(scores, 1)[1].cpu().numpy())
    predictions = np.stack(predictions).astype(np.int64)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", predictions.reshape(-1))
    print(f"{args.split}: {len(predictions)} episodes of {predictions.shape[1]} queries on {device}")


if __name__ == "__main__":
    main()
