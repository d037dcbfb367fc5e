"""Materialise OfficeHome for one split, from the verified archive and weights in the data cache ({data}).

The original's protocol (DomainBed's train.py, seed 0, test environment 0, holdout fraction 0.3): the
four domains in DomainBed's order (Art, Clipart, Product, Real World), each cut into an out-split (30%)
and an in-split (70%) with DomainBed's seeds. Clipart, Product and Real World are the training domains;
Art's out-split is the validation set and its in-split the hidden test.

--split val : the training domains' images as the archive holds them (WORKSPACE/data/office_home/), their
              in- and out-splits in DomainBed's order with ImageFolder's labels (data/splits.json), Art's
              out-split as numbered images without labels (data/heldout/), and the ImageNet weights
              DomainBed's networks.py loads (data/torch_home/hub/checkpoints/); the labels into PRIVATE.
--split test: Art's in-split as numbered images into OUT/test_images/, their labels into PRIVATE.
"""

from __future__ import annotations

import json
import posixpath
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import domainbed, officehome

ARCHIVE = ("office-home-zip", "office_home.zip")
# the files torch.hub's cache holds for torchvision's resnet50(pretrained=True) and timm's resnet50.ram_in1k
WEIGHTS = (("resnet50-torchvision", "resnet50-0676ba61.pth"), ("resnet50-ram-timm", "resnet50_ram-a26f946b.pth"))
TEST_ENV = 0


def numbered(zf: zipfile.ZipFile, members: list[str], folder: Path) -> None:
    """The members' bytes as folder/00000.<ext>, ... in the given order: no class name, no original file name."""
    folder.mkdir(parents=True, exist_ok=True)
    for position, member in enumerate(members):
        (folder / f"{position:05d}{posixpath.splitext(member)[1]}").write_bytes(zf.read(member))


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    archive = args.data.joinpath(*ARCHIVE)
    environments = officehome.environments(archive)
    splits = [domainbed.holdout_split(len(env.members), index) for index, env in enumerate(environments)]
    held_out, held_in = splits[TEST_ENV]
    test_env = environments[TEST_ENV]
    labels = np.asarray(test_env.labels, dtype=np.int64)
    args.private.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive) as zf:
        if args.split == "val":
            if args.workspace is None:
                sys.exit("prepare.py: --workspace is required for --split val")
            data = args.workspace / "data"
            record = {"classes": list(test_env.classes), "train_envs": [],
                      "heldout": {"env": TEST_ENV, "name": test_env.name, "folder": "heldout"}}
            for index, env in enumerate(environments):
                if index == TEST_ENV:
                    continue
                if env.classes != test_env.classes:
                    sys.exit(f"prepare.py: {env.name}'s classes differ from {test_env.name}'s")
                paths = []
                for member in env.members:
                    rel = "office_home/" + member.split("/", 1)[1]  # DomainBed renames the top folder
                    target = data / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(member))
                    paths.append(rel)
                record["train_envs"].append({
                    "env": index, "name": env.name,
                    **{part: [[paths[i], env.labels[i]] for i in positions.tolist()]
                       for part, positions in zip(("out", "in"), splits[index])}})
            numbered(zf, [test_env.members[i] for i in held_out], data / "heldout")
            (data / "splits.json").write_text(json.dumps(record, indent=1))
            checkpoints = data / "torch_home" / "hub" / "checkpoints"
            checkpoints.mkdir(parents=True, exist_ok=True)
            for artifact, name in WEIGHTS:
                shutil.copyfile(args.data / artifact / name, checkpoints / name)
            np.save(args.private / "val_labels.npy", labels[held_out])
        else:
            if args.out is None:
                sys.exit("prepare.py: --out is required for --split test")
            numbered(zf, [test_env.members[i] for i in held_in], args.out / "test_images")
            np.save(args.private / "test_labels.npy", labels[held_in])


if __name__ == "__main__":
    main()
