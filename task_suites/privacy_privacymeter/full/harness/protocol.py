"""Who is a member of what: the privacy-meter task's data, models and audits, fixed by seeds nothing editable reaches.

As privacy meter's run_mia.py with FML-bench's cifar10_benchmark.yaml: the dataset is CIFAR-10's 50,000
training images (normalised to [-1, 1]), the population its 10,000 test images; models come in
complementary pairs trained on random halves of the dataset; an audit takes 5,000 members and 5,000
non-members of the target (audit.data_size 10,000).

The original's run trains four target models (run.num_experiments 4) with the agent's trainer and its
postprocess.py splits them between val and test (audited_models). Here the agent's trainer also trains
four target models, all on the members M (a seeded half of the dataset), because agent code must never
hold a point it is audited on as a non-member. Each target's pair P is trained by the harness on the other
half N, and the reference pair R0/R1 on another random half and its complement: every audited point is
outside exactly one of R0/R1, which is the one RMIA uses (audit.num_ref_models 1). The val and test audits
take disjoint members and non-members. Utility is each target's accuracy on all of N, as the original
measures each model on the half it did not train on; the floor applies to their mean, as the original's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_fmlbench.taskkit import cifar

ARCHIVE = ("cifar-10-python", "cifar-10-python.tar.gz")
CHECKOUT = "privacy-meter"  # the git artefact's name; its checkout is {data}/privacy-meter/src
SEED = 12345  # the original's run.random_seed
AUDIT_HALF = {"full": 5000, "smoke": 20}  # members, and as many non-members, per audit
# the original's train section (cifar10_benchmark.yaml); at smoke scale one epoch of small batches
TRAIN_CONFIG = {"model_name": "wrn28-2", "batch_size": 256, "optimizer": "SGD", "learning_rate": 0.1,
                "weight_decay": 0, "epochs": 50}
SMOKE_TRAIN = {"batch_size": 32, "epochs": 1}
# the columns of the audit's signal matrices: the target, its pair, the reference pair (privacy meter's order)
MODELS = ("target", "pair", "reference_0", "reference_1")
TARGETS = 4  # the original's run.num_experiments: the models the agent's trainer trains, each a target
# postprocess.py's split of the targets: shuffled by RandomState(42), the first 30% (at least one) are val
SPLIT_SEED, VAL_SHARE = 42, 0.3


def audited_targets(split: str) -> tuple[int, ...]:
    """The targets the ``split`` audit attacks, as the original's postprocess.py picks them: val (1,), test
    (0, 2, 3)."""
    order = list(range(TARGETS))
    np.random.RandomState(SPLIT_SEED).shuffle(order)
    cut = max(int(VAL_SHARE * TARGETS), 1)
    return tuple(sorted(order[:cut] if split == "val" else order[cut:]))


def train_config(scale: str, device: str) -> dict:
    config = {**TRAIN_CONFIG, "device": device}
    return {**config, **SMOKE_TRAIN} if scale == "smoke" else config


@dataclass(frozen=True)
class Carving:
    """Indices into the dataset (CIFAR-10's training images)."""

    members: np.ndarray  # the targets' training set, in the workspace
    non_members: np.ndarray  # the rest, hidden
    reference_half: np.ndarray  # bool over the dataset: reference_0 trains on it, reference_1 on the rest
    pools: dict[str, np.ndarray]  # per split: the audited points, members first

    def trained_on(self, n: int) -> np.ndarray:
        """(n, 4) bool: which dataset points each of MODELS trained on."""
        member = np.zeros(n, bool)
        member[self.members] = True
        return np.stack([member, ~member, self.reference_half, ~self.reference_half], axis=1)


def carve(n: int, scale: str) -> Carving:
    rng = np.random.RandomState(SEED)
    order = rng.permutation(n)
    members, non_members = np.sort(order[: n // 2]), np.sort(order[n // 2:])
    half = np.zeros(n, bool)
    half[rng.permutation(n)[: n // 2]] = True
    k = AUDIT_HALF[scale]
    audited_in, audited_out = rng.permutation(members)[: 2 * k], rng.permutation(non_members)[: 2 * k]
    pools = {"val": np.concatenate([audited_in[:k], audited_out[:k]]),
             "test": np.concatenate([audited_in[k:], audited_out[k:]])}
    return Carving(members, non_members, half, pools)


def read_cifar10(data: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(images, labels) of the dataset, then of the population: uint8 HWC images, int64 labels."""
    archive = data.joinpath(*ARCHIVE)
    return (*cifar.read(archive, "cifar10", "train"), *cifar.read(archive, "cifar10", "test"))


def normalise(images: np.ndarray) -> np.ndarray:
    """privacy meter's transform for CIFAR-10: ToTensor, then Normalize(mean 0.5, std 0.5): CHW floats in [-1, 1]."""
    return ((images.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(0, 3, 1, 2).copy()
