"""Dealing a labelled data set to clients and saving each client's train and test parts."""

import os

import numpy as np
import ujson
from sklearn.model_selection import train_test_split

train_ratio = 0.75
alpha = 0.1


def dirichlet_partition(labels, num_clients, num_classes, least_samples):
    """Class by class, Dirichlet(alpha) shares of the class's images (none to a client that already holds its
    even share of the whole), redrawn until every client has enough."""
    even = len(labels) / num_clients
    while True:
        shares = [[] for _ in range(num_clients)]
        for k in range(num_classes):
            members = np.flatnonzero(labels == k)
            np.random.shuffle(members)
            weights = np.random.dirichlet([alpha] * num_clients) * np.array([len(s) < even for s in shares])
            cuts = (np.cumsum(weights / weights.sum()) * len(members)).astype(int)[:-1]
            for client, part in enumerate(np.split(members, cuts)):
                shares[client] += part.tolist()
        if min(len(s) for s in shares) >= least_samples:
            return shares


def save_clients(folder, images, labels, shares, niid, balance, partition):
    for part in ("train", "test"):
        os.makedirs(os.path.join(folder, part), exist_ok=True)
    for client, idx in enumerate(shares):
        x_train, x_test, y_train, y_test = train_test_split(images[idx], labels[idx], train_size=train_ratio,
                                                            shuffle=True)
        for part, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
            with open(os.path.join(folder, part, f"{client}.npz"), "wb") as f:
                np.savez_compressed(f, data={"x": x, "y": y})
    with open(os.path.join(folder, "config.json"), "w") as f:
        ujson.dump({"num_clients": len(shares), "non_iid": niid, "balance": balance, "partition": partition,
                    "alpha": alpha}, f)
