"""Materialise Dassl's office_home_dg for one split, as the original FML-bench did ({data}: the data cache).

The original's setup.py unpacks office_home_dg.zip and renames office_home_dg to office_home; DomainBed then
reads each domain folder (art, clipart, product, real_world) with ImageFolder, whose classes are that
folder's sub-folders: Dassl's split folders ``train`` and ``val``. The protocol is the 65-class task's
(taskkit.officehome.prepare: seed 0, test environment 0 = art, holdout fraction 0.3), on this layout.
"""

from __future__ import annotations

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import officehome

ARCHIVE = ("office-home-dg-zip", "office_home_dg.zip")


def main() -> None:
    officehome.prepare(harness_args(), ARCHIVE, officehome.DASSL_DG)


if __name__ == "__main__":
    main()
