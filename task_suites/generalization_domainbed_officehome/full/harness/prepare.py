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

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import officehome

ARCHIVE = ("office-home-zip", "office_home.zip")


def main() -> None:
    officehome.prepare(harness_args(), ARCHIVE, officehome.DOMAINBED)


if __name__ == "__main__":
    main()
