"""Small stand-ins for the full profile's artefacts, in their upstream formats (for ``--scale=smoke``).

Each generator writes one artefact's file at the path given, deterministically. The images carry a
class-dependent tint so that a few batches of training can tell classes apart; nothing depends on it.
"""

from __future__ import annotations

import io
import pickle
import shutil
import tarfile
from pathlib import Path

import numpy as np

# the other formats, one module each (reader and fixture side by side); named here for task.yaml's `fixture`
from .mnist import write_fixture as mnist_npz  # noqa: F401  (Keras's mnist.npz)
from .svhn import write_fixture as svhn_test_mat  # noqa: F401  (SVHN's test_32x32.mat)
from .officehome import write_fixture as office_home_zip  # noqa: F401  (OfficeHomeDataset_10072016.zip)
from .officehome import write_dg_fixture as office_home_dg_zip  # noqa: F401  (Dassl's office_home_dg.zip)
from .checkpoint import write_fixture as torch_checkpoint  # noqa: F401  (a .pth state dict: published weights)
from .adult import write_fixture as adult_arff  # noqa: F401  (OpenML's adult.arff, data set 1590)
from .compas import write_fixture as compas_csv  # noqa: F401  (ProPublica's compas-scores-two-years.csv)


# Hugging Face repositories (TOFU, open-unlearning's fine-tuned Llama) and FML-bench's retain-model logs
from .tofu import write_tofu_repo as tofu_repo  # noqa: F401
from .tofu import write_model_repo as tofu_llama_repo  # noqa: F401
from .tofu import write_fmlbench_repo as fmlbench_repo  # noqa: F401

PER_BATCH = 40  # CIFAR-10: 5 training batches of 40 and a test batch of 40


def _images(rng: np.random.Generator, labels: np.ndarray, classes: int) -> np.ndarray:
    tint = np.linspace(0, 255, classes)[labels][:, None, None, None]
    noise = rng.integers(0, 96, size=(len(labels), 3, 32, 32))
    return np.clip(noise + tint * np.array([1.0, 0.5, 0.25])[None, :, None, None], 0, 255).astype(np.uint8)


def _batch(rng: np.random.Generator, n: int, classes: int, label_key: bytes, name: bytes) -> bytes:
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    data = _images(rng, labels, classes).reshape(n, 3072)
    batch = {b"batch_label": name, label_key: [int(v) for v in labels], b"data": data,
             b"filenames": [f"fixture_{i:05d}.png".encode() for i in range(n)]}
    return pickle.dumps(batch, protocol=2)


def _tar_gz(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(payload))
    tmp.replace(path)


def cifar10_python(path: Path) -> None:
    """``cifar-10-python.tar.gz``: ``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``."""
    rng = np.random.default_rng(10)
    members = {f"cifar-10-batches-py/data_batch_{i}": _batch(rng, PER_BATCH, 10, b"labels",
                                                             f"training batch {i} of 5".encode())
               for i in range(1, 6)}
    members["cifar-10-batches-py/test_batch"] = _batch(rng, PER_BATCH, 10, b"labels", b"testing batch 1 of 1")
    meta = {b"label_names": [name.encode() for name in ("airplane", "automobile", "bird", "cat", "deer", "dog",
                                                         "frog", "horse", "ship", "truck")],
            b"num_cases_per_batch": PER_BATCH, b"num_vis": 3072}
    members["cifar-10-batches-py/batches.meta"] = pickle.dumps(meta, protocol=2)
    _tar_gz(path, members)


def domainbed_repo(path: Path) -> None:
    """A repository in DomainBed's layout with a stand-in of the interface its tasks use (``standins/domainbed``)."""
    from . import gitrepo

    gitrepo.write_repository(path, Path(__file__).with_name("standins") / "domainbed", "DomainBed stand-in")


def privacy_meter_repo(path: Path) -> None:
    """A repository in privacy meter's layout with a stand-in of the files its task uses (``standins/privacy_meter``)."""
    from . import gitrepo

    gitrepo.write_repository(path, Path(__file__).with_name("standins") / "privacy_meter", "privacy meter stand-in")


def causalml_repo(path: Path) -> None:
    """A repository in causalml's layout with a stand-in of the DragonNet interface its task uses
    (``standins/causalml``) and a small IHDP replication at ``docs/examples/data/ihdp_npci_3.csv``."""
    import tempfile

    from . import gitrepo, ihdp

    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "causalml"
        shutil.copytree(Path(__file__).with_name("standins") / "causalml", tree,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        ihdp.write_fixture(tree / "docs" / "examples" / "data" / "ihdp_npci_3.csv")
        gitrepo.write_repository(path, tree, "causalml stand-in")


def pycil_repo(path: Path) -> None:
    """A repository in PyCIL's layout with a stand-in of the interface its task uses (``standins/pycil``)."""
    from . import gitrepo

    gitrepo.write_repository(path, Path(__file__).with_name("standins") / "pycil", "PyCIL stand-in")


def cifar100_python(path: Path) -> None:
    """``cifar-100-python.tar.gz``: ``cifar-100-python/{train,test,meta}``, 10 training and 4 test images per class
    (4, so that a per-class 30% cut, as the PyCIL task's, leaves one val image per class)."""
    rng = np.random.default_rng(100)
    members = {"cifar-100-python/train": _batch(rng, 1000, 100, b"fine_labels", b"training batch 1 of 1"),
               "cifar-100-python/test": _batch(rng, 400, 100, b"fine_labels", b"testing batch 1 of 1")}
    meta = {b"fine_label_names": [f"class_{i:02d}".encode() for i in range(100)],
            b"coarse_label_names": [f"superclass_{i:02d}".encode() for i in range(20)]}
    members["cifar-100-python/meta"] = pickle.dumps(meta, protocol=2)
    _tar_gz(path, members)


def continual_learning_repo(path: Path) -> None:
    """A repository in GMvandeVen/continual-learning's layout with a stand-in of the interface its split MNIST task
    uses (``standins/continual_learning``)."""
    from . import gitrepo

    gitrepo.write_repository(path, Path(__file__).with_name("standins") / "continual_learning",
                             "continual-learning stand-in")


def pfllib_repo(path: Path) -> None:
    """A repository in PFLlib's layout with a stand-in of the CIFAR-10 generator its federated task runs
    (``standins/pfllib``)."""
    from . import gitrepo

    gitrepo.write_repository(path, Path(__file__).with_name("standins") / "pfllib", "PFLlib stand-in")


def aif360_repo(path: Path) -> None:
    """A repository in AIF360's layout holding AIF360's own ``aif360`` package as the tasks extra installs it
    (aif360 0.6.1; its modules on the task's path are those of the pinned commit, bar a detector), less the
    ``version.py`` its setup generates: the stand-in is AIF360's real code, so smoke runs take the full code path."""
    import importlib.util
    import tempfile

    from . import gitrepo

    spec = importlib.util.find_spec("aif360")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("aif360 is not installed (pip install -e '.[tasks]')")
    with tempfile.TemporaryDirectory() as staging:
        shutil.copytree(spec.submodule_search_locations[0], Path(staging) / "aif360",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "version.py"))
        gitrepo.write_repository(path, Path(staging), "AIF360 stand-in: the installed aif360 package")


def open_unlearning_repo(path: Path) -> None:
    """A repository in open-unlearning's layout with the folders its task copies (``standins/open_unlearning``)."""
    from . import gitrepo

    gitrepo.write_repository(path, Path(__file__).with_name("standins") / "open_unlearning", "open-unlearning stand-in")


# data_efficiency_easyfsl_full: Kaggle's mini-ImageNet zip, FEAT's ResNet-12 checkpoint, easy-few-shot-learning
from .mini_imagenet import write_archive_fixture as mini_imagenet_zip  # noqa: E402, F401
from .mini_imagenet import write_weights_fixture as feat_resnet12_checkpoint  # noqa: E402, F401
from .mini_imagenet import write_repository_fixture as easyfsl_repo  # noqa: E402, F401
