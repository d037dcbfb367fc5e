"""Score one pre-training run by linear probing, entirely inside the harness
(``pytest_fmlbench.taskkit.linear_probe``: the backbone is built from the kit's ``cifar_resnet``, of
which the workspace's encoder.py is a copy). The probe is always fitted on the train part of the visible
pool, as in the original, and scored on its val part (--split val) or on the hidden test set (--split test).
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
    evaluate(lambda: load_pool(with_test), N_CLASSES, dataset="shapes10_linear_probing", metric="test_acc",
             test_probe_fits="train_part")
