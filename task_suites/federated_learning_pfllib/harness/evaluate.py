"""Score one federated run: the global model's accuracy on each client's held-out examples, averaged
over the clients (PFLlib's test_acc), plus the spread across clients.

Labels and client ids come from PRIVATE only; the val items are recomputed here from split_config.json,
so the experiment cannot choose which examples it is scored on. Malformed predictions -> exit 1 with a
one-line message.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fed_data import NUM_CLASSES, NUM_CLIENTS, client_split  # noqa: E402

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, load_split_config, write_result  # noqa: E402

DATASET = "digits_fl"


def load_private(path: Path) -> np.ndarray:
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    if args.split == "val":
        visible_y = load_private(args.private / "visible_y.npy")
        visible_client = load_private(args.private / "visible_client.npy")
        try:
            split_config = load_split_config(args.workspace)
        except Exception as exc:  # a broken editable split_config.json is the experiment's failure
            fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
        _, val_idx = client_split(visible_client, split_config)
        labels, owners = visible_y[val_idx], visible_client[val_idx]
    else:
        labels = load_private(args.private / "test_y.npy")
        owners = load_private(args.private / "test_client.npy")

    pred = load_labels(args.out / "predictions.npy", len(labels), NUM_CLASSES)
    per_client = {c: float(np.mean(pred[owners == c] == labels[owners == c]))
                  for c in range(NUM_CLIENTS) if np.any(owners == c)}
    accs = np.array(list(per_client.values()))
    mean = float(accs.mean())
    write_result(
        args.result,
        {DATASET: {"test_acc": mean, "test_acc_std": float(accs.std())}},
        stderrs={DATASET: {"test_acc": float(accs.std(ddof=1) / math.sqrt(len(accs)))}},
        info={"split": args.split, "n_eval": len(labels), "n_clients_scored": len(accs),
              "per_client_acc": {str(c): a for c, a in per_client.items()}},
    )


if __name__ == "__main__":
    main()
