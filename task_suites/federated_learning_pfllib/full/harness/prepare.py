"""Materialise PFLlib's federated CIFAR-10 for one split, from the verified archive and PFLlib's verified checkout in
the data cache ({data}).

The original's protocol (FML-bench Federated_Learning_PFLlib on TsingZ0/PFLlib at 0169ba7): PFLlib's own
generator (``generate_Cifar10.py noniid - dir``) deals CIFAR-10's 60,000 images to 20 clients with Dirichlet(0.1)
label proportions and cuts each client's share 75% train / 25% test (``taskkit.pfllib``). Each client's train
part is the visible pool (the agent's split_config.json cuts it into train and val); each client's test part is
the hidden test. The partition is made once per workspace, into PRIVATE, and read back by the test split.

--split val : every client's visible pool (uint8 images, labels, client ids, in client order) into
              WORKSPACE/data/; the labels and client ids, for the evaluator, into PRIVATE.
--split test: every client's hidden test images (no labels) and client ids into OUT; their labels and client ids
              into PRIVATE.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import pfllib

ARCHIVE = ("cifar-10-python", "cifar-10-python.tar.gz")
CHECKOUT = ("pfllib", "src")
PARTITION = "pfllib_partition"


def partition(data: Path, private: Path) -> Path:
    folder = private / PARTITION / pfllib.OUTPUT
    if not (folder / "config.json").is_file():
        pfllib.generate(data.joinpath(*CHECKOUT), data.joinpath(*ARCHIVE), private / PARTITION)
    return folder


def clients_part(folder: Path, part: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every client's ``part``, concatenated in client order: uint8 images, labels, client ids."""
    images, labels, owners = [], [], []
    for client in range(pfllib.NUM_CLIENTS):
        x, y = pfllib.read_client(folder, part, client)
        images.append(pfllib.to_uint8(x))
        labels.append(y)
        owners.append(np.full(len(y), client, dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels), np.concatenate(owners)


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    args.private.mkdir(parents=True, exist_ok=True)
    try:
        folder = partition(args.data, args.private)
        images, labels, owners = clients_part(folder, "train" if args.split == "val" else "test")
    except (FileNotFoundError, ValueError) as exc:
        sys.exit(f"prepare.py: {exc}")
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "visible_images.npy", images)
        np.save(data / "visible_labels.npy", labels)
        np.save(data / "visible_client.npy", owners)
        np.save(args.private / "visible_labels.npy", labels)
        np.save(args.private / "visible_client.npy", owners)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_images.npy", images)
        np.save(args.out / "test_client.npy", owners)
        np.save(args.private / "test_labels.npy", labels)
        np.save(args.private / "test_client.npy", owners)


if __name__ == "__main__":
    main()
