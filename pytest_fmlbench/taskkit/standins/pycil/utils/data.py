"""Data sets: CIFAR-100 as torchvision reads it, with its augmentations and normalisation."""

import numpy as np
from torchvision import datasets, transforms


class iData:
    train_trsf, test_trsf, common_trsf = [], [], []
    class_order = None


class iCIFAR100(iData):
    use_path = False
    train_trsf = [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
    test_trsf = [transforms.ToTensor()]
    common_trsf = [transforms.Normalize(mean=(0.5071, 0.4867, 0.4408), std=(0.2675, 0.2565, 0.2761))]
    class_order = list(range(100))

    def download_data(self):
        train = datasets.cifar.CIFAR100("./data", train=True, download=True)
        test = datasets.cifar.CIFAR100("./data", train=False, download=True)
        self.train_data, self.train_targets = train.data, np.array(train.targets)
        self.test_data, self.test_targets = test.data, np.array(test.targets)
