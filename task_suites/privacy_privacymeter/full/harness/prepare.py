"""Materialise the privacy-meter task's data and the auditor's own models, from the verified CIFAR-10
archive and privacy meter checkout in the data cache ({data}).

--split val : the members (the targets' training set: images and labels) into WORKSPACE/data/; then, once
              per workspace, the harness's three models (protocol.MODELS[1:]) and their signals on every
              audited point of both splits and on the population, into PRIVATE/reference.npz.
--split test: the same models' signals, if this workspace has none yet.

Nothing about who is a member of what leaves PRIVATE and the data cache: the seeds are protocol.py's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from protocol import CHECKOUT, carve, read_cifar10, train_config  # noqa: E402
from reference import module_signals, train_model  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def reference_signals(data: Path, scale: str, device: torch.device, cifar10: tuple) -> dict[str, np.ndarray]:
    images, labels, population, population_labels = cifar10
    carving = carve(len(labels), scale)
    trained_on = carving.trained_on(len(labels))
    audited = np.concatenate([carving.pools["val"], carving.pools["test"]])
    config = train_config(scale, str(device))
    on_audited, on_population = [], []
    for column in (1, 2, 3):  # the targets' pair, then the reference pair
        rows = trained_on[:, column]
        print(f"prepare: training the auditor's model {column} on {int(rows.sum())} images", flush=True)
        model = train_model(data / CHECKOUT / "src", images[rows], labels[rows], config, seed=column)
        on_audited.append(module_signals(model, images[audited], labels[audited], device))
        on_population.append(module_signals(model, population, population_labels, device))
    return {"audited": audited, "signals": np.stack(on_audited, 1), "population": np.stack(on_population, 1)}


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    args.private.mkdir(parents=True, exist_ok=True)
    cifar10 = read_cifar10(args.data)
    images, labels = cifar10[:2]
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        members = carve(len(labels), args.scale).members
        folder = args.workspace / "data"
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "members_images.npy", images[members])
        np.save(folder / "members_labels.npy", labels[members])
    stored = args.private / "reference.npz"
    if not stored.is_file():
        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        np.savez(stored, **reference_signals(args.data, args.scale, device, cifar10))


if __name__ == "__main__":
    main()
