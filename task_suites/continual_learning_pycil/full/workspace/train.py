"""Experiment driver (protected): PyCIL's class-incremental loop on CIFAR-100, 50 base classes then 5 sessions
of 10, as FML-bench's Continual_Learning_pycil runs PyCIL's trainer with algorithm.py's configuration.

    python train.py --split val  --out OUT   train session by session on data/train_*.npy; after each, save
                                             model_checkpoint/session_<t>.pt and label data/val_images.npy
    python train.py --split test --out OUT   per session, load model_checkpoint/session_<t>.pt (no training)
                                             and label OUT/test_images.npy

The loop is PyCIL's trainer's: its DataManager (class order drawn with seed 1993, labels renumbered by it),
the learner from utils.factory (algorithm.py names iCaRL), and per session incremental_train(data_manager),
then the scoring that eval_task does, then after_task(). Before training, models/icarl.py's module-level
hyper-parameters are set from algorithm.py, as the original's script sets them. The scoring labels every
scored image with PyCIL's _eval_cnn (the network's top-1) and, when the learner has _class_means, _eval_nme
(the nearest mean of exemplars), into OUT/session_<t>_cnn.npy and OUT/session_<t>_nme.npy (renumbered
classes); the evaluator scores each session on the images of the classes seen so far, with labels it keeps.

PyCIL's data set reads CIFAR-100 from torchvision's folder; here iCIFAR100.download_data reads the harness's
files instead, and PyCIL's "test" source holds the training images again (the learners only log accuracy on
it while they train): the val and test labels never reach this process. --scale smoke runs one epoch per
session on small batches and a 200-exemplar memory, for checking the code path on fixture data.
"""

from __future__ import annotations

import os

# before PyCIL imports tqdm: its per-epoch progress bars refresh every 30 s in the log, not at every batch
os.environ.setdefault("TQDM_MININTERVAL", "30")

import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from torchvision import transforms  # noqa: E402

from pytest_fmlbench.evalkit import harness_args, read_json, write_json  # noqa: E402

import algorithm  # noqa: E402  (the protected configuration, next to this file)
import models.icarl as icarl  # noqa: E402  (PyCIL's iCaRL at the pinned commit: the editable file)
from utils import factory  # noqa: E402
from utils.data import iCIFAR100  # noqa: E402
from utils.data_manager import DataManager, DummyDataset  # noqa: E402

# algorithm.py's keys that the original's script copies onto models/icarl.py's module-level names
PATCHED = ("init_epoch", "init_lr", "init_milestones", "init_lr_decay", "init_weight_decay",
           "epochs", "lrate", "milestones", "lrate_decay", "batch_size", "weight_decay")
SEED = 1993  # the original's script sets it whatever the configuration says
SMOKE = {"init_epoch": 1, "epochs": 1, "batch_size": 32, "memory_size": 200}
DATA, CHECKPOINT = Path("data"), Path("model_checkpoint")
SCORE_BATCH, SCORE_WORKERS = 128, 8


def visible_cifar100(self: iCIFAR100) -> None:
    """iCIFAR100.download_data, from the harness's files: the training images and their labels, also as the
    "test" source that learners log accuracy on while they train."""
    self.train_data = np.load(DATA / "train_images.npy")
    self.train_targets = np.load(DATA / "train_labels.npy")
    self.test_data, self.test_targets = self.train_data, self.train_targets


def configuration(scale: str, device: torch.device) -> dict:
    config = dict(algorithm.get_pycil_config())
    config["seed"] = SEED
    config["device"] = [device]
    if scale == "smoke":
        config.update(SMOKE)
    return config


def set_icarl_hyperparameters(config: dict, scale: str) -> None:
    for key in PATCHED:
        setattr(icarl, key, config[key])
    if scale == "smoke":
        icarl.num_workers = 0  # a handful of images: worker processes would cost more than they save
        torch.set_num_threads(1)  # so small a network gains nothing from a second thread, which spins on a busy CPU
    print("iCaRL: " + ", ".join(f"{key}={getattr(icarl, key)}" for key in PATCHED), flush=True)


def scoring_loader(images: np.ndarray, workers: int) -> DataLoader:
    """The scored images through CIFAR-100's test transforms, with placeholder labels (the evaluator has them)."""
    trsf = transforms.Compose([*iCIFAR100.test_trsf, *iCIFAR100.common_trsf])
    dataset = DummyDataset(images, np.zeros(len(images), dtype=np.int64), trsf)
    return DataLoader(dataset, batch_size=SCORE_BATCH, shuffle=False, num_workers=workers)


def top1(ranked) -> np.ndarray:
    ranked = np.asarray(ranked)
    return (ranked[:, 0] if ranked.ndim == 2 else ranked).astype(np.int64)


def label(learner, loader: DataLoader, session: int, out: Path) -> None:
    """What eval_task scores: the network's top-1 and, when the learner keeps class means, the nearest mean's."""
    np.save(out / f"session_{session}_cnn.npy", top1(learner._eval_cnn(loader)[0]))
    if hasattr(learner, "_class_means"):
        np.save(out / f"session_{session}_nme.npy", top1(learner._eval_nme(loader, learner._class_means)[0]))


def save_session(learner, session: int) -> None:
    """The learner's state after a session, less its data loaders and data manager (the training data)."""
    state = {key: value for key, value in vars(learner).items() if not isinstance(value, (DataLoader, DataManager))}
    try:
        torch.save(state, CHECKPOINT / f"session_{session}.pt")
    except Exception as exc:  # noqa: BLE001  (whatever pickling raises, the run cannot go on)
        sys.exit(f"train.py: cannot save the learner after session {session} ({type(exc).__name__}: {exc}); "
                 "the test run restores it from model_checkpoint/, so its attributes must be picklable")


def restore_session(config: dict, session: int, device: torch.device):
    learner = factory.get_model(config["model_name"], config)
    state = torch.load(CHECKPOINT / f"session_{session}.pt", map_location=device, weights_only=False)
    vars(learner).update(state)
    learner._device, learner._multiple_gpus = device, [device]
    return learner


def train_and_label(config: dict, loader: DataLoader, out: Path) -> None:
    iCIFAR100.download_data = visible_cifar100
    data_manager = DataManager(config["dataset"], config["shuffle"], config["seed"], config["init_cls"],
                               config["increment"], config.get("aug", 1))
    logging.info("class order: %s", data_manager._class_order)
    learner = factory.get_model(config["model_name"], config)
    CHECKPOINT.mkdir(exist_ok=True)
    for session in range(data_manager.nb_tasks):
        learner.incremental_train(data_manager)
        label(learner, loader, session, out)
        save_session(learner, session)
        learner.after_task()
        seen = sum(data_manager.get_task_size(t) for t in range(session + 1))
        print(f"session {session}: classes 0-{seen - 1} learnt, val images labelled", flush=True)
    write_json(CHECKPOINT / "sessions.json", {"sessions": data_manager.nb_tasks})


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(filename)s] => %(message)s",
                        stream=sys.stdout, force=True)
    # PyCIL's trainer: _set_random, then cuda:0 where the original names device "0"
    torch.manual_seed(1)
    torch.cuda.manual_seed_all(1)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    config = configuration(args.scale, device)
    set_icarl_hyperparameters(config, args.scale)
    args.out.mkdir(parents=True, exist_ok=True)
    workers = 0 if args.scale == "smoke" else SCORE_WORKERS

    if args.split == "val":
        train_and_label(config, scoring_loader(np.load(DATA / "val_images.npy"), workers), args.out)
        return
    if not (CHECKPOINT / "sessions.json").is_file():
        sys.exit("train.py: no model_checkpoint/sessions.json: the test run needs the val run's checkpoints")
    loader = scoring_loader(np.load(args.out / "test_images.npy"), workers)
    for session in range(int(read_json(CHECKPOINT / "sessions.json")["sessions"])):
        label(restore_session(config, session, device), loader, session, args.out)
        print(f"session {session}: test images labelled", flush=True)


if __name__ == "__main__":
    main()
