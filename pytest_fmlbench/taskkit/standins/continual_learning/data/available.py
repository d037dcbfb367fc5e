"""Data sets, their transforms and their shapes, by name (the driver swaps in its own MNIST reader)."""

from torchvision import datasets, transforms

AVAILABLE_DATASETS = {"MNIST": datasets.MNIST}
AVAILABLE_TRANSFORMS = {"MNIST": [transforms.ToTensor()]}
DATASET_CONFIGS = {"MNIST": {"size": 28, "channels": 1, "classes": 10}}
