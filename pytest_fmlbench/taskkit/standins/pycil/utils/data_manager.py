"""Class-incremental sessions over a data set: a seeded class order, labels renumbered by it, per-class selection."""

import numpy as np
from PIL import Image
from torch.utils.data import Dataset
from torchvision import transforms

from utils.data import iCIFAR100


class DataManager:
    def __init__(self, dataset_name, shuffle, seed, init_cls, increment, aug=1):
        self.dataset_name = dataset_name
        self._setup_data(dataset_name, shuffle, seed)
        self._increments = [init_cls]
        while sum(self._increments) + increment < len(self._class_order):
            self._increments.append(increment)
        if len(self._class_order) > sum(self._increments):
            self._increments.append(len(self._class_order) - sum(self._increments))

    @property
    def nb_tasks(self):
        return len(self._increments)

    def get_task_size(self, task):
        return self._increments[task]

    def get_total_classnum(self):
        return len(self._class_order)

    def get_dataset(self, indices, source, mode, appendent=None, ret_data=False):
        x, y = (self._train_data, self._train_targets) if source == "train" else (self._test_data, self._test_targets)
        steps = {"train": self._train_trsf, "test": self._test_trsf}[mode]
        trsf = transforms.Compose([*steps, *self._common_trsf])
        keep = np.isin(y, np.asarray(indices, dtype=np.int64))
        data, targets = [x[keep]], [y[keep]]
        if appendent is not None and len(appendent) != 0:
            data.append(appendent[0])
            targets.append(appendent[1])
        data, targets = np.concatenate(data), np.concatenate(targets)
        dataset = DummyDataset(data, targets, trsf, self.use_path)
        return (data, targets, dataset) if ret_data else dataset

    def _setup_data(self, dataset_name, shuffle, seed):
        idata = {"cifar100": iCIFAR100}[dataset_name.lower()]()
        idata.download_data()
        self._train_data, self._train_targets = idata.train_data, idata.train_targets
        self._test_data, self._test_targets = idata.test_data, idata.test_targets
        self.use_path = idata.use_path
        self._train_trsf, self._test_trsf, self._common_trsf = idata.train_trsf, idata.test_trsf, idata.common_trsf
        if shuffle:
            np.random.seed(seed)
            self._class_order = np.random.permutation(len(np.unique(self._train_targets))).tolist()
        else:
            self._class_order = idata.class_order
        self._train_targets = _map_new_class_index(self._train_targets, self._class_order)
        self._test_targets = _map_new_class_index(self._test_targets, self._class_order)


class DummyDataset(Dataset):
    """(index, transformed image, label) triples from uint8 HWC images."""

    def __init__(self, images, labels, trsf, use_path=False, aug=1):
        assert len(images) == len(labels), "Data size error!"
        self.images, self.labels, self.trsf, self.use_path = images, labels, trsf, use_path

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return idx, self.trsf(Image.fromarray(self.images[idx])), self.labels[idx]


def _map_new_class_index(y, order):
    position = {label: rank for rank, label in enumerate(order)}
    return np.array([position[label] for label in y])
