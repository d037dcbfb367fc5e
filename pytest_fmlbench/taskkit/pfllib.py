"""PFLlib's federated CIFAR-10 (TsingZ0/PFLlib at the commit FML-bench pins), for the harness: the partition its own
generator makes, and the per-client scores of FML-bench's Federated_Learning_PFLlib.

FML-bench's setup runs ``python generate_Cifar10.py noniid - dir`` in PFLlib's ``dataset/`` folder: CIFAR-10's
60,000 images (training set, then test set) through ``ToTensor`` and ``Normalize((0.5,) * 3, (0.5,) * 3)``,
dealt to 20 clients class by class with Dirichlet(0.1) proportions (seeded: ``np.random.seed(1)``), each client's
share cut 75% train / 25% test, written as ``Cifar10/{train,test}/<client>.npz``. ``generate`` runs that script
from the verified checkout, with torchvision's CIFAR-10 reading the verified archive instead of downloading it.
The original trains on each client's ``train`` file (cut again into train and val by ``split_config.json``) and
scores each client's ``test`` file; ``test_acc`` is the mean over clients of each client's accuracy, and
``test_acc_std`` their standard deviation (NumPy's, over the clients with scored images).
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from . import cifar

NUM_CLIENTS, NUM_CLASSES = 20, 10
GENERATOR = Path("dataset") / "generate_Cifar10.py"
COMMAND = ("noniid", "-", "dir")  # FML-bench's setup: non-IID, unbalanced, Dirichlet partition
OUTPUT = "Cifar10"


def _archive_cifar10(archive: Path):
    """torchvision's CIFAR10, reading the verified archive: the same images (HWC uint8), targets and transforms."""
    from torch.utils.data import Dataset  # torch on use: importing the kit (a test's collection) stays light

    class ArchiveCIFAR10(Dataset):
        def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
            self.data, targets = cifar.read(archive, "cifar10", "train" if train else "test")
            self.targets = targets.tolist()
            self.transform, self.target_transform = transform, target_transform

        def __len__(self):
            return len(self.data)

        def __getitem__(self, index):
            image, target = Image.fromarray(self.data[index]), self.targets[index]
            if self.transform is not None:
                image = self.transform(image)
            if self.target_transform is not None:
                target = self.target_transform(target)
            return image, target

    return ArchiveCIFAR10


def generate(checkout: Path, archive: Path, workdir: Path) -> Path:
    """Run PFLlib's CIFAR-10 generator from ``checkout`` in ``workdir``; returns the folder it wrote."""
    import torchvision.datasets

    script = (checkout / GENERATOR).resolve()
    if not script.is_file():
        raise FileNotFoundError(f"{checkout} has no {GENERATOR}")
    workdir.mkdir(parents=True, exist_ok=True)
    saved = (os.getcwd(), list(sys.argv), list(sys.path), torchvision.datasets.CIFAR10, sys.dont_write_bytecode)
    try:
        sys.dont_write_bytecode = True  # the checkout in the cache stays as fetched: no __pycache__ in it
        os.chdir(workdir)
        sys.argv = [str(script), *COMMAND]
        sys.path.insert(0, str(script.parent))
        torchvision.datasets.CIFAR10 = _archive_cifar10(archive)
        runpy.run_path(str(script), run_name="__main__")
    finally:
        os.chdir(saved[0])
        sys.argv, sys.path[:] = saved[1], saved[2]
        torchvision.datasets.CIFAR10, sys.dont_write_bytecode = saved[3], saved[4]
        for name in [m for m in sys.modules if m == "utils" or m.startswith("utils.")]:
            del sys.modules[name]  # the generator's own utils package, not to be found by anything else
    return workdir / OUTPUT


def read_client(folder: Path, part: str, client: int) -> tuple[np.ndarray, np.ndarray]:
    """One client's ``part`` ("train" or "test"): float32 images (n, 3, 32, 32), int64 labels. The file is a
    pickled dict that the harness's own run of the verified generator wrote."""
    with np.load(folder / part / f"{client}.npz", allow_pickle=True) as npz:
        content = npz["data"].item()
    return np.asarray(content["x"], dtype=np.float32), np.asarray(content["y"], dtype=np.int64)


def normalise(images: np.ndarray) -> np.ndarray:
    """uint8 (n, 3, 32, 32) to what ToTensor and Normalize(0.5, 0.5) make of them, with the same float32 steps."""
    import torch

    return torch.from_numpy(images).float().div(255).sub(0.5).div(0.5).numpy()


def to_uint8(images: np.ndarray) -> np.ndarray:
    """The uint8 pixels behind the generator's normalised images; refuses images ``normalise`` would not give back
    bit for bit."""
    pixels = np.rint((images * 0.5 + 0.5) * 255).clip(0, 255).astype(np.uint8)
    if not np.array_equal(normalise(pixels), images):
        raise ValueError("the generated images are not CIFAR-10's pixels through ToTensor and Normalize(0.5, 0.5)")
    return pixels


def client_accuracies(predictions: np.ndarray, labels: np.ndarray, clients: np.ndarray) -> list[float]:
    """Per client with scored images (in client order), the fraction of them labelled right."""
    return [float(np.mean(predictions[clients == c] == labels[clients == c]))
            for c in range(NUM_CLIENTS) if (clients == c).any()]
