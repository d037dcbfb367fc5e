"""Score one DomainBed run on office_home_dg: accuracy on the held-out art domain's two folder classes
(train / val, labels from PRIVATE only).

Writes the original's results layout: {"OfficeHome_test_env0": {"avg_acc_mean"}}: on the val split the
accuracy on Art's out-split (30%), on the test split on its in-split (70%).
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, write_result

DATASET = "OfficeHome_test_env0"
# ImageFolder's classes in the renamed office_home_dg: the folders train (0) and val (1)
NUM_CLASSES = 2


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    labels = np.load(args.private / ("val_labels.npy" if args.split == "val" else "test_labels.npy"),
                     allow_pickle=False)
    pred = load_labels(args.out / "predictions.npy", len(labels), NUM_CLASSES)
    accuracy = float(np.mean(pred == labels))
    write_result(args.result, {DATASET: {"avg_acc_mean": accuracy}}, stderrs={DATASET: {"avg_acc_stderr": 0.0}},
                 info={"split": args.split, "n_eval": len(labels)})


if __name__ == "__main__":
    main()
