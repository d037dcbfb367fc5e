"""Score one PyCIL run: average incremental accuracy, from per-session labels and the labels in PRIVATE only.

After each of the six sessions the run labelled every scored image (renumbered classes): with the network's
top-1 (session_<t>_cnn.npy) and, when the learner keeps class means, the nearest mean of exemplars
(session_<t>_nme.npy). Each session is scored as PyCIL's eval_task scores it, on the images of the classes
seen so far (a percentage, two decimals); the averages over sessions are the original's avg_acc_cnn and
avg_acc_nme, and avg_incremental_acc is the NME average (iCaRL's classifier) when every session has NME
labels, else the CNN average, as the original's script reads them. Writes the original's results layout:
{"cifar100_incremental": {"means": {"avg_incremental_acc_mean", "avg_acc_cnn_mean", "avg_acc_nme_mean"}}}.
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, write_result
from pytest_fmlbench.taskkit import pycil

DATASET = "cifar100_incremental"


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    truth = args.private / f"{args.split}_labels.npy"
    if not truth.is_file():
        fail(f"{truth} is missing: run prepare.py first")
    labels = np.load(truth, allow_pickle=False)
    sizes = pycil.session_sizes()
    curves = {}
    for head in ("cnn", "nme"):
        files = [args.out / f"session_{t}_{head}.npy" for t in range(len(sizes))]
        if head == "nme" and not all(f.is_file() for f in files):
            continue
        predictions = [load_labels(f, len(labels), pycil.NUM_CLASSES) for f in files]
        curves[head] = pycil.session_accuracies(predictions, labels, sizes)
    averages = {head: pycil.average_incremental_accuracy(curve) for head, curve in curves.items()}
    primary = averages.get("nme", averages["cnn"])
    write_result(args.result,
                 {DATASET: {"avg_incremental_acc_mean": primary, "avg_acc_cnn_mean": averages["cnn"],
                            "avg_acc_nme_mean": averages.get("nme", 0.0)}},
                 stderrs={DATASET: {"avg_incremental_acc_stderr": 0.0, "avg_acc_cnn_stderr": 0.0,
                                    "avg_acc_nme_stderr": 0.0}},
                 info={"split": args.split, "n_eval": len(labels), "classifier": "nme" if "nme" in averages else "cnn",
                       **{f"{head}_top1_curve": curve for head, curve in curves.items()}})


if __name__ == "__main__":
    main()
