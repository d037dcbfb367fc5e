"""SVHN's test_32x32.mat: the smoke fixture in its format, read as torchvision reads it; a foreign file is one line."""

import numpy as np
import pytest

from pytest_fmlbench.taskkit import fixtures, svhn


def test_the_svhn_fixture_reads_as_torchvision_reads_svhn(tmp_path):
    """The fixture in SVHN's format: torchvision's own SVHN dataset (its integrity check aside) sees our images."""
    from torchvision.datasets import SVHN

    path = tmp_path / "test_32x32.mat"
    fixtures.svhn_test_mat(path)
    first = path.read_bytes()
    fixtures.svhn_test_mat(path)
    assert path.read_bytes() == first  # deterministic bytes: a stable fixture stamp

    class Unchecked(SVHN):
        def _check_integrity(self) -> bool:
            return True

    theirs = Unchecked(str(tmp_path), split="test")
    images, labels = svhn.read(path)
    assert len(theirs) == len(images) == svhn.FIXTURE_IMAGES
    for i in (0, 7, len(images) - 1):
        image, label = theirs[i]
        assert np.array_equal(np.asarray(image), images[i]) and label == labels[i]


def test_a_file_without_svhns_layout_is_one_line(tmp_path):
    from scipy.io import savemat

    savemat(tmp_path / "other.mat", {"X": np.zeros((28, 28, 5), np.uint8), "y": np.ones((5, 1), np.uint8)})
    with pytest.raises(ValueError, match=r"other.mat: X uint8\(28, 28, 5\) / y \(5,\) are not SVHN's layout"):
        svhn.read(tmp_path / "other.mat")
    savemat(tmp_path / "empty.mat", {"images": np.zeros((2, 2), np.uint8)})
    with pytest.raises(ValueError, match="empty.mat: no X and y in the file"):
        svhn.read(tmp_path / "empty.mat")
