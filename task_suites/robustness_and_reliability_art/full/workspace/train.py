"""Experiment driver (protected): train a defended MNIST classifier on each of the five poisoned pools,
FML-bench's Robustness_and_Reliability_art protocol with ART's DP-InstaHide trainer.

    python train.py --split val  --out OUT   for backdoor i = 0..4: train on the train part of
                                             data/pool{i}_*.npy (split_config.json), save
                                             model_checkpoint/model_<backdoor>.pt, classify the val part
    python train.py --split test --out OUT   load each checkpoint (no training), classify OUT/test{i}_X.npy

Writes OUT/predictions{i}.npy (int64 classes, one per classified image, in order); the evaluator scores
them with labels and poison marks it keeps to itself. As the original's protected trainer.py, the
trainer is built here: the editable DPInstaHideTrainer class (dp_instahide_trainer.py) with ART's Mixup
of two inputs, Laplacian noise of scale 0.3 and clip values (0, 1), fitted for 5 epochs at batch size 128
on the editable model (model.py) wrapped in ART's PyTorchClassifier. --scale smoke trains one epoch.
"""

from __future__ import annotations

import random
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from art.defences.preprocessor import Mixup
from art.estimators.classification import PyTorchClassifier

from pytest_fmlbench.evalkit import harness_args, load_split_config, original_split_indices, write_json

import model as editable_model  # the editable network, next to this file
from dp_instahide_trainer import DPInstaHideTrainer  # the editable trainer, next to this file

BACKDOORS = ("pattern", "distributed", "edge", "random_corner", "pattern_topleft")
NUM_CLASSES = 10
SEED = 233
EPOCHS = {"full": 5, "smoke": 1}
BATCH_SIZE = 128
CHECKPOINT = Path("model_checkpoint")

warnings.filterwarnings("ignore", category=UserWarning, module="art")


class Float32Classifier(PyTorchClassifier):
    """ART's PyTorch estimator fed float32: Mixup and the trainer's noise return float64 arrays, which Keras
    (the original's framework) casts silently and torch refuses."""

    def fit(self, x, y, *args, **kwargs):
        return super().fit(np.asarray(x, np.float32), np.asarray(y, np.float32), *args, **kwargs)

    def compute_loss(self, x, y, *args, **kwargs):
        return super().compute_loss(np.asarray(x, np.float32), np.asarray(y, np.float32), *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        return super().predict(np.asarray(x, np.float32), *args, **kwargs)


def get_trainer(classifier: PyTorchClassifier):
    """The original's trainer.py, unchanged in substance: what the agent changes is the class."""
    mixup = Mixup(num_classes=NUM_CLASSES, num_mix=2)
    return DPInstaHideTrainer(classifier=classifier, augmentations=mixup, noise="laplacian", scale=0.3,
                              clip_values=(0, 1))


def seed_everything() -> None:
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)


def classifier_for(net: torch.nn.Module) -> PyTorchClassifier:
    gpu = torch.cuda.is_available()
    return Float32Classifier(model=net, loss=editable_model.get_loss(), optimizer=editable_model.get_optimizer(net),
                             input_shape=(1, 28, 28), nb_classes=NUM_CLASSES, clip_values=(0.0, 1.0),
                             device_type="gpu" if gpu else "cpu")


def images(x: np.ndarray) -> np.ndarray:
    """uint8 (N, 28, 28) -> float32 (N, 1, 28, 28) in [0, 1], as art.utils.preprocess scales MNIST."""
    return (x.astype(np.float32) / 255.0)[:, None]


def classify(classifier: PyTorchClassifier, x: np.ndarray) -> np.ndarray:
    scores = classifier.predict(images(x), batch_size=512)
    if scores.shape != (len(x), NUM_CLASSES):
        sys.exit(f"train.py: the model must return ({len(x)}, {NUM_CLASSES}) class scores, got {scores.shape}")
    return np.argmax(scores, axis=1).astype(np.int64)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    CHECKPOINT.mkdir(exist_ok=True)
    info = []
    for i, name in enumerate(BACKDOORS):
        seed_everything()
        net = editable_model.get_model()
        classifier = classifier_for(net)
        checkpoint = CHECKPOINT / f"model_{name}.pt"
        if args.split == "val":
            x, y = np.load(f"data/pool{i}_X.npy"), np.load(f"data/pool{i}_y.npy")
            train_pos, val_pos = original_split_indices(len(x), load_split_config(Path.cwd()))
            print(f"[{name}] train {len(train_pos)}, val {len(val_pos)}", flush=True)
            one_hot = np.eye(NUM_CLASSES, dtype=np.float32)[y[train_pos]]
            get_trainer(classifier).fit(images(x[train_pos]), one_hot, nb_epochs=EPOCHS[args.scale],
                                        batch_size=BATCH_SIZE)
            torch.save(net.state_dict(), checkpoint)
            predictions = classify(classifier, x[val_pos])
            print(f"[{name}] agreement with the val labels (as poisoned): {np.mean(predictions == y[val_pos]):.4f}",
                  flush=True)
        else:
            if not checkpoint.is_file():
                sys.exit(f"train.py: no {checkpoint}: the test run needs the val run's checkpoints")
            net.load_state_dict(torch.load(checkpoint, map_location=classifier.device))
            predictions = classify(classifier, np.load(args.out / f"test{i}_X.npy"))
        np.save(args.out / f"predictions{i}.npy", predictions)
        info.append({"backdoor": name, "n_classified": len(predictions)})
    write_json(args.out / "run_info.json", {"split": args.split, "scale": args.scale, "backdoors": info})


if __name__ == "__main__":
    main()
