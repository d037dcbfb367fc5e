"""CIFAR-10 dealt to 20 clients: `python generate_Cifar10.py noniid - dir` writes Cifar10/{train,test}/<i>.npz."""

import random
import sys

import numpy as np
import torch
import torchvision
import torchvision.transforms as transforms

from utils.dataset_utils import dirichlet_partition, save_clients

random.seed(1)
np.random.seed(1)
num_clients = 20

if __name__ == "__main__":
    niid, balance = sys.argv[1] == "noniid", sys.argv[2] == "balance"
    partition = None if sys.argv[3] == "-" else sys.argv[3]
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    images, labels = [], []
    for train in (True, False):
        part = torchvision.datasets.CIFAR10(root="Cifar10/rawdata", train=train, download=True, transform=transform)
        x, y = next(iter(torch.utils.data.DataLoader(part, batch_size=len(part), shuffle=False)))
        images.append(x.numpy())
        labels.append(y.numpy())
    images, labels = np.concatenate(images), np.concatenate(labels)
    least = int(min(10 / 0.25, len(labels) / num_clients / 2))
    shares = dirichlet_partition(labels, num_clients, 10, least)
    save_clients("Cifar10", images, labels, shares, niid, balance, partition)
    print(f"Client sizes: {[len(s) for s in shares]}")
