import json
import sys

import numpy as np

import algorithm
from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices

args = harness_args()
dev = np.load("data/dev.npz")
config = json.load(open("config.json"))
train_idx, val_idx = split_indices(len(dev["y"]), load_split_config("."))
w = algorithm.fit(dev["X"][train_idx], dev["y"][train_idx], config)
X_eval = dev["X"][val_idx] if args.split == "val" else np.load(args.out / "test_inputs.npz")["X"]
np.save(args.out / "predictions.npy", algorithm.predict(X_eval, w))
print("predicted", len(X_eval), file=sys.stderr)
