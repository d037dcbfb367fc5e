"""Experiment driver (protected): python train.py --split {val|test} --out DIR

Builds the network that algorithm.get_architecture declares (architecture.py's family), trains it with
algorithm.train on the training set in data/ (the same set for both splits: the audit asks whether
these examples can be told apart from hidden ones), and writes
  DIR/model_spec.json   the validated architecture spec;
  DIR/model.pt          the trained weights, a plain state dict (torch.save of tensors only).
The auditor rebuilds the network from its own copy of architecture.py, loads the weights, and queries
the model itself; nothing else this run writes is used.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

import algorithm
import architecture
from pytest_fmlbench.evalkit import harness_args, write_json


def main() -> None:
    args = harness_args()
    if args.out is None:
        raise SystemExit("train.py: --out is required")
    # One intra-op thread: tiny convolutions gain nothing from more, and CPU results stay bit-identical.
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    here = Path(__file__).resolve().parent
    config = json.loads((here / "config.json").read_text())
    try:
        spec = architecture.ArchitectureSpec.model_validate(algorithm.get_architecture(config))
    except ValueError as exc:
        raise SystemExit(f"train.py: get_architecture returned an invalid spec: {str(exc).splitlines()[0]}")
    X = torch.from_numpy(np.load(here / "data" / "members_X.npy")).to(device)
    y = torch.from_numpy(np.load(here / "data" / "members_y.npy")).to(device)

    torch.manual_seed(int(config.get("seed", 0)))
    model = architecture.build(spec).to(device)
    start = time.perf_counter()
    model = algorithm.train(model, X, y, config)
    seconds = time.perf_counter() - start
    if not isinstance(model, architecture.Network) or model.spec != spec:
        raise SystemExit("train.py: train() must return the architecture.Network it was given (same spec)")

    model.eval()
    with torch.no_grad():
        train_acc = float((model(X).argmax(dim=1) == y).float().mean())
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save({name: t.detach().cpu().contiguous() for name, t in model.state_dict().items()}, args.out / "model.pt")
    write_json(args.out / "model_spec.json", spec.model_dump())
    print(f"[{args.split}] trained {sum(p.numel() for p in model.parameters())} parameters on {len(y)} "
          f"examples in {seconds:.1f}s; training accuracy {train_acc:.4f}")


if __name__ == "__main__":
    main()
