"""Score one pre-training run by linear evaluation, entirely inside the harness
(``pytest_fmlbench.taskkit.linear_probe``: the backbone is built from the kit's ``cifar_resnet``, of
which the workspace's encoder.py is a copy), as the original does: fitted on the train part of the
visible pool and scored on its val part (--split val), or fitted on the whole visible pool and scored
on the hidden test set (--split test).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data import N_CLASSES, load_pool  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402
from pytest_fmlbench.taskkit.linear_probe import evaluate  # noqa: E402

if __name__ == "__main__":
    with_test = harness_args().split == "test"  # validation never renders the hidden test images
    evaluate(lambda: load_pool(with_test), N_CLASSES, dataset="shapes20_ssl", metric="linear_eval_acc",
             test_probe_fits="visible_pool")
